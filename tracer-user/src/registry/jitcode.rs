//! JIT code described by a jitdump: when a process maps a `jit-*.dump` file (runtimes map it
//! executable so that profilers find it, as perf does), the file is read (through
//! `/proc/PID/map_files`, the very file mapped; only a regular file of the process's user or
//! root, at most [`crate::jit::process::MAX_FILE`]) each time the process's mappings are
//! loaded, and each anonymous executable mapping holding code it describes becomes an object
//! of its own: an ELF image of that code ([`crate::jit::elf`]) kept in an anonymous memory
//! file, its table built from the runtime's `.eh_frame` and its symbols from the code-load
//! records. The kernel then unwinds that code exactly, frame pointers or not. Code the
//! runtime compiles later is covered the next time the mappings are read: new code mapped
//! outside the known mappings makes the kernel ask for that, and a sample in a known region at
//! code its image does not hold asks for it here ([`Catalog::note_dump_frame`], at most every
//! [`REREAD`] per process), so that code compiled into a region already known gets its names
//! and rows from the dump without waiting for anything else to reload the mappings; so does a
//! sample in executable memory no image covers yet ([`Catalog::note_unknown_code`]: the dump
//! may have been read before the runtime wrote its records).
//!
//! A jitdump grows while its runtime runs, and may be made to grow by a hostile process as
//! fast as it likes: it is read incrementally ([`DumpFile`]: the records already taken are
//! kept, with the offset of the last complete one, and only what was appended after it is
//! read; a file replaced, another device or inode, or shorter than that offset is read again
//! from its start), each read within the time the JIT-name budget grants the process
//! ([`crate::jit::budget`]: cut short, it goes on at the next), and its records and the images
//! built from them within the process's share of that budget's memory.

use std::{
    cell::RefCell,
    collections::{BTreeMap, BTreeSet, HashMap},
    fs::File,
    os::unix::fs::{MetadataExt as _, OpenOptionsExt as _},
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use serde::Serialize;

use super::{Catalog, Object, TableStore, memory_file};
use crate::{
    jit::{budget::Part, dump::JitDump, process::Refusal},
    procmaps::Mapping,
};

/// The most bytes of JIT images kept in a session (each is held for symbolization until the
/// end: a process rewriting its jitdump must not make the tracer keep images without end).
const MAX_IMAGE_BYTES: u64 = 512 << 20;

/// How often a process's mappings (and jitdump) are read again for code of a known region its
/// image does not hold, at most.
const REREAD: Duration = Duration::from_millis(500);
/// Bytes read (and parsed) from a jitdump at a time (the time granted is checked between
/// them).
const CHUNK: usize = 256 << 10;
/// The longest record taken (a function's code, name and unwind information): a longer one
/// ends the reading of its dump (counted as malformed).
const MAX_RECORD: usize = 16 << 20;

/// The code each jitdump image holds, and the processes whose samples found code it does not.
#[derive(Debug, Default)]
pub(super) struct DumpCode {
    /// Per object: the ranges of its mapping (offsets from its start) the image has code for.
    covered: HashMap<usize, Vec<(u64, u64)>>,
    wanted: RefCell<BTreeSet<u32>>,
    reread_at: HashMap<u32, Instant>,
    /// Per process: its jitdump as read so far (read again only when it grew: code without a
    /// record, a runtime's stubs, asks for nothing).
    dumps: HashMap<u32, DumpFile>,
    /// Per process: the bytes of the images built from its jitdump (held to the end).
    image_bytes: HashMap<u32, u64>,
}

/// One process's jitdump as read so far.
#[derive(Debug)]
pub(super) struct DumpFile {
    /// The mapping of the file (start, end), and the file (device, inode).
    mapping: (u64, u64),
    identity: (u64, u64),
    /// The offset after the last complete record taken (0: not even the header yet).
    read: u64,
    /// A record longer than [`MAX_RECORD`] was met: nothing more is read.
    stuck: bool,
    pub(super) dump: JitDump,
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

impl<T: TableStore> Catalog<T> {
    /// The jitdump `pid` maps, if it maps one (the first), with what was appended to it since
    /// it was last read (module docs); to be given back with [`Catalog::keep_dump`].
    pub(super) fn jit_dump(&mut self, pid: u32, mappings: &[Mapping]) -> Option<DumpFile> {
        let old = self.dump_code.dumps.remove(&pid);
        let Some(m) = mappings.iter().find(|m| is_jitdump(&m.path)) else {
            self.jit.budget.set(pid, Part::Dump, 0);
            return None;
        };
        let (file, identity, size) = match open_dump(pid, m) {
            Ok(opened) => opened,
            Err(refusal) => {
                *self.jit_dumps.refused_by_reason.entry(refusal.name()).or_default() += 1;
                self.jit.budget.set(pid, Part::Dump, 0);
                return None;
            }
        };
        let (mut state, again) = DumpFile::continued(old, (m.start, m.end), identity, size);
        if again {
            self.jit.budget.set(pid, Part::Dump, 0);
        }
        let size = size.min(crate::jit::process::MAX_FILE);
        if state.read >= size || state.stuck {
            return Some(state);
        }
        // Within the time the budget grants; else the names of what was appended come later.
        let Some(until) = self.jit.budget.grant(pid, false) else {
            return Some(state);
        };
        let since = Instant::now();
        self.jit_dumps.read += 1;
        state.dump.set_room(self.jit.budget.room(pid, Part::Dump));
        let (malformed, over_budget) = (state.dump.malformed, state.dump.over_budget);
        let result = state.read_more(&file, size, until);
        self.jit_dumps.malformed_records += state.dump.malformed - malformed;
        self.jit.budget.stats.jitdump_records_over_budget += state.dump.over_budget - over_budget;
        self.jit.budget.set(pid, Part::Dump, state.dump.bytes());
        self.jit.budget.spend(pid, since);
        match result {
            Ok(true) => {}
            Ok(false) => self.jit.budget.stats.reads_behind += 1,
            Err(()) => {
                self.jit_dumps.malformed_records += 1;
                return None;
            }
        }
        Some(state)
    }

    /// Process `pid` is forgotten: its jitdump's records are let go (the images built from
    /// them stay, for its samples).
    pub(super) fn forget_dump(&mut self, pid: u32) {
        if self.dump_code.dumps.remove(&pid).is_some() {
            self.jit.budget.set(pid, Part::Dump, 0);
        }
    }

    /// `pid`'s jitdump, as [`Catalog::jit_dump`] read it, is kept for the next read.
    pub(super) fn keep_dump(&mut self, pid: u32, dump: DumpFile) {
        self.dump_code.dumps.insert(pid, dump);
    }

    /// The object of the JIT code `dump` describes in the anonymous mapping `m`, and its bias
    /// (the mapping's start), if it describes any there.
    pub(super) fn jit_code(&mut self, pid: u32, m: &Mapping, dump: &JitDump) -> Option<(usize, u64)> {
        let loads = dump.within(m.start, m.end);
        let (image, unusable) = crate::jit::elf::image(&loads, dump.machine, m.start)?;
        self.jit_dumps.unusable_unwind += unusable;
        let covered = || {
            loads
                .iter()
                .map(|l| (l.addr.wrapping_sub(m.start), l.end().wrapping_sub(m.start)))
                .collect()
        };
        if let Some(i) = self.objects.find_image(&image) {
            self.dump_code.covered.entry(i).or_insert_with(covered);
            return Some((i, m.start));
        }
        if self.jit_dumps.image_bytes + image.len() as u64 > MAX_IMAGE_BYTES {
            self.jit_dumps.over_limit += 1;
            return None;
        }
        let held = self.dump_code.image_bytes.get(&pid).copied().unwrap_or(0);
        let bytes = held + image.len() as u64;
        if bytes > self.jit.budget.room(pid, Part::Images) {
            self.jit.budget.stats.jitdump_images_over_budget += 1;
            return None;
        }
        let file = Arc::new(memory_file("jitdump", &image).ok()?);
        self.dump_code.image_bytes.insert(pid, bytes);
        self.jit.budget.set(pid, Part::Images, bytes);
        self.jit_dumps.image_bytes += image.len() as u64;
        let mut object = Object::new(PathBuf::from(JITDUMP_OBJECT), None, Some(file), None);
        object.table = self.loader.load_image(&image, &object.path);
        self.jit_dumps.regions += 1;
        let index = self.objects.push_image(image, object);
        self.dump_code.covered.insert(index, covered());
        Some((index, m.start))
    }

    /// A sample of `pid` has a frame at `offset` in the mapping of `object`: if that is a
    /// jitdump's region and its image holds no code there, the process's mappings (and
    /// jitdump) are to be read again ([`Catalog::take_dump_rereads`]).
    pub fn note_dump_frame(&self, pid: u32, object: usize, offset: u64) {
        if let Some(ranges) = self.dump_code.covered.get(&object)
            && !ranges.iter().any(|&(start, end)| start <= offset && offset < end)
        {
            self.dump_code.wanted.borrow_mut().insert(pid);
        }
    }

    /// A sample of `pid` has a frame in executable memory without an object: if the process
    /// maps a jitdump, its records may have been written after it was read (the first read
    /// can come before the runtime wrote any), so it is to be read again too.
    pub fn note_unknown_code(&self, pid: u32) {
        if self.dump_code.dumps.contains_key(&pid) {
            self.dump_code.wanted.borrow_mut().insert(pid);
        }
    }

    /// The processes whose mappings are to be read again for code their jitdump images do
    /// not hold: each at most every [`REREAD`], only when its jitdump grew since it was
    /// read (and was not cut at the size limit), and only while the process has time left
    /// in the JIT-name budget.
    pub fn take_dump_rereads(&mut self) -> Vec<u32> {
        let wanted = std::mem::take(self.dump_code.wanted.get_mut());
        let code = &self.dump_code;
        let budget = &self.jit.budget;
        let due: Vec<u32> = wanted
            .into_iter()
            .filter(|pid| code.reread_at.get(pid).is_none_or(|at| at.elapsed() >= REREAD))
            .filter(|&pid| budget.has_time(pid))
            .filter(|&pid| {
                code.dumps.get(&pid).is_some_and(|d| {
                    let (start, end) = d.mapping;
                    !d.stuck
                        && d.read < crate::jit::process::MAX_FILE
                        && std::fs::metadata(format!("/proc/{pid}/map_files/{start:x}-{end:x}"))
                            .is_ok_and(|m| m.len() > d.read)
                })
            })
            .collect();
        for &pid in &due {
            self.dump_code.reread_at.insert(pid, Instant::now());
        }
        self.jit_dumps.rereads += due.len() as u64;
        due
    }
}

impl DumpCode {
    /// Object `index` was forgotten (its slot goes to another object).
    pub(super) fn forget(&mut self, index: usize) {
        self.covered.remove(&index);
    }

    /// The lengths of its collections, named (see `trace::sizes`).
    pub(super) fn sizes(&self, add: &mut dyn FnMut(&'static str, usize)) {
        add("jitdump.covered", self.covered.len());
        add("jitdump.reread_at", self.reread_at.len());
        add("jitdump.dumps", self.dumps.len());
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
        crate::jit::appended::read_appended(file, &mut self.read, size, until, CHUNK, (), |pending, at_end| {
            let mut header = 0;
            if !header_read {
                match crate::jit::dump::header(pending) {
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
        .and_then(|status| crate::jit::process::status_ids(&status, pid))
        .ok_or(Refusal::Unreadable)?;
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end))
        .map_err(|_| Refusal::Unreadable)?;
    let meta = handle.metadata().map_err(|_| Refusal::Unreadable)?;
    crate::jit::process::check(&meta, uid)?;
    if meta.ino() != m.inode {
        return Err(Refusal::Unreadable);
    }
    let file: File = crate::sys::objfile::reopen_checked(&handle, &meta).map_err(|_| Refusal::Unreadable)?;
    Ok((file, (meta.dev(), meta.ino()), meta.size()))
}

#[cfg(test)]
mod tests;
