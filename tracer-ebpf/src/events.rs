//! Stacks on probes and tracepoints: the entry programs of `-e kprobe:`, `uprobe:`,
//! `uretprobe:` and `tracepoint:` events and the walker copies they tail-call. Each entry
//! program is one event (its slot is its event id, `tracer_common::event`); userspace loads and
//! attaches only those asked for.
//!
//! An entry program starts the walk like a cpu-clock sample does (`crate::begin`): a uprobe's
//! or uretprobe's registers are the user registers (a uretprobe's PC is already the return
//! address in the caller, so its stack starts there); a kprobe's are kernel registers and a
//! tracepoint has none, so theirs are the task's saved user registers (5.15+) and the sample
//! gets the kernel stack. Then it tail-calls the walker of its program type: every kprobe-type
//! program shares [`walk_user_probe`], tracepoints have [`walk_user_tracepoint`]. Probe hits
//! weigh 0 ns: they are counted, not timed.

use aya_ebpf::{
    EbpfContext,
    bindings::pt_regs,
    helpers::{bpf_get_current_pid_tgid, generated::bpf_ktime_get_ns},
    macros::{kprobe, map, tracepoint, uprobe, uretprobe},
    maps::{LruHashMap, ProgramArray},
    programs::{ProbeContext, RetProbeContext, TracePointContext},
};
use tracer_common::{
    Counter,
    event::{
        EVENT_CALL_ENTRY, EXEC_ENTRIES, EXEC_ENTRY_INTERVAL_NS, EventKind, SIGNAL_HANDLER_OFFSET, SIGNAL_SIG_OFFSET,
        ends_process, event_id,
    },
    trace::PROG_WALK_SLOT,
};

use crate::{ALL_PROCESSES, PROCS, TASK_REGS, begin, bump, end_walk, regs, ship, tail_call_failed, walk_more};

/// `walk_user_probe` at `PROG_WALK_SLOT` (`MAP_PROGS_PROBE`), set by userspace after load.
#[map]
static PROGS_PROBE: ProgramArray = ProgramArray::with_max_entries(1, 0);
/// When each process's last exec entry was walked (`MAP_EXEC_ENTRIES`).
#[map]
static EXEC_ENTRIES_AT: LruHashMap<u32, u64> = LruHashMap::with_max_entries(EXEC_ENTRIES, 0);
/// `walk_user_tracepoint` at `PROG_WALK_SLOT` (`MAP_PROGS_TRACEPOINT`).
#[map]
static PROGS_TRACEPOINT: ProgramArray = ProgramArray::with_max_entries(1, 0);

/// A hit of event `event` with registers `regs` (the probe's context); then the walk.
#[inline(always)]
fn probe_hit<C: EbpfContext>(ctx: &C, regs: *const pt_regs, event: u32) -> u32 {
    let Some(state) = begin(ctx, || regs::user_regs(regs, TASK_REGS.load() == 1), event, 0, false) else {
        return 0;
    };
    // SAFETY: the slot holds `walk_user_probe`, a kprobe-type program like every caller of
    // this function; on success this does not return.
    unsafe { PROGS_PROBE.tail_call(ctx, PROG_WALK_SLOT) };
    tail_call_failed(state);
    end_walk(state);
    ship(&state.record);
    0
}

/// A hit of tracepoint event `event`; then the walk. A process not in `PROCS` is walked too:
/// the tracepoint walker may be the one that finds mappings through VMAs (where it is not, the
/// walk stops at its first frame and ships the copy `begin` would have).
#[inline(always)]
fn tracepoint_hit(ctx: &TracePointContext, event: u32) -> u32 {
    let Some(state) = begin(ctx, || regs::task_user_regs(TASK_REGS.load() == 1), event, 0, true) else {
        return 0;
    };
    // SAFETY: the slot holds `walk_user_tracepoint`, a tracepoint program; on success this
    // does not return.
    unsafe { PROGS_TRACEPOINT.tail_call(ctx, PROG_WALK_SLOT) };
    tail_call_failed(state);
    end_walk(state);
    ship(&state.record);
    0
}

/// One entry program per slot: `probe_entries!(attribute, context type, kind, name = slot, ...)`
/// (names as in `tracer_common::event::PROG_*`).
macro_rules! probe_entries {
    ($attr:ident, $ctx:ty, $kind:expr, $($name:ident = $slot:literal),*) => {$(
        #[$attr]
        pub fn $name(ctx: $ctx) -> u32 {
            probe_hit(&ctx, ctx.regs.cast_const(), event_id($kind, $slot))
        }
    )*};
}

probe_entries!(
    kprobe,
    ProbeContext,
    EventKind::Kprobe,
    on_kprobe_0 = 0,
    on_kprobe_1 = 1,
    on_kprobe_2 = 2,
    on_kprobe_3 = 3,
    on_kprobe_4 = 4,
    on_kprobe_5 = 5,
    on_kprobe_6 = 6,
    on_kprobe_7 = 7
);
probe_entries!(
    uprobe,
    ProbeContext,
    EventKind::Uprobe,
    on_uprobe_0 = 0,
    on_uprobe_1 = 1,
    on_uprobe_2 = 2,
    on_uprobe_3 = 3,
    on_uprobe_4 = 4,
    on_uprobe_5 = 5,
    on_uprobe_6 = 6,
    on_uprobe_7 = 7
);
probe_entries!(
    uretprobe,
    RetProbeContext,
    EventKind::Uretprobe,
    on_uretprobe_0 = 0,
    on_uretprobe_1 = 1,
    on_uretprobe_2 = 2,
    on_uretprobe_3 = 3,
    on_uretprobe_4 = 4,
    on_uretprobe_5 = 5,
    on_uretprobe_6 = 6,
    on_uretprobe_7 = 7
);

macro_rules! tracepoint_entries {
    ($($name:ident = $slot:literal),*) => {$(
        #[tracepoint]
        pub fn $name(ctx: TracePointContext) -> u32 {
            tracepoint_hit(&ctx, event_id(EventKind::Tracepoint, $slot))
        }
    )*};
}

tracepoint_entries!(
    on_tracepoint_0 = 0,
    on_tracepoint_1 = 1,
    on_tracepoint_2 = 2,
    on_tracepoint_3 = 3,
    on_tracepoint_4 = 4,
    on_tracepoint_5 = 5,
    on_tracepoint_6 = 6,
    on_tracepoint_7 = 7
);

/// [`on_call_entry`] for `execve` and `execveat`, at most once per `EXEC_ENTRY_INTERVAL_NS`
/// per process (one failing execs in a loop would otherwise have a walk shipped per call);
/// the execs left out are counted.
#[tracepoint]
pub fn on_exec_entry(ctx: TracePointContext) -> u32 {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    // Only the execs of processes a sample would be taken of count against the limit.
    if ALL_PROCESSES.load() != 1 && PROCS.get_ptr(tgid).is_none() {
        return 0;
    }
    // SAFETY: a helper without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    if let Some(last) = EXEC_ENTRIES_AT.get_ptr(tgid) {
        // SAFETY: a valid map value while the program runs; a racing update from another CPU
        // at worst lets one more walk through.
        if now.wrapping_sub(unsafe { *last }) < EXEC_ENTRY_INTERVAL_NS {
            bump(Counter::ExecEntriesLimited);
            return 0;
        }
    }
    // An LRU map makes room by evicting the oldest entry; failure only weakens the limit.
    let _ = EXEC_ENTRIES_AT.insert(tgid, now, 0);
    tracepoint_hit(&ctx, EVENT_CALL_ENTRY)
}

/// The user stack of a thread entering `exit` or `exit_group` (attached to each call's
/// `syscalls:sys_enter_*` tracepoint; `execve` and `execveat` through [`on_exec_entry`]),
/// shipped as an `EVENT_CALL_ENTRY` record:
/// inside the call, once the address space is freed or replaced, the thread's samples have
/// registers but no stack to walk, and userspace gives them this one (they are in the same
/// call, with the same user registers). Nothing is kept here.
#[tracepoint]
pub fn on_call_entry(ctx: TracePointContext) -> u32 {
    tracepoint_hit(&ctx, EVENT_CALL_ENTRY)
}

/// The user stack of a thread a signal that ends its process is delivered to (attached to
/// `signal:signal_deliver`), shipped like [`on_call_entry`]'s: the threads killed by another's
/// `exit_group` or exec, or by a fatal signal, leave through the kernel's exit with the
/// registers they had here, and the last one out frees the memory.
#[tracepoint]
pub fn on_fatal_signal(ctx: TracePointContext) -> u32 {
    // SAFETY: reads of the tracepoint record's fields at their offsets (its format); a
    // failed read is an error, not a fault.
    let read = unsafe {
        (
            ctx.read_at::<i32>(SIGNAL_SIG_OFFSET),
            ctx.read_at::<u64>(SIGNAL_HANDLER_OFFSET),
        )
    };
    let (Ok(sig), Ok(handler)) = read else {
        return 0;
    };
    if !ends_process(sig, handler) {
        return 0;
    }
    tracepoint_hit(&ctx, EVENT_CALL_ENTRY)
}

/// `walk_user` for kprobe-type programs.
#[kprobe]
pub fn walk_user_probe(ctx: ProbeContext) -> u32 {
    if let Some(state) = walk_more::<_, false>(&ctx, &PROGS_PROBE) {
        ship(&state.record);
    }
    0
}

/// `walk_user` for tracepoint programs.
#[tracepoint]
pub fn walk_user_tracepoint(ctx: TracePointContext) -> u32 {
    if let Some(state) = walk_more::<_, false>(&ctx, &PROGS_TRACEPOINT) {
        ship(&state.record);
    }
    0
}

/// `walk_user_vma` for tracepoint programs (`tracer_common::event::PROG_WALK_TRACEPOINT_VMA`):
/// userspace installs it in `PROGS_TRACEPOINT` instead of [`walk_user_tracepoint`] where the
/// kernel allows. Its VMA reads share the cpu-clock walker's slot: a tracepoint program holds
/// the CPU's BPF activity count, so no perf-event program runs on this CPU meanwhile.
#[tracepoint]
pub fn walk_user_tracepoint_vma(ctx: TracePointContext) -> u32 {
    if let Some(state) = walk_more::<_, true>(&ctx, &PROGS_TRACEPOINT) {
        crate::vma::attach(state);
        ship(&state.record);
    }
    0
}
