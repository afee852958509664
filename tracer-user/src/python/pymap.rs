//! Which processes are in the kernel's map of interpreters (`PYTHON`, `PYTHON_ENTRIES` = 1024
//! processes): the policy when it is full. Processes that are sampled are preferred: a process
//! to be added when the map is full takes the place of the one in it least recently sampled
//! (or found, if never sampled since), so idle interpreters give way to busy ones; a process
//! out of the map that is sampled (its stacks then native) is put back at the next
//! housekeeping, on the same terms. Added, evicted and refused processes are counted, by
//! reason, for the summary (`python.map`). The policy's methods on the registry of code
//! objects are in `pycode/map.rs`.

/// Processes out of the map waiting to be put back, at most.
pub const MAX_READMIT: usize = 256;

/// What became of the processes given to the kernel's map of interpreters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PyMapStats {
    /// Processes put in the map.
    pub added: u64,
    /// Processes taken out of a full map for one sampled more recently.
    pub evicted: u64,
    /// Processes left out, by reason: the map full of processes sampled more recently than
    /// this one, or another error of the kernel's.
    pub refused_full: u64,
    pub refused_error: u64,
}
