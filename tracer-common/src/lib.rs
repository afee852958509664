//! Types and names shared by the eBPF program (`tracer-ebpf`) and userspace (`tracer-user`).
//!
//! Everything here crosses the kernel/user boundary, so it is `no_std`, allocation-free,
//! `#[repr(C)]`/fixed-width only, and its layout is pinned with compile-time asserts. Map,
//! program and global names live here as constants so neither side spells them twice.
//! Nothing here may depend on aya-ebpf or std.
#![no_std]

pub mod unwind;
pub mod walk;

/// Name of the perf_event program that runs on every cpu-clock sample.
pub const PROG_ON_SAMPLE: &str = "on_sample";
/// Per-CPU array of `u64` counters indexed by [`Counter`].
pub const MAP_COUNTERS: &str = "COUNTERS";
/// Read-only global (set before load): the thread-group id to sample, 0 = every process.
pub const GLOBAL_TARGET_TGID: &str = "TARGET_TGID";

/// Outcome counters bumped by the kernel side, one slot each in [`MAP_COUNTERS`].
///
/// Travels as its `u32` index; [`Counter::try_from`] is the typed twin for userspace.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// A sample of a traced process was taken.
    Sampled = 0,
    /// A sample hit a process that is not traced and was dropped.
    NotTraced = 1,
}

impl Counter {
    /// Number of counter slots (the size of [`MAP_COUNTERS`]).
    pub const COUNT: u32 = 2;
    /// Every counter, in index order.
    pub const ALL: [Counter; Self::COUNT as usize] = [Counter::Sampled, Counter::NotTraced];

    /// Stable name for summaries and logs.
    pub const fn name(self) -> &'static str {
        match self {
            Counter::Sampled => "sampled",
            Counter::NotTraced => "not_traced",
        }
    }
}

impl TryFrom<u32> for Counter {
    type Error = u32;
    fn try_from(v: u32) -> Result<Self, u32> {
        match v {
            0 => Ok(Counter::Sampled),
            1 => Ok(Counter::NotTraced),
            other => Err(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ALL` lists every counter exactly once, at its own index, and round-trips through u32.
    #[test]
    fn counters_are_dense_and_round_trip() {
        for (i, c) in Counter::ALL.iter().enumerate() {
            assert_eq!(*c as u32, i as u32);
            assert_eq!(Counter::try_from(i as u32), Ok(*c));
        }
        assert_eq!(Counter::try_from(Counter::COUNT), Err(Counter::COUNT));
    }
}
