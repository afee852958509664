//! Types and names shared by the eBPF program (`tracer-ebpf`) and userspace (`tracer-user`).
//!
//! Everything here crosses the kernel/user boundary, so it is `no_std`, allocation-free,
//! `#[repr(C)]`/fixed-width only, and its layout is pinned with compile-time asserts. Map,
//! program and global names live here as constants so neither side spells them twice.
//! Nothing here may depend on aya-ebpf or std.
#![no_std]

pub mod event;
pub mod frame_word;
pub mod mapping;
pub mod notice;
pub mod python;
pub mod sample;
pub mod snapshot;
pub mod trace;
pub mod unwind;
pub mod vma;
pub mod walk;

/// Name of the perf_event program that runs on every cpu-clock sample.
pub const PROG_ON_SAMPLE: &str = "on_sample";
/// Per-CPU array of `u64` counters indexed by [`Counter`].
pub const MAP_COUNTERS: &str = "COUNTERS";

/// Outcome counters bumped by the kernel side, one slot each in [`MAP_COUNTERS`]. (Why each
/// user walk ended is counted apart, by `walk::StopReason`, in `trace::MAP_STOPS`.)
///
/// Travels as its `u32` index; [`Counter::try_from`] is the typed twin for userspace.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// A sample of a traced process was taken and walked.
    Sampled = 0,
    /// A sample hit a process that is not traced and was dropped.
    NotTraced = 1,
    /// The ring buffer was full: the sample was lost.
    EventsLost = 2,
    /// `bpf_get_stack` failed for the kernel stack (the sample keeps its user stack).
    KernelStackFailed = 3,
    /// The user registers of the interrupted task could not be read: the sample was dropped.
    NoUserRegs = 4,
    /// The tail call that continues a walk failed: the walk stopped early (counted as MaxDepth).
    TailCallFailed = 5,
    /// The notice ring buffer was full: a process life-cycle notice was lost.
    NoticesLost = 6,
    /// An `execve` of a process whose last one was less than `event::EXEC_ENTRY_INTERVAL_NS`
    /// ago was not walked at its entry (a process failing execs in a loop).
    ExecEntriesLimited = 7,
}

impl Counter {
    /// Number of counter slots (the size of [`MAP_COUNTERS`]).
    pub const COUNT: u32 = 8;
    /// Every counter, in index order.
    pub const ALL: [Counter; Self::COUNT as usize] = [
        Counter::Sampled,
        Counter::NotTraced,
        Counter::EventsLost,
        Counter::KernelStackFailed,
        Counter::NoUserRegs,
        Counter::TailCallFailed,
        Counter::NoticesLost,
        Counter::ExecEntriesLimited,
    ];

    /// Stable name for summaries and logs.
    pub const fn name(self) -> &'static str {
        match self {
            Counter::Sampled => "sampled",
            Counter::NotTraced => "not_traced",
            Counter::EventsLost => "events_lost",
            Counter::KernelStackFailed => "kernel_stack_failed",
            Counter::NoUserRegs => "no_user_regs",
            Counter::TailCallFailed => "tail_call_failed",
            Counter::NoticesLost => "notices_lost",
            Counter::ExecEntriesLimited => "exec_entries_limited",
        }
    }
}

impl TryFrom<u32> for Counter {
    type Error = u32;
    fn try_from(v: u32) -> Result<Self, u32> {
        Counter::ALL.get(v as usize).copied().ok_or(v)
    }
}

#[cfg(test)]
mod tests;
