//! Names for PLT stubs. A call to a function of another object (or, in a shared library, to
//! one of its own exported functions) goes through a stub in `.plt`, `.plt.sec` or `.plt.got`
//! that jumps through a GOT slot. The stubs have no symbols, so a symbolizer names a sample
//! taken in one after the nearest symbol before it (`_init`, whose size is 0): a wrong name.
//! Here each stub is decoded to the GOT slot it jumps through, the slot to its dynamic
//! relocation, and the relocation to its symbol: `puts@plt`, as perf and objdump call it.
//! Whatever cannot be decoded keeps no name (never a guessed neighbour's).
//!
//! ELF64, x86-64 (`jmp *slot(%rip)`, with or without `endbr64`/`bnd`) and aarch64 (`adrp x16`
//! then `ldr x17, [x16, #off]`). Every read is bounded; a malformed file gives no stubs.

use std::{collections::HashMap, fs::File, ops::Range};

use object::{
    Endianness, ReadCache, ReadRef,
    elf::{self, FileHeader64},
    read::elf::{FileHeader as _, Rela as _, SectionHeader as _, SectionTable, Sym as _},
};

/// The largest PLT section decoded, and the largest relocation or symbol table read.
const MAX_SECTION: u64 = 32 << 20;

/// The stubs of one object, by object-relative address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plt {
    /// Sorted by start, disjoint.
    stubs: Vec<Stub>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Stub {
    range: Range<u64>,
    /// The symbol its GOT slot is relocated to, demangled.
    name: String,
}

impl Plt {
    /// The stubs of the object file `file` (none if it is not a readable ELF64 file).
    pub fn of_file(file: &File) -> Plt {
        let Ok(len) = file.metadata().map(|m| m.len()) else {
            return Plt::default();
        };
        Plt::of(&ReadCache::new(crate::sys::objfile::Pread::new(file, len)))
    }

    /// The stubs of the ELF file `data`.
    pub fn of<'data, R: ReadRef<'data>>(data: R) -> Plt {
        let mut stubs = stubs(data).unwrap_or_default();
        stubs.sort_by_key(|s| s.range.start);
        stubs.dedup_by(|b, a| b.range.start < a.range.end);
        Plt { stubs }
    }

    /// The name of the stub holding object-relative address `offset`.
    pub fn name(&self, offset: u64) -> Option<&str> {
        let i = self.stubs.partition_point(|s| s.range.start <= offset).checked_sub(1)?;
        let stub = &self.stubs[i];
        stub.range.contains(&offset).then_some(stub.name.as_str())
    }

    /// Every stub, as `(start, name)`.
    #[cfg(test)]
    pub fn stubs(&self) -> impl Iterator<Item = (u64, &str)> {
        self.stubs.iter().map(|s| (s.range.start, s.name.as_str()))
    }
}

/// The stubs of `data`, unsorted; `None` if it is not an ELF64 file of a known machine.
fn stubs<'data, R: ReadRef<'data>>(data: R) -> Option<Vec<Stub>> {
    let header = FileHeader64::<Endianness>::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let machine = header.e_machine(endian);
    if machine != elf::EM_X86_64 && machine != elf::EM_AARCH64 {
        return None;
    }
    let sections = header.sections(endian, data).ok()?;
    let plts: Vec<_> = sections
        .iter()
        .filter(|sh| sh.sh_type(endian) == elf::SHT_PROGBITS && sh.sh_size(endian) <= MAX_SECTION)
        .filter_map(|sh| {
            let name = sections.section_name(endian, sh).ok()?;
            matches!(name, b".plt" | b".plt.sec" | b".plt.got").then_some((name, sh))
        })
        .collect();
    if plts.is_empty() {
        return Some(Vec::new());
    }
    // `.plt.got` stubs jump through slots relocated in `.rela.dyn`; the others in `.rela.plt`.
    let dyn_too = plts.iter().any(|(name, _)| *name == b".plt.got");
    let slots = slot_names(&sections, endian, data, dyn_too);
    let mut stubs = Vec::new();
    for (_, sh) in plts {
        let (Some(bytes), addr) = (sh.data(endian, data).ok(), sh.sh_addr(endian)) else {
            continue;
        };
        let entry = match sh.sh_entsize(endian) {
            size @ 8..=32 => size as usize,
            _ => 16,
        };
        let found = if machine == elf::EM_X86_64 {
            x86_64_slots(bytes, addr, entry)
        } else {
            aarch64_slots(bytes, addr)
        };
        stubs.extend(found.into_iter().filter_map(|(range, slot)| {
            Some(Stub {
                range,
                name: slots.get(&slot)?.clone(),
            })
        }));
    }
    Some(stubs)
}

/// The symbol each GOT slot is relocated to (`slot address -> "name@plt"`), from the
/// relocation sections against the dynamic symbols: `.rela.plt`, and others if `all`.
fn slot_names<'data, R: ReadRef<'data>>(
    sections: &SectionTable<'data, FileHeader64<Endianness>, R>,
    endian: Endianness,
    data: R,
    all: bool,
) -> HashMap<u64, String> {
    let mut names = HashMap::new();
    for sh in sections.iter() {
        if sh.sh_type(endian) != elf::SHT_RELA || sh.sh_size(endian) > MAX_SECTION {
            continue;
        }
        if !all && sections.section_name(endian, sh).ok() != Some(b".rela.plt") {
            continue;
        }
        let Ok(Some((relas, link))) = sh.rela(endian, data) else {
            continue;
        };
        let Some(symbols) = sections
            .section(link)
            .ok()
            .filter(|s| s.sh_type(endian) == elf::SHT_DYNSYM && s.sh_size(endian) <= MAX_SECTION)
            .and_then(|_| sections.symbol_table_by_index(endian, data, link).ok())
        else {
            continue;
        };
        for rela in relas {
            let index = rela.r_sym(endian, false);
            if index == 0 {
                continue;
            }
            let Ok(symbol) = symbols.symbol(object::SymbolIndex(index as usize)) else {
                continue;
            };
            if let Ok(name) = symbol.name(endian, symbols.strings())
                && let Ok(name) = std::str::from_utf8(name)
                && !name.is_empty()
            {
                names.insert(rela.r_offset(endian), format!("{}@plt", super::named::demangle(name)));
            }
        }
    }
    names
}

/// x86-64 stubs of `entry` bytes at `addr`: each one's range and the GOT slot its
/// `jmp *disp32(%rip)` (`ff 25`, after an optional `endbr64` and `bnd`/`notrack` prefix) reads.
fn x86_64_slots(bytes: &[u8], addr: u64, entry: usize) -> Vec<(Range<u64>, u64)> {
    let mut found = Vec::new();
    for (i, stub) in bytes.chunks_exact(entry).enumerate() {
        let start = addr + (i * entry) as u64;
        let Some(at) = (0..8).find(|&at| stub.get(at..at + 2) == Some(&[0xff, 0x25][..])) else {
            continue;
        };
        let Some(disp) = stub.get(at + 2..at + 6) else {
            continue;
        };
        let disp = i32::from_le_bytes(disp.try_into().expect("4 bytes"));
        let next = start + at as u64 + 6;
        found.push((start..start + entry as u64, next.wrapping_add_signed(i64::from(disp))));
    }
    found
}

/// aarch64 stubs at `addr`: each `adrp x16, page` followed by `ldr x17, [x16, #off]` reads the
/// GOT slot `page + off`; a stub runs from that `adrp` (or the `bti c` before it) to the next.
fn aarch64_slots(bytes: &[u8], addr: u64) -> Vec<(Range<u64>, u64)> {
    const BTI_C: u32 = 0xd503_245f;
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes")))
        .collect();
    let mut starts = Vec::new();
    for (i, pair) in words.windows(2).enumerate() {
        let (adrp, ldr) = (pair[0], pair[1]);
        // adrp x16 / ldr x17, [x16, #imm12 * 8] (64-bit, unsigned offset).
        if adrp & 0x9f00_001f != 0x9000_0010 || ldr & 0xffc0_03ff != 0xf940_0211 {
            continue;
        }
        let pc = addr + 4 * i as u64;
        let imm = (u64::from(adrp >> 5 & 0x7_ffff) << 2 | u64::from(adrp >> 29 & 3)) << 12;
        // Sign-extend the 33-bit page offset.
        let page_offset = ((imm << 31) as i64) >> 31;
        let slot = (pc & !0xfff).wrapping_add_signed(page_offset) + u64::from(ldr >> 10 & 0xfff) * 8;
        let start = if i > 0 && words[i - 1] == BTI_C { pc - 4 } else { pc };
        starts.push((start, slot));
    }
    let end = addr + bytes.len() as u64;
    (0..starts.len())
        .map(|i| {
            let (start, slot) = starts[i];
            (start..starts.get(i + 1).map_or(end, |next| next.0), slot)
        })
        .collect()
}

#[cfg(test)]
mod tests;
