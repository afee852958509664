//! `cargo xtask vm-test`: the privileged end-to-end tests inside other Linux kernels. Each
//! Debian kernel boots under qemu (`../shared/vmtest/run-in-kernel.sh`, software emulation) with
//! this machine's files visible, and runs the integration-test binary built here, filtered to
//! the tests that load the eBPF program and trace real processes. The verifier of each kernel is
//! the judge. Writes target/vm-test/report.md.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{Context as _, bail};

use crate::{run::sh, setup};

/// What qemu and the script need (its README).
const QEMU_PACKAGES: &[&str] = &["qemu-system-x86", "busybox-static", "cpio", "zstd", "kmod"];

/// Virtual CPUs of each guest. With two, software emulation runs them on two host threads,
/// and the kernel patching its own code while the other CPU runs it (static keys flipped when
/// a tracer attaches or detaches a system-call tracepoint) was seen to crash 6.12 and 7.2 guests
/// at a jump whose bytes were half old, half new: an emulation race, never seen on hardware.
/// `VMTEST_CPUS` overrides.
const GUEST_CPUS: &str = "1";

/// Tests left out on kernels before 5.15 (Debian bullseye), and why: without
/// `bpf_task_pt_regs` samples that interrupt the kernel carry no user stack (so kprobes and
/// tracepoints, which always hit the kernel, give none), and under qemu the vDSO clock falls
/// back to a system call, so that test's samples are nearly all such. (The offcpu test checks
/// there that offcpu is refused.)
const SKIP_BEFORE_5_15: &[&str] = &[
    "glibc_start::samples_in_the_vdso_unwind_completely",
    "events::kprobe_has_user_and_kernel_stacks",
    "events::tracepoint_has_user_and_kernel_stacks",
];

/// The tests run in each kernel: the walker, SFrame accuracy (v3), glibc/.eh_frame/vDSO,
/// stacks on events (each event's programs face each verifier), and a memlock limit too low
/// (kernels before 5.11 charge BPF maps to it: the one sentence), a launched command held at
/// its entry point (ptrace) while the tables load. (The other life-cycle tests
/// time their signals for a real CPU and check userspace, not the kernel.)
const TESTS: &[&str] = &[
    "walker::",
    "trace::sframe_v3",
    "glibc_start::",
    "events::",
    "lifecycle::low_memlock_limit_is_lifted_or_one_sentence",
    "lifecycle::a_launched_command_is_traced_from_its_entry_point",
];

pub fn vm_test(root: &Path, kernels: &[String]) -> anyhow::Result<()> {
    let script = root.join("../shared/vmtest/run-in-kernel.sh");
    if !script.exists() {
        bail!(
            "{} is missing: vm-test needs the shared vmtest scripts beside the repository",
            script.display()
        );
    }
    setup::apt(QEMU_PACKAGES)?;
    sh(Command::new("bash").arg(root.join("fixtures/toolchains.sh")))?;
    let binary = integration_binary()?;
    let mut results = Vec::new();
    for kernel in kernels {
        let started = Instant::now();
        eprintln!(
            "+ {} {kernel} {} {} --test-threads=1",
            script.display(),
            binary.display(),
            TESTS.join(" ")
        );
        let skips = if kernel == "bullseye" { SKIP_BEFORE_5_15 } else { &[] };
        let cpus = std::env::var("VMTEST_CPUS").unwrap_or_else(|_| GUEST_CPUS.to_owned());
        let status = Command::new(&script)
            .env("VMTEST_CPUS", &cpus)
            .arg(kernel)
            .arg(&binary)
            .args(TESTS)
            .args(skips.iter().flat_map(|t| ["--skip", t]))
            .arg("--test-threads=1")
            .status()
            .with_context(|| format!("running {}", script.display()))?;
        results.push((kernel.clone(), status.code(), started.elapsed().as_secs()));
    }
    let mut report = String::from("# Kernel matrix\n\n| kernel | result | seconds |\n|---|---|---|\n");
    for (kernel, code, secs) in &results {
        let result = match code {
            Some(0) => "pass".to_owned(),
            Some(125) => "boot or set-up failure".to_owned(),
            Some(124) => "timeout".to_owned(),
            Some(c) => format!("fail ({c})"),
            None => "killed".to_owned(),
        };
        report.push_str(&format!("| {kernel} | {result} | {secs} |\n"));
    }
    let dir = root.join("target/vm-test");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("report.md"), &report)?;
    print!("{report}");
    if results.iter().any(|(_, code, _)| *code != Some(0)) {
        bail!("the kernel matrix has failures (target/vm-test/report.md)");
    }
    Ok(())
}

/// Build the integration-test binary of tracer-user (optimised: under software emulation a
/// debug tracer takes seconds to start, longer than the workloads run) and return its path.
fn integration_binary() -> anyhow::Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args([
            "test",
            "--release",
            "--package",
            "tracer-user",
            "--test",
            "integration",
            "--no-run",
            "--message-format=json",
        ])
        .output()
        .context("building the integration tests")?;
    if !out.status.success() {
        bail!(
            "building the integration tests failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["target"]["name"] == "integration")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .context("cargo did not report the integration-test binary")
}
