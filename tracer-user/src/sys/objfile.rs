//! Object files opened and read within bounds: the system-call half of reading an object
//! (tracer_unwind::objfile names the parts and holds the limits). Every file the tracer reads
//! as an object (a traced process's mapped files, the file given to `dump` and `check`) may
//! belong to someone hostile: a FIFO that blocks, `/dev/zero` that never ends, a sparse file of
//! many gigabytes. So:
//!
//! 1. Only regular files are read. A path is opened with `O_PATH` (which neither blocks nor
//!    runs a device's open), checked with `fstat`, and only then opened for reading, through
//!    `/proc/self/fd` so that it is the very inode checked ([`reopen_regular`]).
//! 2. Only the parts `tracer_unwind::objfile::bounded_parts` names are read (each checked
//!    against the file's size, at most `MAX_OBJECT_READ` bytes in a file of at most
//!    `MAX_OBJECT_SIZE`); a larger object is `ObjectFileError::TooLarge` and is not read at
//!    all. The parts are read into an anonymous private mapping as long as the file, whose
//!    other pages are never touched: they stay zero and take no memory.
//!
//! No parsing of unwind information here: [`ObjectImage`] is handed to the pure readers as a
//! byte slice.

use std::{
    fs::File,
    io,
    os::{
        fd::AsRawFd as _,
        unix::fs::{FileExt as _, FileTypeExt as _, MetadataExt as _, OpenOptionsExt as _},
    },
    path::Path,
};

use object::{ReadCache, ReadCacheOps};
use tracer_unwind::objfile::{self, ObjectFileError, Wanted};

/// Open `path` for reading if it is a regular file (module docs, step 1); links are followed
/// (the path is the caller's own choice).
pub fn open_regular(path: &Path) -> Result<File, ObjectFileError> {
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)?;
    reopen_regular(&handle)
}

/// `handle` (an `O_PATH` descriptor, or any other) opened for reading, if it is a regular file:
/// non-blocking, no controlling terminal, closed on exec. The descriptor returned is checked
/// again to be the same inode.
pub fn reopen_regular(handle: &File) -> Result<File, ObjectFileError> {
    reopen_checked(handle, &handle.metadata()?)
}

/// [`reopen_regular`] of `handle`, whose metadata `meta` the caller already has.
pub fn reopen_checked(handle: &File, meta: &std::fs::Metadata) -> Result<File, ObjectFileError> {
    check_regular(meta)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(format!("/proc/self/fd/{}", handle.as_raw_fd()))?;
    let again = file.metadata()?;
    check_regular(&again)?;
    if (again.dev(), again.ino()) != (meta.dev(), meta.ino()) {
        return Err(io::Error::other("the file changed while it was opened").into());
    }
    Ok(file)
}

/// `Ok` for the metadata of a regular file, else what kind of file it is.
pub fn check_regular(meta: &std::fs::Metadata) -> Result<(), ObjectFileError> {
    let t = meta.file_type();
    let kind = if t.is_file() {
        return Ok(());
    } else if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_socket() {
        "socket"
    } else {
        "symbolic link"
    };
    Err(ObjectFileError::NotRegular { kind })
}

/// The parts of an object file that tables are built from (module docs), at their file
/// offsets; every other byte reads as zero.
pub struct ObjectImage {
    /// An anonymous private mapping of `len` bytes, or null when `len` is 0.
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by the image alone and only read through `&self` once built.
unsafe impl Send for ObjectImage {}
// SAFETY: as above: shared references only read.
unsafe impl Sync for ObjectImage {}

impl std::ops::Deref for ObjectImage {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        if self.ptr.is_null() {
            return &[];
        }
        // SAFETY: `ptr` maps `len` readable bytes for as long as `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for ObjectImage {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: `ptr`/`len` are the mapping made in `ObjectImage::zeroed`, unmapped once.
            unsafe { libc::munmap(self.ptr.cast(), self.len) };
        }
    }
}

impl ObjectImage {
    /// `len` zero bytes that take no memory until written.
    fn zeroed(len: u64) -> io::Result<ObjectImage> {
        let len = usize::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::OutOfMemory))?;
        if len == 0 {
            return Ok(ObjectImage {
                ptr: std::ptr::null_mut(),
                len,
            });
        }
        // SAFETY: a fresh anonymous mapping; no existing memory is affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(ObjectImage { ptr: ptr.cast(), len })
    }

    /// Read `file[offset..offset + size]` into place (the range was checked to be in the file).
    fn fill(&mut self, file: &File, offset: u64, size: u64) -> io::Result<()> {
        let (start, size) = (offset as usize, size as usize);
        // SAFETY: `start + size <= len` (checked by `tracer_unwind::objfile::bounded_parts`
        // against the file's size, which is `len`), and the mapping is writable and owned by
        // `self`, borrowed mutably.
        let buf = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), size) };
        file.read_exact_at(buf, offset)
    }
}

/// Read the parts of the object `file` that its tables are built from (module docs).
pub fn read_object(file: &File) -> Result<ObjectImage, ObjectFileError> {
    let (file_len, parts) = bounded_parts(file, Wanted::Unwind)?;
    let mut image = ObjectImage::zeroed(file_len)?;
    for (offset, size) in parts {
        image.fill(file, offset, size)?;
    }
    Ok(image)
}

/// The length of the regular file `file` and the `wanted` parts of it, within the limits
/// (`tracer_unwind::objfile::bounded_parts`).
fn bounded_parts(file: &File, wanted: Wanted) -> Result<(u64, Vec<(u64, u64)>), ObjectFileError> {
    let meta = file.metadata()?;
    check_regular(&meta)?;
    let file_len = meta.len();
    let parts = objfile::bounded_parts(&ReadCache::new(Pread::new(file, file_len)), file_len, wanted)?;
    Ok((file_len, parts))
}

/// `read_at` over a shared file, for `object::ReadCache` (no shared file position).
pub struct Pread<'a> {
    file: &'a File,
    pos: u64,
    len: u64,
}

impl<'a> Pread<'a> {
    pub fn new(file: &'a File, len: u64) -> Pread<'a> {
        Pread { file, pos: 0, len }
    }
}

impl ReadCacheOps for Pread<'_> {
    fn len(&mut self) -> Result<u64, ()> {
        Ok(self.len)
    }

    fn seek(&mut self, pos: u64) -> Result<u64, ()> {
        self.pos = pos;
        Ok(pos)
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ()> {
        let n = self.file.read_at(buf, self.pos).map_err(|_| ())?;
        self.pos += n as u64;
        Ok(n)
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), ()> {
        self.file.read_exact_at(buf, self.pos).map_err(|_| ())?;
        self.pos += buf.len() as u64;
        Ok(())
    }
}

/// The file offsets of the names of `file`'s link sections (`tracer_unwind::objfile::
/// link_section_names`), read at their offsets from the file of `file_len` bytes.
pub fn link_section_names(file: &File, file_len: u64) -> Vec<u64> {
    objfile::link_section_names(&ReadCache::new(Pread::new(file, file_len)))
}

pub mod sealed;

#[cfg(test)]
mod tests;
