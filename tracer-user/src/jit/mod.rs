//! Names for JIT-compiled code: the perf map files JIT runtimes write
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

pub mod dump;
pub mod elf;
pub mod perfmap;
pub mod process;

use std::{
    cell::{Cell, RefCell},
    collections::{BTreeMap, BTreeSet, HashMap, VecDeque},
    fs::File,
    os::unix::fs::{FileExt as _, MetadataExt as _},
    path::PathBuf,
    time::{Duration, Instant},
};

use perfmap::PerfMap;
use process::{ProcessView, Refusal};
use serde::Serialize;

/// The debug log that tells each process looked at while it runs (its root and user taken,
/// see [`JitNames::watch`]): `pid N looked at`. Tests wait on it before they let a process end.
pub const WATCH_LOG: &str = "sframe_trace::jit_watch";

/// Bytes read from a perf map at a time.
const CHUNK: usize = 1 << 20;
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
/// How often a map that was replaced or shrank is read again from its start, at most (a
/// process rewriting its map must not make the tracer parse it over and over).
const RESTART: Duration = Duration::from_secs(5);

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
    /// Perf maps by incarnation.
    processes: HashMap<u32, ProcessMaps>,
}

/// One process's perf map as read so far.
#[derive(Debug)]
struct ProcessMaps {
    pid: u32,
    /// `None` when the process was gone before it could be looked at, or after its last read.
    view: Option<ProcessView>,
    /// It exited: the map is read once more, then its root let go.
    exited: bool,
    map: PerfMap,
    /// The file read (device, inode) and how far.
    file: Option<(u64, u64)>,
    read: u64,
    skipping: bool,
    /// Why the file was last refused (each refusal is counted once per process and reason).
    refused: BTreeSet<Refusal>,
    /// When the map was last looked at (also on the kernel's clock), and last read from its
    /// start.
    read_at: Option<Instant>,
    read_mono_ns: u64,
    restarted_at: Option<Instant>,
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
        if self.current.get_mut().contains_key(&pid) {
            return;
        }
        let id = self.next_id();
        self.current.get_mut().insert(pid, id);
        self.processes.insert(id, ProcessMaps::new(pid, process::view(pid)));
    }

    /// Process `pid` exited (or was found gone) at kernel time `at_ns`: its map is read once
    /// more, now, and samples taken later belong to another process.
    pub fn exited(&mut self, pid: u32, at_ns: u64) {
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
                    maps.refresh(true);
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

    /// Whether [`JitNames::want`] was told of a frame without a name since the last refresh.
    pub fn is_wanted(&self) -> bool {
        !self.wanted.borrow().is_empty()
    }

    /// Read what the perf maps of the processes wanted since the last call gained. A map is
    /// read again at most every [`REREAD`] for samples taken before its last read (code without
    /// a name in its map, such as a runtime's stubs, does not make it read again and again),
    /// and at most every [`NEWER`] for samples taken after it (their code may have been
    /// compiled since: a sample is named once, when it is taken in, so the map must be read
    /// before). A process wanted for the first time is looked at now (its root, pid and user),
    /// unless it has ended already (its pid may be another's now).
    pub fn refresh_wanted(&mut self) {
        let wanted = std::mem::take(self.wanted.get_mut());
        for ((pid, id), newest) in wanted {
            let current = self.current.get_mut().get(&pid) == Some(&id);
            let process = self
                .processes
                .entry(id)
                .or_insert_with(|| ProcessMaps::new(pid, current.then(|| process::view(pid)).flatten()));
            let newer = process.file.is_some() && newest > process.read_mono_ns;
            let again = match process.file {
                Some(_) if newer => NEWER,
                Some(_) => REREAD,
                None => RELOOK,
            };
            if process.read_at.is_none_or(|at| at.elapsed() >= again) {
                process.refresh(false);
            } else if newer {
                // Read at the next call, for the samples taken in after this one.
                self.wanted.get_mut().insert((pid, id), newest);
            }
        }
    }

    /// [`JitNames::refresh_wanted`], then read what every perf map read before gained (the
    /// housekeeping tick), or, at the `end` of the session, what every process has. `now_ns`:
    /// the kernel time, when a process found gone without its exit notice ended.
    pub fn refresh(&mut self, end: bool, now_ns: u64) {
        self.refresh_wanted();
        let mut gone = Vec::new();
        for process in self.processes.values_mut() {
            let found_gone = process
                .view
                .as_ref()
                .is_some_and(|v| process::start_time(process.pid) != Some(v.start_time));
            let last = process.exited || found_gone;
            // A process that has exited gets a last read (a map written at exit is read
            // then), after which its root is let go (its names are kept).
            if end || last || process.file.is_some() {
                process.refresh(last || end);
            }
            if last {
                process.view = None;
            }
            if found_gone && !process.exited {
                gone.push(process.pid);
            }
        }
        for pid in gone {
            self.exited(pid, now_ns);
        }
    }

    /// The perf map of the process `pid` that ran at kernel time `time_ns` is `text` (for
    /// tests of what uses the names).
    #[cfg(test)]
    pub(crate) fn set_map(&mut self, pid: u32, time_ns: u64, text: &[u8]) {
        let mut map = PerfMap::default();
        map.add_text(text);
        let mut process = ProcessMaps::new(pid, None);
        process.map = map;
        let id = self.incarnation(pid, time_ns);
        self.processes.insert(id, process);
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

impl ProcessMaps {
    fn new(pid: u32, view: Option<ProcessView>) -> ProcessMaps {
        if view.is_some() {
            log::debug!(target: WATCH_LOG, "pid {pid} looked at");
        }
        ProcessMaps {
            pid,
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

    /// Read what the perf map gained since the last time (all of it if it is another file,
    /// or shorter than what was read; at most every [`RESTART`] unless it is the `last` read).
    fn refresh(&mut self, last: bool) {
        self.read_at = Some(Instant::now());
        self.read_mono_ns = crate::registry::monotonic_ns();
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
            self.map = PerfMap::default();
            self.file = Some(identity);
            self.read = 0;
            self.skipping = false;
        }
        if let Err(refusal) = self.read_from(&file, size) {
            self.refused.insert(refusal);
        }
    }

    /// Parse `file` from where the last read stopped up to `size` (its size when checked).
    fn read_from(&mut self, file: &File, size: u64) -> Result<(), Refusal> {
        let mut pending: Vec<u8> = Vec::new();
        let mut at = self.read;
        let mut buf = vec![0; CHUNK];
        while at < size {
            let want = usize::try_from(size - at).unwrap_or(CHUNK).min(CHUNK);
            let got = file.read_at(&mut buf[..want], at).map_err(|_| Refusal::Unreadable)?;
            if got == 0 {
                break;
            }
            at += got as u64;
            pending.extend_from_slice(&buf[..got]);
            let used = self.map.add_text_from(&pending, &mut self.skipping);
            self.read += used as u64;
            pending.drain(..used);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
