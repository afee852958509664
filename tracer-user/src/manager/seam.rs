//! The seam between the process manager and the world outside it: what following processes
//! needs from the kernel and from `/proc`, as two small traits so
//! that the life cycle (exec, exit and grace, dlopen and dlclose, pid reuse, unloading) runs
//! against fakes in unit tests: [`KernelTables`] (the kernel maps the walker reads: unwind
//! tables and each process's mappings), implemented by [`crate::bpf::Kernel`], and [`Processes`]
//! (discovery: a process's mappings, whether it still runs), implemented by [`Live`] over
//! `/proc`.

use tracer_common::{
    python::{MAP_PYTHON, PY_THREAD_PTHREAD, PyProcInfo},
    trace::{ExecMapping, MAP_PROCS},
};

use crate::procmaps::{self, Known, Mapping, ProcError};

use crate::tables::TableSet;

/// Why the kernel maps did not take a change.
#[derive(Debug, thiserror::Error)]
pub enum SeamError {
    /// The map (named) has no room for one more entry: the change concerns one process, which
    /// is counted and left out.
    #[error("the kernel map {0} is full")]
    Full(&'static str),
    /// This kernel cannot do it for this process (what it lacks, said): counted, left out.
    #[error("{0}")]
    Unsupported(&'static str),
    /// A map could not be read or written: the session cannot go on.
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

/// The kernel maps the walker reads.
pub trait KernelTables {
    /// Write what changed in `tables` since the last call.
    fn sync_tables(&mut self, tables: &mut TableSet) -> Result<(), SeamError>;
    /// Trace `pid` with these mappings (replacing any it had); how many were left out.
    fn set_process(&mut self, pid: u32, mappings: &[ExecMapping]) -> Result<usize, SeamError>;
    /// Stop tracing `pid`.
    fn remove_process(&mut self, pid: u32) -> Result<(), SeamError>;
    /// Walk the CPython frames of `pid` with `info`, or no more with `None`.
    fn set_python(&mut self, _pid: u32, _info: Option<&PyProcInfo>) -> Result<(), SeamError> {
        Ok(())
    }
}

impl KernelTables for crate::bpf::Kernel {
    fn sync_tables(&mut self, tables: &mut TableSet) -> Result<(), SeamError> {
        Ok(crate::bpf::Kernel::sync_tables(self, tables)?)
    }

    fn set_process(&mut self, pid: u32, mappings: &[ExecMapping]) -> Result<usize, SeamError> {
        crate::bpf::Kernel::set_process(self, pid, mappings).map_err(|err| full_or_failed(MAP_PROCS, err))
    }

    fn remove_process(&mut self, pid: u32) -> Result<(), SeamError> {
        Ok(crate::bpf::Kernel::remove_process(self, pid)?)
    }

    fn set_python(&mut self, pid: u32, info: Option<&PyProcInfo>) -> Result<(), SeamError> {
        match info {
            Some(info) if info.offsets.flags & PY_THREAD_PTHREAD != 0 && !self.finds_pthreads() => {
                Err(SeamError::Unsupported(
                    "CPython before 3.11: the kernel's BTF has no task_struct.thread.fsbase (x86-64 only) to find its threads by",
                ))
            }
            Some(info) => {
                crate::bpf::Kernel::set_python(self, pid, info).map_err(|err| full_or_failed(MAP_PYTHON, err))
            }
            None => Ok(crate::bpf::Kernel::remove_python(self, pid)?),
        }
    }
}

/// `err` of a write to `map`: [`SeamError::Full`] where the kernel said the map has no room
/// (`E2BIG` on an insert), else [`SeamError::Failed`].
fn full_or_failed(map: &'static str, err: anyhow::Error) -> SeamError {
    const E2BIG: i32 = 7;
    let full = err.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<aya::maps::MapError>(),
            Some(aya::maps::MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(E2BIG)
        )
    });
    if full {
        SeamError::Full(map)
    } else {
        SeamError::Failed(err)
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
        alive(pid)
    }
}

/// Whether `pid` runs: its `/proc/PID/stat` can be read and its state is not zombie.
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
}

#[cfg(test)]
mod tests;
