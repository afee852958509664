//! The in-kernel half of sframe-trace: two perf_event programs and their maps.
//!
//! [`on_sample`] runs on every cpu-clock sample: it filters by process, captures the user
//! registers (`regs.rs`) and the kernel stack into the per-CPU walk state, and tail-calls
//! [`walk_user`], which walks up to `FRAMES_PER_PROG` user frames per invocation (`unwind.rs`,
//! one global-function call per frame) and tail-calls itself until the walk stops, then ships
//! the sample through the ring buffer. Names, layouts and limits are `tracer_common`'s; this
//! file only wires them. It must stay verifier-friendly: constant loop bounds, no recursion, no
//! `bpf_loop` (kernels before 5.17 lack it), every memory access checked; and it logs (aya-log)
//! only what should never happen, never per sample.
//!
//! Kernels: loads and walks on 5.10, 6.1, 6.12 and 6.18 (walker tests run in VMs); global
//! functions need 5.6, ring buffers 5.8; samples that hit the kernel need `bpf_task_pt_regs`
//! (5.15, `regs.rs`), before that they are counted as `no_user_regs`.
#![no_std]
#![cfg_attr(not(test), no_main)]

mod regs;
mod unwind;

use aya_ebpf::{
    Global,
    helpers::{
        bpf_get_current_comm, bpf_get_current_pid_tgid,
        generated::{bpf_get_smp_processor_id, bpf_get_stack, bpf_ktime_get_ns},
    },
    macros::{map, perf_event},
    maps::{Array, HashMap, PerCpuArray, ProgramArray, RingBuf},
    programs::PerfEventContext,
};
use aya_log_ebpf::error;
use tracer_common::{
    Counter,
    trace::{MAX_KERNEL_FRAMES, PROG_WALK_SLOT, ProcInfo, RowChunk, SOURCE_TABLE, Sample, WalkState},
    unwind::{PageEntry, PageKey, UnwindRule},
    walk::StopReason,
};

/// `tracer_common::trace::GLOBAL_MAX_DEPTH`.
#[unsafe(no_mangle)]
static MAX_DEPTH: Global<u32> = Global::new(tracer_common::trace::DEFAULT_MAX_DEPTH);
/// `tracer_common::trace::GLOBAL_ALL_PROCESSES`.
#[unsafe(no_mangle)]
static ALL_PROCESSES: Global<u32> = Global::new(0);
/// `tracer_common::trace::GLOBAL_KERNEL_STACK`.
#[unsafe(no_mangle)]
static KERNEL_STACK: Global<u32> = Global::new(1);
/// `tracer_common::trace::GLOBAL_TASK_REGS`.
#[unsafe(no_mangle)]
static TASK_REGS: Global<u32> = Global::new(0);

/// Outcome counters (`tracer_common::MAP_COUNTERS`).
#[map]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(Counter::COUNT, 0);
/// Why walks ended (`tracer_common::trace::MAP_STOPS`).
#[map]
static STOPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(StopReason::COUNT, 0);
/// Traced processes (`MAP_PROCS`); userspace sets the size before load. Preallocated: kernels
/// before 6.0 refuse other hash maps in perf_event programs.
#[map]
static PROCS: HashMap<u32, ProcInfo> = HashMap::with_max_entries(1, 0);
/// Page index (`MAP_PAGES`), sized by userspace.
#[map]
static PAGES: HashMap<PageKey, PageEntry> = HashMap::with_max_entries(1, 0);
/// Global rows in chunks (`MAP_ROWS`), sized by userspace.
#[map]
static ROWS: Array<RowChunk> = Array::with_max_entries(1, 0);
/// Shared rules (`MAP_RULES`), sized by userspace.
#[map]
static RULES: Array<UnwindRule> = Array::with_max_entries(1, 0);
/// Samples to userspace (`MAP_EVENTS`); userspace may resize it before load.
#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(1 << 23, 0);
/// The walk in progress on each CPU (`MAP_SCRATCH`).
#[map]
static SCRATCH: PerCpuArray<WalkState> = PerCpuArray::with_max_entries(1, 0);
/// Kernel-only: the walker's verifier-opaque words (`unwind.rs`); userspace never touches
/// them.
#[map]
static OPAQUE: PerCpuArray<[u64; 2]> = PerCpuArray::with_max_entries(1, 0);
/// `walk_user` at `PROG_WALK_SLOT` (`MAP_PROGS`), set by userspace after load.
#[map]
static PROGS: ProgramArray = ProgramArray::with_max_entries(1, 0);

/// Count `counter` on this CPU. (The map has a slot for every counter, so the lookup cannot
/// fail; no log for it: each aya-log call site costs the verifier hundreds of instructions.)
fn bump(counter: Counter) {
    if let Some(slot) = COUNTERS.get_ptr_mut(counter as u32) {
        // SAFETY: the pointer comes from the map lookup and is valid for this CPU's slot while
        // the program runs; per-CPU storage means no concurrent writer.
        unsafe { *slot += 1 }
    }
}

/// The walk state of this CPU. perf_event programs do not nest on a CPU (the kernel's
/// recursion guard drops a sample that arrives while one runs), so nothing else uses it now.
fn scratch(ctx: &PerfEventContext) -> Option<&'static mut WalkState> {
    match SCRATCH.get_ptr_mut(0) {
        // SAFETY: a valid, exclusively ours (see above) per-CPU map value while the program runs.
        Some(state) => Some(unsafe { &mut *state }),
        None => {
            error!(ctx, "SCRATCH has no slot 0");
            None
        }
    }
}

#[perf_event]
pub fn on_sample(ctx: PerfEventContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if ALL_PROCESSES.load() != 1 && PROCS.get_ptr(tgid).is_none() {
        bump(Counter::NotTraced);
        return 0;
    }
    let Some(user) = regs::user_regs(&ctx, TASK_REGS.load() == 1) else {
        bump(Counter::NoUserRegs);
        return 0;
    };
    bump(Counter::Sampled);
    let Some(state) = scratch(&ctx) else {
        return 0;
    };
    let sample = &mut state.sample;
    // SAFETY: helpers without preconditions.
    sample.time_ns = unsafe { bpf_ktime_get_ns() };
    sample.tgid = tgid;
    sample.tid = pid_tgid as u32;
    // SAFETY: as above.
    sample.cpu = unsafe { bpf_get_smp_processor_id() };
    sample.comm = bpf_get_current_comm().unwrap_or([0; 16]);
    sample.num_kernel = 0;
    if KERNEL_STACK.load() == 1 && !user.in_user_mode {
        kernel_stack(&ctx, sample);
    }
    sample.user[0] = user.regs.pc;
    sample.user_source[0] = SOURCE_TABLE;
    sample.num_user = 1;
    state.regs = user.regs;
    // SAFETY: the slot holds `walk_user`, also a perf_event program; on success this does not
    // return.
    unsafe { PROGS.tail_call(&ctx, PROG_WALK_SLOT) };
    bump(Counter::TailCallFailed);
    state.sample.stop = StopReason::MaxDepth as u32;
    finish(state);
    0
}

/// The kernel stack of the sample into `sample.kernel`; a failure is counted and leaves none.
fn kernel_stack(ctx: &PerfEventContext, sample: &mut Sample) {
    const BYTES: u32 = (MAX_KERNEL_FRAMES * 8) as u32;
    // SAFETY: `kernel` is `BYTES` bytes of this map value, the helper writes at most that;
    // flags 0 asks for the kernel stack.
    let got = unsafe { bpf_get_stack(ctx.ctx.cast(), sample.kernel.as_mut_ptr().cast(), BYTES, 0) };
    if got < 0 {
        bump(Counter::KernelStackFailed);
        return;
    }
    sample.num_kernel = ((got as u64).min(u64::from(BYTES)) / 8) as u32;
}

#[perf_event]
pub fn walk_user(ctx: PerfEventContext) -> u32 {
    let Some(state) = scratch(&ctx) else {
        return 0;
    };
    if !unwind::walk_frames(MAX_DEPTH.load()) {
        // SAFETY: as in `on_sample`: this very program, continuing the walk.
        unsafe { PROGS.tail_call(&ctx, PROG_WALK_SLOT) };
        bump(Counter::TailCallFailed);
        state.sample.stop = StopReason::MaxDepth as u32;
    }
    finish(state);
    0
}

/// Count why the walk ended (`state.sample.stop`) and ship the sample.
fn finish(state: &mut WalkState) {
    // SAFETY: a plain load from the walk state; volatile so the verifier sees an unknown
    // value here rather than one constant per stop path (see `unwind::walk_frame`).
    let reason = unsafe { core::ptr::read_volatile(&state.sample.stop) };
    // Every reason has a slot (see `bump`).
    if let Some(slot) = STOPS.get_ptr_mut(reason) {
        // SAFETY: this CPU's slot of a per-CPU map, see `bump`.
        unsafe { *slot += 1 }
    }
    if EVENTS.output::<Sample>(&state.sample, 0).is_err() {
        bump(Counter::EventsLost);
    }
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
