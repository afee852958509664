//! ELF discovery: where a file's `.sframe` (or any named section) is, as bytes plus the
//! virtual address of its first byte. ELF32/ELF64, both byte orders; executables, shared
//! objects (also when stripped of section headers: the `PT_GNU_SFRAME` segment is used), and
//! relocatable objects. Pure: takes the file's bytes, never opens files and never decodes
//! SFrame contents (see `crate::sframe`).
//!
//! Relocatable objects (`ET_REL`): the assembler leaves the FDE start fields to relocations
//! (`.rela.sframe`, e.g. `R_X86_64_PC32`/`PC64` against `.text + addend`). [`find_sframe`]
//! applies them with every section placed at address 0, and writes each field so that the
//! reader resolves the function start to `S + A`: the function's offset inside its own text
//! section. That is what `readelf --sframe` of binutils 2.45+ prints for a `.o` (checked
//! against 2.47.50: `pc = 0x0, 0x10, 0x0` for two functions in `.text` and one in
//! `.text.startup`); binutils 2.40-2.44 apply no relocations to `.sframe` and print the raw
//! value (`pc = 0x0` for every function). Functions of different text sections therefore
//! overlap in a `.o`; [`find_section`] returns unrelocated bytes.
//!
//! Compressed sections (`SHF_COMPRESSED`, `.zdebug_*`) are returned decompressed, within the
//! bounds of `crate::compressed`.

use std::borrow::Cow;

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, SectionTable, Sym};
use object::{Endian as _, Endianness, FileKind, SectionIndex, SymbolIndex};

/// A section's bytes (decompressed) and its `sh_addr` (what [`find_section`] returns).
pub type SectionBytes<'a> = (Cow<'a, [u8]>, u64);

/// The bytes of an SFrame section and where they are loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SframeData<'a> {
    /// Section contents; owned only when relocations had to be applied (`.o` files).
    pub data: Cow<'a, [u8]>,
    /// Virtual address of the first byte (section `sh_addr` or segment `p_vaddr`).
    pub vaddr: u64,
    pub found_by: FoundBy,
}

/// How the section was located.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FoundBy {
    /// A section header named `.sframe` (or of type `SHT_GNU_SFRAME`).
    SectionName,
    /// The `PT_GNU_SFRAME` program header (0x6474e554), e.g. with no section headers.
    ProgramHeader,
}

/// Why a file could not be searched.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ElfError {
    #[error("not an ELF file (bad magic or class)")]
    NotElf,
    #[error("malformed ELF {what}: {source}")]
    Malformed {
        what: &'static str,
        source: object::read::Error,
    },
    #[error("{what} (file offset {offset:#x}, {size:#x} bytes) extends past the end of the {file_len}-byte file")]
    OutOfFile {
        what: String,
        offset: u64,
        size: u64,
        file_len: u64,
    },
    #[error(transparent)]
    Compressed(#[from] crate::compressed::DecompressError),
    #[error("unsupported relocation type {r_type} for ELF machine {machine} at {section}+{offset:#x}")]
    UnsupportedRelocation {
        section: String,
        machine: u16,
        r_type: u32,
        offset: u64,
    },
    #[error("relocation at {section}+{offset:#x} ({size} bytes) reaches past the section's {section_size} bytes")]
    RelocationOutOfSection {
        section: String,
        offset: u64,
        size: u64,
        section_size: u64,
    },
    #[error("relocated value {value:#x} at {section}+{offset:#x} does not fit in {size} bytes")]
    RelocationOverflow {
        section: String,
        offset: u64,
        size: u64,
        value: i64,
    },
}

fn malformed(what: &'static str) -> impl FnOnce(object::read::Error) -> ElfError {
    move |source| ElfError::Malformed { what, source }
}

/// The file's SFrame section. `Ok(None)`: the file has none (or only a `SHT_NOBITS`
/// placeholder, as in separate debug files).
pub fn find_sframe(file: &[u8]) -> Result<Option<SframeData<'_>>, ElfError> {
    match FileKind::parse(file) {
        Ok(FileKind::Elf32) => find_sframe_in::<elf::FileHeader32<Endianness>>(file),
        Ok(FileKind::Elf64) => find_sframe_in::<elf::FileHeader64<Endianness>>(file),
        _ => Err(ElfError::NotElf),
    }
}

/// A named section's bytes (decompressed, relocations not applied) and its `sh_addr`. `Ok(None)` when
/// there is no such section, or it is `SHT_NOBITS`.
pub fn find_section<'a>(file: &'a [u8], name: &str) -> Result<Option<SectionBytes<'a>>, ElfError> {
    match FileKind::parse(file) {
        Ok(FileKind::Elf32) => find_section_in::<elf::FileHeader32<Endianness>>(file, name),
        Ok(FileKind::Elf64) => find_section_in::<elf::FileHeader64<Endianness>>(file, name),
        _ => Err(ElfError::NotElf),
    }
}

/// The entry point of a program: `e_entry` of an executable (`ET_EXEC`, or `ET_DYN` with a
/// `PT_INTERP`, i.e. a position-independent executable). `None` for shared libraries and
/// relocatable objects, whose `e_entry`, if any, is not where a process starts.
pub fn entry_point(file: &[u8]) -> Result<Option<u64>, ElfError> {
    entry(file, true)
}

/// `e_entry` of any executable or shared object (`ET_EXEC`, `ET_DYN`), when not zero: where a
/// process starts when the file is run, the dynamic loader's for every dynamically linked
/// process. Unlike [`entry_point`], a library's too (its code there may be an ordinary
/// function: see `table::entry`, which uses it only where no unwind information covers it).
pub fn entry_address(file: &[u8]) -> Result<Option<u64>, ElfError> {
    entry(file, false)
}

/// [`entry_point`] (`programs_only`) or [`entry_address`].
fn entry(file: &[u8], programs_only: bool) -> Result<Option<u64>, ElfError> {
    match FileKind::parse(file) {
        Ok(FileKind::Elf32) => entry_in::<elf::FileHeader32<Endianness>>(file, programs_only),
        Ok(FileKind::Elf64) => entry_in::<elf::FileHeader64<Endianness>>(file, programs_only),
        _ => Err(ElfError::NotElf),
    }
}

fn entry_in<Elf: FileHeader<Endian = Endianness>>(file: &[u8], programs_only: bool) -> Result<Option<u64>, ElfError> {
    let header = Elf::parse(file).map_err(malformed("file header"))?;
    let endian = header.endian().map_err(malformed("file header"))?;
    let counted = match header.e_type(endian) {
        elf::ET_EXEC => true,
        elf::ET_DYN if !programs_only => true,
        elf::ET_DYN => header
            .program_headers(endian, file)
            .map_err(malformed("program headers"))?
            .iter()
            .any(|ph| ph.p_type(endian) == elf::PT_INTERP),
        _ => false,
    };
    let entry: u64 = header.e_entry(endian).into();
    Ok((counted && entry != 0).then_some(entry))
}

type Sections<'a, Elf> = SectionTable<'a, Elf, &'a [u8]>;

fn find_section_in<'a, Elf: FileHeader<Endian = Endianness>>(
    file: &'a [u8],
    name: &str,
) -> Result<Option<SectionBytes<'a>>, ElfError> {
    let header = Elf::parse(file).map_err(malformed("file header"))?;
    let endian = header.endian().map_err(malformed("file header"))?;
    let sections = header.sections(endian, file).map_err(malformed("section headers"))?;
    let Some((_, sh)) = sections.section_by_name(endian, name.as_bytes()) else {
        return Ok(None);
    };
    Ok(section_bytes(file, endian, sh, name)?.map(|bytes| (bytes, sh.sh_addr(endian).into())))
}

fn find_sframe_in<Elf: FileHeader<Endian = Endianness>>(file: &[u8]) -> Result<Option<SframeData<'_>>, ElfError> {
    let header = Elf::parse(file).map_err(malformed("file header"))?;
    let endian = header.endian().map_err(malformed("file header"))?;
    // Damaged section headers do not hide a usable PT_GNU_SFRAME: try the segment before failing.
    let section_error = match header.sections(endian, file) {
        Ok(sections) => {
            let found = sections.enumerate().find(|(_, sh)| {
                sections.section_name(endian, sh) == Ok(b".sframe".as_slice())
                    || sh.sh_type(endian) == elf::SHT_GNU_SFRAME
            });
            if let Some((index, sh)) = found {
                return from_section(file, header, endian, &sections, index, sh);
            }
            None
        }
        Err(source) => Some(ElfError::Malformed {
            what: "section headers",
            source,
        }),
    };
    let segments = header
        .program_headers(endian, file)
        .map_err(malformed("program headers"))?;
    if let Some(ph) = segments.iter().find(|ph| ph.p_type(endian) == elf::PT_GNU_SFRAME) {
        let (offset, size): (u64, u64) = (ph.p_offset(endian).into(), ph.p_filesz(endian).into());
        let data = file_range(file, offset, size, "PT_GNU_SFRAME segment")?;
        return Ok(Some(SframeData {
            data: Cow::Borrowed(data),
            vaddr: ph.p_vaddr(endian).into(),
            found_by: FoundBy::ProgramHeader,
        }));
    }
    section_error.map_or(Ok(None), Err)
}

fn from_section<'a, Elf: FileHeader<Endian = Endianness>>(
    file: &'a [u8],
    header: &Elf,
    endian: Endianness,
    sections: &Sections<'a, Elf>,
    index: SectionIndex,
    sh: &Elf::SectionHeader,
) -> Result<Option<SframeData<'a>>, ElfError> {
    let Some(bytes) = section_bytes(file, endian, sh, ".sframe")? else {
        return Ok(None);
    };
    let vaddr = sh.sh_addr(endian).into();
    let data = match bytes {
        Cow::Borrowed(bytes) if header.e_type(endian) == elf::ET_REL => {
            relocate(file, header, endian, sections, index, bytes, vaddr)?
        }
        Cow::Owned(bytes) if header.e_type(endian) == elf::ET_REL => {
            Cow::Owned(relocate(file, header, endian, sections, index, &bytes, vaddr)?.into_owned())
        }
        bytes => bytes,
    };
    Ok(Some(SframeData {
        data,
        vaddr,
        found_by: FoundBy::SectionName,
    }))
}

/// The section's contents, decompressed if compressed (`crate::compressed`); `None` for
/// `SHT_NOBITS`.
fn section_bytes<'a, S: SectionHeader<Endian = Endianness>>(
    file: &'a [u8],
    endian: Endianness,
    sh: &S,
    name: &str,
) -> Result<Option<Cow<'a, [u8]>>, ElfError> {
    let Some((offset, size)) = sh.file_range(endian) else {
        return Ok(None);
    };
    let raw = file_range(file, offset, size, &format!("section {name}"))?;
    Ok(Some(crate::compressed::elf_section_data(file, endian, sh, raw, name)?))
}

fn file_range<'a>(file: &'a [u8], offset: u64, size: u64, what: &str) -> Result<&'a [u8], ElfError> {
    let out_of_file = || ElfError::OutOfFile {
        what: what.to_owned(),
        offset,
        size,
        file_len: file.len() as u64,
    };
    let start = usize::try_from(offset).map_err(|_| out_of_file())?;
    let len = usize::try_from(size).map_err(|_| out_of_file())?;
    file.get(start..start.checked_add(len).ok_or_else(out_of_file)?)
        .ok_or_else(out_of_file)
}

/// One relocation against `.sframe`, whichever table (REL or RELA) it came from.
struct Reloc {
    offset: u64,
    r_type: u32,
    symbol: u32,
    /// `None` for REL: the addend is the field's current contents.
    addend: Option<i64>,
}

/// Apply every REL/RELA section targeting `.sframe` (module docs: resolved start = `S + A`).
fn relocate<'a, Elf: FileHeader<Endian = Endianness>>(
    file: &'a [u8],
    header: &Elf,
    endian: Endianness,
    sections: &Sections<'a, Elf>,
    target: SectionIndex,
    bytes: &'a [u8],
    vaddr: u64,
) -> Result<Cow<'a, [u8]>, ElfError> {
    let pcrel = bytes
        .get(3)
        .is_some_and(|flags| flags & crate::sframe::FLAG_FDE_FUNC_START_PCREL != 0);
    let machine = header.e_machine(endian).0;
    let mut out: Option<Vec<u8>> = None;
    for (_, sh) in sections.enumerate() {
        let is_reloc = sh.sh_type(endian) == elf::SHT_RELA || sh.sh_type(endian) == elf::SHT_REL;
        if !is_reloc || sh.info_link(endian) != target {
            continue;
        }
        let (relocs, link) = reloc_entries(file, endian, sh)?;
        let symbols = sections
            .symbol_table_by_index(endian, file, link)
            .map_err(malformed("symbol table"))?;
        let out = out.get_or_insert_with(|| bytes.to_vec());
        for r in relocs {
            let Some(size) = reloc_size(machine, r.r_type) else {
                return Err(ElfError::UnsupportedRelocation {
                    section: ".sframe".into(),
                    machine,
                    r_type: r.r_type,
                    offset: r.offset,
                });
            };
            if size == 0 {
                continue;
            }
            let field = field_range(r.offset, size, out.len())?;
            let addend = match r.addend {
                Some(addend) => addend,
                None => read_signed(&out[field.clone()], endian),
            };
            let s: u64 = match r.symbol {
                0 => 0,
                n => symbols
                    .symbol(SymbolIndex(n as usize))
                    .map_err(malformed("relocation symbol"))?
                    .st_value(endian)
                    .into(),
            };
            let base = if pcrel { vaddr.wrapping_add(r.offset) } else { vaddr };
            let value = s.wrapping_add_signed(addend).wrapping_sub(base) as i64;
            write_signed(&mut out[field], value, endian).ok_or(ElfError::RelocationOverflow {
                section: ".sframe".into(),
                offset: r.offset,
                size,
                value,
            })?;
        }
    }
    Ok(out.map_or(Cow::Borrowed(bytes), Cow::Owned))
}

fn reloc_entries<S: SectionHeader<Endian = Endianness>>(
    file: &[u8],
    endian: Endianness,
    sh: &S,
) -> Result<(Vec<Reloc>, SectionIndex), ElfError> {
    use object::read::elf::{Rel as _, Rela as _};
    if let Some((rela, link)) = sh.rela(endian, file).map_err(malformed("relocation section"))? {
        let relocs = rela.iter().map(|r| Reloc {
            offset: r.r_offset(endian).into(),
            r_type: r.r_type(endian, false).0,
            symbol: r.r_sym(endian, false),
            addend: Some(r.r_addend(endian).into()),
        });
        return Ok((relocs.collect(), link));
    }
    let (rel, link) = sh
        .rel(endian, file)
        .map_err(malformed("relocation section"))?
        .unwrap_or((&[], SectionIndex(0)));
    let relocs = rel.iter().map(|r| Reloc {
        offset: r.r_offset(endian).into(),
        r_type: r.r_type(endian).0,
        symbol: r.r_sym(endian),
        addend: None,
    });
    Ok((relocs.collect(), link))
}

/// Width of the field a relocation writes, for the machines SFrame exists on; `Some(0)` for
/// the NONE relocations, `None` when unknown.
fn reloc_size(machine: u16, r_type: u32) -> Option<u64> {
    let size = match (elf::Machine(machine), r_type) {
        (_, 0) => 0,
        (elf::EM_X86_64, 2 | 10 | 11) => 4, // PC32, 32, 32S
        (elf::EM_X86_64, 1 | 24) => 8,      // 64, PC64
        (elf::EM_AARCH64, 258 | 261) => 4,  // ABS32, PREL32
        (elf::EM_AARCH64, 257 | 260) => 8,  // ABS64, PREL64
        (elf::EM_S390, 4 | 5) => 4,         // 32, PC32
        (elf::EM_S390, 22 | 23) => 8,       // 64, PC64
        _ => return None,
    };
    Some(size)
}

fn field_range(offset: u64, size: u64, len: usize) -> Result<std::ops::Range<usize>, ElfError> {
    let error = || ElfError::RelocationOutOfSection {
        section: ".sframe".into(),
        offset,
        size,
        section_size: len as u64,
    };
    let start = usize::try_from(offset).map_err(|_| error())?;
    let end = start
        .checked_add(size as usize)
        .filter(|&end| end <= len)
        .ok_or_else(error)?;
    Ok(start..end)
}

/// A 4- or 8-byte field, sign-extended.
fn read_signed(field: &[u8], endian: Endianness) -> i64 {
    match <[u8; 4]>::try_from(field) {
        Ok(b) => endian.read_i32(b).into(),
        Err(_) => <[u8; 8]>::try_from(field).map_or(0, |b| endian.read_i64(b)),
    }
}

/// Write `value` into a 4- or 8-byte field; `None` if it does not fit.
fn write_signed(field: &mut [u8], value: i64, endian: Endianness) -> Option<()> {
    if field.len() == 4 {
        field.copy_from_slice(&endian.write_i32(i32::try_from(value).ok()?));
    } else {
        field.copy_from_slice(&endian.write_i64(value));
    }
    Some(())
}
