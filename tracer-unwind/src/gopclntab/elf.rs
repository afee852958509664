//! Where an ELF file keeps its `.gopclntab` (`.data.rel.ro.gopclntab` in a position-independent
//! build) and the address Go's function entries are offsets from. Pure over `object`'s
//! `ReadRef` (a slice, or a file read on demand): the section headers are read, nothing else.

use object::{
    Endianness, ReadRef,
    elf::{self, FileHeader64},
    read::elf::{FileHeader as _, SectionHeader as _},
};

/// The table of an ELF file: where it is in the file and where its code starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Section {
    /// File offset and size of the table.
    pub offset: u64,
    pub size: u64,
    /// The address of `.text`, where Go's linker puts `runtime.text` (what Go's own tools take
    /// entries to be offsets from when the header's is not relocated).
    pub text: Option<u64>,
    /// The executable sections' address ranges: a header's `textStart` must fall in one.
    code: [(u64, u64); 4],
}

impl Section {
    /// The `.gopclntab` of the ELF64 file `data`, `None` when it has none (not a Go program,
    /// or not ELF64).
    pub fn find<'data, R: ReadRef<'data>>(data: R) -> Option<Section> {
        let header = FileHeader64::<Endianness>::parse(data).ok()?;
        let endian = header.endian().ok()?;
        let sections = header.sections(endian, data).ok()?;
        let mut found = None;
        let mut text = None;
        let mut code = [(0u64, 0u64); 4];
        let mut n = 0;
        for sh in sections.iter() {
            let name = sections.section_name(endian, sh).ok()?;
            let (addr, size) = (sh.sh_addr(endian), sh.sh_size(endian));
            if sh.sh_flags(endian).0 & elf::SHF_EXECINSTR.0 != 0 && n < code.len() {
                code[n] = (addr, addr.saturating_add(size));
                n += 1;
            }
            match name {
                b".text" => text = Some(addr),
                b".gopclntab" | b".data.rel.ro.gopclntab" if sh.sh_type(endian) == elf::SHT_PROGBITS => {
                    found = Some((sh.sh_offset(endian), size));
                }
                _ => {}
            }
        }
        let (offset, size) = found?;
        Some(Section {
            offset,
            size,
            text,
            code,
        })
    }

    /// What function entries are offsets from: the header's `textStart` (`header`) when it
    /// lies in the file's code, else `.text`'s address (a position-independent binary's
    /// header holds 0 until relocated).
    pub fn text_start(&self, header: u64) -> Option<u64> {
        if self.code.iter().any(|&(start, end)| (start..end).contains(&header)) {
            Some(header)
        } else {
            self.text
        }
    }
}
