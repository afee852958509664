//! Memory the kernel gives: files mapped read-only, anonymous memory files.

use std::{
    ffi::CStr,
    fs::File,
    io,
    os::fd::{AsRawFd as _, FromRawFd as _},
};

/// A file mapped read-only and private (pages are read as they are reached and are the page
/// cache's, not the heap's).
pub struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Mapped {
    /// The first `len` bytes of `file`, mapped; `None` for an empty length or a failed mmap.
    /// The caller holds a file that cannot shrink under the mapping (only root can change it,
    /// or it is a sealed copy), so reading the bytes cannot fault.
    pub fn of(file: &File, len: u64) -> Option<Mapped> {
        let len = usize::try_from(len).ok().filter(|&len| len > 0)?;
        // SAFETY: a fresh private read-only mapping of a file this process holds open; no
        // existing memory is affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        (ptr != libc::MAP_FAILED).then_some(Mapped { ptr, len })
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes for as long as `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are the mapping made in `Mapped::of`, unmapped once.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// A new anonymous memory file (`MFD_CLOEXEC`) named `name`.
pub fn memfd(name: &CStr) -> io::Result<File> {
    // SAFETY: `name` is NUL-terminated; memfd_create only reads it.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: memfd_create returned a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Ask the kernel to reclaim the pages of the `len` bytes at `addr` of this process
/// (`MADV_PAGEOUT`, Linux 5.4+): clean pages of a file mapping leave the process's resident
/// set (and the page cache, when nothing else maps them) and are read again from the file if
/// touched; the contents do not change, so any range of this process may be given. A kernel
/// without it says `EINVAL`.
pub fn page_out(addr: u64, len: u64) -> io::Result<()> {
    const MADV_PAGEOUT: libc::c_int = 21;
    let (Ok(addr), Ok(len)) = (usize::try_from(addr), usize::try_from(len)) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    // SAFETY: MADV_PAGEOUT is advice that never changes what the memory holds (unlike
    // MADV_DONTNEED or MADV_FREE); a range that is not mapped is refused with ENOMEM.
    if unsafe { libc::madvise(addr as *mut libc::c_void, len, MADV_PAGEOUT) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
