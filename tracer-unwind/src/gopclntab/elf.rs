//! Where an ELF file keeps its `.gopclntab` (`.data.rel.ro.gopclntab` in a position-independent
//! build), the address Go's function entries are offsets from, and the sections its inline
//! trees are found through (see `module`): the module data (`.go.module` from Go 1.26,
//! `.noptrdata` before) and the read-only data the trees lie in (`.rodata`; `.gopclntab` from
//! 1.26). Pure over `object`'s `ReadRef` (a slice, or a file read on demand) for the section
//! headers, and over [`Bytes`] (the whole file by offset) for the rest.

use object::{
    Endianness, ReadRef,
    elf::{self, FileHeader64},
    read::elf::{FileHeader as _, SectionHeader as _},
};

use super::{Bytes, Table};

/// A section's address, file offset and size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Part {
    pub addr: u64,
    pub offset: u64,
    pub size: u64,
}

impl Part {
    fn holds(&self, addr: u64) -> bool {
        addr >= self.addr && addr - self.addr < self.size
    }
}

/// The table of an ELF file: where it is in the file and where its code starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Section {
    /// File offset and size of the table.
    pub offset: u64,
    pub size: u64,
    /// The table's address.
    pub addr: u64,
    /// The address of `.text`, where Go's linker puts `runtime.text` (what Go's own tools take
    /// entries to be offsets from when the header's is not relocated).
    pub text: Option<u64>,
    /// The executable sections' address ranges: a header's `textStart` must fall in one.
    code: [(u64, u64); 4],
    /// `.rodata`'s address, which the module data holds as its `rodata` field.
    rodata: Option<u64>,
    /// Where the module data may be: `.go.module`, `.noptrdata`.
    module: [Option<Part>; 2],
    /// Where the inline trees may be: `.rodata`, the table itself, `.go.func`.
    readonly: [Option<Part>; 3],
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
        let (mut module, mut readonly) = ([None; 2], [None; 3]);
        let mut code = [(0u64, 0u64); 4];
        let mut n = 0;
        for sh in sections.iter() {
            let name = sections.section_name(endian, sh).ok()?;
            let (addr, size) = (sh.sh_addr(endian), sh.sh_size(endian));
            if sh.sh_flags(endian).0 & elf::SHF_EXECINSTR.0 != 0 && n < code.len() {
                code[n] = (addr, addr.saturating_add(size));
                n += 1;
            }
            let part = Some(Part {
                addr,
                offset: sh.sh_offset(endian),
                size,
            });
            if sh.sh_type(endian) != elf::SHT_PROGBITS {
                if name == b".text" {
                    text = Some(addr);
                }
                continue;
            }
            match name {
                b".text" => text = Some(addr),
                b".gopclntab" | b".data.rel.ro.gopclntab" => {
                    found = part;
                    readonly[1] = part;
                }
                b".rodata" => readonly[0] = part,
                b".go.func" => readonly[2] = part,
                b".go.module" => module[0] = part,
                b".noptrdata" => module[1] = part,
                _ => {}
            }
        }
        let found = found?;
        Some(Section {
            offset: found.offset,
            size: found.size,
            addr: found.addr,
            text,
            code,
            rodata: readonly[0].map(|p| p.addr),
            module,
            readonly,
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

    /// Where `table`'s inline trees are: the read-only section holding `go:func.*`, and its
    /// address, read from the module data through `file` (the whole file, by offset). `None`
    /// when the module data is not found or does not check out (no inlined frames then).
    pub fn trees<F: Bytes + ?Sized>(&self, file: &F, table: &Table) -> Option<(Part, u64)> {
        let rodata = self.rodata?;
        let readonly = |addr: u64| self.readonly.iter().flatten().find(|p| p.holds(addr)).copied();
        self.module.iter().flatten().find_map(|&part| {
            let data = Within { file, part };
            let gofunc = table.gofunc(&data, part.size, self.addr, rodata, &|a| readonly(a).is_some())?;
            Some((readonly(gofunc)?, gofunc))
        })
    }
}

/// A section read by offsets from its start, through `file`, never past its end.
pub struct Within<'a, F: Bytes + ?Sized> {
    pub file: &'a F,
    pub part: Part,
}

impl<F: Bytes + ?Sized> Bytes for Within<'_, F> {
    fn read_at(&self, at: u64, buf: &mut [u8]) -> bool {
        let fits = at
            .checked_add(buf.len() as u64)
            .is_some_and(|end| end <= self.part.size);
        fits && self
            .part
            .offset
            .checked_add(at)
            .is_some_and(|at| self.file.read_at(at, buf))
    }
}

/// A section read by the addresses it is loaded at, through `file`, never outside it.
pub struct Loaded<'a, F: Bytes + ?Sized> {
    pub file: &'a F,
    pub part: Part,
}

impl<F: Bytes + ?Sized> Bytes for Loaded<'_, F> {
    fn read_at(&self, at: u64, buf: &mut [u8]) -> bool {
        at.checked_sub(self.part.addr).is_some_and(|offset| {
            Within {
                file: self.file,
                part: self.part,
            }
            .read_at(offset, buf)
        })
    }
}
