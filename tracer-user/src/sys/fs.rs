//! Files opened, created, renamed and removed through descriptors: the exact flags each caller
//! asks for are kept (`O_NOFOLLOW`, `O_EXCL`, `O_CLOEXEC` always added), so that no name another
//! user controls is followed.

use std::{
    ffi::CStr,
    fs::File,
    io,
    os::fd::{AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd, RawFd},
};

/// `openat(dir or the working directory, path, flags | O_CLOEXEC)`.
pub fn open_at(dir: Option<BorrowedFd<'_>>, path: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    let dir = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: `path` is NUL-terminated; openat returns a new fd or -1.
    let fd = unsafe { libc::openat(dir, path.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A new file `name` in `dir`, for writing, with `mode`: `O_CREAT | O_EXCL | O_NOFOLLOW |
/// O_CLOEXEC`, so an existing entry (a link planted there) is an error (`EEXIST`), never opened.
pub fn create_new_at(dir: BorrowedFd<'_>, name: &CStr, mode: libc::c_uint) -> io::Result<File> {
    // SAFETY: `name` is NUL-terminated; openat returns a new fd or -1.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// `path` (relative) resolved inside `root`, never out of it (`RESOLVE_IN_ROOT |
/// RESOLVE_NO_MAGICLINKS`), as an `O_PATH | O_NOFOLLOW` descriptor (openat2).
pub fn open_in_root(root: BorrowedFd<'_>, name: &CStr) -> io::Result<File> {
    // SAFETY: `open_how` is plain integers; all zeros is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: `name` is a NUL-terminated string and `how` a valid `open_how` of the size passed;
    // the kernel only reads them.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            name.as_ptr(),
            &raw const how,
            size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat2 returned a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd as i32) })
}

/// Remove the entry `name` of the directory open as `dir` (unlinkat, no flags). Takes a raw fd:
/// the outputs abandoned on a signal are listed by theirs.
pub fn unlink_at(dir: RawFd, name: &CStr) -> io::Result<()> {
    // SAFETY: `name` is NUL-terminated; unlinkat only removes that entry (a closed `dir` is
    // EBADF, no memory is touched).
    if unsafe { libc::unlinkat(dir, name.as_ptr(), 0) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Rename `from` to `to`, both in `dir` (renameat).
pub fn rename_at(dir: BorrowedFd<'_>, from: &CStr, to: &CStr) -> io::Result<()> {
    // SAFETY: both names are NUL-terminated strings that live across the call; `dir` is open.
    if unsafe { libc::renameat(dir.as_raw_fd(), from.as_ptr(), dir.as_raw_fd(), to.as_ptr()) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// fchown of an open descriptor.
pub fn fchown(fd: BorrowedFd<'_>, uid: libc::uid_t, gid: libc::gid_t) -> io::Result<()> {
    // SAFETY: fchown on an open fd.
    if unsafe { libc::fchown(fd.as_raw_fd(), uid, gid) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// fchmod of an open descriptor.
pub fn fchmod(fd: BorrowedFd<'_>, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: fchmod on an open fd.
    if unsafe { libc::fchmod(fd.as_raw_fd(), mode) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// fstat of an open descriptor.
pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    // SAFETY: an all-zero stat is valid; fstat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open and `st` writable.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// Clear `O_NONBLOCK` of an open descriptor (errors ignored, as a failed F_GETFL leaves -1
/// flags the kernel refuses).
pub fn clear_nonblocking(fd: BorrowedFd<'_>) {
    // SAFETY: fcntl on an open fd; no memory is passed.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK);
    }
}

/// Eight random bytes from getrandom(2).
pub fn random_u64() -> io::Result<u64> {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom(2) writes at most `bytes.len()` bytes into the buffer.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got != bytes.len() as isize {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::from_ne_bytes(bytes))
}

/// mkdir(2) of `path` with `mode`.
pub fn mkdir(path: &CStr, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: a NUL-terminated path; mkdir has no other preconditions.
    if unsafe { libc::mkdir(path.as_ptr(), mode) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// mkfifo(3) of `path` with `mode`.
pub fn mkfifo(path: &CStr, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: a NUL-terminated path that lives through the call.
    if unsafe { libc::mkfifo(path.as_ptr(), mode) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// chown(2) of `path` (following links).
pub fn chown(path: &CStr, uid: libc::uid_t, gid: libc::gid_t) -> io::Result<()> {
    // SAFETY: a NUL-terminated path that lives through the call.
    if unsafe { libc::chown(path.as_ptr(), uid, gid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A descriptor of our own on the file open as `fd` (`F_DUPFD_CLOEXEC`): for a descriptor the
/// process holds but does not own here (`/proc/self/fd/N`).
pub fn duplicate(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: the borrow lasts only for the duplication; a descriptor that is not open is an
    // error of fcntl (EBADF), not memory unsafety.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    borrowed.try_clone_to_owned()
}

/// Mount tracefs at `/sys/kernel/tracing`.
pub fn mount_tracefs() -> io::Result<()> {
    let (source, fstype, dir) = (c"nodev", c"tracefs", c"/sys/kernel/tracing");
    // SAFETY: mount(2) with NUL-terminated strings that live through the call and no data.
    if unsafe { libc::mount(source.as_ptr(), dir.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A non-blocking inotify descriptor watching `path` for `mask` (for tests that observe what
/// the tracer opens).
pub fn inotify_watch(path: &CStr, mask: u32) -> io::Result<File> {
    // SAFETY: no pointers passed.
    let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd that nothing else owns.
    let file = unsafe { File::from_raw_fd(fd) };
    // SAFETY: a NUL-terminated path; inotify_add_watch only reads it.
    if unsafe { libc::inotify_add_watch(fd, path.as_ptr(), mask) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

/// `flock(fd, how)` (`LOCK_EX`, `LOCK_SH`, with `LOCK_NB` or not): `Err` with the call's
/// error (`WouldBlock` for a lock held elsewhere under `LOCK_NB`, `Interrupted` to retry).
pub fn flock(fd: BorrowedFd<'_>, how: libc::c_int) -> io::Result<()> {
    // SAFETY: flock on a descriptor the caller borrows for the call; no memory is passed.
    if unsafe { libc::flock(fd.as_raw_fd(), how) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
