//! CPython interpreters in traced processes: which mapped object is one, which version it is
//! and how its structures are laid out ([`image`], [`layout`]), what the kernel is told about
//! a process running it (`tracer_common::python::PyProcInfo`), and how a code object and an
//! instruction offset become a qualified name, a file and a line ([`linetable`]).
//!
//! Versions: 3.6 to 3.12 by per-version layout tables (checked against the interpreters'
//! DWARF), 3.13 to 3.15 by the `_Py_DebugOffsets` the interpreter publishes at the start of
//! `_PyRuntime` ([`debug_offsets`]: the structure's layout per version). Earlier versions (2.7,
//! no `_PyEval_EvalFrameDefault`) and free-threaded builds are refused with a reason.
//!
//! Pure: every function here takes bytes (an object's image, memory read from a process) and
//! never opens a file or a process.

pub mod code;
pub mod cold;
pub mod debug_offsets;
pub mod image;
pub mod layout;
pub mod linetable;
pub mod merge;
pub mod pycode;
pub mod pymap;
pub mod pymem;
pub mod runtime;

pub use image::{PythonImage, detect, detect_file};
pub use layout::{CodeLayout, Layout};
pub use pycode::{PYTHON_OBJECT, PyCodes, PyFrame, PyFrameStats, PyFunction};
pub use pymap::PyMapStats;
pub use pymem::MemReader;
pub use runtime::{Python, PythonVersion};

/// Why an object that looks like a CPython interpreter cannot be used.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PythonError {
    #[error("malformed ELF: {0}")]
    Elf(String),
    #[error("CPython before 3.6 (2.7 or 3.5 and earlier: no _PyEval_EvalFrameDefault): not supported")]
    TooOld,
    #[error("CPython 3.6 without its symbol table (no interp_head): not supported")]
    NoSymbolTable,
    #[error("CPython {major}.{minor}: not supported (3.6 to 3.15 are)")]
    Unsupported { major: u8, minor: u8 },
    #[error("CPython {major}.{minor}: free-threaded builds are not supported")]
    FreeThreaded { major: u8, minor: u8 },
    /// Before 3.11 a thread state is matched to its thread by the TLS base (`pthread_self()`),
    /// whose place in the kernel's task the walk knows on x86-64 only.
    #[error(
        "CPython {major}.{minor} on {arch}: its threads are found by their TLS base, which the kernel walk reads on x86-64 only"
    )]
    ThreadsByTlsBase { major: u8, minor: u8, arch: String },
    #[error("symbol {0} is not in the file's data")]
    Unreadable(&'static str),
    #[error("_Py_DebugOffsets: {0}")]
    DebugOffsets(&'static str),
}

/// The layout of CPython `major.minor`; `runtime` is the start of `_PyRuntime`'s initialized
/// bytes (needed from 3.13 on).
pub fn for_version(major: u8, minor: u8, runtime: Option<&[u8]>) -> Result<Layout, PythonError> {
    match (major, minor) {
        (3, 6) => Ok(layout::V3_6),
        (3, 7) => Ok(layout::V3_7),
        (3, 8) => Ok(layout::V3_8),
        (3, 9) => Ok(layout::V3_9),
        (3, 10) => Ok(layout::V3_10),
        (3, 11) => Ok(layout::V3_11),
        (3, 12) => Ok(layout::V3_12),
        (3, 13..=15) => {
            let bytes = runtime.ok_or(PythonError::Unreadable("_PyRuntime"))?;
            debug_offsets::from_debug_offsets(bytes, major, minor)
        }
        _ => Err(PythonError::Unsupported { major, minor }),
    }
}

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
