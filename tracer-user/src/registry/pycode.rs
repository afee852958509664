//! Python frames of samples, named while their process runs: the runs of Python frames the
//! kernel recorded put in place of the evaluation-loop frames that ran them
//! (`python::merge`), and each frame's code object read from the process ([`pymem`]) into a
//! function (qualified name and file, interned for the session) and a line.
//!
//! A sample is resolved when it arrives, so its code objects are read while the process
//! lives (the outputs are written later, possibly after it exited). Code objects are cached
//! per process by address, with what they said: a cached one is checked again (one read of
//! its header) once it is [`RECHECK`] old, so that a code object freed and another made at
//! its address is read afresh (one that cannot be read any more, its process gone, is kept). A process's cache goes when it exec's or is forgotten; it holds
//! [`MAX_CODES`] at most. The functions of the session are bounded too ([`MAX_FUNCTIONS`],
//! [`MAX_FUNCTION_BYTES`]): past that, new functions are not named, and counted.
//!
//! [`pymem`]: super::pymem

use std::{
    cell::RefCell,
    collections::HashMap,
    time::{Duration, Instant},
};

use tracer_common::python::PyProcInfo;

use super::pymem::{MemReader, ReadError};
use crate::python::{
    CodeLayout,
    code::{CodeError, CodeHeader, instr_offset},
    linetable::line_of,
    merge::{self, Merged, PyFrameRef},
};

/// The pseudo-object Python frames are in (a pprof or OTLP mapping, a JSON object).
pub const PYTHON_OBJECT: &str = "[python]";
/// Code objects cached per process at most (past it, the process's cache is emptied).
const MAX_CODES: usize = 1 << 14;
/// Functions named in a session at most, and the bytes of their names and files.
const MAX_FUNCTIONS: usize = 1 << 18;
const MAX_FUNCTION_BYTES: usize = 64 << 20;
/// How long a cached code object is used before its header is read again.
const RECHECK: Duration = Duration::from_secs(2);

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
}

/// What became of the Python frames of samples (the summary's `python` object).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PyFrameStats {
    /// Python frames put into stacks.
    pub frames: u64,
    /// Of them, frames whose code object could not be read (the process had exited, or the
    /// address held no code object), named by address.
    pub unnamed: u64,
    /// Of them, frames not named because the session's functions reached their bound.
    pub too_many_functions: u64,
    /// Evaluation-loop frames the kernel gave no Python frames for (kept native).
    pub eval_frames_without_run: u64,
    /// Runs of Python frames without an evaluation-loop frame to replace (the native walk
    /// was cut short above them), or of a process no longer known: dropped.
    pub runs_dropped: u64,
    /// Reader threads left blocked by a process's memory (see `pymem`).
    pub reads_stuck: u64,
}

/// A cached code object.
struct Code {
    /// `None` when unreadable.
    function: Option<u32>,
    first_line: i32,
    linetable: Box<[u8]>,
    header: CodeHeader,
    checked: Instant,
}

/// A process running an interpreter.
struct Proc {
    info: PyProcInfo,
    layout: CodeLayout,
    codes: HashMap<u64, Code>,
}

#[derive(Default)]
struct Inner {
    procs: HashMap<u32, Proc>,
    names: Names,
    stats: PyFrameStats,
    reader: MemReader,
}

/// The functions of the session, each once.
#[derive(Default)]
struct Names {
    functions: Vec<PyFunction>,
    by_function: HashMap<PyFunction, u32>,
    bytes: usize,
}

/// The interpreters of the traced processes and the functions their frames were named with.
/// Used through a shared reference while samples are resolved (interior mutability, on the
/// session's thread only).
pub struct PyCodes {
    inner: RefCell<Inner>,
    /// [`RECHECK`] (tests: shorter).
    recheck: Duration,
}

impl Default for PyCodes {
    fn default() -> PyCodes {
        PyCodes::with_reader(MemReader::default(), RECHECK)
    }
}

impl PyCodes {
    /// Reading through `reader` (tests: a fake memory), checking cached code objects again
    /// once `recheck` old.
    pub fn with_reader(reader: MemReader, recheck: Duration) -> PyCodes {
        PyCodes {
            inner: RefCell::new(Inner {
                reader,
                ..Inner::default()
            }),
            recheck,
        }
    }

    /// `pid` runs the interpreter `info` laid out as `layout` (loaded or reloaded), or none
    /// (`None`). A different interpreter than before starts an empty cache.
    pub fn set(&mut self, pid: u32, found: Option<(PyProcInfo, CodeLayout)>) {
        let inner = self.inner.get_mut();
        match found {
            Some((info, layout)) => {
                let same = inner
                    .procs
                    .get(&pid)
                    .is_some_and(|p| p.info == info && p.layout == layout);
                if !same {
                    inner.procs.insert(
                        pid,
                        Proc {
                            info,
                            layout,
                            codes: HashMap::new(),
                        },
                    );
                }
            }
            None => {
                inner.procs.remove(&pid);
            }
        }
    }

    /// `pid` exec'ed or is forgotten: its cache and memory file go.
    pub fn forget(&mut self, pid: u32) {
        let inner = self.inner.get_mut();
        inner.procs.remove(&pid);
        inner.reader.forget(pid);
    }

    /// The stack of a sample of `pid` whose user words are `user`, the first `native` of them
    /// native frames (innermost first) and the rest the runs of Python frames the kernel
    /// appended; `lookup(i)` is the address native frame `i` is looked up at, `native_whole`
    /// whether the native walk reached the outermost frame. `None` when the sample has no
    /// Python frames.
    pub fn merge(
        &self,
        pid: u32,
        user: &[u64],
        native: usize,
        native_whole: bool,
        lookup: impl Fn(usize) -> u64,
    ) -> Option<Vec<Merged>> {
        if native >= user.len() {
            return None;
        }
        let runs = merge::runs(&user[native..]);
        let inner = &mut *self.inner.borrow_mut();
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

    /// The frame of Python frame `frame` of a sample of `pid`: its code object named (read
    /// now, or cached) and its line.
    pub fn frame(&self, pid: u32, frame: PyFrameRef) -> PyFrame {
        let inner = &mut *self.inner.borrow_mut();
        inner.stats.frames += 1;
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
        // A cached code object, still the same one.
        let fresh = match proc.codes.get_mut(&frame.code) {
            Some(code) if now.duration_since(code.checked) < self.recheck => true,
            // Checked again; one that cannot be read any more (the process exited, and its
            // samples still come in) is kept: nothing can have replaced it.
            Some(code) => match inner.reader.header(pid, layout, frame.code) {
                Ok(header) if header != code.header => false,
                _ => {
                    code.checked = now;
                    true
                }
            },
            None => false,
        };
        if !fresh {
            if proc.codes.len() >= MAX_CODES {
                proc.codes.clear();
            }
            let code = read(&mut inner.reader, &mut inner.names, pid, layout, frame.code, now);
            proc.codes.insert(frame.code, code);
        }
        let code = &proc.codes[&frame.code];
        let Some(function) = code.function else {
            inner.stats.unnamed += 1;
            return unnamed;
        };
        if function == PyFrame::UNNAMED {
            inner.stats.too_many_functions += 1;
            return unnamed;
        }
        let offset = instr_offset(&layout, frame.code, frame.instr);
        let line = line_of(&code.linetable, code.first_line, offset).map_or(0, |l| u32::try_from(l).unwrap_or(0));
        PyFrame {
            function,
            line,
            code: 0,
        }
    }

    /// Function `index` of [`PyFrame::function`].
    pub fn function(&self, index: u32) -> Option<PyFunction> {
        self.inner.borrow().names.functions.get(index as usize).cloned()
    }

    /// What became of the Python frames so far.
    pub fn stats(&self) -> PyFrameStats {
        let inner = self.inner.borrow();
        PyFrameStats {
            reads_stuck: inner.reader.stuck as u64,
            ..inner.stats
        }
    }

    /// The lengths of its collections, named (see `trace::sizes`).
    pub fn sizes(&self, add: &mut dyn FnMut(&'static str, usize)) {
        let inner = self.inner.borrow();
        add("python.processes", inner.procs.len());
        add("python.codes", inner.procs.values().map(|p| p.codes.len()).sum());
        add("python.functions", inner.names.functions.len());
    }
}

/// The code object at `code` of `pid`, read now, its function named in `names`.
fn read(reader: &mut MemReader, names: &mut Names, pid: u32, layout: CodeLayout, code: u64, now: Instant) -> Code {
    match reader.code(pid, layout, code) {
        Ok(info) => Code {
            function: Some(names.intern(info.qualname, info.filename)),
            first_line: info.first_line,
            linetable: info.linetable.into(),
            header: info.header,
            checked: now,
        },
        Err(err) => {
            if let ReadError::Code(CodeError::BadString | CodeError::BadLineTable) = err {
                log::debug!("process {pid}: code object at {code:#x}: {err:?}");
            }
            Code {
                function: None,
                first_line: 0,
                linetable: Box::default(),
                header: [0; 4],
                checked: now,
            }
        }
    }
}

impl Names {
    /// The index of the function, added if new; [`PyFrame::UNNAMED`] past the bounds.
    fn intern(&mut self, qualname: String, filename: String) -> u32 {
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
        self.bytes += bytes;
        let i = self.functions.len() as u32;
        self.functions.push(function.clone());
        self.by_function.insert(function, i);
        i
    }
}

#[cfg(test)]
mod tests;
