//! Which processes are in the kernel's map of interpreters (`PYTHON`, `PYTHON_ENTRIES` = 1024
//! processes): the policy when it is full. Processes that are sampled are preferred: a process
//! to be added when the map is full takes the place of the one in it least recently sampled
//! (or found, if never sampled since), so idle interpreters give way to busy ones; a process
//! out of the map that is sampled (its stacks then native) is put back at the next
//! housekeeping, on the same terms. Added, evicted and refused processes are counted, by
//! reason, for the summary (`python.map`).

use super::pycode::PyCodes;

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

/// The kernel refused a process because its map of interpreters is full.
#[derive(Debug, thiserror::Error)]
#[error("the map of Python processes is full")]
pub struct PythonMapFull;

impl PyCodes {
    /// `pid` is in the kernel's map (`true`) or not.
    pub fn set_in_map(&mut self, pid: u32, in_map: bool) {
        if let Some(proc) = self.inner.get_mut().procs.get_mut(&pid) {
            proc.in_map = in_map;
        }
    }

    /// The process in the map to give way to `pid`: the least recently sampled but `pid`,
    /// if it was sampled (or found) before `pid` was.
    pub fn map_victim(&self, pid: u32) -> Option<u32> {
        let inner = self.inner.borrow();
        let last = inner.procs.get(&pid).map_or(inner.samples, |p| p.last);
        inner
            .procs
            .iter()
            .filter(|&(&p, proc)| p != pid && proc.in_map)
            .min_by_key(|(_, proc)| proc.last)
            .filter(|(_, proc)| proc.last <= last)
            .map(|(&p, _)| p)
    }

    /// The processes sampled while out of the map, to be put back.
    pub fn take_readmit(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.inner.get_mut().readmit)
    }

    /// Count what became of a process given to the map.
    pub fn count_map(&mut self, count: impl FnOnce(&mut PyMapStats)) {
        count(&mut self.inner.get_mut().map);
    }

    /// What became of the processes given to the map.
    pub fn map_stats(&self) -> PyMapStats {
        self.inner.borrow().map
    }
}
