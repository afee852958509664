//! Python frames of samples, named while their process runs: the runs of Python frames the
//! kernel recorded put in place of the evaluation-loop frames that ran them
//! (`python::merge`), and each frame's code object read from the process ([`pymem`]) into a
//! function (qualified name and file, interned for the session) and a line.
//!
//! A sample is resolved when it arrives, so its code objects are read while the process
//! lives (the outputs are written later, possibly after it exited). Code objects are cached
//! per process by address, with their identity (`tracer_common::python::code_ident`, made of
//! what names a frame: its names and line table), and the kernel records with each frame the
//! identity its code object had at the sample. A frame is named by a cached code object of
//! the same identity only; otherwise the code object is read again, and if the address holds
//! another one by now (the frame's was freed after the sample and another made there), the
//! frame is named by its address and counted (`replaced`): a frame never takes the name of
//! a code object that was not its own. A process's cache goes when it exec's or is forgotten.
//!
//! Everything here is bounded against a process that forges its interpreter's memory:
//! - code-object data: a line table is kept once for the code objects of a process that point
//!   at the same bytes (keyed by address and length, its bytes compared: a table freed and
//!   another made at its address is not taken for it); a process's cache holds at most
//!   [`MAX_CODES`] code objects and [`MAX_PROC_CODE_BYTES`] (line tables, and
//!   [`CODE_COST`] per code object), past which it is emptied; the session's caches hold
//!   [`MAX_CODE_BYTES`], past which the process holding the most empties its own
//!   (`caches_emptied`);
//! - work: per sample, [`MAX_READS_PER_SAMPLE`] reads of a process's memory and
//!   [`MAX_SCAN_PER_SAMPLE`] line-table bytes scanned, and per process and second,
//!   [`MAX_READS_PER_SECOND`] and [`MAX_SCAN_PER_SECOND`]; past them frames are not named (or
//!   get no line), counted as `over_budget`: the session falls behind by dropping names, never
//!   by stalling;
//! - names: the session's functions ([`MAX_FUNCTIONS`], [`MAX_FUNCTION_BYTES`]), of which the
//!   processes of one user (the owner of `/proc/PID`) take a sixteenth at most; past that, new
//!   functions are not named, counted (`too_many_functions`, `over_user_budget`);
//! - output: the Python frames of one sample carry [`MAX_SAMPLE_BYTES`] of names at most
//!   (names are cut to `names::MAX_NAME_BYTES` each, [`FRAME_COST`] counted per frame); past
//!   it the sample's outer Python frames are replaced by one `[python frames elided]` frame
//!   (`elided` counts the frames left out).
//!
//! It also keeps which processes are in the kernel's map of interpreters and when each was
//! last sampled, for the map's policy (`python::pymap`).
//!
//! [`pymem`]: super::pymem

use std::{
    cell::RefCell,
    collections::HashMap,
    os::unix::fs::MetadataExt as _,
    sync::Arc,
    time::{Duration, Instant},
};

use tracer_common::python::PyProcInfo;

use super::pymem::{MemReader, ReadError};
use crate::python::{
    CodeLayout,
    code::{CodeError, line as code_line},
    merge::{self, Merged, PyFrameRef},
};

/// The pseudo-object Python frames are in (a pprof or OTLP mapping, a JSON object).
pub const PYTHON_OBJECT: &str = "[python]";
/// The name of the frame standing for the Python frames a sample's output bound left out.
pub const ELIDED_NAME: &str = "[python frames elided]";
/// Code objects cached per process at most (past it, the process's cache is emptied).
const MAX_CODES: usize = 1 << 14;
/// What a cached code object is counted as, besides its line table.
pub const CODE_COST: usize = 128;
/// Bytes of code-object data (line tables, [`CODE_COST`] per code object) one process's
/// cache holds at most; past it, the cache is emptied.
pub const MAX_PROC_CODE_BYTES: usize = 8 << 20;
/// Bytes of code-object data all processes' caches hold at most; past it, the process
/// holding the most empties its cache.
pub const MAX_CODE_BYTES: usize = 64 << 20;
/// Reads of a process's memory (code objects and line tables) one sample
/// makes at most, and one process's samples in a second.
pub const MAX_READS_PER_SAMPLE: u32 = 128;
pub const MAX_READS_PER_SECOND: u32 = 1024;
/// Line-table bytes scanned for one sample's lines at most, and for one process's in a second.
pub const MAX_SCAN_PER_SAMPLE: usize = 256 << 10;
pub const MAX_SCAN_PER_SECOND: usize = 64 << 20;
/// Bytes of names (qualified name and file, [`FRAME_COST`] per frame) one sample's Python
/// frames carry at most.
pub const MAX_SAMPLE_BYTES: usize = 16 << 10;
/// What a Python frame is counted as in a sample's output bound, besides its names.
pub const FRAME_COST: usize = 16;
/// Functions named in a session at most, and the bytes of their names and files.
const MAX_FUNCTIONS: usize = 1 << 18;
const MAX_FUNCTION_BYTES: usize = 64 << 20;
/// The share of those one user's processes may take: one part in this many.
const USER_SHARE: usize = 16;
/// A Python function: its qualified name and the file it is defined in.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PyFunction {
    pub qualname: Box<str>,
    pub filename: Box<str>,
}

/// A Python frame of a stack: the function (an index for [`PyCodes::function`]) and line,
/// or, when its code object could not be read, [`PyFrame::UNNAMED`] and the code object's
/// address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PyFrame {
    pub function: u32,
    /// The line, 0 when the line table gives none.
    pub line: u32,
    /// The code object's address when unnamed, else 0 (frames of one function and line are
    /// one frame).
    pub code: u64,
}

impl PyFrame {
    pub const UNNAMED: u32 = u32::MAX;
    /// The function of the frame that stands for the frames a sample's output bound left out
    /// (named [`ELIDED_NAME`]).
    pub const ELIDED: u32 = u32::MAX - 1;
}

/// What became of the Python frames of samples (the summary's `python` object).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PyFrameStats {
    /// Python frames put into stacks.
    pub frames: u64,
    /// Of them, frames whose code object could not be read (the process had exited, or the
    /// address held no code object), named by address.
    pub unnamed: u64,
    /// Of them, frames whose code object was freed after the sample and another made at its
    /// address before the frame was named (its identity not the frame's): named by address.
    pub replaced: u64,
    /// Of them, frames not named because the session's functions reached their bound.
    pub too_many_functions: u64,
    /// Of them, frames not named because their user's processes took their share of the
    /// session's functions.
    pub over_user_budget: u64,
    /// Of them, frames not named (or without a line) because their sample had made its
    /// reads or scanned its line-table bytes.
    pub over_budget: u64,
    /// Frames left out of samples past the bytes of names one sample may carry (each sample
    /// concerned has one `[python frames elided]` frame instead).
    pub elided: u64,
    /// Processes' code-object caches emptied for the bounds on code-object data.
    pub caches_emptied: u64,
    /// Evaluation-loop frames the kernel gave no Python frames for (kept native).
    pub eval_frames_without_run: u64,
    /// Runs of Python frames without an evaluation-loop frame to replace (the native walk
    /// was cut short above them), or of a process no longer known: dropped.
    pub runs_dropped: u64,
    /// Reader threads left blocked by a process's memory (see `pymem`).
    pub reads_stuck: u64,
    /// Reader threads left behind that answered after all (a slow read, not a stuck one):
    /// their processes were read again.
    pub reads_late: u64,
}

/// A cached code object.
struct Code {
    /// `None` when unreadable.
    function: Option<u32>,
    first_line: i32,
    linetable: Arc<[u8]>,
    /// Its `code_ident` (0 when unreadable).
    ident: u32,
}

/// A process running an interpreter.
pub(super) struct Proc {
    info: PyProcInfo,
    layout: CodeLayout,
    /// The owner of `/proc/PID` when it was found (whose share of names it takes).
    pub(super) uid: u32,
    codes: HashMap<u64, Code>,
    /// The line tables of `codes`, by address and length, each once.
    tables: HashMap<(u64, u64), Arc<[u8]>>,
    /// Bytes of code-object data held ([`CODE_COST`] per code object, the tables).
    bytes: usize,
    /// In the kernel's map of interpreters.
    pub(super) in_map: bool,
    /// The sample count ([`Inner::samples`]) when last sampled, or found.
    pub(super) last: u64,
    /// The work done for its samples in the current second.
    window: Window,
}

/// Work done for a process's samples since `start`.
struct Window {
    start: Instant,
    reads: u32,
    scanned: usize,
}

impl Proc {
    fn empty(&mut self) -> usize {
        self.codes.clear();
        self.tables.clear();
        std::mem::take(&mut self.bytes)
    }
}

/// How far the sample being resolved has gone into its bounds.
#[derive(Default)]
struct SampleWork {
    reads: u32,
    scanned: usize,
    bytes: usize,
    elided: bool,
}

#[derive(Default)]
pub(super) struct Inner {
    pub(super) procs: HashMap<u32, Proc>,
    names: Names,
    pub(super) stats: PyFrameStats,
    pub(super) map: crate::python::pymap::PyMapStats,
    reader: MemReader,
    /// Bytes of code-object data held by all processes.
    bytes: usize,
    /// Samples seen of processes with an interpreter.
    pub(super) samples: u64,
    sample: SampleWork,
    /// Processes sampled while out of the kernel's map, to be put back (`pymap`).
    pub(super) readmit: Vec<u32>,
}

/// The functions of the session, each once.
#[derive(Default)]
struct Names {
    functions: Vec<PyFunction>,
    by_function: HashMap<PyFunction, u32>,
    bytes: usize,
    /// Functions added and their bytes, by the uid of the process that named them first.
    by_user: HashMap<u32, (usize, usize)>,
}

/// The interpreters of the traced processes and the functions their frames were named with.
/// Used through a shared reference while samples are resolved (interior mutability, on the
/// session's thread only).
pub struct PyCodes {
    pub(super) inner: RefCell<Inner>,
    /// The owner of a process (tests: made up).
    pub(crate) owner: fn(u32) -> u32,
}

impl Default for PyCodes {
    fn default() -> PyCodes {
        PyCodes::with_reader(MemReader::default())
    }
}

/// The owner of `/proc/PID` (the process's effective uid; root's when it is not dumpable),
/// `u32::MAX` when gone.
pub(crate) fn proc_owner(pid: u32) -> u32 {
    std::fs::metadata(format!("/proc/{pid}")).map_or(u32::MAX, |m| m.uid())
}

impl PyCodes {
    /// Reading through `reader` (tests: a fake memory).
    pub fn with_reader(reader: MemReader) -> PyCodes {
        PyCodes {
            inner: RefCell::new(Inner {
                reader,
                ..Inner::default()
            }),
            owner: proc_owner,
        }
    }

    /// `pid` runs the interpreter `info` laid out as `layout` (loaded or reloaded), or none
    /// (`None`). A different interpreter than before starts an empty cache.
    pub fn set(&mut self, pid: u32, found: Option<(PyProcInfo, CodeLayout)>) {
        let owner = self.owner;
        let inner = self.inner.get_mut();
        match found {
            Some((info, layout)) => {
                let same = inner
                    .procs
                    .get(&pid)
                    .is_some_and(|p| p.info == info && p.layout == layout);
                if !same {
                    let last = inner.samples;
                    if let Some(mut old) = inner.procs.insert(
                        pid,
                        Proc {
                            info,
                            layout,
                            uid: owner(pid),
                            codes: HashMap::new(),
                            tables: HashMap::new(),
                            bytes: 0,
                            in_map: false,
                            last,
                            window: Window {
                                start: Instant::now(),
                                reads: 0,
                                scanned: 0,
                            },
                        },
                    ) {
                        inner.bytes -= old.empty();
                    }
                }
            }
            None => {
                if let Some(mut old) = inner.procs.remove(&pid) {
                    inner.bytes -= old.empty();
                }
            }
        }
    }

    /// `pid` exec'ed or is forgotten: its cache and memory file go.
    pub fn forget(&mut self, pid: u32) {
        let inner = self.inner.get_mut();
        if let Some(mut old) = inner.procs.remove(&pid) {
            inner.bytes -= old.empty();
        }
        inner.reader.forget(pid);
    }

    /// The stack of a sample of `pid` whose user words are `user`, the first `native` of them
    /// native frames (innermost first) and the rest the runs of Python frames the kernel
    /// appended; `lookup(i)` is the address native frame `i` is looked up at, `native_whole`
    /// whether the native walk reached the outermost frame. `None` when the sample has no
    /// Python frames. Starts the sample's bounds ([`PyCodes::frame`] names its frames).
    pub fn merge(
        &self,
        pid: u32,
        user: &[u64],
        native: usize,
        native_whole: bool,
        lookup: impl Fn(usize) -> u64,
    ) -> Option<Vec<Merged>> {
        let inner = &mut *self.inner.borrow_mut();
        inner.sample = SampleWork::default();
        inner.samples += 1;
        let samples = inner.samples;
        if let Some(proc) = inner.procs.get_mut(&pid) {
            proc.last = samples;
            if !proc.in_map && !inner.readmit.contains(&pid) && inner.readmit.len() < crate::python::pymap::MAX_READMIT
            {
                inner.readmit.push(pid);
            }
        }
        if native >= user.len() {
            return None;
        }
        let runs = merge::runs(&user[native..]);
        let Some(proc) = inner.procs.get(&pid) else {
            inner.stats.runs_dropped += runs.len() as u64;
            return None;
        };
        let whole = native_whole && merge::whole(&user[native..]);
        let (merged, unmatched) = merge::merge(native, |i| proc.info.in_eval(lookup(i)), &runs, whole);
        inner.stats.eval_frames_without_run += unmatched.eval_frames as u64;
        inner.stats.runs_dropped += unmatched.runs as u64;
        Some(merged)
    }

    /// The frame of Python frame `frame` of the sample of `pid` last given to
    /// [`PyCodes::merge`]: its code object named (read now, or cached) and its line; `None`
    /// when the sample's output bound left it out (after one [`PyFrame::ELIDED`] frame).
    pub fn frame(&self, pid: u32, frame: PyFrameRef) -> Option<PyFrame> {
        let inner = &mut *self.inner.borrow_mut();
        if inner.sample.elided {
            inner.stats.elided += 1;
            return None;
        }
        let named = self.name(inner, pid, frame);
        let bytes = FRAME_COST
            + inner
                .names
                .functions
                .get(named.function as usize)
                .map_or(0, |f| f.qualname.len() + f.filename.len());
        inner.sample.bytes += bytes;
        if inner.sample.bytes > MAX_SAMPLE_BYTES {
            inner.sample.elided = true;
            inner.stats.elided += 1;
            return Some(PyFrame {
                function: PyFrame::ELIDED,
                line: 0,
                code: 0,
            });
        }
        inner.stats.frames += 1;
        Some(named)
    }

    fn name(&self, inner: &mut Inner, pid: u32, frame: PyFrameRef) -> PyFrame {
        let unnamed = PyFrame {
            function: PyFrame::UNNAMED,
            line: 0,
            code: frame.code,
        };
        let Some(proc) = inner.procs.get_mut(&pid) else {
            inner.stats.unnamed += 1;
            return unnamed;
        };
        let (layout, now) = (proc.layout, Instant::now());
        if now.duration_since(proc.window.start) >= Duration::from_secs(1) {
            proc.window = Window {
                start: now,
                reads: 0,
                scanned: 0,
            };
        }
        // The kernel could not read the code object at the sample: nothing to name it by.
        if frame.ident == 0 {
            inner.stats.unnamed += 1;
            return unnamed;
        }
        // A cached code object is the frame's if it has the frame's identity; else the
        // address is read again (two reads at most: a code object, its line table).
        if proc.codes.get(&frame.code).is_none_or(|code| code.ident != frame.ident) {
            if inner.sample.reads + 2 > MAX_READS_PER_SAMPLE || proc.window.reads + 2 > MAX_READS_PER_SECOND {
                inner.stats.over_budget += 1;
                return unnamed;
            }
            let code = read(inner, pid, frame.code);
            let Some(proc) = inner.procs.get_mut(&pid) else {
                return unnamed;
            };
            if code.function.is_none() && proc.codes.contains_key(&frame.code) {
                // Unreadable now (the process exited): what is cached stays, for its frames.
                inner.stats.unnamed += 1;
                return unnamed;
            }
            let (readable, ident) = (code.function.is_some(), code.ident);
            if proc.codes.insert(frame.code, code).is_none() {
                proc.bytes += CODE_COST;
                inner.bytes += CODE_COST;
            }
            if readable && ident != frame.ident {
                inner.stats.replaced += 1;
                return unnamed;
            }
        }
        let Some(proc) = inner.procs.get(&pid) else {
            inner.stats.unnamed += 1;
            return unnamed;
        };
        let Some(code) = proc.codes.get(&frame.code) else {
            inner.stats.unnamed += 1;
            return unnamed;
        };
        let Some(function) = code.function else {
            inner.stats.unnamed += 1;
            return unnamed;
        };
        match function {
            PyFrame::UNNAMED => {
                inner.stats.too_many_functions += 1;
                return unnamed;
            }
            Names::OVER_USER => {
                inner.stats.over_user_budget += 1;
                return unnamed;
            }
            _ => {}
        }
        let len = code.linetable.len();
        let line =
            if inner.sample.scanned + len > MAX_SCAN_PER_SAMPLE || proc.window.scanned + len > MAX_SCAN_PER_SECOND {
                inner.stats.over_budget += 1;
                0
            } else {
                inner.sample.scanned += len;
                code_line(&layout, &code.linetable, code.first_line, frame.code, frame.instr)
                    .map_or(0, |l| u32::try_from(l).unwrap_or(0))
            };
        if let Some(proc) = inner.procs.get_mut(&pid) {
            proc.window.scanned += len;
        }
        PyFrame {
            function,
            line,
            code: 0,
        }
    }

    /// Function `index` of [`PyFrame::function`].
    pub fn function(&self, index: u32) -> Option<PyFunction> {
        if index == PyFrame::ELIDED {
            return Some(PyFunction {
                qualname: ELIDED_NAME.into(),
                filename: PYTHON_OBJECT.into(),
            });
        }
        self.inner.borrow().names.functions.get(index as usize).cloned()
    }

    /// What became of the Python frames so far.
    pub fn stats(&self) -> PyFrameStats {
        let inner = self.inner.borrow();
        PyFrameStats {
            reads_stuck: inner.reader.stuck as u64,
            reads_late: inner.reader.recovered as u64,
            ..inner.stats
        }
    }

    /// The lengths of its collections, named (see `trace::sizes`).
    pub fn sizes(&self, add: &mut dyn FnMut(&'static str, usize)) {
        let inner = self.inner.borrow();
        add("python.processes", inner.procs.len());
        add("python.codes", inner.procs.values().map(|p| p.codes.len()).sum());
        add("python.code_bytes", inner.bytes);
        add("python.functions", inner.names.functions.len());
    }
}

/// The code object at `code` of `pid`, read now (its line table read unless the process's
/// cache has it), its function named in the session's names; the bounds on code-object data
/// kept (caches emptied to make room).
fn read(inner: &mut Inner, pid: u32, code: u64) -> Code {
    let unreadable = || Code {
        function: None,
        first_line: 0,
        linetable: Arc::from(Vec::new()),
        ident: 0,
    };
    let Some(proc) = inner.procs.get(&pid) else {
        return unreadable();
    };
    let (layout, uid) = (proc.layout, proc.uid);
    count_read(inner, pid);
    let meta = match inner.reader.meta(pid, uid, layout, code) {
        Ok(meta) => meta,
        Err(err) => {
            if let ReadError::Code(CodeError::BadString | CodeError::BadLineTable) = err {
                log::debug!("process {pid}: code object at {code:#x}: {err:?}");
            }
            return unreadable();
        }
    };
    if let Some(proc) = inner.procs.get_mut(&pid)
        && proc.codes.len() >= MAX_CODES
    {
        inner.bytes -= proc.empty();
        inner.stats.caches_emptied += 1;
    }
    count_read(inner, pid);
    let Ok(bytes) = inner.reader.table(pid, uid, meta.table_at, meta.table_len) else {
        return unreadable();
    };
    // The same bytes at the same place: kept once.
    let key = (meta.table_at, meta.table_len);
    let table = match inner.procs.get(&pid).and_then(|p| p.tables.get(&key)) {
        Some(table) if **table == *bytes => {
            let table = Arc::clone(table);
            make_room(inner, pid, CODE_COST);
            table
        }
        _ => {
            make_room(inner, pid, bytes.len() + CODE_COST);
            let table: Arc<[u8]> = Arc::from(bytes);
            if let Some(proc) = inner.procs.get_mut(&pid) {
                if let Some(old) = proc.tables.insert(key, Arc::clone(&table)) {
                    proc.bytes -= old.len();
                    inner.bytes -= old.len();
                }
                proc.bytes += table.len();
                inner.bytes += table.len();
            }
            table
        }
    };
    Code {
        function: Some(inner.names.intern(uid, meta.qualname, meta.filename)),
        first_line: meta.first_line,
        linetable: table,
        ident: meta.ident,
    }
}

/// One read more for `pid`'s sample and its second.
fn count_read(inner: &mut Inner, pid: u32) {
    inner.sample.reads += 1;
    if let Some(proc) = inner.procs.get_mut(&pid) {
        proc.window.reads += 1;
    }
}

/// Make room for `bytes` more of code-object data of `pid`: its cache emptied when it would
/// pass [`MAX_PROC_CODE_BYTES`], and while the session's would pass [`MAX_CODE_BYTES`], the
/// cache of the process holding the most.
fn make_room(inner: &mut Inner, pid: u32, bytes: usize) {
    if let Some(proc) = inner.procs.get_mut(&pid)
        && proc.bytes + bytes > MAX_PROC_CODE_BYTES
    {
        inner.bytes -= proc.empty();
        inner.stats.caches_emptied += 1;
    }
    while inner.bytes + bytes > MAX_CODE_BYTES {
        let Some(largest) = inner.procs.values_mut().filter(|p| p.bytes > 0).max_by_key(|p| p.bytes) else {
            return;
        };
        inner.bytes -= largest.empty();
        inner.stats.caches_emptied += 1;
    }
}

impl Names {
    /// A function not named because its user's processes took their share.
    const OVER_USER: u32 = u32::MAX - 2;

    /// The index of the function, added if new (counted to `uid`); [`PyFrame::UNNAMED`] past
    /// the session's bounds, [`Names::OVER_USER`] past the user's share of them.
    fn intern(&mut self, uid: u32, qualname: String, filename: String) -> u32 {
        let function = PyFunction {
            qualname: qualname.into(),
            filename: filename.into(),
        };
        if let Some(&i) = self.by_function.get(&function) {
            return i;
        }
        let bytes = function.qualname.len() + function.filename.len();
        if self.functions.len() >= MAX_FUNCTIONS || self.bytes + bytes > MAX_FUNCTION_BYTES {
            return PyFrame::UNNAMED;
        }
        let user = self.by_user.entry(uid).or_default();
        if user.0 >= MAX_FUNCTIONS / USER_SHARE || user.1 + bytes > MAX_FUNCTION_BYTES / USER_SHARE {
            return Names::OVER_USER;
        }
        user.0 += 1;
        user.1 += bytes;
        self.bytes += bytes;
        let i = self.functions.len() as u32;
        self.functions.push(function.clone());
        self.by_function.insert(function, i);
        i
    }
}

mod map;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_bounds;
