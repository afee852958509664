//! Each traced process's mappings as userspace resolves frames with them: the current ones, and
//! those that ended (replaced by a reload, or the process exited or exec'ed) kept a while for
//! the samples taken before, apart from those of whatever took their place (a new image, a new
//! process with the same pid). Times are kernel times (`bpf_ktime_get_ns`: `CLOCK_MONOTONIC`,
//! as samples and notices carry them). Knows nothing of objects and tables: the catalog counts
//! the users of the mappings it is handed back.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use super::ResolvedMapping;

/// The current and ended mappings of every process.
#[derive(Default)]
pub struct ProcessMaps {
    /// The mappings each process has now, sorted by start.
    pub current: HashMap<u32, Vec<ResolvedMapping>>,
    /// When each process's current mappings were loaded.
    pub(super) loaded_at: HashMap<u32, u64>,
    /// The mappings processes had before, by when they ended, per pid.
    ended: HashMap<u32, Vec<Ended>>,
}

/// The mappings a process had until they were replaced, or it exited or exec'ed.
#[derive(Debug)]
struct Ended {
    /// When they ended.
    at_ns: u64,
    /// When they were loaded (`at_ns` for a process never loaded).
    loaded_ns: u64,
    /// When it was heard of, to forget it after a while.
    noted: Instant,
    mappings: Vec<ResolvedMapping>,
}

impl ProcessMaps {
    /// Processes with current mappings.
    pub fn len(&self) -> usize {
        self.current.len()
    }

    /// Whether no process has current mappings.
    pub fn is_empty(&self) -> bool {
        self.current.is_empty()
    }

    /// `pid` has `mappings` from `now` on; returns those it had. Samples taken before now
    /// resolve through the old ones, unless the new ones still have them all (code was only
    /// added, as by dlopen): then the new ones serve them as well, and name the code that was
    /// added before it was known.
    pub fn replace(&mut self, pid: u32, mappings: Vec<ResolvedMapping>, now: u64) -> Vec<ResolvedMapping> {
        let old = self.current.remove(&pid).unwrap_or_default();
        if !old.iter().all(|o| mappings.contains(o)) {
            let loaded = self.loaded_at.get(&pid).copied().unwrap_or(0);
            self.keep_ended(pid, now, loaded, old.clone());
        }
        self.loaded_at.insert(pid, now);
        self.current.insert(pid, mappings);
        old
    }

    /// Forget `pid`'s current mappings (returned), keeping none for earlier samples.
    pub fn remove(&mut self, pid: u32) -> Option<Vec<ResolvedMapping>> {
        self.loaded_at.remove(&pid);
        self.current.remove(&pid)
    }

    /// `pid` exited, exec'ed or unmapped code at `at_ns` (see `Catalog::end_process`): returns
    /// its current mappings if they ended.
    pub fn end(&mut self, pid: u32, at_ns: u64) -> Option<Vec<ResolvedMapping>> {
        if self.loaded_at.get(&pid).is_some_and(|&loaded| loaded > at_ns) {
            let ended = self.ended.entry(pid).or_default();
            match ended.iter_mut().find(|e| e.at_ns >= at_ns) {
                Some(then) if then.loaded_ns <= at_ns => then.at_ns = at_ns,
                _ => self.keep_ended(pid, at_ns, at_ns, Vec::new()),
            }
            return None;
        }
        let loaded = self.loaded_at.remove(&pid).unwrap_or(at_ns);
        let mappings = self.current.remove(&pid);
        self.keep_ended(pid, at_ns, loaded, mappings.clone().unwrap_or_default());
        mappings
    }

    /// Keep `mappings`, which `pid` had from `loaded_ns` until `at_ns`, in order of their end.
    pub(super) fn keep_ended(&mut self, pid: u32, at_ns: u64, loaded_ns: u64, mappings: Vec<ResolvedMapping>) {
        let ended = self.ended.entry(pid).or_default();
        let at = ended.partition_point(|e| e.at_ns <= at_ns);
        ended.insert(
            at,
            Ended {
                at_ns,
                loaded_ns,
                noted: Instant::now(),
                mappings,
            },
        );
    }

    /// Forget the mappings of processes that ended more than `after` ago.
    pub fn expire(&mut self, after: Duration) {
        self.ended.retain(|_, ended| {
            ended.retain(|e| e.noted.elapsed() < after);
            !ended.is_empty()
        });
    }

    /// The mapping that held `addr` in the process with this `pid` at kernel time `time_ns`:
    /// that of the first image ended after `time_ns`, else the current one.
    pub fn mapping_at(&self, pid: u32, addr: u64, time_ns: u64) -> Option<&ResolvedMapping> {
        let ended = self
            .ended
            .get(&pid)
            .and_then(|ended| ended.iter().find(|e| time_ns < e.at_ns));
        match ended {
            Some(ended) => find_mapping(&ended.mappings, addr),
            None => find_mapping(self.current.get(&pid)?, addr),
        }
    }

    /// The mapping of `pid` holding `addr` now (as last read).
    pub fn current_mapping_at(&self, pid: u32, addr: u64) -> Option<&ResolvedMapping> {
        find_mapping(self.current.get(&pid)?, addr)
    }

    /// Every mapping the process with this `pid` had at kernel time `time_ns` (see
    /// [`ProcessMaps::mapping_at`]), sorted by start.
    pub fn mappings_at(&self, pid: u32, time_ns: u64) -> Option<&[ResolvedMapping]> {
        let ended = self
            .ended
            .get(&pid)
            .and_then(|ended| ended.iter().find(|e| time_ns < e.at_ns));
        match ended {
            Some(ended) => Some(&ended.mappings),
            None => self.current.get(&pid).map(Vec::as_slice),
        }
    }

    /// The lengths of its collections, named (see `trace::sizes`).
    pub fn sizes(&self, add: &mut dyn FnMut(&'static str, usize)) {
        add("processes.current", self.current.len());
        add("processes.loaded_at", self.loaded_at.len());
        add("processes.ended_pids", self.ended.len());
        add("processes.ended", self.ended.values().map(Vec::len).sum());
        add(
            "processes.mappings",
            self.current.values().map(Vec::len).sum::<usize>()
                + self.ended.values().flatten().map(|e| e.mappings.len()).sum::<usize>(),
        );
    }
}

/// The mapping of `maps` (sorted by start, not overlapping) that holds `addr`.
fn find_mapping(maps: &[ResolvedMapping], addr: u64) -> Option<&ResolvedMapping> {
    let i = maps.partition_point(|m| m.start <= addr).checked_sub(1)?;
    maps.get(i).filter(|m| addr < m.end)
}
