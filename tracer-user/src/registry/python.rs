//! Which traced processes run a CPython interpreter: among the objects a process maps, the
//! one named like `python3.X` or `libpython3.X.so` whose symbols make it an interpreter
//! (`python::detect_file` over the object's already-open file, never a path opened again).
//! Detection is done once per object identity and cached, the failures too (an unsupported
//! version is logged once, not at every load, and counted by reason: [`Catalog::python_refused`]).
//! The version of each process's interpreter is kept until the process is forgotten
//! ([`Catalog::python_version`], for the exporters' resource attributes).

use std::collections::{BTreeMap, HashMap};

use tracer_common::python::PyProcInfo;

use super::{Catalog, TableStore};
use crate::{
    procmaps::ObjectKey,
    python::{CodeLayout, PythonImage, detect_file},
};

/// Objects at most in the detection cache; past it the cache is emptied (named eviction:
/// objects are detected again when a process maps them next).
const MAX_DETECTED: usize = 4096;
/// Reasons counted apart at most (the rest are counted as [`OTHER_REASON`]: a malformed file's
/// reason carries its parser's words).
const MAX_REASONS: usize = 16;
/// The reason the reasons past [`MAX_REASONS`] are counted under.
pub const OTHER_REASON: &str = "other reasons";

/// The detection result of each interpreter-named object seen.
#[derive(Default)]
pub struct PythonObjects {
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

impl<T: TableStore> Catalog<T> {
    /// The kernel's record for `pid` if one of its current mappings is a CPython interpreter
    /// the walk supports (with that mapping's bias), else `None`.
    /// The interpreter found is also where the process's Python frames are named from
    /// ([`Catalog::pycode`]).
    pub fn python_info(&mut self, pid: u32) -> Option<PyProcInfo> {
        let found = self.find_python(pid);
        match found {
            Some((_, _, version)) => self.python.versions.insert(pid, version),
            None => self.python.versions.remove(&pid),
        };
        self.pycode.set(pid, found.map(|(info, layout, _)| (info, layout)));
        found.map(|(info, _, _)| info)
    }

    /// The version of the interpreter `pid` ran when it was last loaded, until it is forgotten
    /// (`None`: none found, or Python frames are not walked).
    pub fn python_version(&self, pid: u32) -> Option<PythonVersion> {
        self.python.versions.get(&pid).copied()
    }

    /// Forget the interpreter of a process that is gone.
    pub(super) fn forget_python(&mut self, pid: u32) {
        self.python.versions.remove(&pid);
    }

    /// The interpreters found in mapped objects whose frames are not walked, by reason (a
    /// version or build not supported, a file that cannot be read): objects, each counted
    /// once per detection.
    pub fn python_refused(&self) -> BTreeMap<String, u64> {
        self.python.refused.clone()
    }

    fn find_python(&mut self, pid: u32) -> Option<(PyProcInfo, CodeLayout, PythonVersion)> {
        let mappings = self.processes.current.get(&pid)?;
        for m in mappings {
            let Some(object) = m.object.and_then(|i| self.objects.get(i)) else {
                continue;
            };
            let (Some(key), Some(file)) = (&object.key, &object.file) else {
                continue;
            };
            if !interpreter_name(&object.name) {
                continue;
            }
            let cache = &mut self.python.detected;
            if !cache.contains_key(key) && cache.len() >= MAX_DETECTED {
                log::debug!("python: detection cache full ({MAX_DETECTED}), emptied");
                cache.clear();
            }
            let refused = &mut self.python.refused;
            let image = *cache.entry(key.clone()).or_insert_with(|| match detect_file(file) {
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
                return Some((image.proc_info(m.bias), image.layout.code, version));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests;
