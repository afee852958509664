//! The JIT runtime ([`Jit`], a [`crate::runtime::Runtime`]): the jitdumps runtimes write
//! ([`dumps`]; the catalog makes their code objects) and, here, names for JIT-compiled code
//! from the perf map files JIT runtimes write
//! (`/tmp/perf-PID.map`: Node.js `--perf-basic-prof`, Java through `jcmd PID
//! Compiler.perfmap`, `python3.12 -X perf`, `DOTNET_PerfMapEnabled=1`...). Code in anonymous
//! memory has no object to take symbols from; a process whose samples land there is
//! remembered ([`JitNames::want`]) and its perf map read, and read again as it grows (the
//! runtime appends a line per function it compiles), on the session's housekeeping tick and
//! once more when tracing ends. Reading is bounded and refuses files the process could not
//! have written ([`process`]); each refusal is counted by name in the summary. [`perfmap`] is
//! the pure parser.
//!
//! Names belong to a process, not to a pid: each process gets an incarnation number when its
//! first sample lands in JIT code, samples carry it, and an exit (the kernel's notice, or the
//! process found gone) ends it, so that samples taken before resolve to the exited process's
//! names and a later process with the same pid gets an incarnation and a map of its own. The
//! root and user of a process are taken when it is first wanted, and the file is read through
//! that root once more after the process has exited (runtimes that write their map at exit,
//! such as Java's `-XX:+DumpPerfMapAtExit`, are named too).
//!
//! An exit the tracer learns of late (its notice still queued, or lost, when the process is
//! found gone) is dated no later than the start of the process that holds the pid now: the
//! samples of that later process never take the earlier one's names, whenever they are
//! resolved ([`JitNames::exited`] moves such an estimate back to the exit's time when the
//! notice comes). Reading is incremental ([`maps`]) and bounded by the JIT-name budget
//! ([`budget`]: memory across all processes, a share per process, time per period).

pub(crate) mod appended;
pub mod budget;
pub mod dump;
pub mod dumps;
pub mod elf;
pub mod hotspot;
pub mod java;
mod maps;
pub mod perfmap;
pub mod process;
mod runtime;

use std::{
    cell::{Cell, RefCell},
    collections::{BTreeMap, BTreeSet, HashMap, VecDeque},
    time::Duration,
};

pub use runtime::Jit;

use budget::{BudgetStats, JitBudget};
use maps::ProcessMaps;
#[cfg(test)]
use perfmap::PerfMap;
use serde::Serialize;

/// The pseudo-object JIT code named by a perf map is shown in (its offsets are the code's
/// addresses in its process).
pub const JIT_OBJECT: &str = "[jit]";

/// The debug log that tells each process looked at while it runs (its root and user taken,
/// see [`JitNames::watch`]): `pid N looked at`. Tests wait on it before they let a process end.
pub const WATCH_LOG: &str = "sframe_trace::jit_watch";

/// How often a frame without a name makes its process's perf map be read again, at most, when
/// the sample was taken before the last read began (the map then held all the sample could
/// be named by, unless the runtime writes its lines late).
const REREAD: Duration = Duration::from_millis(100);
/// How often a frame without a name in a sample taken after the last read began makes the map
/// be read again, at most: code compiled since then is named by lines written since then.
const NEWER: Duration = Duration::from_millis(5);
/// How often a process without a perf map is looked at again, at most.
const RELOOK: Duration = Duration::from_secs(2);
/// How long the exit of a process never seen in JIT code is remembered (kernel time), for its
/// samples still queued.
const UNSEEN_EXIT: u64 = 60_000_000_000;
/// How long the reads at the end of a session may take together.
const END_READS: Duration = Duration::from_millis(500);

/// The perf maps of the traced processes that run JIT code.
#[derive(Debug, Default)]
pub struct JitNames {
    /// Processes (pid, incarnation) whose samples landed in code without a name, not yet
    /// looked at, with the kernel time of the newest such sample.
    wanted: RefCell<BTreeMap<(u32, u32), u64>>,
    /// The incarnation samples of each pid belong to from now on (given at its first want).
    current: RefCell<HashMap<u32, u32>>,
    /// Incarnations that ended, per pid, with when (kernel time), in order of their end; 0
    /// for a process not seen in JIT code before it exited (given one if a sample later says
    /// it ran JIT code, so that its samples never take the next process's names).
    ended: RefCell<HashMap<u32, Vec<(u64, u32)>>>,
    /// Those exits of processes without an incarnation or names, oldest first, to forget them.
    unseen_exits: VecDeque<(u64, u32)>,
    /// The last incarnation number given (0 is none).
    last: Cell<u32>,
    /// The reads put off at the last [`JitNames::refresh_wanted`], and how many of its calls
    /// ended one of them ([`JitNames::settled`]).
    put_off: BTreeSet<(u32, u32)>,
    settled: u64,
    /// Perf maps by incarnation.
    processes: HashMap<u32, ProcessMaps>,
    /// What the JIT names of all processes may hold and take (jitdumps' too).
    pub budget: JitBudget,
}

/// What the summary says about perf maps.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JitStats {
    /// Processes with executable memory without an object (sampled there, or mapping it), and
    /// those whose perf map was read.
    pub processes: u64,
    pub perf_maps: u64,
    /// Named ranges taken from them.
    pub entries: u64,
    /// Lines skipped as malformed (or overlong), and over the per-process limit.
    pub malformed_lines: u64,
    pub over_limit: u64,
    /// Perf maps not read, by why (`not_regular`, `other_owner`, `too_large`, `unreadable`).
    pub refused_by_reason: BTreeMap<&'static str, u64>,
    /// The JIT-name budget (perf maps and jitdumps together): its limit, peak, and what was
    /// dropped or put off for it, by name.
    pub budget: BudgetStats,
}

impl JitNames {
    /// A sample of `pid` taken at kernel time `time_ns` has a frame at `addr`, in code
    /// outside any object: unless its perf map names it already, look (again) at the map at
    /// the next [`JitNames::refresh_wanted`]. Returns the process's incarnation, for
    /// [`JitNames::name`].
    pub fn want(&self, pid: u32, addr: u64, time_ns: u64) -> u32 {
        let mut process = self.incarnation(pid, time_ns);
        // Taken before the process looked at started (resolved late, after its pid was
        // reused): an earlier process's, which ended when that one started.
        if let Some(start) = self
            .processes
            .get(&process)
            .and_then(|p| p.view.as_ref())
            .map(|v| v.started_mono_ns)
            .filter(|&start| time_ns < start)
        {
            let mut ended = self.ended.borrow_mut();
            let list = ended.entry(pid).or_default();
            if !list.iter().any(|&(t, _)| t == start) {
                let at = list.partition_point(|&(t, _)| t <= start);
                list.insert(at, (start, 0));
            }
            drop(ended);
            process = self.incarnation(pid, time_ns);
        }
        if self.name(process, addr).is_none() {
            let mut wanted = self.wanted.borrow_mut();
            let newest = wanted.entry((pid, process)).or_default();
            *newest = (*newest).max(time_ns);
        }
        process
    }

    /// The incarnation of `pid` that ran at `time_ns`: the first one that ended after it,
    /// else the current one (a new one if there is none).
    fn incarnation(&self, pid: u32, time_ns: u64) -> u32 {
        if let Some(ended) = self.ended.borrow_mut().get_mut(&pid)
            && let Some((_, id)) = ended.iter_mut().find(|(at, _)| time_ns < *at)
        {
            if *id == 0 {
                *id = self.next_id();
            }
            return *id;
        }
        *self.current.borrow_mut().entry(pid).or_insert_with(|| self.next_id())
    }

    fn next_id(&self) -> u32 {
        self.last.set(self.last.get() + 1);
        self.last.get()
    }

    /// Process `pid` runs JIT code (it maps anonymous executable memory): look at it now (its
    /// root, pid and user), while it surely is the process with that pid.
    pub fn watch(&mut self, pid: u32) {
        if let Some(&id) = self.current.get_mut().get(&pid) {
            // Still the process of that incarnation (or one not looked at yet, which
            // `refresh_wanted` looks at): nothing to do. Else it is gone, its exit not heard
            // of yet: it ended before this one started.
            let known = self
                .processes
                .get(&id)
                .and_then(|p| p.view.as_ref())
                .map(|v| v.start_time);
            match (known, process::start_time(pid)) {
                (Some(then), Some(now)) if then != now => self.gone(pid, crate::sys::monotonic_ns()),
                _ => return,
            }
        }
        let id = self.next_id();
        self.current.get_mut().insert(pid, id);
        self.processes.insert(id, ProcessMaps::new(pid, id, process::view(pid)));
    }

    /// The process of the current incarnation of `pid` was found gone at kernel time `now_ns`
    /// (its exit notice not seen yet, or lost): it ended by then, and before the process that
    /// holds its pid now started, if one does (dated so, that one's samples are never named
    /// from the gone one's map, however late they are resolved).
    fn gone(&mut self, pid: u32, now_ns: u64) {
        let next_start = process::started_mono(pid);
        let started = self
            .current
            .get_mut()
            .get(&pid)
            .and_then(|id| self.processes.get(id))
            .map_or(0, ProcessMaps::started);
        let at = next_start.map_or(now_ns, |s| s.min(now_ns)).max(started);
        self.exited(pid, at);
    }

    /// Process `pid` exited (or was found gone) at kernel time `at_ns`: its map is read once
    /// more, now, and samples taken later belong to another process. (A notice of the exit of
    /// an earlier process than the current incarnation's ends nothing more.)
    pub fn exited(&mut self, pid: u32, at_ns: u64) {
        // The notice of an exit already dated by an estimate (the process found gone): the
        // estimate is moved back to it.
        if self.tighten(pid, at_ns) {
            return;
        }
        // The exit of a process that ran before the current incarnation started: that one
        // goes on.
        let current = self.current.get_mut().get(&pid).copied();
        if let Some(id) = current
            && self.processes.get(&id).is_some_and(|p| p.started() > at_ns)
        {
            let list = self.ended.get_mut().entry(pid).or_default();
            let at = list.partition_point(|&(t, _)| t <= at_ns);
            list.insert(at, (at_ns, 0));
            self.unseen_exits.push_back((at_ns, pid));
            return;
        }
        let process = self.current.get_mut().remove(&pid);
        let ended = self.ended.get_mut();
        let list = ended.entry(pid).or_default();
        let at = list.partition_point(|&(t, _)| t <= at_ns);
        list.insert(at, (at_ns, process.unwrap_or(0)));
        match process.and_then(|id| self.processes.get_mut(&id)) {
            Some(maps) => {
                // Its last read, now: a map written at exit is there, and a later process with
                // its pid has not written its own yet (one written after the exit is refused).
                maps.exited = true;
                if let Some(view) = &mut maps.view {
                    view.ended_unix_ns = process::unix_of_monotonic(at_ns).unwrap_or(0);
                    maps.refresh(true, &mut self.budget);
                    maps.view = None;
                }
                // A process that named nothing is forgotten (system-wide, most processes
                // looked at have no map): its samples find no names, as before.
                if maps.map.is_empty() && maps.file.is_none() && maps.refused.is_empty() {
                    self.processes.remove(&process.unwrap_or(0));
                    self.unseen_exits.push_back((at_ns, pid));
                }
            }
            None if process.is_none() => self.unseen_exits.push_back((at_ns, pid)),
            None => {}
        }
        // Exits of processes never seen in JIT code are forgotten after a while.
        while let Some(&(then, old)) = self.unseen_exits.front()
            && then.saturating_add(UNSEEN_EXIT) < at_ns
        {
            self.unseen_exits.pop_front();
            let processes = &self.processes;
            if let Some(list) = ended.get_mut(&old) {
                list.retain(|&(t, id)| t != then || processes.contains_key(&id));
                if list.is_empty() {
                    ended.remove(&old);
                }
            }
        }
    }

    /// An exit of `pid` at `at_ns` whose process was dated as ended later, by an estimate (it
    /// was running then, so the exit is its own): the end is moved back to `at_ns`. Whether
    /// there was one.
    fn tighten(&mut self, pid: u32, at_ns: u64) -> bool {
        let processes = &self.processes;
        let Some(list) = self.ended.get_mut().get_mut(&pid) else {
            return false;
        };
        let first_after = list.partition_point(|&(t, _)| t < at_ns);
        let Some(&(t, id)) = list.get(first_after) else {
            return false;
        };
        let its_own = id != 0 && processes.get(&id).is_some_and(|p| p.started() <= at_ns);
        if !its_own {
            return false;
        }
        list[first_after] = (at_ns, id);
        if t != at_ns {
            log::debug!("pid {pid}: exit estimated at {t} was at {at_ns}");
        }
        true
    }

    /// Whether [`JitNames::want`] was told of a frame without a name since the last refresh.
    pub fn is_wanted(&self) -> bool {
        !self.wanted.borrow().is_empty()
    }

    /// Whether the map of incarnation `process` of `pid` is to be read again, for a sample taken
    /// after its last read began (after [`JitNames::refresh_wanted`]: a read put off by the
    /// [`NEWER`] limit, which the next call makes). A sample whose frames it left without a
    /// name waits for that read rather than being written without them.
    pub fn put_off(&self, pid: u32, process: u32) -> bool {
        self.wanted.borrow().contains_key(&(pid, process))
    }

    /// Read what the perf maps of the processes wanted since the last call gained. A map is
    /// read again at most every [`REREAD`] for samples taken before its last read (code without
    /// a name in its map, such as a runtime's stubs, does not make it read again and again),
    /// and at most every [`NEWER`] for samples taken after it (their code may have been
    /// compiled since: a sample is named once, when it is taken in, so the map must be read
    /// before). A process wanted for the first time is looked at now (its root, pid and user),
    /// unless it has ended already (its pid may be another's now).
    pub fn refresh_wanted(&mut self) {
        let before = std::mem::take(&mut self.put_off);
        let wanted = std::mem::take(self.wanted.get_mut());
        for ((pid, id), newest) in wanted {
            if !self.processes.contains_key(&id) {
                let current = self.current.get_mut().get(&pid) == Some(&id);
                let view = current.then(|| process::view(pid)).flatten();
                // A process that started after the sample was taken is not the one that took
                // it: that one is gone, and ended before this one started.
                if let Some(later) = view.as_ref().map(|v| v.started_mono_ns).filter(|&s| s > newest) {
                    self.processes.insert(id, ProcessMaps::new(pid, id, None));
                    self.exited(pid, later);
                    continue;
                }
                self.processes.insert(id, ProcessMaps::new(pid, id, view));
            }
            let Some(process) = self.processes.get_mut(&id) else {
                continue;
            };
            let newer = process.file.is_some() && newest > process.read_mono_ns;
            let again = match process.file {
                Some(_) if newer => NEWER,
                Some(_) => REREAD,
                None => RELOOK,
            };
            if process.read_at.is_none_or(|at| at.elapsed() >= again) {
                process.refresh(false, &mut self.budget);
            } else if newer {
                // Read at the next call, for the samples taken in after this one.
                self.wanted.get_mut().insert((pid, id), newest);
            }
        }
        self.put_off = self.wanted.get_mut().keys().copied().collect();
        if !before.is_subset(&self.put_off) {
            self.settled += 1;
        }
    }

    /// How many calls of [`JitNames::refresh_wanted`] made (or gave up) a read that had been
    /// put off: a sample waiting for one ([`JitNames::put_off`]) need not be looked at again
    /// until this changes.
    pub fn settled(&self) -> u64 {
        self.settled
    }

    /// [`JitNames::refresh_wanted`], then read what every perf map read before gained (the
    /// housekeeping tick), or, at the `end` of the session, what every process has. `now_ns`:
    /// the kernel time, when a process found gone without its exit notice ended.
    pub fn refresh(&mut self, end: bool, now_ns: u64) {
        if end {
            self.budget.ending(END_READS);
        }
        self.refresh_wanted();
        // Processes found gone (their exit not heard of): ended first, so that their last
        // read knows when (a map written after that is another process's).
        let gone: Vec<(u32, u32)> = self
            .processes
            .iter()
            .filter(|(_, p)| !p.exited)
            .filter(|(_, p)| {
                p.view
                    .as_ref()
                    .is_some_and(|v| process::start_time(p.pid) != Some(v.start_time))
            })
            .map(|(&id, p)| (p.pid, id))
            .collect();
        for (pid, id) in gone {
            if self.current.get_mut().get(&pid) == Some(&id) {
                self.gone(pid, now_ns);
            } else if let Some(process) = self.processes.get_mut(&id) {
                process.view = None;
            }
        }
        for process in self.processes.values_mut() {
            // A process that has exited gets a last read (a map written at exit is read
            // then), after which its root is let go (its names are kept).
            if end || process.exited || process.file.is_some() {
                process.refresh(process.exited || end, &mut self.budget);
            }
            if process.exited {
                process.view = None;
            }
        }
    }

    /// The perf map of the process `pid` that ran at kernel time `time_ns` is `text` (for
    /// tests of what uses the names).
    #[cfg(test)]
    pub(crate) fn set_map(&mut self, pid: u32, time_ns: u64, text: &[u8]) {
        let mut map = PerfMap::default();
        map.add_text(text);
        let id = self.incarnation(pid, time_ns);
        let mut process = ProcessMaps::new(pid, id, None);
        process.map = map;
        self.processes.insert(id, process);
    }

    /// Process `pid` writes its perf map under `root` (for tests of what uses the names read):
    /// its incarnation.
    #[cfg(test)]
    pub(crate) fn read_under(&mut self, pid: u32, root: &std::path::Path) -> u32 {
        let id = self.next_id();
        self.current.get_mut().insert(pid, id);
        self.processes
            .insert(id, ProcessMaps::new(pid, id, Some(process::own_view(root, pid))));
        id
    }

    /// Incarnation `process`'s map as if last read at `at` (for tests of the rate limits).
    #[cfg(test)]
    pub(crate) fn set_read_at(&mut self, process: u32, at: std::time::Instant) {
        if let Some(maps) = self.processes.get_mut(&process) {
            maps.read_at = Some(at);
        }
    }

    /// The perf map name of `addr` in incarnation `process` (from [`JitNames::want`]).
    pub fn name(&self, process: u32, addr: u64) -> Option<&str> {
        self.processes.get(&process)?.map.name(addr)
    }

    /// The lengths of its collections, named (see `trace::sizes`).
    pub fn sizes(&self, add: &mut dyn FnMut(&'static str, usize)) {
        add("jit.wanted", self.wanted.borrow().len());
        add("jit.current", self.current.borrow().len());
        add("jit.ended_pids", self.ended.borrow().len());
        add("jit.ended", self.ended.borrow().values().map(Vec::len).sum());
        add("jit.unseen_exits", self.unseen_exits.len());
        add("jit.processes", self.processes.len());
    }

    /// The figures for the summary.
    pub fn stats(&self) -> JitStats {
        let mut stats = JitStats {
            processes: self.processes.len() as u64,
            budget: self.budget.stats.clone(),
            ..JitStats::default()
        };
        for process in self.processes.values() {
            stats.perf_maps += u64::from(process.file.is_some());
            stats.entries += process.map.len() as u64;
            stats.malformed_lines += process.map.malformed;
            stats.over_limit += process.map.over_limit;
            for refusal in &process.refused {
                *stats.refused_by_reason.entry(refusal.name()).or_default() += 1;
            }
        }
        stats
    }
}

#[cfg(test)]
mod tests;
