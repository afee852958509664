//! What the sampling program and userspace exchange besides the unwind tables: the per-process
//! mapping table the walker resolves PCs with, the sample record sent through the ring buffer,
//! and the names and limits of the maps, programs and globals involved.
//!
//! Maps (names below; sizes set by userspace before load from what it loads):
//! - [`MAP_PROCS`]: hash `tgid -> ProcInfo` — the traced processes and their executable
//!   mappings, sorted by `start`, searched in at most [`MAPPING_SEARCH_STEPS`] steps.
//! - [`MAP_PAGES`] (`PageKey -> PageEntry`), [`MAP_ROWS`] (array of [`RowChunk`]: global row `i`
//!   is `ROWS[i / ROW_CHUNK].rows[i % ROW_CHUNK]`, so loading needs one update per 1024 rows),
//!   [`MAP_RULES`] (array of `UnwindRule`): the tables of `unwind.rs`.
//! - [`MAP_EVENTS`]: ring buffer of [`SampleRecord`]s, each only as long as its stack
//!   (userspace decodes them into `sample::Sample`s). [`MAP_SCRATCH`]: per-CPU [`WalkState`], the
//!   walk in progress (too big for the 512-byte BPF stack). [`MAP_STOPS`]: per-CPU `u64`
//!   counters indexed by `walk::StopReason`; [`crate::MAP_COUNTERS`]: by [`crate::Counter`].
//! - [`MAP_PROGS`]: program array for the walker's tail calls ([`PROG_WALK`] at [`PROG_WALK_SLOT`]);
//!   the event programs of other program types have arrays and walkers of their own (`event`).

pub use crate::mapping::{ExecMapping, NO_OBJECT, NO_VMA};
use crate::{vma::MAX_VMAS, walk::Regs};

/// The tail-called program that walks [`FRAMES_PER_PROG`] frames per invocation.
pub const PROG_WALK: &str = "walk_user";
/// Index of [`PROG_WALK`] in [`MAP_PROGS`] (and of each walker in its own array).
pub const PROG_WALK_SLOT: u32 = 0;

pub const MAP_PROCS: &str = "PROCS";
pub const MAP_PAGES: &str = "PAGES";
pub const MAP_ROWS: &str = "ROWS";
pub const MAP_RULES: &str = "RULES";
pub const MAP_EVENTS: &str = "EVENTS";
pub const MAP_SCRATCH: &str = "SCRATCH";
pub const MAP_STOPS: &str = "STOPS";
pub const MAP_PROGS: &str = "PROGS";

/// Read-only global (set before load): user frames to walk at most (1..=[`MAX_USER_FRAMES`]).
pub const GLOBAL_MAX_DEPTH: &str = "MAX_DEPTH";
/// Read-only global: 1 to sample every process (those not in [`MAP_PROCS`] are walked with
/// frame pointers only), 0 to sample only the processes in [`MAP_PROCS`].
pub const GLOBAL_ALL_PROCESSES: &str = "ALL_PROCESSES";
/// Read-only global: 1 to record the kernel stack, 0 not to (`--no-kernel`).
pub const GLOBAL_KERNEL_STACK: &str = "KERNEL_STACK";
/// Read-only global: 1 when perf_event programs may call `bpf_get_current_task_btf` and
/// `bpf_task_pt_regs` (Linux 5.15+; userspace probes), so samples that hit the kernel are
/// walked from the task's saved user registers; 0 to count those samples as
/// `Counter::NoUserRegs` instead (the verifier then drops the calls as dead code, so the
/// program still loads on older kernels).
pub const GLOBAL_TASK_REGS: &str = "TASK_REGS";
/// Read-only global: 1 to ship every sample of a traced process as a stack copy
/// (`crate::snapshot`) instead of walking it (`--record-snapshots`, a debug option: userspace
/// walks the copies and records them); 0, the default, walks in the kernel as usual (the
/// verifier drops the copy path as dead code).
pub const GLOBAL_COPY_STACKS: &str = "COPY_STACKS";

/// Rows per [`MAP_ROWS`] value.
pub const ROW_CHUNK: usize = 1024;
/// Executable mappings per process; a process with more is traced through its first ones and
/// userspace counts the rest.
pub const MAX_MAPPINGS: usize = 256;
/// `log2(MAX_MAPPINGS) + 1`.
pub const MAPPING_SEARCH_STEPS: u32 = 9;
/// Frames walked per program invocation before a tail call continues the walk. Each frame is
/// one call of a global function, so the verifier's cost of a program does not grow with it.
pub const FRAMES_PER_PROG: u32 = 64;
/// The deepest walk possible: 33 tail calls (the kernel's limit) of [`FRAMES_PER_PROG`] frames
/// reach 2112; the record holds 2048.
pub const MAX_USER_FRAMES: usize = 2048;
/// The default of `--max-depth`: the deepest walk. A record is as long as its stack, so the
/// limit costs nothing for ordinary stacks; deep recursion (expression trees, parsers) is
/// walked whole instead of cut short.
pub const DEFAULT_MAX_DEPTH: u32 = MAX_USER_FRAMES as u32;
/// Kernel frames kept (the kernel's default `perf_event_max_stack` is 127).
pub const MAX_KERNEL_FRAMES: usize = 127;

/// The value of [`MAP_PROCS`]: a traced process's executable mappings, sorted by `start`,
/// non-overlapping; only the first `num_mappings` are valid.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProcInfo {
    pub num_mappings: u32,
    pub _pad: u32,
    pub mappings: [ExecMapping; MAX_MAPPINGS],
}

/// The value of [`MAP_ROWS`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RowChunk {
    pub rows: [crate::unwind::UnwindRow; ROW_CHUNK],
}

/// How a user frame was found ([`Sample::user_source`]).
pub const SOURCE_TABLE: u8 = 0;
/// The frame came from the frame-pointer fallback (no table covered the callee's PC).
pub const SOURCE_FP: u8 = 1;

/// The fixed part of a [`SampleRecord`]: who, when, why the walk ended, and how many frames
/// follow.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SampleHeader {
    /// `bpf_ktime_get_ns` at the sample (offcpu: when the task was switched out).
    pub time_ns: u64,
    /// The nanoseconds it stands for: the sampling period for cpu-clock, the time blocked for
    /// offcpu, 0 for a probe or tracepoint hit (counted, not timed).
    pub weight: u64,
    /// Which event took it (`event::event_id`).
    pub event: u32,
    /// Words of user stack copied into the record (`crate::snapshot`), 0 for a walked one.
    pub snapshot: u32,
    pub tgid: u32,
    pub tid: u32,
    pub cpu: u32,
    /// `walk::StopReason` code of the user walk.
    pub stop: u32,
    /// User frames in the record.
    pub num_user: u32,
    /// Kernel frames in the record (0: `--no-kernel`, or a user-mode sample).
    pub num_kernel: u32,
    /// Mappings found through the process's VMAs (`crate::vma`) that follow the user frames.
    pub vmas: u32,
    pub _pad: u32,
    pub comm: [u8; 16],
}

/// Set in a user frame of a [`SampleRecord`] found by the frame-pointer fallback
/// ([`SOURCE_FP`]); clear: [`SOURCE_TABLE`]. No user address has it (x86-64 and aarch64 user
/// space ends below 2^57).
pub const FP_FRAME_BIT: u64 = 1 << 63;
/// Words of one [`ExecMapping`] carried after the user frames.
pub const VMA_WORDS: usize = core::mem::size_of::<ExecMapping>() / 8;
/// Frame slots of a [`SampleRecord`]: the kernel stack, then the user stack, then room for the
/// mappings found through VMAs.
pub const RECORD_FRAMES: usize = MAX_KERNEL_FRAMES + MAX_USER_FRAMES + MAX_VMAS * VMA_WORDS;
/// Bytes of a [`SampleRecord`] before its frames.
pub const RECORD_HEADER_BYTES: usize = core::mem::offset_of!(SampleRecord, frames);

/// One sample as the kernel builds it (in [`WalkState`]) and ships it through [`MAP_EVENTS`]:
/// only its first [`SampleRecord::len`] bytes, the header and the frames in use, so a record
/// is as long as its stack (a 44-frame user stack: 480 bytes, not the 5.6 KiB of the deepest).
///
/// `frames[..num_kernel]` is the kernel stack (innermost first; taken when the walk starts, so
/// its length is known before the first user frame is written) and
/// `frames[num_kernel..num_kernel + num_user]` the user stack (frame 0 = the sampled PC), each
/// user frame with [`FP_FRAME_BIT`] set when the frame-pointer fallback found it; then
/// `header.vmas` [`ExecMapping`]s of [`VMA_WORDS`] words each (`crate::vma`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SampleRecord {
    pub header: SampleHeader,
    pub frames: [u64; RECORD_FRAMES],
}

impl SampleRecord {
    /// The bytes of the record in use: the header and `num_kernel + num_user` frames (each
    /// count clamped to its maximum), at most the whole record.
    #[inline(always)]
    pub fn len(num_kernel: u32, num_user: u32) -> usize {
        let kernel = (num_kernel as usize).min(MAX_KERNEL_FRAMES);
        let user = (num_user as usize).min(MAX_USER_FRAMES);
        RECORD_HEADER_BYTES + 8 * (kernel + user)
    }

    /// [`SampleRecord::len`] with `vmas` mappings after the user frames (at most [`MAX_VMAS`]).
    #[inline(always)]
    pub fn len_with(num_kernel: u32, num_user: u32, vmas: u32) -> usize {
        Self::len(num_kernel, num_user) + 8 * VMA_WORDS * (vmas as usize).min(MAX_VMAS)
    }
}

/// The per-CPU state of a walk in progress ([`MAP_SCRATCH`]): the registers of the frame to
/// unwind next, what the walker remembers between frames, and the record being filled.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WalkState {
    pub regs: WalkRegs,
    /// The mapping found last (`end == 0`: none yet): consecutive frames are mostly in one
    /// object, and each frame's PC was already found by the check of the frame below it, so
    /// most mapping lookups are one range check instead of a binary search.
    pub mapping: ExecMapping,
    /// The page looked up last (`object == NO_OBJECT`: none yet) and its entry, for the same
    /// reason: a hash lookup saved per frame in the same 64 KiB of code.
    pub page_key: crate::unwind::PageKey,
    pub page: crate::unwind::PageEntry,
    /// The registers the walk started from (a stack copy is made from them when the walk
    /// meets code without a table).
    pub first: WalkRegs,
    /// Mappings found through VMAs (`crate::vma`): `vmas[..record.header.vmas]`, shipped after
    /// the user frames.
    pub vmas: [ExecMapping; MAX_VMAS],
    pub record: SampleRecord,
}

/// [`Regs`] as a `#[repr(C)]` record.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkRegs {
    pub pc: u64,
    pub sp: u64,
    pub fp: u64,
    pub lr: u64,
}

impl From<WalkRegs> for Regs {
    fn from(r: WalkRegs) -> Regs {
        Regs {
            pc: r.pc,
            sp: r.sp,
            fp: r.fp,
            lr: r.lr,
        }
    }
}

impl From<Regs> for WalkRegs {
    fn from(r: Regs) -> WalkRegs {
        WalkRegs {
            pc: r.pc,
            sp: r.sp,
            fp: r.fp,
            lr: r.lr,
        }
    }
}

const _: () = assert!(core::mem::size_of::<ExecMapping>() == 32);
const _: () = assert!(core::mem::size_of::<ProcInfo>() == 8 + 32 * MAX_MAPPINGS);
const _: () = assert!(core::mem::size_of::<RowChunk>() == 4 * ROW_CHUNK);
const _: () = assert!(core::mem::size_of::<SampleHeader>() == 72);
const _: () = assert!(RECORD_HEADER_BYTES == 72);
const _: () = assert!(core::mem::size_of::<SampleRecord>() == RECORD_HEADER_BYTES + 8 * RECORD_FRAMES);
const _: () = assert!(1 << (MAPPING_SEARCH_STEPS - 1) >= MAX_MAPPINGS);
const _: () = assert!(FRAMES_PER_PROG as usize * 33 >= MAX_USER_FRAMES);

#[cfg(feature = "user")]
mod pod {
    // SAFETY: `#[repr(C)]` records of integers and arrays of them, explicit padding fields,
    // sizes pinned above: every bit pattern is valid and there are no implicit padding bytes.
    unsafe impl aya::Pod for super::ProcInfo {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::RowChunk {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::SampleRecord {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::WalkState {}
}
