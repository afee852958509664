//! Which traced processes run a CPython interpreter: the catalog shows the Python runtime
//! ([`crate::python::runtime`]) the objects a process maps.

use std::collections::BTreeMap;

use tracer_common::python::PyProcInfo;

use super::{Catalog, TableStore};
use crate::python::{PythonVersion, runtime::Candidate};

impl<T: TableStore> Catalog<T> {
    /// The kernel's record for `pid` if one of its current mappings is a CPython interpreter
    /// the walk supports (with that mapping's bias), else `None`
    /// ([`crate::python::Python::attach_objects`]).
    pub fn python_info(&mut self, pid: u32) -> Option<PyProcInfo> {
        let mappings = self.processes.current.get(&pid).map_or(&[][..], Vec::as_slice);
        let candidates: Vec<Candidate<'_>> = mappings
            .iter()
            .filter_map(|m| {
                let object = self.objects.get(m.object?)?;
                Some(Candidate {
                    key: object.key.as_ref()?,
                    file: object.file.as_deref()?,
                    name: &object.name,
                    path: &object.path,
                    bias: m.bias,
                })
            })
            .collect();
        self.runtimes.python.attach_objects(pid, &candidates)
    }

    /// The version of the interpreter `pid` ran when it was last loaded, until it is forgotten.
    pub fn python_version(&self, pid: u32) -> Option<PythonVersion> {
        self.runtimes.python.version(pid)
    }

    /// The interpreters found in mapped objects whose frames are not walked, by reason.
    pub fn python_refused(&self) -> BTreeMap<String, u64> {
        self.runtimes.python.refused()
    }
}
