//! What loading needs from the system around it: a memlock limit high enough for old kernels,
//! which helpers the kernel has, and forwarding the program's aya-log records to the `log`
//! logger on the tokio runtime. No maps or programs are touched here beyond the logger's own.

use std::os::fd::AsRawFd as _;

use aya::{
    Ebpf,
    programs::ProgramType,
    sys::{BpfHelper, is_helper_supported},
};
use tokio::io::{Interest, unix::AsyncFd};

/// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK; lift it so loading does not fail there.
pub(super) fn raise_memlock_limit() {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads the struct we pass; failure only leaves the old limit in place.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) } != 0 {
        log::debug!("could not raise RLIMIT_MEMLOCK; loading may fail on kernels before 5.11");
    }
}

/// Whether perf_event programs may call `bpf_get_current_task_btf` and `bpf_task_pt_regs`
/// (Linux 5.15+), which the walker needs for samples that hit the kernel
/// (`tracer_common::trace::GLOBAL_TASK_REGS`). Said once when missing.
pub(super) fn has_task_regs() -> bool {
    let helpers = [
        BpfHelper::BPF_FUNC_get_current_task_btf,
        BpfHelper::BPF_FUNC_task_pt_regs,
    ];
    let missing = helpers
        .iter()
        .find(|&&helper| !is_helper_supported(ProgramType::PerfEvent, helper).unwrap_or(false));
    if let Some(helper) = missing {
        log::warn!("this kernel lacks {helper:?} (Linux 5.15+): samples that hit the kernel will have no user stack");
    }
    missing.is_none()
}

/// Forward aya-log records from the program to this process's `log` logger, on the current
/// tokio runtime (without one, they are not forwarded).
pub(super) fn forward_logs(ebpf: &mut Ebpf) {
    if tokio::runtime::Handle::try_current().is_err() {
        log::debug!("eBPF logs not forwarded: no tokio runtime");
        return;
    }
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
