//! The pids whose process exited or exec'd while traced, for the names the outputs trust.

use std::collections::{HashMap, HashSet};

/// Pids remembered at most.
const MAX_CHANGED: usize = 65536;

/// The pids whose process exited or ran another program (exec) during the session: their
/// executable's name, looked at once, may be another process's or program's, so their stacks
/// are not rooted at it (a pid reused by a later process would otherwise name that process's
/// stacks after the earlier one). Bounded: past [`MAX_CHANGED`] pids, no name is trusted.
#[derive(Debug, Default)]
pub struct Changed {
    pids: HashSet<u32>,
    overflowed: bool,
}

impl Changed {
    /// Process `pid` ended or exec'd.
    pub fn note(&mut self, pid: u32) {
        if self.pids.len() >= MAX_CHANGED {
            self.overflowed = true;
        } else {
            self.pids.insert(pid);
        }
    }

    /// The executable names of `names` that name their pid's one program: those of pids that
    /// did not change (none when too many did).
    pub fn trusted(&self, names: &HashMap<u32, String>) -> HashMap<u32, String> {
        if self.overflowed {
            return HashMap::new();
        }
        names
            .iter()
            .filter(|(pid, _)| !self.pids.contains(pid))
            .map(|(pid, name)| (*pid, name.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests;
