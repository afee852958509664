//! The kernel map's policy (`python::pymap`) kept with the processes it is about: which
//! process is in the map, which gives way, which is put back.

use super::PyCodes;
use crate::python::pymap::PyMapStats;

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
