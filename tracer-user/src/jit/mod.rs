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
//! Processes are known by pid for the whole session: the root and user of a process are
//! taken when it is first wanted, and the file is read through that root even after the
//! process has exited (runtimes that write their map at exit, such as Java's
//! `-XX:+DumpPerfMapAtExit`, are named too).

pub mod dump;
pub mod elf;
pub mod perfmap;
pub mod process;

use std::{
    cell::RefCell,
    collections::{BTreeMap, BTreeSet, HashMap},
    fs::File,
    os::unix::fs::{FileExt as _, MetadataExt as _},
    path::PathBuf,
    time::{Duration, Instant},
};

use perfmap::PerfMap;
use process::{ProcessView, Refusal};
use serde::Serialize;

/// Bytes read from a perf map at a time.
const CHUNK: usize = 1 << 20;
/// How often a frame without a name makes its process's perf map be read again, at most.
const REREAD: Duration = Duration::from_millis(100);
/// How often a process without a perf map is looked at again, at most.
const RELOOK: Duration = Duration::from_secs(2);
/// How often a map that was replaced or shrank is read again from its start, at most (a
/// process rewriting its map must not make the tracer parse it over and over).
const RESTART: Duration = Duration::from_secs(5);

/// The perf maps of the traced processes that run JIT code.
#[derive(Debug, Default)]
pub struct JitNames {
    /// Processes whose samples landed in code without an object, not yet looked at.
    wanted: RefCell<BTreeSet<u32>>,
    processes: HashMap<u32, ProcessMaps>,
}

/// One process's perf map as read so far.
#[derive(Debug)]
struct ProcessMaps {
    /// `None` when the process was gone before it could be looked at.
    view: Option<ProcessView>,
    map: PerfMap,
    /// The file read (device, inode) and how far.
    file: Option<(u64, u64)>,
    read: u64,
    skipping: bool,
    /// Why the file was last refused (each refusal is counted once per process and reason).
    refused: BTreeSet<Refusal>,
    /// When the map was last looked at, and last read from its start.
    read_at: Option<Instant>,
    restarted_at: Option<Instant>,
}

/// What the summary says about perf maps.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JitStats {
    /// Processes sampled in executable memory without an object, and those whose perf map was
    /// read.
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
    /// A sample of `pid` has a frame at `addr`, in code outside any object: unless its perf
    /// map names it already, look (again) at the map at the next [`JitNames::refresh_wanted`].
    pub fn want(&self, pid: u32, addr: u64) {
        if self.name(pid, addr).is_none() {
            self.wanted.borrow_mut().insert(pid);
        }
    }

    /// Whether [`JitNames::want`] was told of a frame without a name since the last refresh.
    pub fn is_wanted(&self) -> bool {
        !self.wanted.borrow().is_empty()
    }

    /// Read what the perf maps of the processes wanted since the last call gained (each at
    /// most every [`REREAD`]: code without a name in its map, such as a runtime's stubs,
    /// does not make it read again and again); a process wanted for the first time is looked
    /// at now (its root, pid and user).
    pub fn refresh_wanted(&mut self) {
        let wanted = std::mem::take(&mut *self.wanted.borrow_mut());
        for pid in wanted {
            // A process that ended (its view closed) and a new one with its pid: the new one's
            // map from now on.
            if self
                .processes
                .get(&pid)
                .is_some_and(|p| p.view.is_none() && p.read_at.is_some())
                && let Some(view) = process::view(pid)
            {
                self.processes.insert(pid, ProcessMaps::new(Some(view)));
            }
            let process = self
                .processes
                .entry(pid)
                .or_insert_with(|| ProcessMaps::new(process::view(pid)));
            let again = if process.file.is_some() { REREAD } else { RELOOK };
            if process.read_at.is_none_or(|at| at.elapsed() >= again) {
                process.refresh();
            }
        }
    }

    /// [`JitNames::refresh_wanted`], then read what every perf map read before gained (the
    /// housekeeping tick), or, at the `end` of the session, what every process has.
    pub fn refresh(&mut self, end: bool) {
        self.refresh_wanted();
        for (&pid, process) in &mut self.processes {
            let gone = process
                .view
                .as_ref()
                .is_some_and(|v| process::start_time(pid) != Some(v.start_time));
            // A process that has exited gets a last read (a map written at exit is read
            // then), after which its root is let go (its names are kept).
            if end || gone || process.file.is_some() {
                process.refresh();
            }
            if gone {
                process.view = None;
            }
        }
    }

    /// Process `pid`'s perf map is `text` (for tests of what uses the names).
    #[cfg(all(test, feature = "ebpf"))]
    pub(crate) fn set_map(&mut self, pid: u32, text: &[u8]) {
        let mut map = PerfMap::default();
        map.add_text(text);
        let mut process = ProcessMaps::new(None);
        process.map = map;
        self.processes.insert(pid, process);
    }

    /// The perf map name of `addr` in process `pid`.
    pub fn name(&self, pid: u32, addr: u64) -> Option<&str> {
        self.processes.get(&pid)?.map.name(addr)
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
    fn new(view: Option<ProcessView>) -> ProcessMaps {
        ProcessMaps {
            view,
            map: PerfMap::default(),
            file: None,
            read: 0,
            skipping: false,
            refused: BTreeSet::new(),
            read_at: None,
            restarted_at: None,
        }
    }

    /// Read what the perf map gained since the last time (all of it if it is another file,
    /// or shorter than what was read).
    fn refresh(&mut self) {
        self.read_at = Some(Instant::now());
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
            if self.file.is_some() && self.restarted_at.is_some_and(|at| at.elapsed() < RESTART) {
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
