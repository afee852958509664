//! Object files read within bounds. Every file the tracer reads as an object (a traced
//! process's mapped files, the file given to `dump` and `check`) may belong to someone hostile:
//! a FIFO that blocks, `/dev/zero` that never ends, a sparse file of many gigabytes. So:
//!
//! 1. Only regular files are read. A path is opened with `O_PATH` (which neither blocks nor
//!    runs a device's open), checked with `fstat`, and only then opened for reading, through
//!    `/proc/self/fd` so that it is the very inode checked ([`reopen_regular`]).
//! 2. Only the parts the unwind tables are built from are read: the ELF header, the program and
//!    section header tables, the section names, the unwind sections (`.sframe`, `.eh_frame`,
//!    `.eh_frame_hdr`, `.debug_frame` or `.zdebug_frame`, Go's `.gopclntab`), the executable segments (alignment
//!    padding is recognised in them) and, in relocatable objects, everything (they are small and
//!    their `.sframe` is relocated from their symbol tables). Each range is checked against the
//!    file's size.
//! 3. Those parts add up to at most [`MAX_OBJECT_READ`] bytes, in a file of at most
//!    [`MAX_OBJECT_SIZE`] bytes; a larger object is [`ObjectFileError::TooLarge`] and is not
//!    read at all. The parts are read into an anonymous private mapping as long as the file,
//!    whose other pages are never touched: they stay zero and take no memory.
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

use object::{
    Endianness, FileKind, ReadCache, ReadCacheOps,
    elf::{self, FileHeader32, FileHeader64},
    read::elf::{FileHeader, ProgramHeader as _, SectionHeader as _},
};

/// The most bytes read from one object (its headers, unwind sections and executable code).
/// The largest programs in use (a web browser, a compiler's library) need a few hundred MiB.
pub const MAX_OBJECT_READ: u64 = 512 << 20;
/// The largest object file read at all (the parts not needed are never read, but the file is
/// laid out in address space as long as it is).
pub const MAX_OBJECT_SIZE: u64 = 64 << 30;

/// Why an object file was not read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ObjectFileError {
    #[error("not a regular file (a {kind})")]
    NotRegular { kind: &'static str },
    #[error("too large: {needed} bytes to read, more than the {cap}-byte limit per object")]
    TooLarge { needed: u64, cap: u64 },
    #[error("{what} (file offset {offset:#x}, {size:#x} bytes) extends past the end of the {file_len}-byte file")]
    OutOfFile {
        what: &'static str,
        offset: u64,
        size: u64,
        file_len: u64,
    },
    #[error("malformed ELF {what}")]
    Malformed { what: &'static str },
    #[error(transparent)]
    Io(#[from] io::Error),
}

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
        // SAFETY: `start + size <= len` (checked by `needed_parts` against the file's size, which
        // is `len`), and the mapping is writable and owned by `self`, borrowed mutably.
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
/// ([`MAX_OBJECT_SIZE`], [`MAX_OBJECT_READ`]).
fn bounded_parts(file: &File, wanted: Wanted) -> Result<(u64, Vec<(u64, u64)>), ObjectFileError> {
    let meta = file.metadata()?;
    check_regular(&meta)?;
    let file_len = meta.len();
    if file_len > MAX_OBJECT_SIZE {
        return Err(ObjectFileError::TooLarge {
            needed: file_len,
            cap: MAX_OBJECT_SIZE,
        });
    }
    let parts = needed_parts(file, file_len, wanted)?;
    let needed = parts.iter().map(|&(_, size)| size).sum::<u64>();
    if needed > MAX_OBJECT_READ {
        return Err(ObjectFileError::TooLarge {
            needed,
            cap: MAX_OBJECT_READ,
        });
    }
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

/// `(offset, size)` of the parts of the file to read, merged, each inside the file.
fn needed_parts(file: &File, file_len: u64, wanted: Wanted) -> Result<Vec<(u64, u64)>, ObjectFileError> {
    let cache = ReadCache::new(Pread::new(file, file_len));
    let mut parts = match FileKind::parse(&cache) {
        Ok(FileKind::Elf32) => elf_parts::<FileHeader32<Endianness>>(&cache, file_len, wanted)?,
        Ok(FileKind::Elf64) => elf_parts::<FileHeader64<Endianness>>(&cache, file_len, wanted)?,
        // Not ELF: the readers say so from the first bytes.
        _ => vec![(0, file_len.min(64))],
    };
    for &(offset, size) in &parts {
        if offset.checked_add(size).is_none_or(|end| end > file_len) {
            return Err(ObjectFileError::OutOfFile {
                what: "a section or segment",
                offset,
                size,
                file_len,
            });
        }
    }
    parts.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(parts.len());
    for (offset, size) in parts {
        match merged.last_mut() {
            Some((start, len)) if offset <= *start + *len => *len = (*len).max(offset + size - *start),
            _ => merged.push((offset, size)),
        }
    }
    Ok(merged)
}

const UNWIND_SECTIONS: [&[u8]; 8] = [
    b".sframe",
    b".eh_frame",
    b".eh_frame_hdr",
    b".debug_frame",
    b".zdebug_frame",
    b".text",
    // Go's function table: its stack-pointer deltas unwind Go code without CFI.
    b".gopclntab",
    b".data.rel.ro.gopclntab",
];

/// Which parts of an ELF file are read: those unwind tables are built from, or those symbols
/// are read from ([`sealed`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wanted {
    Unwind,
    Symbols,
}

impl Wanted {
    /// Whether section `sh` (named `name`) is read.
    fn section<Elf: FileHeader<Endian = Endianness>>(
        self,
        endian: Endianness,
        sh: &Elf::SectionHeader,
        name: &[u8],
    ) -> bool {
        let (kind, flags) = (sh.sh_type(endian), sh.sh_flags(endian).0);
        match self {
            Wanted::Unwind => UNWIND_SECTIONS.contains(&name) || kind == elf::SHT_GNU_SFRAME,
            // Everything but the program's loaded code and data: symbol and string tables,
            // notes, version tables, and what is not loaded (DWARF, MiniDebugInfo, links).
            Wanted::Symbols => {
                let loaded = flags & elf::SHF_ALLOC.0 != 0;
                let code_or_data = kind == elf::SHT_PROGBITS
                    || kind == elf::SHT_NOBITS
                    || flags & (elf::SHF_EXECINSTR.0 | elf::SHF_WRITE.0) != 0;
                !loaded || !code_or_data
            }
        }
    }
}

fn elf_parts<Elf: FileHeader<Endian = Endianness>>(
    data: &ReadCache<Pread<'_>>,
    file_len: u64,
    wanted: Wanted,
) -> Result<Vec<(u64, u64)>, ObjectFileError> {
    let malformed = |what| move |_| ObjectFileError::Malformed { what };
    let header = Elf::parse(data).map_err(malformed("file header"))?;
    let endian = header.endian().map_err(malformed("file header"))?;
    if header.e_type(endian) == elf::ET_REL {
        return Ok(vec![(0, file_len)]);
    }
    let mut parts = vec![(0, u64::from(header.e_ehsize(endian)).max(size_of::<Elf>() as u64))];
    let phnum = header.phnum(endian, data).map_err(malformed("program headers"))? as u64;
    parts.push((
        header.e_phoff(endian).into(),
        phnum * u64::from(header.e_phentsize(endian)),
    ));
    for ph in header
        .program_headers(endian, data)
        .map_err(malformed("program headers"))?
    {
        let p_type = ph.p_type(endian);
        let executable_load = p_type == elf::PT_LOAD && ph.p_flags(endian).0 & elf::PF_X.0 != 0;
        if wanted == Wanted::Unwind && (executable_load || p_type == elf::PT_GNU_SFRAME) {
            parts.push((ph.p_offset(endian).into(), ph.p_filesz(endian).into()));
        }
    }
    // Damaged section headers leave the segments to the readers (which then say what is wrong).
    let Ok(shnum) = header.shnum(endian, data) else {
        return Ok(parts);
    };
    parts.push((
        header.e_shoff(endian).into(),
        shnum as u64 * u64::from(header.e_shentsize(endian)),
    ));
    let Ok(sections) = header.sections(endian, data) else {
        return Ok(parts);
    };
    if let Ok(index) = header.shstrndx(endian, data)
        && let Ok(strings) = sections.section(object::SectionIndex(index as usize))
        && let Some(range) = strings.file_range(endian)
    {
        parts.push(range);
    }
    for sh in sections.iter() {
        let name = sections.section_name(endian, sh).unwrap_or_default();
        if wanted.section::<Elf>(endian, sh, name)
            && let Some(range) = sh.file_range(endian)
        {
            parts.push(range);
        }
    }
    Ok(parts)
}

/// Sections through which a symbolizer goes on to read other files, named by the object:
/// `.gnu_debuglink` (a file name looked up beside the object and in the debug directories),
/// `.gnu_debugaltlink` and `.debug_sup` (any path).
pub const LINK_SECTIONS: [&[u8]; 3] = [b".gnu_debuglink", b".gnu_debugaltlink", b".debug_sup"];

/// The file offsets of the names of `file`'s [`LINK_SECTIONS`] in its section-name table (each
/// one the first byte of a name its section header points at); empty when the file has none or
/// its section headers cannot be read.
pub fn link_section_names(file: &File, file_len: u64) -> Vec<u64> {
    let cache = ReadCache::new(Pread::new(file, file_len));
    match FileKind::parse(&cache) {
        Ok(FileKind::Elf32) => link_names::<FileHeader32<Endianness>>(&cache).unwrap_or_default(),
        Ok(FileKind::Elf64) => link_names::<FileHeader64<Endianness>>(&cache).unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn link_names<Elf: FileHeader<Endian = Endianness>>(data: &ReadCache<Pread<'_>>) -> Option<Vec<u64>> {
    let header = Elf::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let sections = header.sections(endian, data).ok()?;
    let index = header.shstrndx(endian, data).ok()?;
    let (strings, size) = sections
        .section(object::SectionIndex(index as usize))
        .ok()?
        .file_range(endian)?;
    let names = sections
        .iter()
        .filter(|sh| {
            sections
                .section_name(endian, sh)
                .is_ok_and(|name| LINK_SECTIONS.contains(&name))
        })
        .map(|sh| u64::from(sh.sh_name(endian)))
        .filter(|&offset| offset < size)
        .map(|offset| strings + offset)
        .collect();
    Some(names)
}

pub mod sealed;

#[cfg(test)]
mod tests;
