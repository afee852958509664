//! Jitdumps as read so far: when a process maps a `jit-*.dump` file (runtimes map it
//! executable so that profilers find it, as perf does), the file is read (through
//! `/proc/PID/map_files`, the very file mapped; only a regular file of the process's user or
//! root, at most [`super::process::MAX_FILE`]) each time the process's mappings are loaded.
//! The catalog turns the code it describes into objects of their own (`registry::jitcode`);
//! this module keeps the records, which code each image covers, and which processes are to
//! be read again: a sample in a known region at code its image does not hold asks for that
//! ([`JitDumps::note_frame`], at most every [`REREAD`] per process), and so does a sample in
//! executable memory no image covers yet ([`JitDumps::note_unknown_code`]: the dump may have
//! been read before the runtime wrote its records).
//!
//! A jitdump grows while its runtime runs, and may be made to grow by a hostile process as
//! fast as it likes: it is read incrementally ([`DumpFile`]: the records already taken are
//! kept, with the offset of the last complete one, and only what was appended after it is
//! read; a file replaced, another device or inode, or shorter than that offset is read again
//! from its start), each read within the time the JIT-name budget grants the process
//! ([`super::budget`]: cut short, it goes on at the next), and its records and the images
//! built from them within the process's share of that budget's memory.

use std::{
    cell::RefCell,
    collections::{BTreeMap, BTreeSet, HashMap},
    fs::File,
    os::unix::fs::{MetadataExt as _, OpenOptionsExt as _},
    path::Path,
    time::{Duration, Instant},
};

use serde::Serialize;

use super::{
    budget::{JitBudget, Part},
    dump::JitDump,
    process::Refusal,
};
use crate::procmaps::Mapping;

/// The most bytes of JIT images kept in a session (each is held for symbolization until the
/// end: a process rewriting its jitdump must not make the tracer keep images without end).
pub const MAX_IMAGE_BYTES: u64 = 512 << 20;

/// How often a process's mappings (and jitdump) are read again for code of a known region its
/// image does not hold, at most.
const REREAD: Duration = Duration::from_millis(500);
/// Bytes read (and parsed) from a jitdump at a time (the time granted is checked between
/// them).
const CHUNK: usize = 256 << 10;
/// The longest record taken (a function's code, name and unwind information): a longer one
/// ends the reading of its dump (counted as malformed).
const MAX_RECORD: usize = 16 << 20;

/// The jitdumps of the processes, the code each image built from them holds, and the
/// processes whose samples found code it does not.
#[derive(Debug, Default)]
pub struct JitDumps {
    /// Per object: the ranges of its mapping (offsets from its start) the image has code for.
    covered: HashMap<usize, Vec<(u64, u64)>>,
    wanted: RefCell<BTreeSet<u32>>,
    reread_at: HashMap<u32, Instant>,
    /// Per process: its jitdump as read so far (read again only when it grew: code without a
    /// record, a runtime's stubs, asks for nothing).
    dumps: HashMap<u32, DumpFile>,
    /// Processes whose code is read from their memory instead of a jitdump (`super::hotspot`):
    /// read again whenever asked, at most every [`REREAD`].
    from_memory: BTreeSet<u32>,
    /// Per process: the bytes of the images built from its jitdump (held to the end).
    image_bytes: HashMap<u32, u64>,
    /// What the summary says.
    pub stats: DumpStats,
}

/// One process's jitdump as read so far.
#[derive(Debug)]
pub struct DumpFile {
    /// The mapping of the file (start, end), and the file (device, inode).
    mapping: (u64, u64),
    identity: (u64, u64),
    /// The offset after the last complete record taken (0: not even the header yet).
    read: u64,
    /// A record longer than [`MAX_RECORD`] was met: nothing more is read.
    stuck: bool,
    pub dump: JitDump,
}

/// The object name (and pprof or OTLP mapping) of JIT code described by a jitdump.
pub const JITDUMP_OBJECT: &str = "[jitdump]";

/// What the summary says about jitdumps.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DumpStats {
    /// Reads of jitdumps (when a process's mappings were loaded and its dump had grown: each
    /// takes what was appended), and jitdumps refused by reason.
    pub read: u64,
    pub refused_by_reason: BTreeMap<&'static str, u64>,
    /// Records that made no sense or cut the reading short; unwind information that could
    /// not be used (an encoding not supported).
    pub malformed_records: u64,
    pub unusable_unwind: u64,
    /// Regions of JIT code given an object (a table and names), the bytes of their images,
    /// and regions left without one because the images reached [`MAX_IMAGE_BYTES`].
    pub regions: u64,
    pub image_bytes: u64,
    pub over_limit: u64,
    /// Times a process's mappings and jitdump were read again because a sample landed in a
    /// known region at code its image did not hold (compiled after the dump was read).
    pub rereads: u64,
}

/// Whether `path` names a jitdump: `jit-PID.dump`.
fn is_jitdump(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("jit-"))
        .and_then(|n| n.strip_suffix(".dump"))
        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

impl JitDumps {
    /// The jitdump `pid` maps, if it maps one (the first), with what was appended to it since
    /// it was last read (module docs), within what `budget` grants; to be given back with
    /// [`JitDumps::keep`].
    pub fn read(&mut self, pid: u32, mappings: &[Mapping], budget: &mut JitBudget) -> Option<DumpFile> {
        let old = self.dumps.remove(&pid);
        let Some(m) = mappings.iter().find(|m| is_jitdump(&m.path)) else {
            budget.set(pid, Part::Dump, 0);
            return None;
        };
        let (file, identity, size) = match open_dump(pid, m) {
            Ok(opened) => opened,
            Err(refusal) => {
                *self.stats.refused_by_reason.entry(refusal.name()).or_default() += 1;
                budget.set(pid, Part::Dump, 0);
                return None;
            }
        };
        let (mut state, again) = DumpFile::continued(old, (m.start, m.end), identity, size);
        if again {
            budget.set(pid, Part::Dump, 0);
        }
        let size = size.min(super::process::MAX_FILE);
        if state.read >= size || state.stuck {
            return Some(state);
        }
        // Within the time the budget grants; else the names of what was appended come later.
        let Some(until) = budget.grant(pid, false) else {
            return Some(state);
        };
        let since = Instant::now();
        self.stats.read += 1;
        state.dump.set_room(budget.room(pid, Part::Dump));
        let (malformed, over_budget) = (state.dump.malformed, state.dump.over_budget);
        let result = state.read_more(&file, size, until);
        self.stats.malformed_records += state.dump.malformed - malformed;
        budget.stats.jitdump_records_over_budget += state.dump.over_budget - over_budget;
        budget.set(pid, Part::Dump, state.dump.bytes());
        budget.spend(pid, since);
        match result {
            Ok(true) => {}
            Ok(false) => budget.stats.reads_behind += 1,
            Err(()) => {
                self.stats.malformed_records += 1;
                return None;
            }
        }
        Some(state)
    }

    /// `pid`'s code was read from its memory (`super::hotspot`): a sample in code of it not
    /// covered asks for another read.
    pub fn read_from_memory(&mut self, pid: u32) {
        self.from_memory.insert(pid);
    }

    /// `pid`'s jitdump, as [`JitDumps::read`] read it, is kept for the next read.
    pub fn keep(&mut self, pid: u32, dump: DumpFile) {
        self.dumps.insert(pid, dump);
    }

    /// Process `pid` is forgotten: its jitdump's records are let go (the images built from
    /// them stay, for its samples).
    pub fn forget_process(&mut self, pid: u32, budget: &mut JitBudget) {
        if self.dumps.remove(&pid).is_some() {
            budget.set(pid, Part::Dump, 0);
        }
        self.from_memory.remove(&pid);
    }

    /// Object `index` was forgotten (its slot goes to another object).
    pub fn forget_object(&mut self, index: usize) {
        self.covered.remove(&index);
    }

    /// Object `index` is an image of code at `ranges` of its mapping (offsets from its start);
    /// unless `replace`, ranges it is known to cover already are kept.
    pub fn cover(&mut self, index: usize, ranges: impl FnOnce() -> Vec<(u64, u64)>, replace: bool) {
        if replace {
            self.covered.insert(index, ranges());
        } else {
            self.covered.entry(index).or_insert_with(ranges);
        }
    }

    /// The bytes of the images built from `pid`'s jitdump.
    pub fn image_bytes(&self, pid: u32) -> u64 {
        self.image_bytes.get(&pid).copied().unwrap_or(0)
    }

    /// `pid`'s images hold `bytes` now.
    pub fn set_image_bytes(&mut self, pid: u32, bytes: u64) {
        self.image_bytes.insert(pid, bytes);
    }

    /// Whether the image `object` holds code at `offset` of its mapping (`None`: no image).
    pub fn covers(&self, object: usize, offset: u64) -> Option<bool> {
        let ranges = self.covered.get(&object)?;
        Some(ranges.iter().any(|&(start, end)| start <= offset && offset < end))
    }

    /// A sample of `pid` has a frame at `offset` in the mapping of `object`: if that is a
    /// jitdump's region and its image holds no code there, the process's mappings (and
    /// jitdump) are to be read again ([`JitDumps::take_rereads`]).
    pub fn note_frame(&self, pid: u32, object: usize, offset: u64) {
        if self.covers(object, offset) == Some(false) {
            self.wanted.borrow_mut().insert(pid);
        }
    }

    /// A sample of `pid` has a frame in executable memory without an object: if the process
    /// maps a jitdump, its records may have been written after it was read (the first read
    /// can come before the runtime wrote any), so it is to be read again too.
    pub fn note_unknown_code(&self, pid: u32) {
        if self.dumps.contains_key(&pid) || self.from_memory.contains(&pid) {
            self.wanted.borrow_mut().insert(pid);
        }
    }

    /// The processes whose mappings are to be read again for code their jitdump images do
    /// not hold: each at most every [`REREAD`], only when its jitdump grew since it was
    /// read (and was not cut at the size limit), and only while the process has time left
    /// in the JIT-name `budget`.
    pub fn take_rereads(&mut self, budget: &JitBudget, from_memory: impl Fn(u32) -> bool) -> Vec<u32> {
        self.from_memory.retain(|&pid| from_memory(pid));
        let wanted = std::mem::take(self.wanted.get_mut());
        let due: Vec<u32> = wanted
            .into_iter()
            .filter(|pid| self.reread_at.get(pid).is_none_or(|at| at.elapsed() >= REREAD))
            .filter(|&pid| budget.has_time(pid))
            .filter(|&pid| {
                self.from_memory.contains(&pid)
                    || self.dumps.get(&pid).is_some_and(|d| {
                        let (start, end) = d.mapping;
                        !d.stuck
                            && d.read < super::process::MAX_FILE
                            && std::fs::metadata(format!("/proc/{pid}/map_files/{start:x}-{end:x}"))
                                .is_ok_and(|m| m.len() > d.read)
                    })
            })
            .collect();
        for &pid in &due {
            self.reread_at.insert(pid, Instant::now());
        }
        self.stats.rereads += due.len() as u64;
        due
    }

    /// The lengths of its collections, named (see `trace::sizes`).
    pub fn sizes(&self, add: &mut dyn FnMut(&'static str, usize)) {
        add("jitdump.covered", self.covered.len());
        add("jitdump.reread_at", self.reread_at.len());
        add("jitdump.dumps", self.dumps.len());
        add("jitdump.from_memory", self.from_memory.len());
    }
}

impl DumpFile {
    /// The jitdump read so far (`old`) if `identity` (of size `size`, mapped at `mapping`) is
    /// still its file, else a new one to read from its start: a file replaced (another device
    /// or inode) or cut shorter than what was read. Whether it is new.
    fn continued(old: Option<DumpFile>, mapping: (u64, u64), identity: (u64, u64), size: u64) -> (DumpFile, bool) {
        match old {
            Some(mut old) if old.identity == identity && old.read <= size => {
                old.mapping = mapping;
                (old, false)
            }
            _ => (
                DumpFile {
                    mapping,
                    identity,
                    read: 0,
                    stuck: false,
                    dump: JitDump::default(),
                },
                true,
            ),
        }
    }

    /// Take the records appended to `file` from [`DumpFile::read`] up to `size`, or until
    /// `until`: whether it got to `size` (`Err` for a file that is no jitdump).
    fn read_more(&mut self, file: &File, size: u64, until: Instant) -> Result<bool, ()> {
        let (dump, stuck) = (&mut self.dump, &mut self.stuck);
        let mut header_read = self.read != 0;
        super::appended::read_appended(file, &mut self.read, size, until, CHUNK, (), |pending, at_end| {
            let mut header = 0;
            if !header_read {
                match super::dump::header(pending) {
                    Ok((machine, len)) => {
                        dump.machine = machine;
                        header = len;
                        header_read = true;
                    }
                    // Not all written yet (read again when it grew).
                    Err(_) if at_end => return Ok((0, true)),
                    Err(_) => return Err(()),
                }
            }
            let used = header + dump.add_records(&pending[header..]);
            if pending.len() - used > MAX_RECORD {
                dump.malformed += 1;
                *stuck = true;
                return Ok((used, true));
            }
            Ok((used, false))
        })
    }
}

/// The jitdump mapped by `m` in process `pid`: the very file mapped, if trusted (module docs),
/// open, with its device and inode and its size.
fn open_dump(pid: u32, m: &Mapping) -> Result<(File, (u64, u64), u64), Refusal> {
    let (_, uid) = std::fs::read(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| super::process::status_ids(&status, pid))
        .ok_or(Refusal::Unreadable)?;
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end))
        .map_err(|_| Refusal::Unreadable)?;
    let meta = handle.metadata().map_err(|_| Refusal::Unreadable)?;
    super::process::check(&meta, uid)?;
    if meta.ino() != m.inode {
        return Err(Refusal::Unreadable);
    }
    let file: File = crate::sys::objfile::reopen_checked(&handle, &meta).map_err(|_| Refusal::Unreadable)?;
    Ok((file, (meta.dev(), meta.ino()), meta.size()))
}

#[cfg(test)]
mod tests;
