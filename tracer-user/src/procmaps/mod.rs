//! Discovery (docs/design.md, step 1): a process's executable mappings and the objects behind
//! them, as the in-kernel walker needs them: per address range, an object identity and the bias
//! such that `object-relative address = runtime pc - bias`, object-relative addresses being the
//! ELF file's own virtual addresses (what SFrame and `.eh_frame` describe).
//!
//! Split so that nearly everything is pure: [`parse`] reads `/proc/PID/maps` text, [`image`]
//! computes bias and build-id from ELF bytes, and only [`read`] touches `/proc`. No aya, no
//! tokio, no unwind-table parsing here; tables are built per [`ObjectKey`] elsewhere.

pub mod image;
pub mod parse;
pub mod read;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

pub use image::{ElfFacts, ImageError, inspect};
pub use parse::{Backing, MapsEntry, ParseError, parse_maps};
pub use read::{ProcError, executable_mappings};

/// A device number as `/proc/PID/maps` prints it (`major:minor`, hex).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Device {
    pub major: u32,
    pub minor: u32,
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02x}:{:02x}", self.major, self.minor)
    }
}

/// Which object a mapping shows: the key under which its unwind table is built once and shared
/// by every process mapping it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKey {
    /// The GNU build-id (`NT_GNU_BUILD_ID`): the same bytes wherever the file is installed.
    BuildId(Box<[u8]>),
    /// No build-id: the file as the kernel knows it (device and inode from `/proc/PID/maps`)
    /// plus size and modification time (nanoseconds since the epoch), so a file rewritten in
    /// place (same inode) is a different object.
    File {
        device: Device,
        inode: u64,
        size: u64,
        mtime_ns: i128,
    },
}

impl fmt::Display for ObjectKey {
    /// Hex build-id, or `major:minor/inode`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObjectKey::BuildId(id) => id.iter().try_for_each(|b| write!(f, "{b:02x}")),
            ObjectKey::File { device, inode, .. } => write!(f, "{device}/{inode}"),
        }
    }
}

/// One executable mapping of a process.
#[derive(Clone, Debug)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub file_offset: u64,
    /// The path as the process sees it (without ` (deleted)`); a pseudo name such as `[vdso]`;
    /// empty for anonymous memory.
    pub path: PathBuf,
    /// The file was unlinked (or replaced) after being mapped; memfd files always are.
    pub deleted: bool,
    pub device: Device,
    pub inode: u64,
    pub kind: MappingKind,
}

/// What the walker can do with a mapping.
#[derive(Clone, Debug)]
pub enum MappingKind {
    /// An ELF file: unwind with the table of `key`, at `pc - bias`.
    File { key: ObjectKey, bias: u64 },
    /// The kernel's vDSO. It has no file; its image is read from the process's memory later.
    Vdso,
    /// No ELF file behind it: anonymous memory (JIT code), `[vsyscall]`, `[anon:name]`...
    Anonymous,
    /// A file mapping whose ELF could not be used; the other mappings are unaffected.
    Unreadable { reason: Unreadable },
}

/// Why one file mapping could not be identified.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Unreadable {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: Arc<std::io::Error> },
    #[error("{path}: {source}")]
    Elf { path: PathBuf, source: ImageError },
}
