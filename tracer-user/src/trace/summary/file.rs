//! The `--summary-output` file, created safely: the tracer runs as root, often in directories
//! others can write to (`/tmp`), so the path must not lead it to write through a symbolic link,
//! a hard link or a FIFO planted there, nor leave the figures readable by everyone.

use std::{
    fs::{File, OpenOptions},
    io,
    os::unix::fs::{MetadataExt as _, OpenOptionsExt as _},
    path::Path,
};

/// Open `path` for writing the summary: created with mode 0600 when it does not exist; an
/// existing file is reused (emptied) only when it is a regular file of this user with no other
/// link. A symbolic link at `path` is refused (`O_NOFOLLOW`).
pub(super) fn create(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|err| match err.raw_os_error() {
            Some(libc::ELOOP) => io::Error::other(format!(
                "{} is a symbolic link: give the summary a path of its own",
                path.display()
            )),
            _ => io::Error::new(err.kind(), format!("creating {}: {err}", path.display())),
        })?;
    let meta = file.metadata()?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if !meta.file_type().is_file() || meta.uid() != euid || meta.nlink() != 1 {
        return Err(io::Error::other(format!(
            "{} exists and is not a regular file of this user with one link: give the summary a path of its own",
            path.display()
        )));
    }
    file.set_len(0)?;
    Ok(file)
}
