//! Discovery (docs/design.md, step 1): a process's executable mappings and the objects behind
//! them, as the in-kernel walker needs them: per address range, an object identity and the bias
//! such that `object-relative address = runtime pc - bias`, object-relative addresses being the
//! ELF file's own virtual addresses (what SFrame and `.eh_frame` describe).
//!
//! Split so that nearly everything is pure: [`parse`] reads `/proc/PID/maps` text, [`image`]
//! computes bias and build-id from ELF bytes, and only [`read`] and [`open`] touch `/proc`.
//! Discovery opens each mapped file once, safely ([`open`]), and hands the open file on with
//! the mapping: nothing after it finds the file again by a path. No aya, no tokio, no
//! unwind-table parsing here; tables are built per [`ObjectKey`] elsewhere.

pub mod image;
mod open;
pub mod parse;
pub mod read;

use std::fmt;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

pub use image::{ElfFacts, ImageError, inspect};
pub(crate) use open::{open_dir, open_in_root};
pub use parse::{Backing, MapsEntry, ParseError, parse_maps};
pub use read::{Known, ProcError, executable_mappings, executable_mappings_with};

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

/// Which file a mapping shows: the key under which its unwind table is built once and shared
/// by every process mapping the same file. The file as the kernel knows it (device and inode
/// from `/proc/PID/maps`) plus its size, modification and change times (nanoseconds since the
/// epoch), so that a file rewritten in place (same inode) is another object. Never the
/// build-id alone: any file can carry any build-id, and a fake library carrying libc's would
/// lend its table to every libc.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub device: Device,
    pub inode: u64,
    pub size: u64,
    pub mtime_ns: i128,
    /// The change time cannot be set by the file's owner (unlike the modification time).
    pub ctime_ns: i128,
}

impl fmt::Display for ObjectKey {
    /// `major:minor/inode`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.device, self.inode)
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
    /// An ELF file: unwind with the table of `key`, at `pc - bias`. `file` is the file
    /// itself, opened once by discovery (read it from there, never by path again).
    File {
        key: ObjectKey,
        bias: u64,
        /// The GNU build-id, for finding separate debug information (not an identity).
        build_id: Option<Box<[u8]>>,
        file: Arc<File>,
    },
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
    #[error("cannot read {}: {source}", path.display())]
    Io { path: PathBuf, source: Arc<std::io::Error> },
    #[error("{}: {source}", path.display())]
    Elf { path: PathBuf, source: ImageError },
}
