//! `--output` files, created safely in directories other users can write to (a shared `/tmp`):
//! the tracer runs as root and its outputs carry kernel addresses and other users' command
//! lines, so
//!
//! 1. what is at the path is looked at without following it (`O_PATH | O_NOFOLLOW`, then
//!    `fstat`): a symbolic link, a FIFO, a socket, a directory or a block device is refused
//!    before tracing starts;
//! 2. a new or regular file is never opened: the output goes to a temporary file beside it,
//!    named unpredictably and created with `O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600, and is
//!    renamed over the path only once complete ([`Placement::commit`]); a session that fails or
//!    an output that fails leaves what was at the path as it was and removes its temporary file;
//! 3. a character device (`/dev/null`, `/dev/full`, a terminal) is written in place, opened with
//!    `O_NOFOLLOW | O_NONBLOCK | O_NOCTTY` and checked to be the device that was looked at
//!    (users cannot create devices, so one at the path was put there by root).
//!
//! The directory is held open, so the rename lands in the directory the file was created in
//! even if the path's directories are renamed meanwhile.
//!
//! What the session writes for its user ([`create_for`] with an [`Access`]) is, under `sudo`,
//! owned by the user who ran it (`SUDO_UID`/`SUDO_GID`, checked to be plain ids other than
//! root's), and has the mode `--output-mode` gives (0600 without it): the temporary file is
//! given both through its descriptor (`fchown`, `fchmod`) before a byte is written.
//!
//! Temporary files not yet committed are known process-wide, so that a command ended by a
//! signal removes them ([`abandon_all`]) without waiting for the thread writing them: after
//! that no output is created or committed any more, and none is left as if it were complete.

use std::{
    ffi::{CString, OsStr},
    fs::File,
    io,
    os::{
        fd::{AsFd, AsRawFd as _, OwnedFd},
        unix::ffi::OsStrExt as _,
    },
    path::{Path, PathBuf},
    sync::{Mutex, PoisonError},
};

use crate::sys;
/// Why an output file cannot be created.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputFileError {
    #[error(
        "refusing to write {}: it is {what} (give a regular file, a new path or a character device such as /dev/null)",
        path.display()
    )]
    NotAFile { path: PathBuf, what: &'static str },
    #[error("cannot write {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

/// Who owns a new output file, and its mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// `(uid, gid)` to give the file to; `None`: the tracer's own.
    pub owner: Option<(u32, u32)>,
    /// Permission bits, at most 0o666.
    pub mode: u32,
}

impl Default for Access {
    /// The tracer's own, 0600.
    fn default() -> Access {
        Access {
            owner: None,
            mode: 0o600,
        }
    }
}

/// The widest `--output-mode`: read and write for anyone, never execute or set-id bits.
pub const MAX_MODE: u32 = 0o666;

/// Why `SUDO_UID`/`SUDO_GID` are not used.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SudoIdsError {
    #[error("{name} is `{value}`, not a user or group id: the outputs stay root's")]
    NotAnId { name: &'static str, value: String },
    #[error("SUDO_UID is set without SUDO_GID (or the reverse): the outputs stay root's")]
    Half,
}

impl Access {
    /// The access of outputs in a session run by root for `sudo_uid`/`sudo_gid` (the values
    /// of `SUDO_UID`, `SUDO_GID`; `None` when unset) with `mode`: given to that user unless
    /// it is root. An id is decimal digits (at most 10) below `u32::MAX` (which `chown` reads
    /// as "leave it"); anything else is refused and the outputs stay root's.
    pub fn for_sudo(
        euid: u32,
        sudo_uid: Option<&str>,
        sudo_gid: Option<&str>,
        mode: u32,
    ) -> (Access, Option<SudoIdsError>) {
        let mut access = Access { owner: None, mode };
        if euid != 0 {
            return (access, None);
        }
        let id = |name: &'static str, value: &str| {
            value
                .parse::<u32>()
                .ok()
                .filter(|&id| value.len() <= 10 && value.bytes().all(|b| b.is_ascii_digit()) && id != u32::MAX)
                .ok_or_else(|| SudoIdsError::NotAnId {
                    name,
                    value: value.to_owned(),
                })
        };
        match (sudo_uid, sudo_gid) {
            (None, None) => (access, None),
            (Some(uid), Some(gid)) => match id("SUDO_UID", uid).and_then(|u| Ok((u, id("SUDO_GID", gid)?))) {
                Ok((0, _)) => (access, None),
                Ok(owner) => {
                    access.owner = Some(owner);
                    (access, None)
                }
                Err(err) => (access, Some(err)),
            },
            _ => (access, Some(SudoIdsError::Half)),
        }
    }
}

/// Where an open output's bytes end up once it is complete.
#[derive(Debug)]
pub struct Placement(Option<Rename>);

/// The temporary files created and neither committed nor dropped yet, and whether
/// [`abandon_all`] was called.
struct Pending {
    abandoned: bool,
    next: u64,
    /// Each file's number, its directory's fd (open while the entry is here: the entry leaves
    /// before its [`Rename`] is dropped) and its name.
    files: Vec<(u64, libc::c_int, CString)>,
}

static PENDING: Mutex<Pending> = Mutex::new(Pending {
    abandoned: false,
    next: 0,
    files: Vec::new(),
});

fn pending() -> std::sync::MutexGuard<'static, Pending> {
    PENDING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Remove every temporary file not committed yet, and refuse to create or commit outputs from
/// now on (for a command ended by a signal, from any thread). Returns how many were removed.
pub fn abandon_all() -> usize {
    let mut pending = pending();
    pending.abandoned = true;
    let files = std::mem::take(&mut pending.files);
    for (_, dir, temp) in &files {
        // `dir` is open while its entry is listed (the lock is held, so its Placement cannot
        // drop it meanwhile).
        let _ = sys::fs::unlink_at(*dir, temp);
    }
    files.len()
}

/// The error of an output asked for after [`abandon_all`].
fn abandoned() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "interrupted by a signal")
}

/// A temporary file `temp` in `dir`, renamed to `name` by [`Placement::commit`] and removed
/// when dropped uncommitted. (A character device has none: it is written in place.)
#[derive(Debug)]
struct Rename {
    dir: OwnedFd,
    temp: CString,
    name: CString,
    /// Its number among the [`PENDING`] files.
    id: u64,
}

/// Open the output at `path`: the file to write to and where it ends up (the tracer's own,
/// mode 0600).
pub fn create(path: &Path) -> Result<(File, Placement), OutputFileError> {
    create_for(path, &Access::default())
}

/// [`create`], a new file given `access` (a character device is written as it is).
pub fn create_for(path: &Path, access: &Access) -> Result<(File, Placement), OutputFileError> {
    let io_error = |source| OutputFileError::Io {
        path: path.to_owned(),
        source,
    };
    let refuse = |what| OutputFileError::NotAFile {
        path: path.to_owned(),
        what,
    };
    let name = path
        .file_name()
        .filter(|_| !path.as_os_str().as_bytes().ends_with(b"/"))
        .ok_or_else(|| refuse("not a file name"))?;
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let dir = open_at(None, parent.as_os_str().as_bytes(), libc::O_PATH | libc::O_DIRECTORY).map_err(io_error)?;
    let name = c_string(name).map_err(io_error)?;
    match open_at(Some(&dir), name.as_bytes(), libc::O_PATH | libc::O_NOFOLLOW) {
        Err(err) if err.raw_os_error() == Some(libc::ENOENT) => {}
        Err(err) => return Err(io_error(err)),
        Ok(found) => {
            let seen = stat(&found).map_err(io_error)?;
            match seen.st_mode & libc::S_IFMT {
                libc::S_IFREG => {}
                libc::S_IFCHR => return in_place(&dir, &name, &seen).map_err(io_error),
                libc::S_IFLNK => return Err(refuse("a symbolic link")),
                libc::S_IFIFO => return Err(refuse("a FIFO")),
                libc::S_IFDIR => return Err(refuse("a directory")),
                libc::S_IFSOCK => return Err(refuse("a socket")),
                libc::S_IFBLK => return Err(refuse("a block device")),
                _ => return Err(refuse("not a regular file")),
            }
        }
    }
    let mut pending = pending();
    if pending.abandoned {
        return Err(io_error(abandoned()));
    }
    let (file, temp) = temporary_beside(&dir, &name).map_err(io_error)?;
    let id = pending.next;
    pending.next += 1;
    pending.files.push((id, dir.as_raw_fd(), temp.clone()));
    let placement = Placement(Some(Rename { dir, temp, name, id }));
    // Dropped on failure, the placement removes the temporary file.
    give(&file, access).map_err(io_error)?;
    Ok((file, placement))
}

impl Placement {
    /// Put the complete output in place (the caller has flushed it).
    pub fn commit(mut self) -> io::Result<()> {
        let Some(Rename { dir, temp, name, id }) = self.0.take() else {
            return Ok(());
        };
        // Held across the rename: an [`abandon_all`] comes before (the file is gone, and the
        // output refused) or after (the output is complete).
        let mut pending = pending();
        let listed = pending.files.iter().position(|(i, ..)| *i == id);
        let Some(listed) = listed.filter(|_| !pending.abandoned) else {
            remove(&dir, &temp);
            return Err(abandoned());
        };
        pending.files.swap_remove(listed);
        if let Err(err) = sys::fs::rename_at(dir.as_fd(), &temp, &name) {
            remove(&dir, &temp);
            return Err(err);
        }
        Ok(())
    }

    /// The temporary file's name while the output is written (`None` in place).
    #[cfg(test)]
    pub fn temporary(&self) -> Option<&OsStr> {
        self.0.as_ref().map(|r| OsStr::from_bytes(r.temp.as_bytes()))
    }
}

impl Drop for Placement {
    /// An output that was not completed leaves no temporary file behind.
    fn drop(&mut self) {
        if let Some(Rename { dir, temp, id, .. }) = &self.0 {
            let mut pending = pending();
            pending.files.retain(|(i, ..)| i != id);
            remove(dir, temp);
        }
    }
}

/// Give the new file `file` its owner and mode, through its descriptor (the umask does not
/// apply, and nothing at its path can be swapped in between).
fn give(file: &File, access: &Access) -> io::Result<()> {
    if let Some((uid, gid)) = access.owner {
        sys::fs::fchown(file.as_fd(), uid, gid)?;
    }
    sys::fs::fchmod(file.as_fd(), (access.mode & MAX_MODE) as libc::mode_t)
}

fn remove(dir: &OwnedFd, name: &CString) {
    let _ = sys::fs::unlink_at(dir.as_raw_fd(), name);
}

/// Open the character device `name` in `dir` for writing, checking it is the one `seen`.
fn in_place(dir: &OwnedFd, name: &CString, seen: &libc::stat) -> io::Result<(File, Placement)> {
    let fd = open_at(
        Some(dir),
        name.as_bytes(),
        libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
    )?;
    let now = stat(&fd)?;
    if now.st_mode & libc::S_IFMT != libc::S_IFCHR || now.st_rdev != seen.st_rdev || now.st_ino != seen.st_ino {
        return Err(io::Error::other("it changed while it was opened"));
    }
    // A device blocks like stdout does (a terminal); only the open had to be non-blocking.
    sys::fs::clear_nonblocking(fd.as_fd());
    Ok((File::from(fd), Placement(None)))
}

/// Create `.NAME.XXXXXXXXXXXXXXXX.tmp` in `dir` (random hex, `O_EXCL`, mode 0600).
fn temporary_beside(dir: &OwnedFd, name: &CString) -> io::Result<(File, CString)> {
    // Room for the dots, 16 digits and `.tmp` within NAME_MAX (255).
    let stem = &name.as_bytes()[..name.as_bytes().len().min(200)];
    let mut attempts = 0;
    loop {
        let mut temp = b".".to_vec();
        temp.extend_from_slice(stem);
        temp.extend_from_slice(format!(".{:016x}.tmp", random()?).as_bytes());
        let temp = CString::new(temp).map_err(io::Error::other)?;
        let err = match sys::fs::create_new_at(dir.as_fd(), &temp, 0o600) {
            Ok(file) => return Ok((file, temp)),
            Err(err) => err,
        };
        attempts += 1;
        if err.raw_os_error() != Some(libc::EEXIST) || attempts == 8 {
            return Err(err);
        }
    }
}

/// 64 bits from the kernel's random source.
fn random() -> io::Result<u64> {
    sys::fs::random_u64()
}

fn c_string(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(io::Error::other)
}

/// `openat(dir or the working directory, path, flags | O_CLOEXEC)`.
fn open_at(dir: Option<&OwnedFd>, path: &[u8], flags: libc::c_int) -> io::Result<OwnedFd> {
    let path = CString::new(path).map_err(io::Error::other)?;
    sys::fs::open_at(dir.map(AsFd::as_fd), &path, flags)
}

fn stat(fd: &OwnedFd) -> io::Result<libc::stat> {
    sys::fs::fstat(fd.as_fd())
}

#[cfg(test)]
mod tests;
