//! The thin I/O part of discovery: reads `/proc/PID/maps`, opens the file behind each
//! executable mapping and hands it to [`super::image::inspect`]. It opens files through
//! `/proc/PID/root/<path>` so paths resolve in the process's mount namespace (containers), and
//! through `/proc/PID/map_files/<start>-<end>` (the very file mapped; needs
//! `CAP_CHECKPOINT_RESTORE` or root) when the path was deleted or now names another inode.
//! Only the ELF header, program headers and notes are read, lazily (`object::ReadCache`).
//! It must not parse anything itself, and one bad mapping never fails the whole process:
//! it becomes [`MappingKind::Unreadable`].

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object::ReadCache;

use super::{Backing, Mapping, MappingKind, MapsEntry, ObjectKey, ParseError, Unreadable, inspect, parse_maps};

/// Linux `ESRCH`: reading `/proc/PID/...` of a process that exits meanwhile. std has no
/// `ErrorKind` for it, and `libc` is only a dependency of the `ebpf` feature.
const ESRCH: i32 = 3;

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
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let maps_path = proc_dir.join("maps");
    let text = fs::read_to_string(&maps_path).map_err(|e| proc_error(pid, &maps_path, e))?;
    let entries = parse_maps(&text).map_err(|source| ProcError::Parse { pid, source })?;
    let mappings: Vec<Mapping> = entries.into_iter().map(|e| mapping(&proc_dir, e)).collect();
    // A process that exits while its files are opened leaves Unreadable mappings behind: tell
    // that apart from real per-file failures by looking again (gone, or a zombie without maps).
    let unreadable = mappings
        .iter()
        .any(|m| matches!(m.kind, MappingKind::Unreadable { .. }));
    if unreadable && fs::read_to_string(&maps_path).map_or(true, |text| text.trim().is_empty()) {
        return Err(ProcError::Gone { pid });
    }
    Ok(mappings)
}

fn proc_error(pid: u32, path: &Path, error: io::Error) -> ProcError {
    if error.kind() == io::ErrorKind::NotFound || error.raw_os_error() == Some(ESRCH) {
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

fn mapping(proc_dir: &Path, entry: MapsEntry) -> Mapping {
    let (path, deleted, kind) = match &entry.backing {
        Backing::Anonymous => (PathBuf::new(), false, MappingKind::Anonymous),
        Backing::Pseudo(name) if name == "[vdso]" => (PathBuf::from(name), false, MappingKind::Vdso),
        Backing::Pseudo(name) => (PathBuf::from(name), false, MappingKind::Anonymous),
        Backing::File { path, deleted } => (path.clone(), *deleted, identify(proc_dir, &entry, path, *deleted)),
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

fn identify(proc_dir: &Path, entry: &MapsEntry, path: &Path, deleted: bool) -> MappingKind {
    let (file, opened) = match open_mapped(proc_dir, entry, path, deleted) {
        Ok(found) => found,
        Err(reason) => return MappingKind::Unreadable { reason },
    };
    let metadata = match file.metadata() {
        Ok(metadata) => metadata,
        Err(e) => return io_reason(opened, e),
    };
    let cache = ReadCache::new(file);
    match inspect(&cache, entry.start, entry.end, entry.file_offset) {
        Ok(facts) => MappingKind::File {
            key: facts.build_id.map_or_else(
                || ObjectKey::File {
                    device: entry.device,
                    inode: entry.inode,
                    size: metadata.size(),
                    mtime_ns: i128::from(metadata.mtime()) * 1_000_000_000 + i128::from(metadata.mtime_nsec()),
                },
                ObjectKey::BuildId,
            ),
            bias: facts.bias,
        },
        Err(source) => MappingKind::Unreadable {
            reason: Unreadable::Elf { path: opened, source },
        },
    }
}

/// The mapped file and the path it was opened by: the path inside the process's root when it
/// still names the mapped inode (only the inode is compared: overlayfs reports another device
/// in `/proc/PID/maps` than `stat` does), else the `map_files` entry.
fn open_mapped(proc_dir: &Path, entry: &MapsEntry, path: &Path, deleted: bool) -> Result<(File, PathBuf), Unreadable> {
    if !deleted {
        let in_root = proc_dir.join("root").join(path.strip_prefix("/").unwrap_or(path));
        if let Ok(file) = File::open(&in_root)
            && file.metadata().is_ok_and(|m| m.ino() == entry.inode)
        {
            return Ok((file, in_root));
        }
    }
    let map_file = proc_dir
        .join("map_files")
        .join(format!("{:x}-{:x}", entry.start, entry.end));
    match File::open(&map_file) {
        Ok(file) => Ok((file, map_file)),
        Err(source) => Err(Unreadable::Io {
            path: map_file,
            source: Arc::new(source),
        }),
    }
}

fn io_reason(path: PathBuf, source: io::Error) -> MappingKind {
    MappingKind::Unreadable {
        reason: Unreadable::Io {
            path,
            source: Arc::new(source),
        },
    }
}
