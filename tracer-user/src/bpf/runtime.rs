//! What loading needs from the system around it (the memlock limit is lifted when the session
//! starts, `sys::session`): what to say when it stayed too low, no signal pending for the
//! loading thread, which helpers the kernel has, and forwarding the program's aya-log records
//! to the `log` logger on the tokio runtime. No maps or programs are touched here beyond the
//! logger's own.

use std::os::fd::AsRawFd as _;

use aya::{
    Ebpf,
    programs::{ProgramError, ProgramType},
    sys::{BpfHelper, is_helper_supported},
};

/// The error of a failed load of the eBPF object: with a memlock limit left in place
/// (`memlock`, from `sys::session::memlock_left`: kernels before 5.11 charge BPF maps to
/// RLIMIT_MEMLOCK, which the session lifted if it could) and a refusal from the kernel
/// (`EPERM`, which is what kernels before 5.11 answer when maps exceed it), the one sentence
/// that says so.
pub(super) fn explain_load_failure(err: anyhow::Error, memlock: Option<u64>) -> anyhow::Error {
    const EPERM: i32 = 1;
    let refused = err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error)
            == Some(EPERM)
    });
    match memlock {
        Some(limit) if refused => anyhow::anyhow!(
            "the locked-memory limit ({} KiB, `ulimit -l`) is too low for the eBPF maps and sframe-trace cannot \
             raise it without CAP_SYS_RESOURCE: run it with `ulimit -l unlimited`, or as root",
            limit / 1024
        ),
        _ => err.context("loading the eBPF object (creating its maps)"),
    }
}

/// Lines of the verifier's log a rejection's message keeps: its end, where the verifier says
/// why it gave up (`BPF program is too large. Processed 1000001 insn`, the instruction that
/// failed and its registers).
const VERIFIER_LINES: usize = 8;

/// Program `name`'s failure to load as one readable message: the kernel's answer and the end
/// of the verifier's log, not the whole log (hundreds of kilobytes when the verifier gives up
/// at its limit), which goes to the debug log.
pub(super) fn rejected(name: &str, err: ProgramError) -> anyhow::Error {
    match err {
        ProgramError::LoadError { io_error, verifier_log } => {
            let log = verifier_log.to_string();
            log::debug!("the verifier's log of {name}:\n{log}");
            anyhow::anyhow!(
                "the kernel verifier rejected {name} ({io_error}); the end of its log:\n{}",
                log_tail(&log, VERIFIER_LINES)
            )
        }
        other => anyhow::Error::new(other).context(format!("the kernel verifier rejected {name}")),
    }
}

/// The last `lines` non-empty lines of `log`, said to be the end when there were more.
pub(super) fn log_tail(log: &str, lines: usize) -> String {
    let all: Vec<&str> = log.lines().map(str::trim_end).filter(|l| !l.is_empty()).collect();
    let kept = &all[all.len().saturating_sub(lines)..];
    let mut out = String::new();
    if kept.len() < all.len() {
        out.push_str(&format!("  ({} lines before)\n", all.len() - kept.len()));
    }
    for line in kept {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    out
}

/// SIGINT and SIGTERM blocked for the current thread while it lives. The verifier gives up
/// on a program (`EAGAIN`) when a signal is pending for the thread that loads it, so Ctrl-C
/// while the program loads would fail the session instead of ending it once loaded; blocked
/// here, the signals go to the runtime's other threads (or wait), and are acted on after.
pub(super) struct DeferSignals(Option<crate::sys::signals::Blocked>);

impl DeferSignals {
    pub(super) fn new() -> DeferSignals {
        // Only the calling thread's mask changes (a failure leaves it as it was).
        DeferSignals(crate::sys::signals::block(&[libc::SIGINT, libc::SIGTERM]).ok())
    }
}

impl Drop for DeferSignals {
    fn drop(&mut self) {
        // Restores the mask saved by `new` on this same thread (the guard lives in one stack
        // frame).
        if let Some(blocked) = &self.0 {
            blocked.restore();
        }
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

/// Whether perf_event programs may call `bpf_find_vma` (Linux 5.17+; with
/// `bpf_get_current_task_btf`, 5.11+), which `walk_user_vma` needs (`tracer_common::vma`).
pub(super) fn has_find_vma() -> bool {
    [BpfHelper::BPF_FUNC_get_current_task_btf, BpfHelper::BPF_FUNC_find_vma]
        .iter()
        .all(|&helper| is_helper_supported(ProgramType::PerfEvent, helper).unwrap_or(false))
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
    let Ok(mut logger) = crate::sys::poll::readable(logger) else {
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

#[cfg(test)]
mod tests;
