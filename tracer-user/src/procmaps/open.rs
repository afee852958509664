//! Opening the file behind one mapping, as a root process beside hostile ones must: the
//! process chooses its paths, its mount namespace, its root and what sits at a path by the time
//! the tracer looks (a FIFO, a symlink to a host file, another file with the same inode number
//! on a file system of its own). So:
//!
//! 1. First `/proc/PID/map_files/START-END`: the kernel hands over the very file mapped, with no
//!    path resolved at all (needs root or `CAP_CHECKPOINT_RESTORE`). It must still be a regular
//!    file with the mapping's inode (the mapping may have been replaced meanwhile). Its device is
//!    not compared: on btrfs `stat` reports the subvolume's device, `/proc/PID/maps` the file
//!    system's, and this route needs no check of where a path led.
//! 2. Else, for a file not deleted, its path inside the process's own root: `openat2` relative
//!    to `/proc/PID/root` with `RESOLVE_IN_ROOT` (an absolute symlink or `..` stays inside that
//!    root) and `RESOLVE_NO_MAGICLINKS`, `O_NOFOLLOW`. It must be a regular file with the
//!    mapping's device and inode (`/proc/PID/maps` prints the kernel's `major:minor`, which
//!    `libc::major`/`minor` recover from `st_dev`).
//! 3. Else the same path in the tracer's own root, checked the same way (`/proc/PID/maps` shows
//!    the path from the reader's root when the file is reachable from it: a process that
//!    `chroot`ed without a mount namespace of its own).
//!
//! On overlayfs (most containers) `stat` reports the overlay's device, not the one
//! `/proc/PID/maps` shows, so steps 2 and 3 refuse such files: only step 1 reads them.
//!
//! Both open with `O_PATH` first (no blocking on a FIFO, no device driver's open) and open for
//! reading only once the descriptor is known to be the right regular file
//! ([`crate::sys::objfile::reopen_checked`]). Nothing here reads the file.

use std::{
    ffi::CString,
    fs::File,
    io,
    os::{
        fd::AsFd as _,
        unix::{ffi::OsStrExt as _, fs::MetadataExt as _, fs::OpenOptionsExt as _},
    },
    path::{Path, PathBuf},
    sync::Arc,
};

use super::{MapsEntry, ObjectKey, Unreadable};
use crate::sys::objfile::{check_regular, reopen_checked};
use tracer_unwind::objfile::ObjectFileError;

/// The files already open, by identity: a file known is not opened for reading again.
pub type Known<'a> = &'a dyn Fn(&ObjectKey) -> Option<Arc<File>>;

/// A mapped file, open for reading, and its identity.
pub(super) struct Opened {
    pub key: ObjectKey,
    pub file: Arc<File>,
}

/// What the mapped files of one process are opened relative to.
pub(super) struct ProcessFiles {
    proc_dir: PathBuf,
    /// `/proc/PID/root`, opened when first needed (`None` inside: it could not be).
    root: Option<Option<File>>,
}

impl ProcessFiles {
    pub(super) fn new(proc_dir: PathBuf) -> ProcessFiles {
        ProcessFiles { proc_dir, root: None }
    }

    /// The file `entry` maps (module docs), open for reading: the one `known` has for its
    /// identity, else opened now.
    pub(super) fn open(
        &mut self,
        entry: &MapsEntry,
        path: &Path,
        deleted: bool,
        known: Known<'_>,
    ) -> Result<Opened, Unreadable> {
        let map_file = self
            .proc_dir
            .join("map_files")
            .join(format!("{:x}-{:x}", entry.start, entry.end));
        let by_map_file = open_path(&map_file).and_then(|handle| {
            let meta = handle.metadata()?;
            if meta.ino() != entry.inode {
                return Err(mismatch(entry, &meta).into());
            }
            finish(&handle, &meta, entry, known)
        });
        let first_error = match by_map_file {
            Ok(file) => return Ok(file),
            Err(e) => e,
        };
        if deleted {
            return Err(unreadable(map_file, first_error));
        }
        let root = self.root.get_or_insert_with(|| open_dir(&self.proc_dir.join("root")));
        let in_root = self.proc_dir.join("root").join(path.strip_prefix("/").unwrap_or(path));
        let Some(root) = root else {
            return Err(unreadable(map_file, first_error));
        };
        match open_checked(root, path, entry, known) {
            Ok(file) => Ok(file),
            // The process's own view first: only if the path is not there at all, the tracer's.
            Err(ObjectFileError::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                let own = open_dir(Path::new("/")).ok_or_else(|| unreadable(in_root.clone(), e.into()))?;
                open_checked(&own, path, entry, known).map_err(|e| unreadable(path.to_owned(), e))
            }
            Err(e) => Err(unreadable(in_root, e)),
        }
    }
}

/// `path` opened inside `root` (module docs, step 2) if it is the regular file `entry` maps.
fn open_checked(root: &File, path: &Path, entry: &MapsEntry, known: Known<'_>) -> Result<Opened, ObjectFileError> {
    let handle = open_in_root(root, path)?;
    let meta = handle.metadata()?;
    let device = (libc::major(meta.dev()), libc::minor(meta.dev()));
    if (device, meta.ino()) != ((entry.device.major, entry.device.minor), entry.inode) {
        return Err(mismatch(entry, &meta).into());
    }
    finish(&handle, &meta, entry, known)
}

/// The checked `handle` (of metadata `meta`) open for reading, unless `known` has the file of
/// its identity already.
fn finish(
    handle: &File,
    meta: &std::fs::Metadata,
    entry: &MapsEntry,
    known: Known<'_>,
) -> Result<Opened, ObjectFileError> {
    check_regular(meta)?;
    let key = ObjectKey {
        device: entry.device,
        inode: entry.inode,
        size: meta.size(),
        mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
    };
    let file = match known(&key) {
        Some(file) => file,
        None => Arc::new(reopen_checked(handle, meta)?),
    };
    Ok(Opened { key, file })
}

/// A directory as an `O_PATH` descriptor, `None` when it cannot be opened.
pub(crate) fn open_dir(path: &Path) -> Option<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
        .ok()
}

/// A descriptor of `path` that resolves nothing for reading (`O_PATH`); magic links followed.
fn open_path(path: &Path) -> Result<File, ObjectFileError> {
    Ok(std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)?)
}

/// `path` (absolute, as the process sees it) resolved inside `root`, never out of it (module
/// docs, step 2), as an `O_PATH` descriptor.
pub(crate) fn open_in_root(root: &File, path: &Path) -> io::Result<File> {
    let relative = path.strip_prefix("/").unwrap_or(path);
    let name =
        CString::new(relative.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    crate::sys::fs::open_in_root(root.as_fd(), &name)
}

fn mismatch(entry: &MapsEntry, meta: &std::fs::Metadata) -> io::Error {
    io::Error::other(format!(
        "not the mapped file (device {:02x}:{:02x} inode {}, the mapping has {} inode {})",
        libc::major(meta.dev()),
        libc::minor(meta.dev()),
        meta.ino(),
        entry.device,
        entry.inode
    ))
}

fn unreadable(path: PathBuf, error: ObjectFileError) -> Unreadable {
    match error {
        ObjectFileError::Io(source) => Unreadable::Io {
            path,
            source: Arc::new(source),
        },
        other => Unreadable::Io {
            path,
            source: Arc::new(io::Error::other(other.to_string())),
        },
    }
}
