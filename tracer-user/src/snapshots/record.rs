//! `--record-snapshots DIR`: the writer of recordings (`recording`), one file per walked copy,
//! for the replay corpus (docs/testing.md, "Replay corpus"). The tracer runs as root and a
//! recording holds a process's stack bytes, so the directory and its files are created
//! safely:
//!
//! 1. the directory is created with mode 0700, or, when it exists, opened without following
//!    a symbolic link (`O_DIRECTORY | O_NOFOLLOW`) and refused unless it is ours and no one
//!    else may enter it (mode `& 0o077 == 0`);
//! 2. each file is created in that descriptor (`openat`, `O_CREAT | O_EXCL | O_NOFOLLOW`,
//!    mode 0600): nothing at its name is ever opened or followed;
//! 3. at most [`MAX_RECORDS`] files are written; later copies are counted, not recorded.
//!
//! A write that fails is counted and logged once; tracing goes on.

use std::{
    ffi::CString,
    io::{self, Write as _},
    os::{
        fd::{AsFd as _, OwnedFd},
        unix::ffi::OsStrExt as _,
    },
    path::{Path, PathBuf},
};

use super::recording::Recording;
use crate::sys;

/// Recordings written at most per session.
pub const MAX_RECORDS: u32 = 512;

/// Why the recording directory cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordDirError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: {why}")]
    Refused { path: PathBuf, why: String },
}

/// The open recording directory and what was written into it.
pub struct Recorder {
    dir: OwnedFd,
    path: PathBuf,
    written: u32,
    /// Copies not recorded: over [`MAX_RECORDS`], or a write failed.
    pub dropped: u64,
}

impl Recorder {
    /// Create (0700) or open `path` (module docs).
    pub fn open(path: &Path) -> Result<Recorder, RecordDirError> {
        let io_error = |source| RecordDirError::Io {
            path: path.to_owned(),
            source,
        };
        let name = CString::new(path.as_os_str().as_bytes()).map_err(|e| io_error(io::Error::other(e)))?;
        if let Err(err) = sys::fs::mkdir(&name, 0o700)
            && err.raw_os_error() != Some(libc::EEXIST)
        {
            return Err(io_error(err));
        }
        // O_CLOEXEC is added by `open_at`.
        let dir =
            sys::fs::open_at(None, &name, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW).map_err(io_error)?;
        let seen = sys::fs::fstat(dir.as_fd()).map_err(io_error)?;
        let euid = sys::process::effective_uid();
        if seen.st_uid != euid || seen.st_mode & 0o077 != 0 {
            return Err(RecordDirError::Refused {
                path: path.to_owned(),
                why: format!(
                    "owned by uid {} with mode {:o}: must be ours and closed to others (0700)",
                    seen.st_uid,
                    seen.st_mode & 0o7777
                ),
            });
        }
        Ok(Recorder {
            dir,
            path: path.to_owned(),
            written: 0,
            dropped: 0,
        })
    }

    /// Write `recording` as `PID-SEQ.json` (`SEQ` counts from 1); false when it was not
    /// (over the limit, or the write failed: counted).
    pub fn write(&mut self, pid: u32, recording: &Recording) -> bool {
        if self.written >= MAX_RECORDS {
            self.dropped += 1;
            return false;
        }
        let name = format!("{pid}-{:06}.json", self.written + 1);
        match self.create(&name, recording) {
            Ok(()) => {
                self.written += 1;
                true
            }
            Err(err) => {
                if self.dropped == 0 {
                    log::warn!("recording {}/{name}: {err}", self.path.display());
                }
                self.dropped += 1;
                false
            }
        }
    }

    /// Whether [`MAX_RECORDS`] are written (later copies are only counted).
    pub fn full(&self) -> bool {
        self.written >= MAX_RECORDS
    }

    /// Recordings written.
    pub fn written(&self) -> u32 {
        self.written
    }

    fn create(&self, name: &str, recording: &Recording) -> io::Result<()> {
        let c_name = CString::new(name).map_err(io::Error::other)?;
        // A name without a slash, in the open directory.
        let mut file = sys::fs::create_new_at(self.dir.as_fd(), &c_name, 0o600)?;
        let mut text = serde_json::to_vec_pretty(recording).map_err(io::Error::other)?;
        text.push(b'\n');
        file.write_all(&text)
    }
}

#[cfg(test)]
mod tests;
