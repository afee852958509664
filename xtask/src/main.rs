//! Developer tasks that cargo alone cannot do: installing what the build needs, the bundled demo,
//! the full test run (privileged tests included), fixture regeneration, benchmarks and the
//! split clippy. Run as `cargo xtask <task>`; every task prints the commands it runs.

mod background;
mod bench;
mod cmd;
mod debian;
mod dist;
mod fuzz;
#[cfg(test)]
mod imports;
#[cfg(test)]
mod purity;
mod run;
mod setup;
#[cfg(test)]
mod standalone;
mod times;
#[cfg(test)]
mod unsafety;
mod vmtest;
mod warmup;

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "sframe-trace developer tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Install what building and testing need (apt packages, rust-src, bpf-linker, the private
    /// root of Debian trixie's python3.13). Idempotent.
    Setup,
    /// Set up, build, compile the bundled demo with SFrame and run sframe-trace on it.
    Demo,
    /// Set up, build, and run every test: unit, integration, golden, privileged, hardening,
    /// fuzzing (each target for a bounded time), clippy.
    Test {
        /// The long variants of the hardening tests (30 s storms instead of 5 s).
        #[arg(long)]
        long: bool,
        /// Start at this stage (the toolchains' set-up always runs), to finish a run that
        /// failed: workspace-tests, pure-readers, conformance, external, dist, x86-64-guests,
        /// arm64-guest, fuzz, clippy.
        #[arg(long, value_name = "STAGE")]
        from: Option<String>,
    },
    /// Build what a production host installs into target/dist/: a static executable per
    /// architecture (musl, eBPF program embedded), tarballs with the man page and completions,
    /// SHA256SUMS, Debian packages and OCI image archives. Idempotent; installs what it needs.
    Dist {
        /// Architectures to build, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "x86_64,aarch64")]
        arch: Vec<String>,
    },
    /// Lint the userspace crates and the eBPF crate (apart: it only builds for the bpf target).
    Clippy {
        /// Only the formatting and the eBPF crate: the userspace crates were linted as they were
        /// built (`cargo xtask test` builds its tests with clippy's driver).
        #[arg(long, hide = true)]
        ebpf_only: bool,
    },
    /// Regenerate the checked-in fixtures with binutils 2.40, 2.44 and the sid snapshot.
    Fixtures,
    /// Measure sframe-trace beside perf and bpftrace (accuracy, overhead, kernel cost per
    /// sample, memory, build rate, attach time, data volume, decode rate, perf-map
    /// symbolization) and write target/bench/report.md, report.json and report.svg.
    Bench {
        /// A short smoke run: fewer repetitions, shorter runs, one SFrame version.
        #[arg(long)]
        quick: bool,
        /// Run only this phase and print it; no report is written: `perfmap`, or as root
        /// `hostscale`, `python`, `static`, `soak` (30 minutes; 40 s with --quick), or `bare`
        /// (sframe-trace against bare `perf record` in 61 paired rounds, about 6 minutes).
        #[arg(long, value_name = "PHASE")]
        phase: Option<String>,
    },
    /// Run the privileged end-to-end tests inside other Debian kernels under qemu, and write
    /// target/vm-test/report.md and the kernel table of docs/kernels.md.
    ///
    /// Kernels are cached under ${XDG_CACHE_HOME:-~/.cache}/sframe-trace/vmtest; each guest's
    /// output, exit status and console are in target/vm-test/KERNEL/. Settings: VMTEST_CPUS
    /// (1), VMTEST_MEM (1G), VMTEST_ACCEL (tcg; kvm where it works), VMTEST_WATCHDOG (600:
    /// seconds a guest may print nothing before it is stopped, naming the test it was in),
    /// VMTEST_MIRROR and VMTEST_SECURITY_MIRROR (deb.debian.org). Each test's time is printed
    /// as it ends.
    VmTest {
        /// Debian suites (or kernel ABI names) to boot, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "bullseye,bookworm,trixie,sid")]
        kernels: Vec<String>,
        /// Seconds each guest may run (boot and tests) before it is stopped.
        #[arg(long, default_value_t = 1800)]
        timeout: u64,
        /// The guests' architecture: x86_64 (this machine's binaries and root), or aarch64
        /// (Debian's arm64 kernels under qemu-system-aarch64, binaries cross-built here, an arm64
        /// root file system unpacked from Debian packages).
        #[arg(long, value_enum, default_value = "x86_64")]
        arch: vmtest::arch::GuestArch,
        /// Run only these tests (filters of the integration-test binary, comma-separated, e.g.
        /// `walker::,events::kprobe`) instead of the architecture's list: for iterating on a
        /// few. The report is written, the kernel table of docs/kernels.md is left alone.
        #[arg(long, value_delimiter = ',', value_name = "FILTERS")]
        tests: Vec<String>,
    },
}

fn main() -> anyhow::Result<()> {
    let root = workspace_root();
    std::env::set_current_dir(&root)?;
    match Cli::parse().task {
        Task::Setup => setup::setup(),
        Task::Demo => {
            setup::setup()?;
            run::demo(&root)
        }
        Task::Test { long, from } => {
            setup::setup()?;
            run::test(&root, long, from.as_deref())
        }
        Task::Dist { arch } => {
            setup::setup()?;
            let arches = arch.iter().map(|a| dist::arch(a)).collect::<anyhow::Result<Vec<_>>>()?;
            dist::dist(&root, &arches).map(drop)
        }
        Task::Clippy { ebpf_only } => {
            setup::setup()?;
            run::clippy(!ebpf_only)
        }
        Task::Fixtures => run::fixtures(&root),
        Task::VmTest {
            kernels,
            timeout,
            arch,
            tests,
        } => {
            vmtest::check_prerequisites(&root, arch)?;
            setup::setup()?;
            let timeout = std::time::Duration::from_secs(timeout);
            vmtest::vm_test(&root, arch, &kernels, timeout, &tests)
        }
        Task::Bench {
            phase: Some(phase),
            quick,
        } => bench::phase(&root, &phase, quick),
        Task::Bench { quick, phase: None } => {
            setup::setup()?;
            bench::bench(&root, quick)
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}
