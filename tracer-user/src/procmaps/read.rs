//! The thin I/O part of discovery: reads `/proc/PID/maps`, opens the file behind each
//! executable mapping once ([`super::open`]: the process's own `map_files` entry, else its path
//! inside the process's root, never out of it) and hands it to [`super::image::inspect`].
//! Only the ELF header, program headers and notes are read, lazily (`object::ReadCache`).
//! It must not parse anything itself, and one bad mapping never fails the whole process:
//! it becomes [`MappingKind::Unreadable`].

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use object::ReadCache;

pub use super::open::Known;
use super::open::ProcessFiles;
use super::{Backing, Mapping, MappingKind, MapsEntry, ParseError, Unreadable, inspect, parse_maps};
use crate::objfile::Pread;

/// Why the mappings of a process could not be listed at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcError {
    #[error("process {pid} is gone")]
    Gone { pid: u32 },
    #[error("permission denied reading {path} of process {pid} (needs root or CAP_SYS_PTRACE)")]
    PermissionDenied { pid: u32, path: PathBuf },
    #[error("cannot read {path} of process {pid}: {source}")]
    Io { pid: u32, path: PathBuf, source: io::Error },
    #[error("process {pid}: {source}")]
    Parse { pid: u32, source: ParseError },
}

/// The executable mappings of process `pid`, in address order, each with the identity and
/// bias of its object or the reason it has none. A process without mappings (a kernel
/// thread, a zombie) gives an empty list.
pub fn executable_mappings(pid: u32) -> Result<Vec<Mapping>, ProcError> {
    executable_mappings_with(pid, &|_| None)
}

/// [`executable_mappings`], reusing the files `known` has open (by identity) instead of
/// opening them again.
pub fn executable_mappings_with(pid: u32, known: Known<'_>) -> Result<Vec<Mapping>, ProcError> {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let maps_path = proc_dir.join("maps");
    let text = fs::read(&maps_path).map_err(|e| proc_error(pid, &maps_path, e))?;
    let entries = parse_maps(&text).map_err(|source| ProcError::Parse { pid, source })?;
    let mut files = ProcessFiles::new(proc_dir);
    let mappings: Vec<Mapping> = entries.into_iter().map(|e| mapping(&mut files, e, known)).collect();
    // A process that exits while its files are opened leaves Unreadable mappings behind: tell
    // that apart from real per-file failures by looking again (gone, or a zombie without maps).
    let unreadable = mappings
        .iter()
        .any(|m| matches!(m.kind, MappingKind::Unreadable { .. }));
    if unreadable && fs::read(&maps_path).map_or(true, |text| text.trim_ascii().is_empty()) {
        return Err(ProcError::Gone { pid });
    }
    Ok(mappings)
}

fn proc_error(pid: u32, path: &Path, error: io::Error) -> ProcError {
    if error.kind() == io::ErrorKind::NotFound || error.raw_os_error() == Some(libc::ESRCH) {
        ProcError::Gone { pid }
    } else if error.kind() == io::ErrorKind::PermissionDenied {
        ProcError::PermissionDenied {
            pid,
            path: path.to_owned(),
        }
    } else {
        ProcError::Io {
            pid,
            path: path.to_owned(),
            source: error,
        }
    }
}

fn mapping(files: &mut ProcessFiles, entry: MapsEntry, known: Known<'_>) -> Mapping {
    let (path, deleted, kind) = match &entry.backing {
        Backing::Anonymous => (PathBuf::new(), false, MappingKind::Anonymous),
        Backing::Pseudo(name) if name == "[vdso]" => (PathBuf::from(name), false, MappingKind::Vdso),
        Backing::Pseudo(name) => (PathBuf::from(name), false, MappingKind::Anonymous),
        Backing::File { path, deleted } => (path.clone(), *deleted, identify(files, &entry, path, *deleted, known)),
    };
    Mapping {
        start: entry.start,
        end: entry.end,
        file_offset: entry.file_offset,
        path,
        deleted,
        device: entry.device,
        inode: entry.inode,
        kind,
    }
}

fn identify(files: &mut ProcessFiles, entry: &MapsEntry, path: &Path, deleted: bool, known: Known<'_>) -> MappingKind {
    let opened = match files.open(entry, path, deleted, known) {
        Ok(opened) => opened,
        Err(reason) => return MappingKind::Unreadable { reason },
    };
    let facts = inspect(
        &ReadCache::new(Pread::new(&opened.file, opened.key.size)),
        entry.start,
        entry.end,
        entry.file_offset,
    );
    match facts {
        Ok(facts) => MappingKind::File {
            key: opened.key,
            bias: facts.bias,
            build_id: facts.build_id,
            file: opened.file,
        },
        Err(source) => MappingKind::Unreadable {
            reason: Unreadable::Elf {
                path: path.to_owned(),
                source,
            },
        },
    }
}
