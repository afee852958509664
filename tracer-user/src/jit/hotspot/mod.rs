//! Java's compiled code, walked and named without any option given to the JVM: the HotSpot
//! JVM describes its own data structures for debuggers ([`vmstructs`]), and through that
//! description the tracer reads the code heaps of a running `java` ([`heap`]): every compiled
//! method (C1, C2) with its code, its frame size and its `Class.method` name, the interpreter
//! and the stubs. The catalog makes of each code-heap mapping an image, as it does of a
//! jitdump's code (`registry/jitcode.rs`, object `[hotspot]`), with unwind rules made from the
//! frame sizes ([`unwind`]): the kernel then walks compiled Java frames exactly, frame
//! pointers or not. The kernel knows only the parts of the code heaps that held code at the
//! read ([`pieces`]): a sample in code compiled since is shipped as a stack copy, which asks
//! for another read and is walked after it. Reads of one JVM are [`MIN_REREAD`] apart at
//! least, and paced by the JIT-name budget (`super::budget`); between them, its images stay.
//!
//! Frames of the interpreter, the call stub and native-method wrappers keep frame pointers:
//! in a JVM whose compiled code keeps none (`super::java`), a frame-pointer step from them is
//! still trusted ([`HotSpots::keeps_frame_pointer`]), except from the sampled frame itself
//! (it may be in an entry, before its frame is built). Interpreted frames are shown as
//! `Interpreter` (which method they run is not read yet).
//!
//! A JVM started with `-XX:+PreserveFramePointer` is left as it was: its stacks walk whole by
//! frame pointers, and its names come from the perf map or jitdump it was set up to write.
//!
//! A process is a JVM when it maps a `libjvm.so` that exports the tables; one whose version is
//! not known ([`vmstructs::KNOWN_MAJORS`]), or whose tables lack a field, is refused (counted
//! by reason). Reading goes through `/proc/PID/mem` on a thread of its own, waited for at
//! most [`TIMEOUT`]: a process whose memory does not answer (a page of a stalled FUSE file)
//! is not read again; after [`MAX_STUCK`] such threads left behind, no JVM is read.

pub mod heap;
pub mod interpreted;
pub mod methods;
pub mod pieces;
pub mod scopes;
pub mod unwind;
pub mod vmstructs;

use std::{
    collections::{BTreeMap, HashMap},
    fs::File,
    os::unix::fs::FileExt as _,
    sync::{Arc, mpsc},
    time::Duration,
};

use object::{Object as _, ObjectSymbol as _};
use serde::Serialize;

use super::dump::{CodeLoad, JitDump, Unwind};
use crate::procmaps::{Mapping, MappingKind};
use heap::{BlobKind, Scan};
use vmstructs::{EXPORTS, Exports, Layout, Memory};

/// The object name (and pprof or OTLP mapping) of a JVM's code read from its code heaps.
pub const HOTSPOT_OBJECT: &str = "[hotspot]";
/// The longest a read of a JVM's code heaps is waited for.
pub const TIMEOUT: Duration = Duration::from_secs(2);
/// The least time between two reads of one JVM's code heaps.
pub const MIN_REREAD: Duration = Duration::from_millis(100);
/// Reader threads left blocked at most; then no JVM is read.
pub const MAX_STUCK: usize = 4;
/// Reads of a starting JVM that may fail before it is refused.
const MAX_FAILED_READS: u32 = 20;
/// The processes remembered as read, at most.
const MAX_READ_PIDS: usize = 65_536;
/// The ELF machine of x86-64, the only one whose compiled frames are known.
const EM_X86_64: u32 = 62;

/// Why a JVM's code is not read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HotSpotError {
    #[error("the JVM's vmStructs lack {0}")]
    Missing(String),
    #[error("JVM version {0:?} is not one the walk knows")]
    Version(String),
    #[error("could not read {0}")]
    Unreadable(&'static str),
    #[error("malformed {0}")]
    Malformed(&'static str),
    #[error("its memory did not answer in time")]
    Stuck,
    #[error("compiled Java frames are walked on x86-64 only")]
    Machine,
    #[error("its code cache is not made yet")]
    NotReady,
}

impl HotSpotError {
    /// The name it is counted by in the summary.
    pub fn reason(&self) -> &'static str {
        match self {
            HotSpotError::Missing(_) => "missing_field",
            HotSpotError::Version(_) => "unknown_version",
            HotSpotError::Unreadable(_) => "unreadable",
            HotSpotError::Malformed(_) => "malformed",
            HotSpotError::Stuck => "stuck",
            HotSpotError::Machine => "machine",
            HotSpotError::NotReady => "not_ready",
        }
    }

    /// Whether a later read may succeed: a JVM starting (its library mapped before it is
    /// relocated, its code cache not made yet) reads as one not ready or unreadable.
    fn passing(&self) -> bool {
        matches!(self, HotSpotError::NotReady | HotSpotError::Unreadable(_))
    }
}

/// What the summary says about JVMs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HotSpotStats {
    /// JVMs whose code heaps were read, and the reads.
    pub processes: u64,
    pub scans: u64,
    /// The time the reads took, in all (µs: the session's thread waits for each).
    pub read_us: u64,
    /// Compiled methods found at the last read of each (summed), and those whose name could
    /// not be read.
    pub compiled_methods: u64,
    pub unnamed_methods: u64,
    /// Compiled methods (counted at each read) whose PCs' Java scopes could not be read: their
    /// frames are named without lines or inlined callees.
    pub unscoped_methods: u64,
    /// Blobs skipped as malformed, or past the limit of one read.
    pub malformed_blobs: u64,
    pub over_limit: u64,
    /// JVMs not read, by why (`unknown_version`, `missing_field`, `unreadable`, `malformed`,
    /// `stuck`, `machine`).
    pub refused_by_reason: BTreeMap<&'static str, u64>,
    /// Interpreted frames named, or left `Interpreter` by why.
    pub interpreted: interpreted::InterpretedStats,
}

/// One JVM as read.
#[derive(Debug, Default)]
struct Jvm {
    /// The tables' description, and the `libjvm.so` mapping it was read through (its start and
    /// inode: an exec into another JVM reads it again).
    layout: Option<Arc<Layout>>,
    read_through: (u64, u64),
    /// Refused: never read again.
    refused: bool,
    /// Read once at least.
    read: bool,
    /// Not read yet for a reason that may pass ([`HotSpotError::passing`]): how many reads
    /// failed so, and the last one's reason (counted as a refusal if no read succeeds before
    /// the process is forgotten or the session ends).
    failed_reads: u32,
    pending: Option<&'static str>,
    /// Started with `-XX:+PreserveFramePointer` (or no `java` launcher): not read.
    skipped: bool,
    /// Code that keeps frame pointers (interpreter, call stub, native wrappers), by start:
    /// its end, and whether it is the interpreter's.
    frame_pointer_code: BTreeMap<u64, (u64, bool)>,
    /// The owner of the process (for the reads of interpreted frames' methods).
    uid: u32,
    /// Compiled methods at the last read.
    compiled: u64,
    /// At the last read: the heaps' committed ranges, the runs of used blocks in them
    /// ([`pieces`]), and when it was.
    heaps: Vec<(u64, u64)>,
    used: Vec<(u64, u64)>,
    read_at: Option<std::time::Instant>,
    /// The Java frames of each compiled method's PCs (`scopes`), by its code's start: its
    /// code's end, and the frames.
    java: BTreeMap<u64, (u64, Arc<scopes::CompiledFrames>)>,
}

/// The JVMs of the traced processes.
#[derive(Debug, Default)]
pub struct HotSpots {
    jvms: HashMap<u32, Jvm>,
    /// Processes whose code heaps were read this session (at most [`MAX_READ_PIDS`]), for the
    /// diagnosis: their stacks do not stop at compiled code.
    read_pids: std::collections::HashSet<u32>,
    /// Reader threads left blocked.
    stuck: usize,
    pub stats: HotSpotStats,
    /// The names of interpreted frames' methods.
    pub interpreted: interpreted::Interpreted,
}

impl HotSpots {
    /// The code of `pid`'s code heaps, as a jitdump would give it, if `mappings` hold a JVM
    /// whose tables can be read (module docs). Refusals are counted once per process.
    pub fn scan(&mut self, pid: u32, mappings: &[Mapping]) -> Option<JitDump> {
        let jvm_mapping = mappings.iter().find(|m| {
            m.path.file_name().is_some_and(|n| n == "libjvm.so") && matches!(m.kind, MappingKind::File { .. })
        })?;
        let MappingKind::File { bias, file, .. } = &jvm_mapping.kind else {
            return None;
        };
        let jvm = self.jvms.entry(pid).or_insert_with(|| Jvm {
            // One started to keep frame pointers was set up for profiling that way, with a perf
            // map or a jitdump agent for names: left to them.
            skipped: !super::java::process_without_frame_pointers(pid),
            uid: crate::python::pycode::proc_owner(pid),
            ..Jvm::default()
        });
        if jvm.refused || jvm.skipped || self.stuck >= MAX_STUCK {
            return None;
        }
        let through = (jvm_mapping.start, jvm_mapping.inode);
        if jvm.read_through != through {
            jvm.layout = None;
            jvm.read_through = through;
        }
        let known = jvm.layout.clone();
        let (bias, file) = (*bias, Arc::clone(file));
        let since = std::time::Instant::now();
        let (send, receive) = mpsc::channel();
        let started = std::thread::Builder::new()
            .name("sframe-trace-jvm".into())
            .spawn(move || {
                let mut mem = ProcMem::open(pid);
                let layout = match known {
                    Some(layout) => Ok(layout),
                    None => read_layout(&mut mem, &file, bias).map(Arc::new),
                };
                let scan = match &layout {
                    Ok(layout) => heap::scan(&mut mem, layout),
                    Err(error) => Err(error.clone()),
                };
                let _ = send.send((layout.ok(), scan));
            });
        if started.is_err() {
            return None;
        }
        let (layout, result) = match receive.recv_timeout(TIMEOUT) {
            Ok(result) => result,
            Err(_) => {
                self.stuck += 1;
                (None, Err(HotSpotError::Stuck))
            }
        };
        self.stats.scans += 1;
        self.stats.read_us += since.elapsed().as_micros() as u64;
        let mut scan = self.settle(pid, layout, result)?;
        let java = self.java_frames_of(&mut scan);
        let jvm = self.jvms.entry(pid).or_default();
        if cfg!(not(target_arch = "x86_64")) {
            jvm.refused = true;
            *self
                .stats
                .refused_by_reason
                .entry(HotSpotError::Machine.reason())
                .or_default() += 1;
            return None;
        }
        if !jvm.read {
            jvm.read = true;
            self.stats.processes += 1;
            if self.read_pids.len() < MAX_READ_PIDS {
                self.read_pids.insert(pid);
            }
        }
        self.stats.malformed_blobs += scan.malformed;
        self.stats.unnamed_methods += scan.unnamed;
        self.stats.unscoped_methods += scan.unscoped;
        self.stats.over_limit += scan.over_limit;
        let blobs = scan.blobs.len();
        let (heaps, used) = (std::mem::take(&mut scan.heaps), std::mem::take(&mut scan.used));

        let (dump, frame_pointer_code, compiled) = dump_of(scan);
        log::debug!(
            "pid {pid}: JVM {}: {blobs} blobs, {compiled} compiled methods, read in {:?}",
            jvm.layout.as_ref().map_or("", |l| l.release.as_str()),
            since.elapsed()
        );
        self.stats.compiled_methods = self.stats.compiled_methods - jvm.compiled + compiled;
        jvm.compiled = compiled;
        jvm.frame_pointer_code = frame_pointer_code;
        (jvm.heaps, jvm.used, jvm.java) = (heaps, used, java);
        jvm.read_at = Some(std::time::Instant::now());
        Some(dump)
    }

    /// The Java frames of `scan`'s compiled methods (their scopes' methods named in the
    /// names of interpreted frames, `Self::method`), by code start; the scopes are taken.
    fn java_frames_of(&self, scan: &mut Scan) -> BTreeMap<u64, (u64, Arc<scopes::CompiledFrames>)> {
        let Some(coding) = scan.coding else {
            return BTreeMap::new();
        };
        let mut indexes: HashMap<u64, Option<u32>> = HashMap::new();
        let methods = std::mem::take(&mut scan.methods);
        let mut out = BTreeMap::new();
        for blob in &mut scan.blobs {
            if blob.java.is_empty() {
                continue;
            }
            let pcs = std::mem::take(&mut blob.java);
            let frames = scopes::CompiledFrames::new(
                &pcs,
                |m| {
                    *indexes.entry(m).or_insert_with(|| {
                        let name = methods.get(&m)?.name.clone()?;
                        self.interpreted.intern(name)
                    })
                },
                |m| methods.get(&m).map(|m| m.lines.as_slice()),
                coding,
            );
            if !frames.is_empty() {
                let end = blob.code_begin + blob.code.len() as u64;
                out.insert(blob.code_begin, (end, Arc::new(frames)));
            }
        }
        out
    }

    /// The Java frames (method index for [`Self::method`], line or 0), innermost first, that
    /// `pid`'s compiled code runs at `pc` (a sampled PC, or a return address minus one).
    pub fn java_frames(&self, pid: u32, pc: u64) -> Option<&[(u32, u32)]> {
        let jvm = self.jvms.get(&pid)?;
        let (&begin, (end, frames)) = jvm.java.range(..=pc).next_back()?;
        if pc >= *end {
            return None;
        }
        frames.at(u32::try_from(pc - begin).ok()?)
    }

    /// What a read of `pid` gave (the layout it read or used, the code heaps or why not): the
    /// code heaps, or `None` with the JVM refused (counted), or left to read again when the
    /// reason may pass ([`HotSpotError::passing`], at most [`MAX_FAILED_READS`] times).
    fn settle(&mut self, pid: u32, layout: Option<Arc<Layout>>, result: Result<Scan, HotSpotError>) -> Option<Scan> {
        let jvm = self.jvms.entry(pid).or_default();
        if layout.is_some() {
            jvm.layout = layout;
        }
        match result {
            Ok(scan) => {
                jvm.pending = None;
                Some(scan)
            }
            Err(error) if error.passing() && jvm.failed_reads < MAX_FAILED_READS => {
                log::debug!("pid {pid}: the JVM's code is not read yet: {error}");
                jvm.failed_reads += 1;
                jvm.pending = Some(error.reason());
                None
            }
            Err(error) => {
                log::debug!("pid {pid}: the JVM's code is not read: {error}");
                jvm.refused = true;
                jvm.pending = None;
                *self.stats.refused_by_reason.entry(error.reason()).or_default() += 1;
                None
            }
        }
    }

    /// Whether `pid`'s code heaps, read already, are not to be read again now: read less than
    /// [`MIN_REREAD`] ago, or the process's time in the JIT-name budget used (`has_time`
    /// false). The images of the last read stay meanwhile.
    pub fn paced(&self, pid: u32, has_time: bool) -> bool {
        self.jvms.get(&pid).is_some_and(|j| {
            j.read && !j.refused && (!has_time || j.read_at.is_some_and(|at| at.elapsed() < MIN_REREAD))
        })
    }

    /// The parts of `pid`'s mapping `[start, end)` the kernel is given ([`pieces`]): `None`
    /// when it holds none of the JVM's code heaps as last read (it is given whole).
    pub fn code_pieces(&self, pid: u32, start: u64, end: u64) -> Option<Vec<(u64, u64)>> {
        let jvm = self.jvms.get(&pid).filter(|j| j.read && !j.refused)?;
        jvm.heaps
            .iter()
            .any(|&(low, high)| low < end && start < high)
            .then(|| pieces::pieces(&jvm.used, start, end, pieces::MAX_PIECES))
    }

    /// Whether the code at `addr` of `pid` is a JVM's that keeps frame pointers (interpreter,
    /// call stub, native wrapper).
    pub fn keeps_frame_pointer(&self, pid: u32, addr: u64) -> bool {
        self.frame_pointer_code(pid, addr).is_some()
    }

    /// The frame-pointer code of `pid` holding `addr`: whether it is the interpreter's.
    fn frame_pointer_code(&self, pid: u32, addr: u64) -> Option<bool> {
        let jvm = self.jvms.get(&pid)?;
        let (_, &(end, interpreter)) = jvm.frame_pointer_code.range(..=addr).next_back()?;
        (addr < end).then_some(interpreter)
    }

    /// The method of an interpreted frame of `pid` at `addr` (in the interpreter, not the
    /// sampled frame) whose `Method*` (and bytecode index, `slot_config_with_bci`) the kernel
    /// read as `word`, in a sample taken at `time_ns`: its index for [`Self::method`] and its
    /// line (0: not known), or `None` (counted when it was the interpreter's).
    pub fn interpreted_frame(&self, pid: u32, addr: u64, word: u64, time_ns: u64) -> Option<(u32, u32)> {
        use tracer_common::frame_word::{BCI_MASK, BCI_SHIFT, WORD_ADDR_MASK};
        if self.frame_pointer_code(pid, addr) != Some(true) {
            return None;
        }
        let jvm = self.jvms.get(&pid)?;
        let bci = ((word >> BCI_SHIFT) & BCI_MASK).checked_sub(1).map(|b| b as i32);
        self.interpreted.frame(
            pid,
            jvm.uid,
            jvm.layout.as_ref()?,
            (word & WORD_ADDR_MASK, bci),
            time_ns,
        )
    }

    /// The kernel's word for the code-heap mappings of `pid` (`tracer_common::frame_word`):
    /// an interpreted frame's `Method*`, and its bytecode index when the JVM's layout of its
    /// methods is read.
    pub fn frame_word(&self, pid: u32) -> u32 {
        use tracer_common::frame_word::{slot_config, slot_config_with_bci};
        let layout = self.jvms.get(&pid).and_then(|j| j.layout.as_ref());
        match layout.and_then(|l| Some((l, l.scopes.as_ref()?))) {
            Some((layout, scopes))
                if layout.method_const % 8 == 0
                    && layout.method_const < 128
                    && scopes.const_size % 8 == 0
                    && scopes.const_size < 512 =>
            {
                slot_config_with_bci(
                    interpreted::METHOD_SLOT,
                    interpreted::BCP_SLOT,
                    layout.method_const as u8,
                    scopes.const_size as u16,
                )
            }
            _ => slot_config(interpreted::METHOD_SLOT),
        }
    }

    /// Interpreted method `index`'s name.
    pub fn method(&self, index: u32) -> Option<String> {
        self.interpreted.name(index)
    }

    /// What was read, interpreted frames included.
    pub fn figures(&self) -> HotSpotStats {
        HotSpotStats {
            interpreted: self.interpreted.stats(),
            ..self.stats.clone()
        }
    }

    /// Whether a process `pid` had its code heaps read in this session.
    pub fn was_read(&self, pid: u32) -> bool {
        self.read_pids.contains(&pid)
    }

    /// Whether `pid`'s code heaps are read, or are to be read again (a JVM starting).
    pub fn knows(&self, pid: u32) -> bool {
        self.jvms
            .get(&pid)
            .is_some_and(|j| (j.read || j.pending.is_some()) && !j.refused)
    }

    /// Process `pid` is forgotten.
    pub fn forget(&mut self, pid: u32) {
        self.interpreted.forget(pid);
        if let Some(jvm) = self.jvms.remove(&pid) {
            self.stats.compiled_methods -= jvm.compiled;
            self.count_pending(&jvm);
        }
    }

    /// The session ends: JVMs never read for a reason that might have passed are counted as
    /// refused by it.
    pub fn end(&mut self) {
        let pending: Vec<&'static str> = self.jvms.values_mut().filter_map(|j| j.pending.take()).collect();
        for reason in pending {
            *self.stats.refused_by_reason.entry(reason).or_default() += 1;
        }
    }

    fn count_pending(&mut self, jvm: &Jvm) {
        if let Some(reason) = jvm.pending {
            *self.stats.refused_by_reason.entry(reason).or_default() += 1;
        }
    }

    pub fn sizes(&self, add: &mut dyn FnMut(&'static str, usize)) {
        add("hotspot.jvms", self.jvms.len());
    }
}

/// A scan's blobs as code loads (each with its unwind rules), the ranges of code that keeps
/// frame pointers, and how many compiled methods it holds.
fn dump_of(scan: Scan) -> (JitDump, BTreeMap<u64, (u64, bool)>, u64) {
    let mut dump = JitDump::new(EM_X86_64);
    let mut frame_pointer_code = BTreeMap::new();
    let mut compiled = 0;
    for blob in scan.blobs {
        if blob.code.is_empty() {
            continue;
        }
        let end = blob.code_begin + blob.code.len() as u64;
        let unwind = match blob.kind {
            BlobKind::Compiled => {
                compiled += 1;
                let rules = unwind::rules(&blob.code, blob.frame_bytes, blob.frame_complete, blob.body_end);
                let at = blob.code_begin + (blob.code.len() as u64).next_multiple_of(8);
                (!rules.is_empty()).then(|| Unwind {
                    eh_frame: unwind::eh_frame(&rules, blob.code_begin, at),
                })
            }
            BlobKind::FramePointer => {
                frame_pointer_code.insert(blob.code_begin, (end, blob.name == "Interpreter"));
                None
            }
            BlobKind::Stub => None,
        };
        dump.loads.insert(
            blob.code_begin,
            CodeLoad {
                addr: blob.code_begin,
                code: blob.code,
                name: blob.name,
                unwind,
            },
        );
    }
    (dump, frame_pointer_code, compiled)
}

/// The tables' description from the JVM library `file` (its exported symbols) mapped at
/// `bias` in the process `mem` reads.
fn read_layout(mem: &mut dyn Memory, file: &File, bias: u64) -> Result<Layout, HotSpotError> {
    let len = file
        .metadata()
        .map_err(|_| HotSpotError::Unreadable("libjvm.so"))?
        .len();
    let cache = object::ReadCache::new(crate::sys::objfile::Pread::new(file, len));
    let elf = object::File::parse(&cache).map_err(|_| HotSpotError::Unreadable("libjvm.so"))?;
    let mut values = [None; EXPORTS.len()];
    for symbol in elf.dynamic_symbols() {
        let Ok(name) = symbol.name() else { continue };
        if let Some(i) = EXPORTS.iter().position(|&e| e == name)
            && !symbol.is_undefined()
        {
            values[i] = Some(symbol.address().wrapping_add(bias));
        }
    }
    let mut found = [0u64; EXPORTS.len()];
    for (i, value) in values.iter().enumerate() {
        found[i] = value.ok_or_else(|| HotSpotError::Missing(EXPORTS[i].to_owned()))?;
    }
    Layout::read(mem, &Exports::from_values(found))
}

/// `/proc/PID/mem`, read with `pread`.
struct ProcMem(Option<File>);

impl ProcMem {
    fn open(pid: u32) -> ProcMem {
        ProcMem(File::open(format!("/proc/{pid}/mem")).ok())
    }
}

impl Memory for ProcMem {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        self.0.as_ref().is_some_and(|f| f.read_exact_at(buf, addr).is_ok())
    }
}

#[cfg(test)]
mod tests;
