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

use std::{
    cell::RefCell,
    collections::{BTreeMap, BTreeSet, HashMap},
    fs::File,
    io::Read as _,
    os::unix::fs::{MetadataExt as _, OpenOptionsExt as _},
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use serde::Serialize;

use super::{Catalog, Object, TableStore, memory_file};
use crate::{
    jit::{dump::JitDump, process::Refusal},
    procmaps::Mapping,
};

/// The most bytes of JIT images kept in a session (each is held for symbolization until the
/// end: a process rewriting its jitdump must not make the tracer keep images without end).
const MAX_IMAGE_BYTES: u64 = 512 << 20;

/// How often a process's mappings (and jitdump) are read again for code of a known region its
/// image does not hold, at most.
const REREAD: Duration = Duration::from_millis(500);

/// The code each jitdump image holds, and the processes whose samples found code it does not.
#[derive(Debug, Default)]
pub(super) struct DumpCode {
    /// Per object: the ranges of its mapping (offsets from its start) the image has code for.
    covered: HashMap<usize, Vec<(u64, u64)>>,
    wanted: RefCell<BTreeSet<u32>>,
    reread_at: HashMap<u32, Instant>,
    /// Per process: the mapping of its jitdump and how many bytes of it were read (read again
    /// only when it grew: code without a record, a runtime's stubs, asks for nothing).
    dumps: HashMap<u32, (u64, u64, u64)>,
}

/// The object name (and pprof or OTLP mapping) of JIT code described by a jitdump.
pub const JITDUMP_OBJECT: &str = "[jitdump]";

/// What the summary says about jitdumps.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DumpStats {
    /// jitdumps read (each time a process's mappings were loaded), and refused by reason.
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
    /// The jitdump `pid` maps, read, if it maps one (the first).
    pub(super) fn jit_dump(&mut self, pid: u32, mappings: &[Mapping]) -> Option<JitDump> {
        let m = mappings.iter().find(|m| is_jitdump(&m.path))?;
        let bytes = match read_dump(pid, m) {
            Ok(bytes) => bytes,
            Err(refusal) => {
                *self.jit_dumps.refused_by_reason.entry(refusal.name()).or_default() += 1;
                return None;
            }
        };
        self.jit_dumps.read += 1;
        self.dump_code.dumps.insert(pid, (m.start, m.end, bytes.len() as u64));
        match crate::jit::dump::parse(&bytes) {
            Ok(dump) => {
                self.jit_dumps.malformed_records += dump.malformed;
                Some(dump)
            }
            Err(_) => {
                self.jit_dumps.malformed_records += 1;
                None
            }
        }
    }

    /// The object of the JIT code `dump` describes in the anonymous mapping `m`, and its bias
    /// (the mapping's start), if it describes any there.
    pub(super) fn jit_code(&mut self, m: &Mapping, dump: &JitDump) -> Option<(usize, u64)> {
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
        let file = Arc::new(memory_file("jitdump", &image).ok()?);
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
    /// not hold: each at most every [`REREAD`], and only when its jitdump grew since it was
    /// read (and was not cut at the size limit).
    pub fn take_dump_rereads(&mut self) -> Vec<u32> {
        let wanted = std::mem::take(self.dump_code.wanted.get_mut());
        let code = &self.dump_code;
        let due: Vec<u32> = wanted
            .into_iter()
            .filter(|pid| code.reread_at.get(pid).is_none_or(|at| at.elapsed() >= REREAD))
            .filter(|&pid| {
                code.dumps.get(&pid).is_some_and(|&(start, end, read)| {
                    read < crate::jit::process::MAX_FILE
                        && std::fs::metadata(format!("/proc/{pid}/map_files/{start:x}-{end:x}"))
                            .is_ok_and(|m| m.len() > read)
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

/// The jitdump mapped by `m` in process `pid`: the very file mapped, if trusted (module docs).
fn read_dump(pid: u32, m: &Mapping) -> Result<Vec<u8>, Refusal> {
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
    let file: File = crate::objfile::reopen_checked(&handle, &meta).map_err(|_| Refusal::Unreadable)?;
    let mut bytes = Vec::new();
    file.take(crate::jit::process::MAX_FILE)
        .read_to_end(&mut bytes)
        .map_err(|_| Refusal::Unreadable)?;
    Ok(bytes)
}
