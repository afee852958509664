//! What following processes needs from the world outside the session, as two small traits so
//! that the life cycle (exec, exit and grace, dlopen and dlclose, pid reuse, unloading) runs
//! against fakes in unit tests: [`KernelTables`] (the kernel maps the walker reads: unwind
//! tables and each process's mappings), implemented by [`crate::bpf::Kernel`], and [`Processes`]
//! (discovery: a process's mappings, whether it still runs), implemented by [`Live`] over
//! `/proc`.

use tracer_common::{python::PyProcInfo, trace::ExecMapping};

use crate::procmaps::{self, Known, Mapping, ProcError};

use crate::tables::TableSet;

/// The kernel maps the walker reads.
pub trait KernelTables {
    /// Write what changed in `tables` since the last call.
    fn sync_tables(&mut self, tables: &mut TableSet) -> anyhow::Result<()>;
    /// Trace `pid` with these mappings (replacing any it had); how many were left out.
    fn set_process(&mut self, pid: u32, mappings: &[ExecMapping]) -> anyhow::Result<usize>;
    /// Stop tracing `pid`.
    fn remove_process(&mut self, pid: u32) -> anyhow::Result<()>;
    /// Walk the CPython frames of `pid` with `info`, or no more with `None`.
    fn set_python(&mut self, _pid: u32, _info: Option<&PyProcInfo>) -> anyhow::Result<()> {
        Ok(())
    }
}

impl KernelTables for crate::bpf::Kernel {
    fn sync_tables(&mut self, tables: &mut TableSet) -> anyhow::Result<()> {
        crate::bpf::Kernel::sync_tables(self, tables)
    }

    fn set_process(&mut self, pid: u32, mappings: &[ExecMapping]) -> anyhow::Result<usize> {
        crate::bpf::Kernel::set_process(self, pid, mappings)
    }

    fn remove_process(&mut self, pid: u32) -> anyhow::Result<()> {
        crate::bpf::Kernel::remove_process(self, pid)
    }

    fn set_python(&mut self, pid: u32, info: Option<&PyProcInfo>) -> anyhow::Result<()> {
        match info {
            Some(info) => crate::bpf::Kernel::set_python(self, pid, info),
            None => crate::bpf::Kernel::remove_python(self, pid),
        }
    }
}

/// The processes being followed, as discovery sees them.
pub trait Processes {
    /// `pid`'s executable mappings, each with its file: the one `known` has for its identity,
    /// else opened now (see [`procmaps`]).
    fn mappings(&self, pid: u32, known: Known<'_>) -> Result<Vec<Mapping>, ProcError>;
    /// Whether `pid` still runs (not gone, not a zombie).
    fn alive(&self, pid: u32) -> bool;
}

/// The processes of this host, through `/proc`.
pub struct Live;

impl Processes for Live {
    fn mappings(&self, pid: u32, known: Known<'_>) -> Result<Vec<Mapping>, ProcError> {
        procmaps::executable_mappings_with(pid, known)
    }

    fn alive(&self, pid: u32) -> bool {
        super::targets::alive(pid)
    }
}
