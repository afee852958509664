//! Off-CPU stacks (`-e offcpu`): where traced threads block, weighted by how long. One raw
//! tracepoint program on `sched_switch` (no tracefs needed) and its walker copy; userspace
//! loads them only for offcpu, on kernels with `bpf_task_pt_regs` (5.15+).
//!
//! At each switch, in the scheduler, with `prev` still `current`:
//! 1. switch-in of `next`: if a stack of it is parked (`PARKED[tid]`) and it was switched out
//!    at least `MIN_BLOCK_NS` ago, ship that stack with the time blocked as its weight; forget
//!    it either way. (`next` is not `current`: its tid is read from its `task_struct`.)
//! 2. switch-out of `prev`: unless it was preempted or otherwise left runnable (state
//!    `TASK_RUNNING`: waiting for the CPU, not blocked) or is exiting (never switched in
//!    again), start the walk of its stack like a cpu-clock sample that hit
//!    the kernel (user registers saved at its kernel entry, kernel stack down to `schedule`)
//!    and tail-call [`walk_user_switch`], which parks the finished sample instead of shipping it.
//!
//! Walking every switch-out costs one walk per block, short or long: whether it will be long
//! is only known at switch-in, when the task's stack can no longer be read.

use aya_ebpf::{
    Global,
    helpers::{
        bpf_probe_read_kernel,
        generated::{bpf_get_current_task, bpf_ktime_get_ns},
    },
    macros::{map, raw_tracepoint},
    maps::{LruHashMap, ProgramArray},
    programs::RawTracePointContext,
};
use tracer_common::{
    Counter,
    event::{EVENT_OFFCPU, PF_EXITING},
    trace::{PROG_WALK_SLOT, SampleRecord},
};

use crate::{TASK_REGS, begin, bump, end_walk, regs, ship, tail_call_failed, walk_more};

/// `tracer_common::event::GLOBAL_MIN_BLOCK_NS`.
#[unsafe(no_mangle)]
static MIN_BLOCK_NS: Global<u64> = Global::new(1_000_000);
/// `tracer_common::event::GLOBAL_TASK_PID_OFFSET`.
#[unsafe(no_mangle)]
static TASK_PID_OFFSET: Global<u32> = Global::new(0);
/// `tracer_common::event::GLOBAL_TASK_FLAGS_OFFSET`.
#[unsafe(no_mangle)]
static TASK_FLAGS_OFFSET: Global<u32> = Global::new(0);
/// `tracer_common::event::GLOBAL_TASK_STATE_OFFSET`.
#[unsafe(no_mangle)]
static TASK_STATE_OFFSET: Global<u32> = Global::new(0);

/// Stacks of blocked threads by tid (`MAP_PARKED`), sized by userspace.
#[map]
static PARKED: LruHashMap<u32, SampleRecord> = LruHashMap::with_max_entries(1, 0);
/// `walk_user_switch` at `PROG_WALK_SLOT` (`MAP_PROGS_SWITCH`).
#[map]
static PROGS_SWITCH: ProgramArray = ProgramArray::with_max_entries(1, 0);

#[raw_tracepoint(tracepoint = "sched_switch")]
pub fn on_switch(ctx: RawTracePointContext) -> i32 {
    // Arguments of the tracepoint: (bool preempt, task_struct *prev, task_struct *next, ...).
    let next: u64 = ctx.arg(2);
    switched_in(next);
    let preempt: u64 = ctx.arg(0);
    if preempt != 0 || !blocking() {
        return 0;
    }
    let Some(state) = begin(
        &ctx,
        || regs::task_user_regs(TASK_REGS.load() == 1),
        EVENT_OFFCPU,
        0,
        false,
    ) else {
        return 0;
    };
    // SAFETY: the slot holds `walk_user_switch`, a raw tracepoint program; on success this
    // does not return.
    unsafe { PROGS_SWITCH.tail_call(&ctx, PROG_WALK_SLOT) };
    tail_call_failed(state);
    end_walk(state);
    park(&state.record);
    0
}

/// `walk_user` for raw tracepoint programs: the finished walk is parked.
#[raw_tracepoint]
pub fn walk_user_switch(ctx: RawTracePointContext) -> i32 {
    if let Some(state) = walk_more::<_, false>(&ctx, &PROGS_SWITCH) {
        park(&state.record);
    }
    0
}

/// Step 1 for the task at `next` (a `task_struct` address).
#[inline(always)]
fn switched_in(next: u64) {
    let at = next.wrapping_add(u64::from(TASK_PID_OFFSET.load()));
    // SAFETY: a probe read of kernel memory: a bad address fails instead of faulting.
    let Ok(tid) = (unsafe { bpf_probe_read_kernel(at as *const u32) }) else {
        return;
    };
    let Some(parked) = PARKED.get_ptr_mut(tid) else {
        return;
    };
    // SAFETY: a helper without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    // SAFETY: a value of this map, valid while the program runs; no other CPU touches it
    // meanwhile (the task is switched in here, once; it was parked before it could be).
    let record = unsafe { &mut *parked };
    let blocked = now.wrapping_sub(record.header.time_ns);
    if blocked >= MIN_BLOCK_NS.load() && blocked < u64::MAX / 2 {
        record.header.weight = blocked;
        ship(record);
    }
    let _ = PARKED.remove(tid);
}

/// Whether the current task, being switched out, blocks: it sleeps (a state other than
/// `TASK_RUNNING`) and is not exiting (`PF_EXITING`: its last switch-out is not a block).
#[inline(always)]
fn blocking() -> bool {
    // SAFETY: a helper without preconditions.
    let task = unsafe { bpf_get_current_task() };
    let field = |offset: u32| task.wrapping_add(u64::from(offset)) as *const u32;
    // SAFETY: probe reads of kernel memory, as above.
    let (state, flags) = unsafe {
        (
            bpf_probe_read_kernel(field(TASK_STATE_OFFSET.load())),
            bpf_probe_read_kernel(field(TASK_FLAGS_OFFSET.load())),
        )
    };
    matches!((state, flags), (Ok(state), Ok(flags)) if state != 0 && flags & PF_EXITING == 0)
}

/// Keep the stack of the task being switched out until it is switched in again.
fn park(record: &SampleRecord) {
    if PARKED.insert(record.header.tid, record, 0).is_err() {
        bump(Counter::EventsLost);
    }
}
