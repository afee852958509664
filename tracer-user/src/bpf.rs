//! Kernel plumbing: preflight checks, loading the embedded eBPF program, attaching it to
//! cpu-clock on every online CPU, forwarding its aya-log diagnostics and reading its counters.
//! Nothing here parses unwind information; it only moves data between userspace and the kernel.

use std::{os::fd::AsRawFd as _, path::Path};

use anyhow::{Context as _, bail};
use aya::{
    Ebpf, EbpfLoader,
    maps::PerCpuArray,
    programs::{
        PerfEvent,
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
    },
    util::online_cpus,
};
use tokio::io::{Interest, unix::AsyncFd};
use tracer_common::{Counter, GLOBAL_TARGET_TGID, MAP_COUNTERS, PROG_ON_SAMPLE};

/// The eBPF object built by `build.rs` from `tracer-ebpf`.
static PROGRAM: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer"));

/// Why this host cannot trace, as one sentence, or Ok.
pub fn preflight() -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        bail!("sframe-trace needs root (or CAP_BPF and CAP_PERFMON) to load its eBPF program: run it with sudo");
    }
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        bail!(
            "this kernel has no BTF (/sys/kernel/btf/vmlinux is missing): sframe-trace needs a kernel built with CONFIG_DEBUG_INFO_BTF=y"
        );
    }
    Ok(())
}

/// The loaded program, attached to cpu-clock on every online CPU.
pub struct Tracer {
    ebpf: Ebpf,
}

impl Tracer {
    /// Load the program for `target_tgid` (0 = every process) and attach it at `frequency` Hz.
    pub fn start(target_tgid: u32, frequency: u64) -> anyhow::Result<Self> {
        raise_memlock_limit();
        let mut ebpf = EbpfLoader::new()
            .override_global(GLOBAL_TARGET_TGID, &target_tgid, true)
            .load(PROGRAM)
            .context("loading the eBPF program")?;
        forward_logs(&mut ebpf);
        let program: &mut PerfEvent = ebpf
            .program_mut(PROG_ON_SAMPLE)
            .with_context(|| format!("program {PROG_ON_SAMPLE} missing from the eBPF object"))?
            .try_into()?;
        program.load().context("the kernel verifier rejected the program")?;
        let cpus = online_cpus().map_err(|(path, err)| anyhow::anyhow!("reading {path}: {err}"))?;
        for cpu in cpus {
            program
                .attach(
                    PerfEventConfig::Software(SoftwareEvent::CpuClock),
                    PerfEventScope::AllProcessesOneCpu { cpu },
                    SamplePolicy::Frequency(frequency),
                    false,
                )
                .with_context(|| format!("attaching to cpu-clock on CPU {cpu}"))?;
        }
        Ok(Self { ebpf })
    }

    /// Counter totals over all CPUs, in [`Counter::ALL`] order.
    pub fn counters(&self) -> anyhow::Result<Vec<(Counter, u64)>> {
        let map = self
            .ebpf
            .map(MAP_COUNTERS)
            .with_context(|| format!("map {MAP_COUNTERS} missing from the eBPF object"))?;
        let array = PerCpuArray::<_, u64>::try_from(map)?;
        Counter::ALL
            .iter()
            .map(|&c| {
                let per_cpu = array.get(&(c as u32), 0)?;
                Ok((c, per_cpu.iter().sum()))
            })
            .collect()
    }
}

/// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK; lift it so loading does not fail there.
fn raise_memlock_limit() {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads the struct we pass; failure only leaves the old limit in place.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) } != 0 {
        log::debug!("could not raise RLIMIT_MEMLOCK; loading may fail on kernels before 5.11");
    }
}

/// Forward aya-log records from the program to this process's `log` logger, on the tokio runtime.
fn forward_logs(ebpf: &mut Ebpf) {
    let logger = match aya_log::EbpfLogger::init(ebpf) {
        Ok(logger) => logger,
        // A program built without log statements has no log map: nothing to forward.
        Err(err) => {
            log::debug!("eBPF logs unavailable: {err}");
            return;
        }
    };
    let fd = logger.as_raw_fd();
    // SAFETY: the logger owns its ring-buffer fd and returns that same open fd for as long as
    // it lives; the AsyncFd owns the logger, so the fd outlives the registration.
    let Ok(mut logger) = (unsafe { AsyncFd::register_with_interest(logger, Interest::READABLE) }) else {
        log::debug!("eBPF logs unavailable: cannot poll fd {fd}");
        return;
    };
    tokio::spawn(async move {
        while let Ok(mut guard) = logger.readable_mut().await {
            guard.get_inner_mut().flush();
            guard.clear_ready();
        }
    });
}
