//! Which parts of an object file the tables are built from, and the limits on reading them.
//! Every object the tracer reads (a traced process's mapped files, the file given to `dump`
//! and `check`) may belong to someone hostile: a sparse file of many gigabytes, section headers
//! that point past the end of the file. So:
//!
//! 1. Only the parts the unwind tables are built from are named ([`Wanted::Unwind`]): the ELF
//!    header, the program and section header tables, the section names, the unwind sections
//!    (`.sframe`, `.eh_frame`, `.eh_frame_hdr`, `.debug_frame` or `.zdebug_frame`, Go's
//!    `.gopclntab`), the executable segments (alignment padding is recognised in them) and, in
//!    relocatable objects, everything (they are small and their `.sframe` is relocated from
//!    their symbol tables). Or those symbols are read from ([`Wanted::Symbols`]). Each range is
//!    checked against the file's size.
//! 2. Those parts add up to at most [`MAX_OBJECT_READ`] bytes, in a file of at most
//!    [`MAX_OBJECT_SIZE`] bytes; a larger object is [`ObjectFileError::TooLarge`].
//!
//! Pure: the headers are read through an [`object::ReadRef`] the caller gives (tracer-user's
//! reads at file offsets, `sys::objfile`, or a byte slice); opening, checking and reading the
//! file is tracer-user's (its `sys::objfile`).

use std::io;

use object::{
    Endianness, FileKind, ReadRef,
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

/// Which parts of an ELF file are read: those unwind tables are built from, or those symbols
/// are read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wanted {
    Unwind,
    Symbols,
}

/// The `wanted` parts of the object `data` (a file of `file_len` bytes), merged, each inside
/// the file, within the limits ([`MAX_OBJECT_SIZE`], [`MAX_OBJECT_READ`]).
pub fn bounded_parts<'a, R: ReadRef<'a>>(
    data: R,
    file_len: u64,
    wanted: Wanted,
) -> Result<Vec<(u64, u64)>, ObjectFileError> {
    if file_len > MAX_OBJECT_SIZE {
        return Err(ObjectFileError::TooLarge {
            needed: file_len,
            cap: MAX_OBJECT_SIZE,
        });
    }
    let parts = needed_parts(data, file_len, wanted)?;
    let needed = parts.iter().map(|&(_, size)| size).sum::<u64>();
    if needed > MAX_OBJECT_READ {
        return Err(ObjectFileError::TooLarge {
            needed,
            cap: MAX_OBJECT_READ,
        });
    }
    Ok(parts)
}

/// `(offset, size)` of the parts of the file to read, merged, each inside the file.
fn needed_parts<'a, R: ReadRef<'a>>(
    data: R,
    file_len: u64,
    wanted: Wanted,
) -> Result<Vec<(u64, u64)>, ObjectFileError> {
    let mut parts = match FileKind::parse(data) {
        Ok(FileKind::Elf32) => elf_parts::<FileHeader32<Endianness>, R>(data, file_len, wanted)?,
        Ok(FileKind::Elf64) => elf_parts::<FileHeader64<Endianness>, R>(data, file_len, wanted)?,
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

fn elf_parts<'a, Elf: FileHeader<Endian = Endianness>, R: ReadRef<'a>>(
    data: R,
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

/// The file offsets of the names of the object `data`'s [`LINK_SECTIONS`] in its section-name
/// table (each one the first byte of a name its section header points at); empty when it has
/// none or its section headers cannot be read.
pub fn link_section_names<'a, R: ReadRef<'a>>(data: R) -> Vec<u64> {
    match FileKind::parse(data) {
        Ok(FileKind::Elf32) => link_names::<FileHeader32<Endianness>, R>(data).unwrap_or_default(),
        Ok(FileKind::Elf64) => link_names::<FileHeader64<Endianness>, R>(data).unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn link_names<'a, Elf: FileHeader<Endian = Endianness>, R: ReadRef<'a>>(data: R) -> Option<Vec<u64>> {
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

#[cfg(test)]
mod tests;
