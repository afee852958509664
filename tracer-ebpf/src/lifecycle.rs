//! Following processes: the raw tracepoint programs on exec and exit, and the rate-limited
//! notices the sampling programs send (`tracer_common::notice` says what each one means). It
//! only removes stale entries from `PROCS`; adding processes is userspace's job. Where the
//! kernel looks PCs up in VMAs, the `_vma` variants also look up new code as it appears (the
//! program and loader at exec, a library as it is mapped) for `PROC_VMAS` (`vma.rs`).
//!
//! Raw tracepoints (4.17+) attach by name, without tracefs, and take their facts from the
//! current task: at `sched_process_exec` the task has its new image, at `sched_process_exit`
//! the exiting thread is current (only a thread-group leader's exit ends the process here).
//!
//! `munmap` of a traced process's code (dlclose) is seen at the `syscalls` tracepoints (the
//! raw `sys_enter` would run on every system call of the host): at entry, a range that
//! overlaps one of the process's executable mappings removes the process from `PROCS` at
//! once (code mapped there next must not be walked with the old table), and the thread is
//! remembered; at exit, the notice goes out, so userspace reads the mappings after the call.

use aya_ebpf::{
    Global,
    helpers::{
        bpf_get_current_pid_tgid, bpf_probe_read_kernel,
        generated::{bpf_get_current_task, bpf_get_current_task_btf, bpf_ktime_get_ns},
    },
    macros::{map, raw_tracepoint, tracepoint},
    maps::{HashMap, LruHashMap, RingBuf},
    programs::{RawTracePointContext, TracePointContext},
};
use tracer_common::{
    Counter,
    notice::{
        DYING_ENTRIES, DyingTask, MMAP_PROT_OFFSET, MMAP_RET_OFFSET, MUNMAP_ADDR_OFFSET, MUNMAP_LEN_OFFSET,
        NOTICE_INTERVAL_NS, NOTICED_ENTRIES, NOTICES_BYTES, Notice, NoticeKind, PROT_EXEC, UNMAPPING_ENTRIES,
    },
};

use crate::{ALL_PROCESSES, PROC_VMAS, PROCS, TASK_REGS, VMA_OFFSETS, bump, regs, unwind, vma};

/// Notices to userspace (`MAP_NOTICES`).
#[map]
static NOTICES: RingBuf = RingBuf::with_byte_size(NOTICES_BYTES, 0);
/// When each process last had a rate-limited notice (`MAP_NOTICED`).
#[map]
static NOTICED: LruHashMap<u32, u64> = LruHashMap::with_max_entries(NOTICED_ENTRIES, 0);

/// `tracer_common::notice::MAP_DYING`.
#[map]
static DYING: LruHashMap<u32, DyingTask> = LruHashMap::with_max_entries(DYING_ENTRIES, 0);

/// `tracer_common::notice::GLOBAL_TASK_START_TIME_OFFSET`.
#[unsafe(no_mangle)]
static TASK_START_TIME_OFFSET: Global<u32> = Global::new(0);

/// The current task as [`DYING`] remembers it: its address and start time; `None` where the
/// start time's offset is unknown or its read fails (then no exit is remembered: an address
/// alone could be a later task's).
#[inline(always)]
fn current_task() -> Option<DyingTask> {
    let at = TASK_START_TIME_OFFSET.load();
    if at == 0 {
        return None;
    }
    // SAFETY: a helper without preconditions, then a probe read of kernel memory, which
    // fails instead of faulting.
    let task = unsafe { bpf_get_current_task() };
    let start_time = unsafe { bpf_probe_read_kernel((task + u64::from(at)) as *const u64) }.ok()?;
    Some(DyingTask { task, start_time })
}

/// Whether the current task is the last thread out of traced process `tgid`, which has left
/// `PROCS` at its exit but is still freeing its memory (`tracer_common::notice::MAP_DYING`):
/// the same address and start time (a later task at that address is another process).
#[inline(always)]
pub fn dying(tgid: u32) -> bool {
    // SAFETY: a copy out of the map value, valid during this run.
    let Some(&dying) = (unsafe { DYING.get(tgid) }) else {
        return false;
    };
    current_task() == Some(dying)
}

/// Threads inside a `munmap` of a traced process's code, and when it began (`MAP_UNMAPPING`).
#[map]
static UNMAPPING: HashMap<u32, u64> = HashMap::with_max_entries(UNMAPPING_ENTRIES, 0);

/// Send a notice; a full ring buffer is counted.
fn send(kind: NoticeKind, tgid: u32, now: u64) {
    let notice = Notice {
        time_ns: now,
        kind: kind as u32,
        tgid,
    };
    if NOTICES.output::<Notice>(&notice, 0).is_err() {
        bump(Counter::NoticesLost);
    }
}

/// Send a `NewProcess` or `UnknownPc` notice unless the process had one in the last
/// `NOTICE_INTERVAL_NS`.
pub fn notify_limited(kind: NoticeKind, tgid: u32) {
    // SAFETY: a helper without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let key = limit_key(kind, tgid);
    if let Some(last) = NOTICED.get_ptr(key) {
        // SAFETY: a valid map value while the program runs; a racing update from another CPU
        // at worst lets one extra notice through.
        if now.wrapping_sub(unsafe { *last }) < NOTICE_INTERVAL_NS {
            return;
        }
    }
    // An LRU map makes room by evicting the oldest entry; failure only weakens the limit.
    let _ = NOTICED.insert(key, now, 0);
    send(kind, tgid, now);
}

/// Set in the `NOTICED` key of a process's `UnknownPc` limit: pids are below 2^22.
const UNKNOWN_PC_KEY: u32 = 1 << 31;

/// The `NOTICED` key of `kind`'s rate limit for `tgid`: `UnknownPc` has a limit of its own,
/// so that a process told of at its first sample (before its libraries were mapped, in its
/// first milliseconds) is read again at once when a sample meets code mapped since.
fn limit_key(kind: NoticeKind, tgid: u32) -> u32 {
    if kind == NoticeKind::UnknownPc {
        tgid | UNKNOWN_PC_KEY
    } else {
        tgid
    }
}

/// Forget both rate limits of `tgid`.
fn forget_limits(tgid: u32) {
    let _ = NOTICED.remove(tgid);
    let _ = NOTICED.remove(tgid | UNKNOWN_PC_KEY);
}

/// A traced process leaves `PROCS` and userspace hears `kind`. So does a process userspace
/// was told of but has not loaded (yet): its samples must not be resolved through whatever
/// gets its pid next, and that one is told of at once, not after the rate limit. System-wide,
/// every exec is told.
fn drop_process(kind: NoticeKind) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if kind == NoticeKind::Exit && !group_dead(pid_tgid as u32 == tgid) {
        return;
    }
    let _ = PROC_VMAS.remove(tgid);
    let traced = PROCS.get_ptr(tgid).is_some();
    // System-wide, every exec is told: the new program is loaded at once instead of at its
    // first sample (its first samples are stack copies until then).
    let every_exec = kind == NoticeKind::Exec && ALL_PROCESSES.load() == 1;
    if !traced && !every_exec && NOTICED.get_ptr(tgid).is_none() {
        return;
    }
    if traced {
        let _ = PROCS.remove(tgid);
        if kind == NoticeKind::Exit {
            // An LRU map makes room by evicting the oldest entry; failing, the rest of the
            // exit is not sampled (as before the map).
            if let Some(task) = current_task() {
                let _ = DYING.insert(tgid, task, 0);
            }
        }
    }
    forget_limits(tgid);
    // SAFETY: a helper without preconditions.
    send(kind, tgid, unsafe { bpf_ktime_get_ns() });
}

/// `tracer_common::notice::GLOBAL_TASK_SIGNAL_OFFSET`.
#[unsafe(no_mangle)]
static TASK_SIGNAL_OFFSET: Global<u32> = Global::new(0);
/// `tracer_common::notice::GLOBAL_SIGNAL_LIVE_OFFSET`.
#[unsafe(no_mangle)]
static SIGNAL_LIVE_OFFSET: Global<u32> = Global::new(0);

/// Whether the exiting current thread is the last of its group (`do_exit` counts it out of
/// `signal->live` before `sched_process_exit`); where the offsets are unknown or a read
/// fails, whether it is the leader (`leader`).
fn group_dead(leader: bool) -> bool {
    let (signal_at, live_at) = (TASK_SIGNAL_OFFSET.load(), SIGNAL_LIVE_OFFSET.load());
    if signal_at == 0 {
        return leader;
    }
    // SAFETY: a helper without preconditions; the reads below are probe reads of kernel
    // memory, which fail instead of faulting.
    let task = unsafe { bpf_get_current_task() };
    let signal = unsafe { bpf_probe_read_kernel((task + u64::from(signal_at)) as *const u64) };
    let Ok(signal) = signal else { return leader };
    let live = unsafe { bpf_probe_read_kernel((signal + u64::from(live_at)) as *const i32) };
    live.map_or(leader, |live| live == 0)
}

#[raw_tracepoint(tracepoint = "sched_process_exec")]
pub fn on_exec(_ctx: RawTracePointContext) -> i32 {
    drop_process(NoticeKind::Exec);
    0
}

/// `on_exec` where the kernel looks PCs up in VMAs (`vma.rs`): the new image's executable code
/// (`mm->start_code`) and the code it starts in (the dynamic loader's entry, or the program's
/// when static) are looked up here, outside an interrupt, and kept for the process's first
/// samples, which then walk through both with the tables of those files (loaded for an earlier
/// run) without a lookup of their own.
#[raw_tracepoint(tracepoint = "sched_process_exec")]
pub fn on_exec_vma(_ctx: RawTracePointContext) -> i32 {
    drop_process(NoticeKind::Exec);
    if ALL_PROCESSES.load() != 1 {
        return 0;
    }
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let offsets = VMA_OFFSETS.load();
    // SAFETY: a helper without preconditions; the task pointer it returns is read with probe
    // reads only.
    let task = unsafe { bpf_get_current_task_btf() } as u64;
    // SAFETY: probe reads of kernel memory, which fail rather than fault.
    let mm = unsafe { bpf_probe_read_kernel((task + u64::from(offsets.task_mm)) as *const u64) }.unwrap_or(0);
    let start_code = if mm == 0 {
        0
    } else {
        // SAFETY: as above.
        unsafe { bpf_probe_read_kernel((mm + u64::from(offsets.mm_start_code)) as *const u64) }.unwrap_or(0)
    };
    let entry = regs::task_user_regs(TASK_REGS.load() == 1).map_or(0, |regs| regs.regs.pc);
    if start_code != 0 {
        vma::remember_code_at(tgid, start_code);
    }
    if entry != 0 {
        vma::remember_code_at(tgid, entry);
    }
    0
}

#[raw_tracepoint(tracepoint = "sched_process_exit")]
pub fn on_exit(_ctx: RawTracePointContext) -> i32 {
    drop_process(NoticeKind::Exit);
    0
}

#[tracepoint(category = "syscalls", name = "sys_enter_munmap")]
pub fn on_munmap(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    // SAFETY: reads of the tracepoint's record, whose fields are at these fixed offsets.
    let (Ok(addr), Ok(len)) = (unsafe { ctx.read_at::<u64>(MUNMAP_ADDR_OFFSET) }, unsafe {
        ctx.read_at::<u64>(MUNMAP_LEN_OFFSET)
    }) else {
        // Not knowing what was unmapped, the VMA mappings of the process are found again.
        let _ = PROC_VMAS.remove(tgid);
        return 0;
    };
    vma::forget_overlapping(tgid, addr, addr.saturating_add(len));
    let Some(procs) = PROCS.get_ptr(tgid) else {
        return 0;
    };
    if !unwind::overlaps_mappings(procs, addr, addr.saturating_add(len)) {
        return 0;
    }
    let _ = PROCS.remove(tgid);
    // Code mapped next (the next dlopen) is asked about at once, not after the rate limit.
    forget_limits(tgid);
    // SAFETY: a helper without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    if UNMAPPING.insert(pid_tgid as u32, now, 0).is_err() {
        // No room to wait for the end of the call: say it now.
        send(NoticeKind::Unmapped, tgid, now);
    }
    0
}

#[tracepoint(category = "syscalls", name = "sys_exit_munmap")]
pub fn on_munmap_exit(_ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    // SAFETY: a copy out of the map value, valid during this run.
    let Some(began) = (unsafe { UNMAPPING.get(tid) }).copied() else {
        return 0;
    };
    let _ = UNMAPPING.remove(tid);
    send(NoticeKind::Unmapped, (pid_tgid >> 32) as u32, began);
    0
}

/// A traced process maps code (a library by the dynamic loader, dlopen): remember the thread,
/// and tell userspace when the call returns (`on_mmap_exit`), so the process's mappings are read
/// again before a walk meets the new code (without this, a process loaded at exec, before the
/// loader mapped libc, had its first libc samples copied and walked only once read again).
/// System-wide, every process's code is remembered, for `on_mmap_exit_vma` to look up.
#[tracepoint(category = "syscalls", name = "sys_enter_mmap")]
pub fn on_mmap(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if ALL_PROCESSES.load() != 1 && PROCS.get_ptr((pid_tgid >> 32) as u32).is_none() {
        return 0;
    }
    // SAFETY: a read of the tracepoint's record, whose field is at this fixed offset.
    let Ok(prot) = (unsafe { ctx.read_at::<u64>(MMAP_PROT_OFFSET) }) else {
        return 0;
    };
    if prot & PROT_EXEC != 0 {
        // SAFETY: a helper without preconditions.
        let _ = UNMAPPING.insert(pid_tgid as u32, unsafe { bpf_ktime_get_ns() }, 0);
    }
    0
}

/// The end of an `mmap` `on_mmap` remembered: the thread is forgotten, and a traced process's
/// userspace hears of the new code. The process and the call's result (the mapping's start, or
/// an error), or `None` when the call was not remembered.
#[inline(always)]
fn mmap_returned(ctx: &TracePointContext) -> Option<(u32, u64)> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    let tgid = (pid_tgid >> 32) as u32;
    // SAFETY: a copy out of the map value, valid during this run.
    let began = (unsafe { UNMAPPING.get(tid) }).copied()?;
    let _ = UNMAPPING.remove(tid);
    if PROCS.get_ptr(tgid).is_some() {
        send(NoticeKind::UnknownPc, tgid, began);
    }
    // SAFETY: a read of the tracepoint's record, whose field is at this fixed offset.
    let ret = unsafe { ctx.read_at::<u64>(MMAP_RET_OFFSET) }.unwrap_or(u64::MAX);
    Some((tgid, ret))
}

#[tracepoint(category = "syscalls", name = "sys_exit_mmap")]
pub fn on_mmap_exit(ctx: TracePointContext) -> u32 {
    let _ = mmap_returned(&ctx);
    0
}

/// `on_mmap_exit` where the kernel looks PCs up in VMAs (`vma.rs`): the new code is looked up
/// here, outside an interrupt, and kept for the process's samples, so that a process
/// userspace has not read yet walks through the libraries its loader mapped (their tables
/// loaded for other processes) without a lookup of its own.
#[tracepoint(category = "syscalls", name = "sys_exit_mmap")]
pub fn on_mmap_exit_vma(ctx: TracePointContext) -> u32 {
    let Some((tgid, start)) = mmap_returned(&ctx) else {
        return 0;
    };
    // An error is a small negative number; user addresses are below the top half.
    if start == 0 || start >= 1 << 63 {
        return 0;
    }
    vma::remember_code_at(tgid, start);
    0
}
