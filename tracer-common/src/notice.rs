//! Process life-cycle notices: what the kernel side tells userspace about processes besides
//! samples, through their own ring buffer ([`MAP_NOTICES`]) so a burst of samples never
//! delays them and their records stay small.
//!
//! - [`NoticeKind::Exec`]: a traced process exec'ed (raw tracepoint `sched_process_exec`). The
//!   kernel has already removed it from `PROCS` (its old mappings are gone); userspace reads
//!   its new mappings and adds it back. System-wide, every exec is told, traced or not, so a
//!   new program is loaded at once instead of at its first sample.
//! - [`NoticeKind::Exit`]: the last thread of a traced process exited (`sched_process_exit`
//!   with the group's `signal->live` count at 0, read at [`GLOBAL_TASK_SIGNAL_OFFSET`] and
//!   [`GLOBAL_SIGNAL_LIVE_OFFSET`]; where those are unknown, the thread-group leader's exit):
//!   the threads an `exit_group` kills run on after the leader, and the last one out may be
//!   the one that frees the memory; the kernel has removed the process from `PROCS`. Exec and exit are also
//!   sent for processes userspace had a rate-limited notice about but did not load (yet).
//! - [`NoticeKind::NewProcess`]: system-wide, a sample hit a process that is not in `PROCS`
//!   (started after the tracer, or exec'ed); userspace loads it.
//! - [`NoticeKind::UnknownPc`]: a walk of a traced process met a PC in none of its mappings
//!   (a library loaded with dlopen, JIT code); userspace re-reads its mappings.
//! - [`NoticeKind::Unmapped`]: a traced process unmapped some of its code (`munmap` over an
//!   executable mapping: dlclose). The kernel removed it from `PROCS` when the call began (the
//!   addresses may hold other code next); the notice is sent when the call returns, with the
//!   time it began; userspace reads the mappings left and adds it back.
//!
//! `NewProcess` and `UnknownPc` are rate-limited per process, each on its own: at most one of
//! each per [`NOTICE_INTERVAL_NS`] ([`MAP_NOTICED`] remembers when each process last had one;
//! the `UnknownPc` key has the top bit set).

/// Ring buffer of [`Notice`]s.
pub const MAP_NOTICES: &str = "NOTICES";
/// LRU hash `tgid -> u64`: when the process's last rate-limited notice was sent.
pub const MAP_NOTICED: &str = "NOTICED";
/// Size of [`MAP_NOTICES`] in bytes (a power of two, a multiple of the page size).
pub const NOTICES_BYTES: u32 = 256 << 10;
/// Processes [`MAP_NOTICED`] remembers.
pub const NOTICED_ENTRIES: u32 = 8192;
/// LRU hash `tgid -> u64`: the last thread out of each traced process whose exit was told,
/// by its `task_struct` address. On Linux 6.16+ `sched_process_exit` comes before the thread
/// lets go of the address space, so its samples while the kernel frees that memory come after
/// the process left `PROCS`: a sample of a process not in `PROCS` whose current task is the
/// one kept here is still the traced process's (with `--pid`, it is taken; system-wide, no
/// `NewProcess` notice is sent for it), and no other process can be taken for it (a pid reused
/// is another task). The entries age out of the LRU.
pub const MAP_DYING: &str = "DYING";
/// Processes [`MAP_DYING`] remembers.
pub const DYING_ENTRIES: u32 = 1024;
/// The shortest gap between two rate-limited notices of one process.
pub const NOTICE_INTERVAL_NS: u64 = 200_000_000;

/// Raw tracepoint program on `sched_process_exec`.
pub const PROG_ON_EXEC: &str = "on_exec";
/// The same, where the kernel looks PCs up in VMAs (`crate::vma`): it also looks up the new
/// image's executable and dynamic loader, so that a process's first samples need no lookup of
/// their own (one per sample is all an interrupt can do).
pub const PROG_ON_EXEC_VMA: &str = "on_exec_vma";
/// Raw tracepoint program on `sched_process_exit`.
pub const PROG_ON_EXIT: &str = "on_exit";
/// The tracepoints they attach to.
pub const TRACEPOINT_EXEC: &str = "sched_process_exec";
pub const TRACEPOINT_EXIT: &str = "sched_process_exit";

/// Tracepoint program on `syscalls:sys_enter_munmap`, and on `sys_exit_munmap`.
pub const PROG_ON_MUNMAP: &str = "on_munmap";
pub const PROG_ON_MUNMAP_EXIT: &str = "on_munmap_exit";
/// The category and names of the (tracefs) tracepoints they attach to.
pub const TRACEPOINT_SYSCALLS: &str = "syscalls";
pub const TRACEPOINT_MUNMAP: &str = "sys_enter_munmap";
pub const TRACEPOINT_MUNMAP_EXIT: &str = "sys_exit_munmap";
/// Tracepoint program on `syscalls:sys_enter_mmap`, and on `sys_exit_mmap`: a traced process
/// maps code (the dynamic loader mapping a library, dlopen), told as an `UnknownPc` notice once
/// the call returns, so the new code is known before a walk meets it.
pub const PROG_ON_MMAP: &str = "on_mmap";
pub const PROG_ON_MMAP_EXIT: &str = "on_mmap_exit";
/// The same, where the kernel looks PCs up in VMAs: any process's new code (system-wide: the
/// libraries the loader maps before userspace has read the process) is looked up when the call
/// returns, outside an interrupt, and kept in `crate::vma::MAP_PROC_VMAS`.
pub const PROG_ON_MMAP_EXIT_VMA: &str = "on_mmap_exit_vma";
pub const TRACEPOINT_MMAP: &str = "sys_enter_mmap";
pub const TRACEPOINT_MMAP_EXIT: &str = "sys_exit_mmap";
/// Offset of `prot` in the record of `sys_enter_mmap` (after `addr` and `len`).
pub const MMAP_PROT_OFFSET: usize = 32;
/// Offset of `ret` in the record of `sys_exit_mmap` (after `__syscall_nr`, padded).
pub const MMAP_RET_OFFSET: usize = 16;
/// `PROT_EXEC`.
pub const PROT_EXEC: u64 = 4;
/// Offsets of `addr` and `len` in the record of `sys_enter_munmap` (after the 8-byte common
/// header and the 4-byte syscall number, padded), the same on every kernel.
pub const MUNMAP_ADDR_OFFSET: usize = 16;
pub const MUNMAP_LEN_OFFSET: usize = 24;
/// Hash `tid -> u64`: threads inside a `munmap` of a traced process's code, or an `mmap` of
/// code by one (a thread is inside one call at a time), and when it began.
pub const MAP_UNMAPPING: &str = "UNMAPPING";
/// Threads [`MAP_UNMAPPING`] has room for (when full, the notice goes out at the start).
pub const UNMAPPING_ENTRIES: u32 = 1024;

/// Read-only globals: byte offsets of `task_struct::signal` and `signal_struct::live` (the
/// group's live threads, an `atomic_t`) from the kernel's BTF; 0 when not found.
pub const GLOBAL_TASK_SIGNAL_OFFSET: &str = "TASK_SIGNAL_OFFSET";
pub const GLOBAL_SIGNAL_LIVE_OFFSET: &str = "SIGNAL_LIVE_OFFSET";
/// Read-only global: the byte offset of `task_struct::start_time` from the kernel's BTF (0 when
/// not found), which tells a [`DyingTask`] from a later task at the same address.
pub const GLOBAL_TASK_START_TIME_OFFSET: &str = "TASK_START_TIME_OFFSET";

/// The value of [`MAP_DYING`]: the last thread out of an exited traced process, by the address
/// of its `task_struct` and its start time. The address alone is not enough: the allocator
/// hands a freed `task_struct` to the next task made, and that one may get the same pid
/// (`clone3` with `set_tid`, or pid reuse): a process of its own, to be told of and loaded,
/// not the exit of the first. (`start_time` is 0 where its offset is unknown.)
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DyingTask {
    pub task: u64,
    pub start_time: u64,
}

/// What happened ([`Notice::kind`]); travels as its `u32`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoticeKind {
    Exec = 1,
    Exit = 2,
    NewProcess = 3,
    UnknownPc = 4,
    Unmapped = 5,
}

impl TryFrom<u32> for NoticeKind {
    type Error = u32;
    fn try_from(v: u32) -> Result<Self, u32> {
        match v {
            1 => Ok(NoticeKind::Exec),
            2 => Ok(NoticeKind::Exit),
            3 => Ok(NoticeKind::NewProcess),
            4 => Ok(NoticeKind::UnknownPc),
            5 => Ok(NoticeKind::Unmapped),
            other => Err(other),
        }
    }
}

/// One notice.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Notice {
    /// `bpf_ktime_get_ns` when it was sent.
    pub time_ns: u64,
    /// A [`NoticeKind`].
    pub kind: u32,
    pub tgid: u32,
}

const _: () = assert!(core::mem::size_of::<Notice>() == 16);

#[cfg(feature = "user")]
// SAFETY: `#[repr(C)]` integers, no padding (size pinned above): every bit pattern is valid.
unsafe impl aya::Pod for Notice {}

#[cfg(test)]
mod tests;
