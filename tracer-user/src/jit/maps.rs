//! One process's perf map as read so far, and its incremental reading: only what was appended
//! since the last read is parsed (from the end of the last complete line), the whole file
//! again only when it was replaced (another device or inode) or shrank, at most every
//! [`RESTART`]. Each read is bounded in time by the JIT-name budget ([`super::budget`]): cut
//! short, it stops at a line's end and goes on at the next; and what the map keeps is bounded
//! by the process's share of the budget.

use std::{
    collections::BTreeSet,
    fs::File,
    os::unix::fs::MetadataExt as _,
    path::PathBuf,
    time::{Duration, Instant},
};

use super::{
    WATCH_LOG,
    budget::{JitBudget, Part},
    perfmap::PerfMap,
    process::{self, ProcessView, Refusal},
};

/// Bytes read (and parsed) from a perf map at a time: the time granted is checked between
/// them, so that one costs little even on a slow, busy host.
const CHUNK: usize = 64 << 10;
/// How often a map that was replaced or shrank is read again from its start, at most (a
/// process rewriting its map must not make the tracer parse it over and over).
pub(super) const RESTART: Duration = Duration::from_secs(5);

/// One process's perf map as read so far.
#[derive(Debug)]
pub(super) struct ProcessMaps {
    pub(super) pid: u32,
    /// Its incarnation (what its part of the budget is named by).
    pub(super) id: u32,
    /// `None` when the process was gone before it could be looked at, or after its last read.
    pub(super) view: Option<ProcessView>,
    /// When it started, on the kernel's clock (0: unknown), kept once the view is let go.
    pub(super) started_mono_ns: u64,
    /// It exited: the map is read once more, then its root let go.
    pub(super) exited: bool,
    pub(super) map: PerfMap,
    /// The file read (device, inode) and how far (the end of its last complete line).
    pub(super) file: Option<(u64, u64)>,
    pub(super) read: u64,
    skipping: bool,
    /// Why the file was last refused (each refusal is counted once per process and reason).
    pub(super) refused: BTreeSet<Refusal>,
    /// When the map was last looked at (also on the kernel's clock), and last read from its
    /// start.
    pub(super) read_at: Option<Instant>,
    pub(super) read_mono_ns: u64,
    pub(super) restarted_at: Option<Instant>,
}

impl ProcessMaps {
    pub(super) fn new(pid: u32, id: u32, view: Option<ProcessView>) -> ProcessMaps {
        if view.is_some() {
            log::debug!(target: WATCH_LOG, "pid {pid} looked at");
        }
        ProcessMaps {
            pid,
            id,
            started_mono_ns: view.as_ref().map_or(0, |v| v.started_mono_ns),
            view,
            exited: false,
            map: PerfMap::default(),
            file: None,
            read: 0,
            skipping: false,
            refused: BTreeSet::new(),
            read_at: None,
            read_mono_ns: 0,
            restarted_at: None,
        }
    }

    /// When the process started on the kernel's clock (0: unknown).
    pub(super) fn started(&self) -> u64 {
        self.view.as_ref().map_or(self.started_mono_ns, |v| v.started_mono_ns)
    }

    /// Read what the perf map gained since the last time (all of it if it is another file,
    /// or shorter than what was read; at most every [`RESTART`] unless it is the `last` read),
    /// within the time `budget` grants and the room it leaves.
    pub(super) fn refresh(&mut self, last: bool, budget: &mut JitBudget) {
        self.read_at = Some(Instant::now());
        self.read_mono_ns = crate::sys::monotonic_ns();
        let Some(view) = &self.view else { return };
        let path = PathBuf::from(format!("/tmp/perf-{}.map", view.nspid));
        let (file, size) = match process::open_trusted(view, &path) {
            Ok(Some(opened)) => opened,
            Ok(None) => return,
            Err(refusal) => {
                self.refused.insert(refusal);
                return;
            }
        };
        let Ok(meta) = file.metadata() else { return };
        let identity = (meta.dev(), meta.ino());
        if self.file != Some(identity) || size < self.read {
            if !last && self.file.is_some() && self.restarted_at.is_some_and(|at| at.elapsed() < RESTART) {
                return;
            }
            self.restarted_at = Some(Instant::now());
            let (malformed, over_limit, over_budget) = (self.map.malformed, self.map.over_limit, self.map.over_budget);
            self.map = PerfMap::default();
            (self.map.malformed, self.map.over_limit, self.map.over_budget) = (malformed, over_limit, over_budget);
            budget.set(self.pid, Part::PerfMap(self.id), 0);
            self.file = Some(identity);
            self.read = 0;
            self.skipping = false;
        }
        if self.read >= size {
            return;
        }
        let Some(until) = budget.grant(self.pid, last) else {
            return;
        };
        let since = Instant::now();
        self.map.set_room(budget.room(self.pid, Part::PerfMap(self.id)));
        let before = self.map.over_budget;
        let result = self.read_from(&file, size, until);
        budget.stats.perf_map_lines_over_budget += self.map.over_budget - before;
        budget.set(self.pid, Part::PerfMap(self.id), self.map.bytes());
        budget.spend(self.pid, since);
        match result {
            Err(refusal) => {
                self.refused.insert(refusal);
            }
            // Cut short: the rest at the next read.
            Ok(false) => budget.stats.reads_behind += 1,
            Ok(true) => {}
        }
    }

    /// Parse `file` from where the last read stopped up to `size` (its size when checked), or
    /// until `until`: whether it got to `size`.
    fn read_from(&mut self, file: &File, size: u64, until: Instant) -> Result<bool, Refusal> {
        let (map, skipping) = (&mut self.map, &mut self.skipping);
        super::appended::read_appended(
            file,
            &mut self.read,
            size,
            until,
            CHUNK,
            Refusal::Unreadable,
            |pending, _| Ok((map.add_text_from(pending, skipping), false)),
        )
    }
}
