//! Sealed copies of the files symbols are read from. The symbolizer reads a file through a
//! memory mapping, and touching a mapped page past the end of a file that shrank since it was
//! mapped raises SIGBUS, which ends the tracer: a process's owner can shrink the files of its
//! own programs and libraries at any moment, and a FUSE or network file system can fail a page
//! read. So a file that someone other than root could change ([`may_change`]) is not given to
//! the symbolizer: the parts symbols are read from (the ELF and section headers, symbol and
//! string tables, notes, version tables, and every section not loaded into memory: DWARF,
//! MiniDebugInfo, debug links) are copied, at their offsets, into an anonymous memory file
//! that is then sealed against shrinking, growing and writing ([`sealed_copy`]). The loaded code
//! and data are holes in it: they take no memory. The copy is also what the compressed-section
//! checks read, so nothing changes between the check and the use.

use std::{
    fs::File,
    io,
    os::{
        fd::{AsRawFd as _, FromRawFd as _},
        unix::fs::{FileExt as _, MetadataExt as _},
    },
};

use tracer_unwind::objfile::{ObjectFileError, Wanted};

use super::bounded_parts;

/// File systems whose files can change under a root reader whoever owns them: FUSE (served by
/// any user), NFS, SMB/CIFS and 9p (served by another host).
const CHANGEABLE_FILE_SYSTEMS: [i64; 5] = [0x6573_5546, 0x6969, 0xff53_4d42, 0xfe53_4d42, 0x0102_1997];

/// Whether someone other than root could change `file` while it is mapped: it is owned by
/// another user, writable by its group or others, or on a file system in
/// [`CHANGEABLE_FILE_SYSTEMS`].
pub fn may_change(file: &File) -> io::Result<bool> {
    let meta = file.metadata()?;
    let mut fs = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `fs` is a writable statfs; fstatfs fills it or fails.
    if unsafe { libc::fstatfs(file.as_raw_fd(), fs.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstatfs succeeded, so `fs` is initialised.
    #[allow(clippy::unnecessary_cast, reason = "f_type is not i64 on every target")]
    let fs_type = unsafe { fs.assume_init() }.f_type as i64;
    Ok(changeable(meta.uid(), meta.mode(), fs_type))
}

/// [`may_change`] of a file with owner `uid`, permissions `mode`, on a file system of
/// `fs_type`.
pub fn changeable(uid: u32, mode: u32, fs_type: i64) -> bool {
    uid != 0 || mode & 0o022 != 0 || CHANGEABLE_FILE_SYSTEMS.contains(&fs_type)
}

/// A sealed anonymous copy of the parts of ELF `file` symbols are read from (module docs),
/// as long as the file. Fails when the file is not a regular ELF file within the object read
/// limits, or changed while it was copied.
pub fn sealed_copy(file: &File) -> Result<File, ObjectFileError> {
    let (file_len, parts) = bounded_parts(file, Wanted::Symbols)?;
    let mut magic = [0; 4];
    if file.read_exact_at(&mut magic, 0).is_err() || magic != *b"\x7fELF" {
        return Err(ObjectFileError::Malformed { what: "file header" });
    }
    let copy = memory_file()?;
    copy.set_len(file_len)?;
    let mut buf = vec![0; 1 << 20];
    for (offset, size) in parts {
        let mut done = 0;
        while done < size {
            let n = (size - done).min(buf.len() as u64) as usize;
            file.read_exact_at(&mut buf[..n], offset + done)?;
            copy.write_all_at(&buf[..n], offset + done)?;
            done += n as u64;
        }
    }
    // The copy names no other file: a symbolizer following its debug links would open what
    // the file's owner chose (a FIFO that blocks the open, a descriptor of the tracer's,
    // DWARF that was never checked). The link sections are renamed (`_gnu_debuglink`) and so
    // no longer found; the copy's own symbols and DWARF are read as they are.
    for name in super::link_section_names(&copy, file_len) {
        copy.write_all_at(b"_", name)?;
    }
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
    // SAFETY: F_ADD_SEALS on a descriptor this function owns, with an integer argument.
    if unsafe { libc::fcntl(copy.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(io::Error::last_os_error().into());
    }
    Ok(copy)
}

/// A new, empty anonymous memory file that can be sealed.
fn memory_file() -> io::Result<File> {
    // SAFETY: the name is a NUL-terminated literal; memfd_create only reads it.
    let fd = unsafe {
        libc::memfd_create(
            c"sframe-trace-symbols".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: memfd_create returned a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests;
