//! The in-kernel half of sframe-trace: the cpu-clock programs, the maps, and the start and end
//! of a walk that every event's programs share.
//!
//! [`on_sample`] runs on every cpu-clock sample: it filters by process, captures the user
//! registers (`regs.rs`) and the kernel stack into the per-CPU walk state ([`begin`]), and
//! tail-calls [`walk_user`], which walks up to `FRAMES_PER_PROG` user frames per invocation
//! (`unwind.rs`, one global-function call per frame, [`walk_more`]) and tail-calls itself until
//! the walk stops, then ships the sample through the ring buffer. The programs of the other
//! events (`events.rs`: probes and tracepoints; `offcpu.rs`: `sched_switch`) do the same with
//! their own walker copies. Names, layouts and limits are `tracer_common`'s; this file only
//! wires them. It must stay verifier-friendly: constant loop bounds, no recursion, no
//! `bpf_loop` (kernels before 5.17 lack it), every memory access checked; and it logs (aya-log)
//! only what should never happen, never per sample.
//!
//! Kernels: loads and walks on 5.10, 6.1, 6.12 and 6.18 (walker tests run in VMs); global
//! functions need 5.6, ring buffers 5.8; samples that hit the kernel need `bpf_task_pt_regs`
//! (5.15, `regs.rs`), before that they are counted as `no_user_regs`.
#![no_std]
#![cfg_attr(not(test), no_main)]

mod events;
mod lifecycle;
mod offcpu;
mod python;
mod regs;
mod snapshot;
mod unwind;
mod vma;

use aya_ebpf::{
    EbpfContext, Global,
    bindings::{BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP, BPF_RB_RING_SIZE},
    helpers::{
        bpf_get_current_comm, bpf_get_current_pid_tgid,
        generated::{bpf_get_smp_processor_id, bpf_get_stack, bpf_ktime_get_ns},
    },
    macros::{map, perf_event},
    maps::{Array, HashMap, PerCpuArray, ProgramArray, RingBuf},
    programs::PerfEventContext,
};
use aya_log_ebpf::error;
use regs::UserRegs;
use tracer_common::{
    Counter,
    event::{EVENT_CALL_ENTRY, EVENT_CPU_CLOCK},
    notice::NoticeKind,
    snapshot::snapshot_record_len,
    trace::{MAX_KERNEL_FRAMES, NO_OBJECT, PROG_WALK_SLOT, ProcInfo, RowChunk, SampleRecord, WalkState},
    unwind::{PageEntry, PageKey, UnwindRule},
    vma::{FILES_ENTRIES, FileKey, FileTable, PROC_VMAS_ENTRIES, ProcVmas, VmaOffsets},
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
/// `tracer_common::trace::GLOBAL_COPY_STACKS`.
#[unsafe(no_mangle)]
static COPY_STACKS: Global<u32> = Global::new(0);
/// `tracer_common::vma::GLOBAL_VMA_OFFSETS`; `page_shift` 0: `walk_user_vma` is not the
/// cpu-clock walker (samples of processes not in `PROCS` are copied at once).
#[unsafe(no_mangle)]
static VMA_OFFSETS: Global<VmaOffsets> = Global::new(VmaOffsets {
    vm_start: 0,
    vm_end: 0,
    vm_pgoff: 0,
    vm_flags: 0,
    vm_file: 0,
    f_inode: 0,
    i_ino: 0,
    i_sb: 0,
    i_size: 0,
    i_mtime_sec: 0,
    i_mtime_nsec: 0,
    i_ctime_sec: 0,
    i_ctime_nsec: 0,
    s_dev: 0,
    page_shift: 0,
    task_mm: 0,
    mm_start_code: 0,
    _pad: 0,
});

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
/// VMA mappings found per process (`tracer_common::vma::MAP_PROC_VMAS`). Preallocated, like
/// `PROCS`.
#[map]
static PROC_VMAS: HashMap<u32, ProcVmas> = HashMap::with_max_entries(PROC_VMAS_ENTRIES, 0);
/// Where `vma.rs` builds a new `PROC_VMAS` entry (too large for the stack the calls share).
#[map]
static NEXT_VMAS: PerCpuArray<ProcVmas> = PerCpuArray::with_max_entries(1, 0);
/// Kernel-only: what `vma::read_vma` read out of the VMA `bpf_find_vma` found, on each CPU, a
/// slot for the sampling walker and one for the programs of the task (`vma::SLOT_SAMPLE`).
#[map]
static VMA_READ: PerCpuArray<vma::Vma> = PerCpuArray::with_max_entries(vma::VMA_SLOTS, 0);
/// Tables of files by identity (`tracer_common::vma::MAP_FILES`).
#[map]
static FILES: HashMap<FileKey, FileTable> = HashMap::with_max_entries(FILES_ENTRIES, 0);
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
/// Kernel-only: the user stack copied during the walk on each CPU (`unwind::StackWindow`).
#[map]
static STACK: PerCpuArray<unwind::StackWindow> = PerCpuArray::with_max_entries(1, 0);
/// Kernel-only: the rules each CPU's walks looked up (`unwind::RuleCache`).
#[map]
static RULE_CACHE: PerCpuArray<unwind::RuleCache> = PerCpuArray::with_max_entries(1, 0);
/// Kernel-only: when the sample ring buffer last woke userspace (`bpf_ktime_get_ns`).
#[map]
static WOKEN: Array<u64> = Array::with_max_entries(1, 0);
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

/// The walk state of this CPU. The programs that walk do not nest on a CPU: perf_event,
/// kprobe-type and tracepoint programs share the kernel's per-CPU recursion guard
/// (`bpf_prog_active`: one that would start while another runs is dropped), and `sched_switch`
/// runs with interrupts off, inside the scheduler, where none of them runs. So nothing else
/// uses it now.
fn scratch<C: EbpfContext>(ctx: &C) -> Option<&'static mut WalkState> {
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
    // SAFETY: `ctx.ctx` is the kernel's `bpf_perf_event_data`: one 8-byte context load of its
    // period (cpu-clock has a fixed one, 1e9 / frequency ns), and the address of its first
    // field, the registers, which `user_regs` reads with context loads.
    let (period, regs) = unsafe {
        (
            core::ptr::read_volatile(core::ptr::addr_of!((*ctx.ctx).sample_period)),
            core::ptr::addr_of!((*ctx.ctx).regs).cast(),
        )
    };
    let Some(state) = begin(
        &ctx,
        || regs::user_regs(regs, TASK_REGS.load() == 1),
        EVENT_CPU_CLOCK,
        period,
        VMA_OFFSETS.load().page_shift != 0,
    ) else {
        return 0;
    };
    // SAFETY: the slot holds `walk_user`, also a perf_event program; on success this does not
    // return.
    unsafe { PROGS.tail_call(&ctx, PROG_WALK_SLOT) };
    tail_call_failed(state);
    end_walk(state);
    ship(&state.record);
    0
}

/// Start the walk of the current task for `event`: the process filter, the user registers
/// (`user`, called only for a traced process), and the sample's header, first frame and
/// kernel stack (when the registers came from the kernel's entry: the event hit the kernel).
/// Returns the walk state, ready for the tail call to a walker, or `None` (counted) when
/// there is nothing to walk. A process not in `PROCS` is walked only by a walker that finds
/// mappings through VMAs (`vma`); for the others its sample is a stack copy at once.
#[inline(always)]
fn begin<C: EbpfContext>(
    ctx: &C,
    user: impl FnOnce() -> Option<UserRegs>,
    event: u32,
    weight: u64,
    vma: bool,
) -> Option<&'static mut WalkState> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    let traced = PROCS.get_ptr(tgid).is_some();
    // The last thread of a traced process that has exited, freeing its memory.
    let dying = !traced && lifecycle::dying(tgid);
    if ALL_PROCESSES.load() != 1 && !traced && !dying {
        bump(Counter::NotTraced);
        return None;
    }
    let Some(user) = user() else {
        bump(Counter::NoUserRegs);
        return None;
    };
    // System-wide: a process userspace has not loaded yet (its stack is copied below). Not
    // for one that has ended, nor for a stack kept at an exit or exec's entry: the process is
    // ending or about to be another program, which its exec notice tells (a load now would
    // race the new image).
    if !traced && !dying && event != EVENT_CALL_ENTRY {
        lifecycle::notify_limited(NoticeKind::NewProcess, tgid);
    }
    bump(Counter::Sampled);
    let state = scratch(ctx)?;
    // Nothing remembered from the previous walk (another process, or tables since changed).
    state.mapping.end = 0;
    state.page_key.object = NO_OBJECT;
    unwind::forget_stack();
    let record = &mut state.record;
    let header = &mut record.header;
    // SAFETY: helpers without preconditions.
    header.time_ns = unsafe { bpf_ktime_get_ns() };
    header.weight = weight;
    header.event = event;
    header.tgid = tgid;
    header.tid = pid_tgid as u32;
    // SAFETY: as above.
    header.cpu = unsafe { bpf_get_smp_processor_id() };
    header.comm = bpf_get_current_comm().unwrap_or([0; 16]);
    header.num_kernel = 0;
    header.snapshot = 0;
    header.vmas = 0;
    header.stop = WALKING;
    if KERNEL_STACK.load() == 1 && !user.in_user_mode {
        kernel_stack(ctx, record);
    }
    // The first user frame follows the kernel stack (`num_kernel <= MAX_KERNEL_FRAMES`).
    let at = (record.header.num_kernel as usize).min(MAX_KERNEL_FRAMES);
    if let Some(slot) = record.frames.get_mut(at) {
        *slot = user.regs.pc;
    }
    record.header.num_user = 1;
    state.regs = user.regs;
    state.first = user.regs;
    if (!traced && !vma) || COPY_STACKS.load() == 1 {
        // No table to walk with, and frame pointers would be guesses: ship a copy. (Or every
        // sample is to be a copy: `--record-snapshots`.)
        snapshot::take(state);
    }
    Some(state)
}

/// `header.stop` of a walk still in progress (no stop reason has it): a walk that `begin`
/// turned into a stack copy is over before it started.
const WALKING: u32 = u32::MAX;

/// After a failed tail call to a walker: the walk ends where it is, counted as `MaxDepth`.
fn tail_call_failed(state: &mut WalkState) {
    bump(Counter::TailCallFailed);
    state.record.header.stop = StopReason::MaxDepth as u32;
}

/// The kernel stack of the sample into the first frames of `record`; a failure is counted and
/// leaves none.
/// Every program type it runs in has its own variant of the helper (perf_event: the sample's
/// registers; kprobe: the probe's; tracepoints and raw tracepoints: the caller's).
fn kernel_stack<C: EbpfContext>(ctx: &C, record: &mut SampleRecord) {
    const BYTES: u32 = (MAX_KERNEL_FRAMES * 8) as u32;
    // SAFETY: `frames` holds more than `BYTES` bytes of this map value, the helper writes at
    // most that; flags 0 asks for the kernel stack.
    let got = unsafe { bpf_get_stack(ctx.as_ptr(), record.frames.as_mut_ptr().cast(), BYTES, 0) };
    if got < 0 {
        bump(Counter::KernelStackFailed);
        return;
    }
    record.header.num_kernel = ((got as u64).min(u64::from(BYTES)) / 8) as u32;
}

#[perf_event]
pub fn walk_user(ctx: PerfEventContext) -> u32 {
    if let Some(state) = walk_more::<_, false>(&ctx, &PROGS) {
        ship(&state.record);
    }
    0
}

/// `walk_user` that finds the mappings `PROCS` does not know through the process's VMAs
/// (`vma.rs`; Linux 5.17+): loaded instead of it where the kernel allows.
#[perf_event]
pub fn walk_user_vma(ctx: PerfEventContext) -> u32 {
    if let Some(state) = walk_more::<_, true>(&ctx, &PROGS) {
        vma::attach(state);
        ship(&state.record);
    }
    0
}

/// The body of every walker program: walk up to `FRAMES_PER_PROG` frames, then tail-call the
/// walker in `progs` (the calling program itself) to go on, or, when the walk is over, count
/// why and return the state to ship (or park).
#[inline(always)]
fn walk_more<C: EbpfContext, const VMA: bool>(ctx: &C, progs: &ProgramArray) -> Option<&'static mut WalkState> {
    let state = scratch(ctx)?;
    // SAFETY: a plain load from the walk state.
    let walking = unsafe { core::ptr::read_volatile(&state.record.header.stop) } == WALKING;
    if walking && !unwind::walk_frames::<VMA>(MAX_DEPTH.load()) {
        // SAFETY: the walker of this program's type, continuing the walk; on success this
        // does not return.
        unsafe { progs.tail_call(ctx, PROG_WALK_SLOT) };
        tail_call_failed(state);
    }
    end_walk(state);
    Some(state)
}

/// Count why the walk ended (`state.record.header.stop`); a walk that met a PC in none of the
/// process's mappings (code userspace has not read yet, or a process no longer in `PROCS`)
/// becomes a stack copy for userspace to walk once it has the code's table.
fn end_walk(state: &mut WalkState) {
    // SAFETY: a plain load from the walk state; volatile so the verifier sees an unknown
    // value here rather than one constant per stop path (see `unwind::walk_frame`).
    let mut reason = unsafe { core::ptr::read_volatile(&state.record.header.stop) };
    if reason == StopReason::NoMapping as u32 {
        snapshot::take(state);
        // SAFETY: as above.
        reason = unsafe { core::ptr::read_volatile(&state.record.header.stop) };
    }
    if reason != StopReason::Snapshot as u32 {
        python::walk(state);
    }
    // Every reason has a slot (see `bump`).
    if let Some(slot) = STOPS.get_ptr_mut(reason) {
        // SAFETY: this CPU's slot of a per-CPU map, see `bump`.
        unsafe { *slot += 1 }
    }
    // A PC in none of a traced process's mappings: it mapped new code (dlopen, JIT). (Not
    // when every sample is a copy: nothing is missing then.)
    let tgid = state.record.header.tgid;
    if reason == StopReason::Snapshot as u32
        && COPY_STACKS.load() != 1
        && state.record.header.event != EVENT_CALL_ENTRY
        && PROCS.get_ptr(tgid).is_some()
    {
        lifecycle::notify_limited(NoticeKind::UnknownPc, tgid);
    }
}

/// Userspace is woken once this fraction of the ring buffer is waiting to be read, or when
/// [`WAKEUP_INTERVAL_NS`] have passed since the last wakeup (`tracer-user`'s `bpf/events.rs`):
/// a wakeup per sample costs both sides more than the sample itself, and each wakeup of the
/// reader costs it tens of microseconds, so it is woken a few times a second, not per sample
/// or on a timer of its own.
const WAKEUP_FRACTION: u64 = 8;
/// At most this long between wakeups while samples are shipped (so they reach userspace at
/// most this late); the first sample after a quiet spell wakes it at once.
const WAKEUP_INTERVAL_NS: u64 = 200_000_000;

/// Send the sample to userspace: the bytes of `record` in use (`SampleRecord::len`), without
/// waking userspace unless the ring buffer is filling up or the last wakeup is a while ago.
fn ship(record: &SampleRecord) {
    // SAFETY: plain loads from the record; volatile so the length below is computed from
    // unknown values, which the clamps in `len` bound for the verifier.
    let (num_kernel, num_user, copied, vmas) = unsafe {
        (
            core::ptr::read_volatile(&record.header.num_kernel),
            core::ptr::read_volatile(&record.header.num_user),
            core::ptr::read_volatile(&record.header.snapshot),
            core::ptr::read_volatile(&record.header.vmas),
        )
    };
    let len = if copied == 0 {
        SampleRecord::len_with(num_kernel, num_user, vmas)
    } else {
        snapshot_record_len(copied)
    }
    .min(size_of::<SampleRecord>());
    // SAFETY: `len <= size_of::<SampleRecord>()`: bytes of the record, which is plain data.
    let bytes = unsafe { core::slice::from_raw_parts(core::ptr::from_ref(record).cast::<u8>(), len) };
    let flags = if wakeup_due() {
        BPF_RB_FORCE_WAKEUP
    } else {
        BPF_RB_NO_WAKEUP
    };
    if EVENTS.output::<[u8]>(bytes, u64::from(flags)).is_err() {
        bump(Counter::EventsLost);
    }
}

/// Whether the sample about to be shipped should wake userspace (see [`WAKEUP_FRACTION`]);
/// if so, the wakeup is remembered. CPUs racing here may both wake it: harmless.
fn wakeup_due() -> bool {
    let waiting = EVENTS.query(u64::from(BPF_RB_AVAIL_DATA));
    let size = EVENTS.query(u64::from(BPF_RB_RING_SIZE));
    let Some(woken) = WOKEN.get_ptr_mut(0) else {
        // Cannot happen (a one-slot array): wake as before the interval existed.
        return waiting >= size / WAKEUP_FRACTION;
    };
    // SAFETY: a helper without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    // SAFETY: the slot of a one-slot array, valid while the program runs; a torn or stale
    // value from another CPU only moves one wakeup.
    let last = unsafe { core::ptr::read_volatile(woken) };
    let due = waiting >= size / WAKEUP_FRACTION || now.wrapping_sub(last) >= WAKEUP_INTERVAL_NS;
    if due {
        // SAFETY: as above.
        unsafe { core::ptr::write_volatile(woken, now) };
    }
    due
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
