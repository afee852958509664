//! The CPython runtime: which traced processes run a CPython interpreter (among the objects a
//! process maps, the one named like `python3.X` or `libpython3.X.so` whose symbols make it an
//! interpreter: [`super::detect_file`] over the object's already-open file, never a path
//! opened again), and the naming of their Python frames ([`PyCodes`]). Detection is done once
//! per object identity and cached, the failures too (an unsupported version is logged once,
//! not at every load, and counted by reason: [`Python::refused`]). The version of each
//! process's interpreter is kept until the process is forgotten ([`Python::version`], for the
//! exporters' resource attributes).

use std::{
    collections::{BTreeMap, HashMap},
    fs::File,
    path::Path,
};

use tracer_common::python::PyProcInfo;

use super::{CodeLayout, PYTHON_OBJECT, PyCodes, PyFrame, PythonImage, detect_file};
use crate::{
    export::model::FrameSource,
    frame::Frame,
    procmaps::ObjectKey,
    runtime::{Runtime, RuntimeFrame},
};

/// Objects at most in the detection cache; past it the cache is emptied (named eviction:
/// objects are detected again when a process maps them next).
const MAX_DETECTED: usize = 4096;
/// Reasons counted apart at most (the rest are counted as [`OTHER_REASON`]: a malformed file's
/// reason carries its parser's words).
const MAX_REASONS: usize = 16;
/// The reason the reasons past [`MAX_REASONS`] are counted under.
pub const OTHER_REASON: &str = "other reasons";

/// The CPython runtime: the interpreters found in the objects processes map (each
/// interpreter-named object detected once), the version each process runs, and its Python
/// frames named ([`PyCodes`]).
#[derive(Default)]
pub struct Python {
    /// The processes' interpreters, and their Python frames named.
    pub code: PyCodes,
    detected: HashMap<ObjectKey, Option<PythonImage>>,
    /// Interpreter objects found and not walked, by reason (each detection counted once).
    refused: BTreeMap<String, u64>,
    /// The interpreter each process ran when it was last loaded.
    versions: HashMap<u32, PythonVersion>,
}

/// The version of a CPython interpreter found in a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PythonVersion {
    pub major: u8,
    pub minor: u8,
    /// Known from `Py_Version` (3.11+) only.
    pub micro: Option<u8>,
}

impl std::fmt::Display for PythonVersion {
    /// `3.11.7`, or `3.9` when the micro release is not known.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)?;
        match self.micro {
            Some(micro) => write!(f, ".{micro}"),
            None => Ok(()),
        }
    }
}

/// Whether a mapped file's name is one an interpreter is shipped under (2.7's too: it is
/// refused by name).
fn interpreter_name(name: &str) -> bool {
    ["python2", "python3", "libpython2", "libpython3"]
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

/// An object a process maps, as detection looks at it.
#[derive(Clone, Copy, Debug)]
pub struct Candidate<'a> {
    pub key: &'a ObjectKey,
    pub file: &'a File,
    /// Its file name, and its path (for the log).
    pub name: &'a str,
    pub path: &'a Path,
    /// The mapping's bias.
    pub bias: u64,
}

impl Python {
    /// Process `pid` maps `objects` now: the kernel's record for it if one of them is a
    /// CPython interpreter the walk supports (with that mapping's bias), else `None`. The
    /// interpreter found is also where the process's Python frames are named from.
    pub fn attach_objects(&mut self, pid: u32, objects: &[Candidate<'_>]) -> Option<PyProcInfo> {
        let found = self.find(objects);
        match found {
            Some((_, _, version)) => self.versions.insert(pid, version),
            None => self.versions.remove(&pid),
        };
        self.code.set(pid, found.map(|(info, layout, _)| (info, layout)));
        found.map(|(info, _, _)| info)
    }

    /// The version of the interpreter `pid` ran when it was last loaded, until it is forgotten
    /// (`None`: none found, or Python frames are not walked).
    pub fn version(&self, pid: u32) -> Option<PythonVersion> {
        self.versions.get(&pid).copied()
    }

    /// The interpreters found in mapped objects whose frames are not walked, by reason (a
    /// version or build not supported, a file that cannot be read): objects, each counted
    /// once per detection.
    pub fn refused(&self) -> BTreeMap<String, u64> {
        self.refused.clone()
    }

    fn find(&mut self, objects: &[Candidate<'_>]) -> Option<(PyProcInfo, CodeLayout, PythonVersion)> {
        for object in objects {
            if !interpreter_name(object.name) {
                continue;
            }
            let cache = &mut self.detected;
            if !cache.contains_key(object.key) && cache.len() >= MAX_DETECTED {
                log::debug!("python: detection cache full ({MAX_DETECTED}), emptied");
                cache.clear();
            }
            let refused = &mut self.refused;
            let image = *cache
                .entry(object.key.clone())
                .or_insert_with(|| match detect_file(object.file) {
                    Ok(image) => image,
                    Err(err) => {
                        log::warn!("{}: {err}; its Python frames are not shown", object.path.display());
                        let reason = err.to_string();
                        let reason = if refused.contains_key(&reason) || refused.len() < MAX_REASONS {
                            reason
                        } else {
                            OTHER_REASON.to_owned()
                        };
                        *refused.entry(reason).or_default() += 1;
                        None
                    }
                });
            if let Some(image) = image {
                let version = PythonVersion {
                    major: image.major,
                    minor: image.minor,
                    micro: image.micro,
                };
                return Some((image.proc_info(object.bias), image.layout.code, version));
            }
        }
        None
    }
}

impl Runtime for Python {
    fn name(&self) -> &'static str {
        "python"
    }

    fn detach(&mut self, pid: u32) {
        self.code.forget(pid);
        self.versions.remove(&pid);
    }

    /// A Python function at a line: in the [`PYTHON_OBJECT`] pseudo-object, at an offset
    /// standing for its function and line (`function << 32 | line`: what tells its pprof
    /// location apart), or at its code object's address when that could not be read.
    fn resolve(&self, frame: &Frame) -> Option<RuntimeFrame> {
        let Frame::Python(py) = *frame else {
            return None;
        };
        let PyFrame { function, line, code } = py;
        Some(match self.code.function(function) {
            Some(named) => {
                let offset = u64::from(function) << 32 | u64::from(line);
                RuntimeFrame {
                    object: PYTHON_OBJECT,
                    addr: offset,
                    offset,
                    symbol: Some(named.qualname.into()),
                    file: Some(named.filename.into()),
                    line: (line != 0).then_some(line),
                    source: FrameSource::Python,
                    inlined: false,
                }
            }
            None => RuntimeFrame {
                object: PYTHON_OBJECT,
                addr: code,
                offset: code,
                symbol: None,
                file: None,
                line: None,
                source: FrameSource::Python,
                inlined: false,
            },
        })
    }

    fn sizes(&self, add: &mut dyn FnMut(&'static str, usize)) {
        self.code.sizes(add);
    }
}

#[cfg(test)]
mod tests;
