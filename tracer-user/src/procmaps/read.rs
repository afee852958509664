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
use crate::sys::objfile::Pread;

/// Why the mappings of a process could not be listed at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcError {
    #[error("process {pid} is gone")]
    Gone { pid: u32 },
    #[error("permission denied reading {path} of process {pid}: {why}")]
    PermissionDenied {
        pid: u32,
        path: PathBuf,
        /// What refused it, as far as this process can tell ([`denial_cause`]).
        why: &'static str,
    },
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
            why: denial_cause(effective_ids(), yama_scope()),
        }
    } else {
        ProcError::Io {
            pid,
            path: path.to_owned(),
            source: error,
        }
    }
}

/// `CAP_SYS_PTRACE`: reading the memory maps of another user's process.
const CAP_SYS_PTRACE: u32 = 19;

/// This process's effective user id and whether `CAP_SYS_PTRACE` is in its effective set.
fn effective_ids() -> (u32, bool) {
    let euid = crate::sys::process::effective_uid();
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let caps = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    (euid, caps & (1 << CAP_SYS_PTRACE) != 0)
}

/// Yama's `ptrace_scope` (0 to 3), when the module is there.
fn yama_scope() -> Option<u8> {
    fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// Why reading another process's `/proc/PID/maps` was refused, from who this process is:
/// `(euid, has CAP_SYS_PTRACE)` and Yama's scope. Only an unprivileged user is told to get
/// root: root that was refused is told what refused it.
pub(crate) fn denial_cause((euid, ptrace): (u32, bool), yama: Option<u8>) -> &'static str {
    match (euid, ptrace, yama) {
        (_, _, Some(3)) => {
            "Yama's kernel.yama.ptrace_scope is 3, which refuses every process, root's included, until reboot"
        }
        (0, false, _) => {
            "running as root, but without CAP_SYS_PTRACE (dropped by the container or a capability bounding set): \
             grant CAP_SYS_PTRACE"
        }
        (0, true, _) => {
            "refused although running as root with CAP_SYS_PTRACE (by a security module such as AppArmor or \
             SELinux, the process's user namespace, or what is mounted over /proc): `dmesg` may name the denial"
        }
        (_, false, _) => "it needs root or CAP_SYS_PTRACE: run it with sudo",
        (_, true, _) => "refused despite CAP_SYS_PTRACE: a security module (AppArmor, SELinux) refuses it",
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

#[cfg(test)]
mod tests;
