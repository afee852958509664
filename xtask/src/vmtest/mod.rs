//! `cargo xtask vm-test`: the privileged end-to-end tests inside other Linux kernels. Each
//! Debian kernel (`kernel`: fetched and cached) boots under qemu with an initramfs built here
//! (`initramfs`, `init.sh`), sees this machine's files, and runs the integration-test binary
//! built here, filtered to the tests that load the eBPF program and trace real processes
//! (`guest`). The verifier of each kernel is the judge. The results go to
//! target/vm-test/report.md and into the kernel table of docs/kernels.md (`report`).

pub mod arch;
mod guest;
mod initramfs;
mod kernel;
mod progress;
mod report;
mod rootfs;
#[cfg(test)]
mod tests;

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant, SystemTime},
};

use anyhow::{Context as _, bail};

use crate::{
    cmd::{is_root, output, sh},
    debian, setup,
};
use arch::GuestArch;

/// Debian packages of the rig: qemu, a static busybox for the guest init, kmod (depmod and
/// modprobe resolve the guest's boot modules), the decompressors of Debian's modules, and the
/// archive keyring apt checks the kernels with.
pub const QEMU_PACKAGES: &[&str] = &[
    "qemu-system-x86",
    "busybox-static",
    "kmod",
    "xz-utils",
    "zstd",
    "debian-archive-keyring",
];

/// Programs the rig runs, and the package each comes from (and the guest architecture's qemu,
/// `GuestArch::qemu`).
const TOOLS: &[(&str, &str)] = &[
    ("depmod", "kmod"),
    ("modprobe", "kmod"),
    ("xz", "xz-utils"),
    ("zstd", "zstd"),
    ("apt-get", "apt"),
    ("dpkg-deb", "dpkg"),
];

/// The static busybox of busybox-static.
const BUSYBOX: &str = "/bin/busybox";

/// Virtual CPUs of each guest. With two, software emulation runs them on two host threads,
/// and the kernel patching its own code while the other CPU runs it (static keys flipped when
/// a tracer attaches or detaches a system-call tracepoint) was seen to crash 6.12 and 7.2 guests
/// at a jump whose bytes were half old, half new: an emulation race, never seen on hardware.
/// `VMTEST_CPUS` overrides.
const GUEST_CPUS: u32 = 1;

/// Guest memory (`VMTEST_MEM` overrides).
const GUEST_MEMORY: &str = "1G";

/// Tests left out on kernels before 5.15 (Debian bullseye), and why: without
/// `bpf_task_pt_regs` samples that interrupt the kernel carry no user stack (so kprobes and
/// tracepoints, which always hit the kernel, give none), and under qemu the vDSO clock falls
/// back to a system call, so that test's samples are nearly all such. (The offcpu test checks
/// there that offcpu is refused.)
const SKIP_BEFORE_5_15: &[&str] = &[
    "glibc_start::samples_in_the_vdso_unwind_completely",
    "events::kprobe_has_user_and_kernel_stacks",
    "events::tracepoint_has_user_and_kernel_stacks",
    "events::tracefs_is_mounted_before_the_first_attach",
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

/// The tests run in aarch64 guests: those of [`TESTS`], with SFrame accuracy for every version
/// with and without signed return addresses (`trace::sframe_v`: the workloads cross-built here,
/// [`prebuilt_workloads`]; the other tests build their programs with the guest's own gcc).
const TESTS_AARCH64: &[&str] = &[
    "walker::",
    "trace::sframe_v",
    "glibc_start::",
    "events::",
    "lifecycle::low_memlock_limit_is_lifted_or_one_sentence",
    "lifecycle::a_launched_command_is_traced_from_its_entry_point",
];

/// The tests of the static executable (`SFRAME_TRACE_DIST_BINARY`), run in a guest when asked.
pub const DIST_TESTS: &str = "dist::static_binary_traces_a_process_in_this_kernel";

/// Tests `#[ignore]`d on the host that a guest runs when asked for by name: the static
/// executable's, and the recorder of the replay corpus (`SFRAME_TRACE_REPLAY_CORPUS`, passed
/// into the guest with the other `SFRAME_TRACE_` variables).
const IGNORED_ON_THE_HOST: &[&str] = &[DIST_TESTS, RECORDER];

/// The recorder of the replay corpus (tests/integration/replay.rs), which needs the workloads
/// cross-built ([`prebuilt_workloads`]).
const RECORDER: &str = "replay::record_the_replay_corpus";

/// The x86-64 tests CI runs in the oldest and the newest kernels (`cargo xtask test` under
/// CI=true): loading every program (the event programs face the verifier, and the cpu-clock
/// walker must be the one with VMA lookups where the kernel has them), a walk, an event with
/// stacks, the memlock limit, and the static executable.
pub const CI_TESTS_X86_64: &[&str] = &[
    "walker::sframe_stacks_are_exact",
    "events::event_programs_load_within_limits",
    "events::uprobe_records_the_exact_callers",
    "lifecycle::low_memlock_limit_is_lifted_or_one_sentence",
    DIST_TESTS,
];

/// The aarch64 tests CI runs (`cargo xtask test` under CI=true): [`TESTS_AARCH64`] but the six
/// SFrame accuracy sets (`trace::`), which take 4 minutes each in the guest (25 with them all)
/// and would take CI past its time.
pub fn ci_tests_aarch64() -> Vec<String> {
    TESTS_AARCH64
        .iter()
        .filter(|test| !test.starts_with("trace::"))
        .map(|test| (*test).to_owned())
        .collect()
}

/// Everything vm-test needs that it cannot install itself, checked before any long set-up:
/// one sentence naming what is missing.
pub fn check_prerequisites(root: &Path, arch: GuestArch) -> anyhow::Result<()> {
    if !cfg!(target_arch = "x86_64") {
        bail!("vm-test runs binaries built (or cross-built) here on an x86-64 host, so it needs one");
    }
    for tool in ["apt-get", "dpkg-deb", "dpkg-query"] {
        if !on_path(tool) {
            bail!(
                "vm-test fetches Debian's kernel packages with {tool}, which this host lacks: it needs a Debian or Ubuntu host"
            );
        }
    }
    let missing: Vec<&str> = QEMU_PACKAGES
        .iter()
        .copied()
        .chain([arch.qemu().1])
        .filter(|p| !setup::installed(p))
        .collect();
    if !missing.is_empty() && !is_root() {
        bail!(
            "vm-test needs the packages {} (as root: apt-get install {0}, or run vm-test as root)",
            missing.join(" ")
        );
    }
    guest::command_line(
        arch.console(),
        &root.join("target/vm-test"),
        root,
        &cache_dir()?.join("kernels"),
    )?;
    Ok(())
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
}

/// `${XDG_CACHE_HOME:-~/.cache}/sframe-trace/vmtest`.
fn cache_dir() -> anyhow::Result<PathBuf> {
    Ok(debian::cache_dir()?.join("vmtest"))
}

/// After set-up: the tools are there and busybox (the guest's, at `busybox`) is static (a
/// dynamic one cannot run before the guest's root is mounted).
fn check_tools(arch: GuestArch, busybox: &Path) -> anyhow::Result<()> {
    for (tool, package) in TOOLS.iter().chain([&arch.qemu()]) {
        if !on_path(tool) {
            bail!("vm-test needs {tool} (package {package}), which is not on PATH");
        }
    }
    let bytes = fs::read(busybox).with_context(|| {
        format!(
            "vm-test needs a static busybox at {} (package busybox-static)",
            busybox.display()
        )
    })?;
    if !is_static(&bytes) {
        bail!(
            "{} is dynamically linked; vm-test needs the static one (package busybox-static)",
            busybox.display()
        );
    }
    Ok(())
}

/// Whether an ELF64 file has no program interpreter (`PT_INTERP`).
fn is_static(elf: &[u8]) -> bool {
    let word = |at: usize, len: usize| -> Option<u64> {
        let bytes = elf.get(at..at + len)?;
        Some(bytes.iter().rev().fold(0, |acc, b| acc << 8 | u64::from(*b)))
    };
    let header = || -> Option<bool> {
        if elf.get(..5)? != b"\x7fELF\x02" {
            return Some(false);
        }
        let (phoff, phentsize, phnum) = (
            word(0x20, 8)? as usize,
            word(0x36, 2)? as usize,
            word(0x38, 2)? as usize,
        );
        Some((0..phnum).all(|i| word(phoff + i * phentsize, 4) != Some(3)))
    };
    header().unwrap_or(false)
}

/// Boot each of `kernels` with the tests of `arch` (or only those `only` filters, when not
/// empty: then the kernel table of docs/kernels.md, which records whole runs, is left alone).
pub fn vm_test(
    root: &Path,
    arch: GuestArch,
    kernels: &[String],
    timeout: Duration,
    only: &[String],
) -> anyhow::Result<()> {
    let packages: Vec<&str> = QEMU_PACKAGES.iter().copied().chain([arch.qemu().1]).collect();
    setup::apt(&packages)?;
    let cache = cache_dir()?;
    fs::create_dir_all(&cache).with_context(|| format!("creating {}", cache.display()))?;
    // The guest's root: this machine's, or an arm64 one unpacked from Debian packages.
    let guest_root = match arch {
        GuestArch::X86_64 => PathBuf::from("/"),
        GuestArch::Aarch64 => rootfs::fetch(&cache, arch.debian()).context("building the arm64 root file system")?,
    };
    let busybox = guest_root.join(BUSYBOX.trim_start_matches('/'));
    check_tools(arch, &busybox)?;
    sh(Command::new("bash").arg(root.join("fixtures/toolchains.sh")))?;
    let workloads = prebuilt_workloads(root, arch, only)?;
    let binary = integration_binary(arch)?;
    let cpus = match std::env::var("VMTEST_CPUS") {
        Ok(n) => n.parse().context("VMTEST_CPUS must be a number")?,
        Err(_) => GUEST_CPUS,
    };
    let memory = std::env::var("VMTEST_MEM").unwrap_or_else(|_| GUEST_MEMORY.to_owned());
    let accel = std::env::var("VMTEST_ACCEL").unwrap_or_else(|_| "tcg".to_owned());
    let watchdog = match std::env::var("VMTEST_WATCHDOG") {
        Ok(secs) => Duration::from_secs(secs.parse().context("VMTEST_WATCHDOG must be a number of seconds")?),
        Err(_) => progress::WATCHDOG,
    };
    let date = report::date(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH)?.as_secs());
    let commit = commit();
    let matrix = Matrix {
        arch,
        root,
        guest_root: &guest_root,
        busybox: &busybox,
        cache: &cache,
        binary: &binary,
        cpus,
        memory: &memory,
        accel: &accel,
        timeout,
        watchdog,
        workloads: workloads.as_deref(),
        date: &date,
        commit: &commit,
        only,
    };
    let mut rows = Vec::new();
    let mut not_run = Vec::new();
    for name in kernels {
        match matrix.run(name) {
            Ok(row) => rows.push(row),
            // A kernel that cannot be fetched or booted has no result: it stays out of the
            // table, and the run fails at the end.
            Err(e) => {
                eprintln!("vm-test: {name}: {e:#}");
                not_run.push(name.as_str());
            }
        }
    }
    let out = root.join("target/vm-test/report.md");
    fs::write(&out, report::report(&rows))?;
    print!("{}", report::report(&rows));
    if !only.is_empty() {
        eprintln!(
            "vm-test: wrote {} (a subset of the tests: {} is left alone)",
            out.display(),
            report::KERNELS_DOC
        );
    } else {
        write_kernels_doc(root, &rows, &out)?;
    }
    if !not_run.is_empty() {
        bail!("kernels not run: {} (see the messages above)", not_run.join(", "));
    }
    if rows.iter().any(|r| r.result != "pass") {
        bail!("the kernel matrix has failures ({})", out.display());
    }
    Ok(())
}

/// Put `rows` into the kernel table of docs/kernels.md (`out`: the report they are also in).
fn write_kernels_doc(root: &Path, rows: &[report::Row], out: &Path) -> anyhow::Result<()> {
    let doc_path = root.join(report::KERNELS_DOC);
    let doc = fs::read_to_string(&doc_path).with_context(|| format!("reading {}", doc_path.display()))?;
    let rewritten = report::rewrite_table(&doc, rows).with_context(|| {
        format!(
            "{} lacks the kernel table markers `{}` and `{}`",
            report::KERNELS_DOC,
            report::BEGIN,
            report::END
        )
    })?;
    fs::write(&doc_path, rewritten)?;
    eprintln!(
        "vm-test: wrote {} and the kernel table of {}",
        out.display(),
        report::KERNELS_DOC
    );
    Ok(())
}

/// What every kernel's run shares.
struct Matrix<'a> {
    arch: GuestArch,
    root: &'a Path,
    /// The root file system the guest mounts (`guest::Run::root`).
    guest_root: &'a Path,
    /// The static busybox of the guest's initramfs.
    busybox: &'a Path,
    cache: &'a Path,
    binary: &'a Path,
    cpus: u32,
    memory: &'a str,
    accel: &'a str,
    timeout: Duration,
    /// How long a guest may print nothing (`progress::WATCHDOG`).
    watchdog: Duration,
    /// The accuracy workloads cross-built for the guest ([`prebuilt_workloads`]).
    workloads: Option<&'a Path>,
    date: &'a str,
    commit: &'a str,
    /// The tests asked for (`--tests`), or empty: the architecture's list.
    only: &'a [String],
}

impl Matrix<'_> {
    /// Fetch kernel `name`, boot it with the tests, and return its row of the table.
    fn run(&self, name: &str) -> anyhow::Result<report::Row> {
        let started = Instant::now();
        let kernel =
            kernel::fetch(self.cache, name, self.arch.debian()).with_context(|| format!("fetching kernel {name}"))?;
        // A row (and run directory) per kernel and architecture: `bookworm`, `bookworm arm64`.
        let row_name = match self.arch {
            GuestArch::X86_64 => name.to_owned(),
            GuestArch::Aarch64 => format!("{name} {}", self.arch.debian()),
        };
        let dir = self.root.join("target/vm-test").join(row_name.replace(' ', "-"));
        fs::create_dir_all(&dir)?;
        let initramfs = dir.join("initramfs.cpio");
        fs::write(&initramfs, initramfs::build(&kernel, self.busybox)?)?;
        let old = report::major_minor(&kernel.release).is_some_and(|v| v < (5, 15));
        let skips = if old { SKIP_BEFORE_5_15 } else { &[] };
        let mut command = vec![self.binary.to_string_lossy().into_owned()];
        let tests = match self.arch {
            GuestArch::X86_64 => TESTS,
            GuestArch::Aarch64 => TESTS_AARCH64,
        };
        if self.only.is_empty() {
            command.extend(tests.iter().map(|t| (*t).to_owned()));
        } else {
            command.extend(self.only.iter().cloned());
        }
        command.extend(skips.iter().flat_map(|t| ["--skip".to_owned(), (*t).to_owned()]));
        // The static executable's test is `#[ignore]`d on the host (it needs `cargo xtask
        // dist`'s output), and so is the replay corpus's recorder (it writes the corpus); no
        // other test of the guests' lists is.
        if command
            .iter()
            .any(|t| IGNORED_ON_THE_HOST.iter().any(|i| t.starts_with(i)))
        {
            command.push("--include-ignored".to_owned());
        }
        command.push("--test-threads=1".to_owned());
        // Each test's time, measured in the guest (`progress.rs`): an unstable option of
        // libtest, which `RUSTC_BOOTSTRAP` allows (as it allows `build-std` for the program).
        command.extend(["-Z", "unstable-options", "--report-time"].map(str::to_owned));
        let mut env = guest::passed_env();
        env.push(("RUSTC_BOOTSTRAP".to_owned(), "1".to_owned()));
        // The guests exist to run the privileged tier (tests/integration/support.rs).
        env.push((crate::cmd::PRIVILEGED_VAR.to_owned(), "1".to_owned()));
        // The tests' turns (file locks) and built workloads on the guest's own tmpfs (root's
        // only), not on the host's target/ over 9p (tests/integration/support.rs).
        env.push((
            "SFRAME_TRACE_TEST_STATE_DIR".to_owned(),
            "/run/sframe-trace-tests".to_owned(),
        ));
        if let Some(workloads) = self.workloads {
            env.push((WORKLOADS_VAR.to_owned(), workloads.display().to_string()));
        }
        // Tests whose sample counts and run lengths assume a real CPU adapt to emulation.
        if self.accel == "tcg" {
            env.push((EMULATED_VAR.to_owned(), "1".to_owned()));
        }
        let script = guest::command_script(&env, self.root, &command);
        fs::write(dir.join("command.sh"), script)?;
        let run = guest::Run {
            arch: self.arch,
            kernel: &kernel,
            root: self.guest_root,
            initramfs: &initramfs,
            repo: self.root,
            dir: &dir,
            cpus: self.cpus,
            memory: self.memory,
            timeout: self.timeout,
            watchdog: self.watchdog,
            accel: self.accel,
        };
        let line = guest::command_line(self.arch.console(), &dir, self.root, &kernel.dir)?;
        eprintln!(
            "vm-test: {name}: kernel {}, {} vCPU ({})",
            kernel.release, self.cpus, self.accel
        );
        let outcome = guest::boot(&run, &line)?;
        if outcome == report::Outcome::BootFailure {
            eprint!("{}", guest::console_tail(&dir, 40));
        }
        if guest::kernel_complained(&dir) {
            let console = dir.join("console.log");
            eprintln!(
                "vm-test: {name}: the kernel reported a problem, see {}",
                console.display()
            );
        }
        let output = fs::read_to_string(dir.join("output.log")).unwrap_or_default();
        let row = report::Row::new(&row_name, &kernel.release, &outcome, &output, self.date, self.commit);
        eprintln!("vm-test: {name}: {} ({} s)", row.result, started.elapsed().as_secs());
        Ok(row)
    }
}

/// The commit tested: short hash, `+changes` when tracked files differ from it (apart from the
/// kernel table of docs/kernels.md, which this command writes).
fn commit() -> String {
    let hash = output(Command::new("git").args(["rev-parse", "--short", "HEAD"]))
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    let dirty = output(Command::new("git").args([
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
        ".",
        ":!docs/kernels.md",
    ]))
    .is_some_and(|s| !s.trim().is_empty());
    if dirty { format!("{hash}+changes") } else { hash }
}

/// The variable that points the tests at workloads built ahead (tests/integration/support.rs).
const WORKLOADS_VAR: &str = "SFRAME_TRACE_WORKLOADS";
/// The variable that tells the tests they run under software emulation
/// (tests/integration/trace.rs).
const EMULATED_VAR: &str = "SFRAME_TRACE_EMULATED";

/// The SFrame accuracy workloads of an aarch64 guest, which has no cross tools: every set of
/// `fixtures/workloads/build.sh` cross-built here (SFrame v1, v2, v3, each also with signed
/// return addresses, and `.eh_frame` alone for the replay corpus) into the repository, which
/// the guest sees at the same path. `None` for x86-64 guests, which build their own with this
/// machine's tools, and when the tests asked for (`only`, when not empty) include neither a
/// `trace::` test nor the recorder (CI's arm64 guest).
fn prebuilt_workloads(root: &Path, arch: GuestArch, only: &[String]) -> anyhow::Result<Option<PathBuf>> {
    let wanted = only.is_empty() || only.iter().any(|t| t.starts_with("trace::") || t.starts_with(RECORDER));
    if arch != GuestArch::Aarch64 || !wanted {
        return Ok(None);
    }
    let dir = root.join("target/vm-test/workloads-aarch64");
    sh(Command::new("bash")
        .arg(root.join("fixtures/workloads/build.sh"))
        .arg(&dir)
        .args(["v1", "v2", "v3", "v1-pac", "v2-pac", "v3-pac", "ehframe"])
        .env("WORKLOAD_ARCH", "aarch64"))
    .context("cross-building the accuracy workloads for aarch64")?;
    Ok(Some(dir))
}

/// The variable naming the tracer the integration tests run (tests/integration/support.rs).
const TRACER_VAR: &str = "SFRAME_TRACE_BIN";

/// The build of the integration-test binary the guests of `arch` run; also started by `cargo
/// xtask test`'s background builds (`warmup.rs`). With a tracer of its own (`given_tracer`:
/// [`TRACER_VAR`] set, as `cargo xtask test` sets it to the static executable of `dist`), the
/// debug build: on x86-64 the very build of the workspace's tests (the same command, so it is
/// not built again), cross-built for aarch64. Without, the release build (under software
/// emulation the debug tracer takes seconds to start, longer than the workloads run), of
/// which the tests run the tracer built beside them.
pub fn integration_build(arch: GuestArch, given_tracer: bool) -> Command {
    // This machine's architecture: the build `cargo xtask test` made of its tests, linted
    // as they were (the same fingerprints, so nothing is built again).
    let mut command = match arch.rust_target() {
        None => crate::cmd::linting_cargo(),
        Some(_) => crate::cmd::cargo(),
    };
    command.args(["test", "--no-run"]);
    if !given_tracer {
        command.arg("--release");
    }
    if let Some(target) = arch.rust_target() {
        command.args(["--target", target, "--package", "tracer-user", "--test", "integration"]);
    } else if !given_tracer {
        command.args(["--package", "tracer-user", "--test", "integration"]);
    }
    command
}

/// Whether the tests are given a tracer to run ([`TRACER_VAR`]), passed into the guest.
pub fn given_tracer() -> bool {
    std::env::var_os(TRACER_VAR).is_some()
}

/// Build the integration-test binary of tracer-user for the guest's architecture
/// ([`integration_build`]) and return its path.
fn integration_binary(arch: GuestArch) -> anyhow::Result<PathBuf> {
    let mut command = integration_build(arch, given_tracer());
    command.arg("--message-format=json");
    let out = command.output().context("building the integration tests")?;
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
