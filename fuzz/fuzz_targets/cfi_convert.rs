//! Fuzz the CFI converter: call-frame information in, kernel rows out. An input that is an ELF
//! file is read as is; any other input is wrapped in a small ELF file as its `.eh_frame` (or
//! `.debug_frame`, with or without an `.eh_frame_hdr` cut from it), for one of the three
//! machines, so that mutations spend their time in the CFI rather than in ELF headers.
//! Building the table (`table::build_from_cfi`; for ELF inputs also `table::build_object`, which
//! reads code bytes from the program headers to fill alignment padding) and looking up rules
//! (`cfi::CfiTable`) must not panic, and a table must keep the paged layout the kernel searches:
//! pages ascending, rows ascending from 0 inside a page, every rule index in range.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer_unwind::{cfi::CfiTable, table};

/// Where the wrapped sections are placed (the CFI encodes addresses relative to them).
const EH_FRAME_ADDR: u64 = 0x40_0000;
const TEXT_ADDR: u64 = 0x1000;

fuzz_target!(|input: &[u8]| {
    let wrapped;
    let file: &[u8] = if input.starts_with(b"\x7fELF") {
        input
    } else {
        wrapped = wrap(input);
        &wrapped
    };
    // The entry point marks its FDE outermost; take one from the input when it has 8 bytes.
    let entry = input
        .get(1..9)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    if let Ok(Some(built)) = table::build_from_cfi(file, entry) {
        check_layout(&built);
    }
    if input.starts_with(b"\x7fELF")
        && let Ok(Some((built, _))) = table::build_object(file)
    {
        check_layout(&built);
    }
    if let Ok(Some(cfi)) = CfiTable::from_elf(file) {
        for fde in cfi.fdes().into_iter().take(32) {
            for pc in [
                fde.start,
                fde.end.wrapping_sub(1),
                fde.start.wrapping_add(fde.end.wrapping_sub(fde.start) / 2),
            ] {
                let _ = cfi.rule_at(pc);
            }
        }
        let _ = cfi.rule_at(TEXT_ADDR);
    }
});

/// The invariants of the paged table (`tracer_common::unwind`).
fn check_layout(built: &table::ObjectTable) {
    let pages = built.pages();
    assert!(pages.windows(2).all(|w| w[0].0 < w[1].0), "pages ascend");
    for (page, rows) in pages {
        assert_eq!(
            rows.first().map(|r| r.addr_lo),
            Some(0),
            "page {page:#x} starts with a row at 0"
        );
        assert!(
            rows.windows(2).all(|w| w[0].addr_lo < w[1].addr_lo),
            "rows of page {page:#x} ascend"
        );
        assert!(
            rows.iter().all(|r| usize::from(r.rule) < built.rules().len()),
            "rule index out of range in page {page:#x}"
        );
        let base = u64::from(*page) << 16;
        for row in rows.iter().take(8) {
            let _ = built.lookup(base + u64::from(row.addr_lo));
        }
    }
}

/// A little-endian (or, for s390x, big-endian) ELF64 file holding `input` past its first byte
/// as CFI. The first byte chooses: bits 0-1 the machine (x86-64, aarch64, s390x), bit 2
/// `.debug_frame` instead of `.eh_frame`, bit 3 an `.eh_frame_hdr` made of the input's last
/// quarter.
fn wrap(input: &[u8]) -> Vec<u8> {
    let (choice, data) = input.split_first().map_or((0, &[][..]), |(c, d)| (*c, d));
    let (machine, big_endian) = match choice & 3 {
        1 => (183u16, false), // EM_AARCH64
        2 => (22, true),      // EM_S390
        _ => (62, false),     // EM_X86_64
    };
    let debug = choice & 4 != 0;
    let (cfi, hdr) = if choice & 8 != 0 && !debug {
        data.split_at(data.len() - data.len() / 4)
    } else {
        (data, &[][..])
    };
    let mut sections: Vec<(&str, u32, u64, &[u8])> = vec![(".text", 8, TEXT_ADDR, &[])];
    sections.push((if debug { ".debug_frame" } else { ".eh_frame" }, 1, EH_FRAME_ADDR, cfi));
    if !hdr.is_empty() {
        sections.push((".eh_frame_hdr", 1, EH_FRAME_ADDR - 0x1_0000, hdr));
    }
    Elf::new(big_endian).file(machine, &sections)
}

/// Writes ELF64 fields in one byte order.
struct Elf {
    big_endian: bool,
    out: Vec<u8>,
}

impl Elf {
    fn new(big_endian: bool) -> Elf {
        Elf {
            big_endian,
            out: Vec::new(),
        }
    }

    fn put(&mut self, value: u64, width: usize) {
        let bytes = value.to_le_bytes();
        let field = &bytes[..width];
        if self.big_endian {
            self.out.extend(field.iter().rev());
        } else {
            self.out.extend(field);
        }
    }

    /// Header, section contents, `.shstrtab`, section headers (null, `sections`, `.shstrtab`).
    /// Each section: name, type (1 PROGBITS, 8 NOBITS), address, bytes.
    fn file(mut self, machine: u16, sections: &[(&str, u32, u64, &[u8])]) -> Vec<u8> {
        let mut names = vec![0u8];
        let mut name_at = Vec::new();
        for (name, ..) in sections.iter().chain([&(".shstrtab", 3, 0, &[][..])]) {
            name_at.push(names.len() as u64);
            names.extend(name.as_bytes());
            names.push(0);
        }
        let mut offsets = Vec::new();
        let mut at = 64u64;
        for (.., bytes) in sections {
            offsets.push(at);
            at += bytes.len() as u64;
        }
        let names_at = at;
        let shoff = (names_at + names.len() as u64).next_multiple_of(8);
        let shnum = sections.len() as u64 + 2;
        self.out.extend(b"\x7fELF\x02");
        self.out.push(if self.big_endian { 2 } else { 1 });
        self.out.extend([1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        self.put(2, 2); // ET_EXEC
        self.put(machine.into(), 2);
        self.put(1, 4);
        self.put(TEXT_ADDR, 8); // e_entry
        self.put(0, 8); // e_phoff
        self.put(shoff, 8);
        self.put(0, 4);
        self.put(64, 2); // e_ehsize
        self.put(56, 2);
        self.put(0, 2);
        self.put(64, 2); // e_shentsize
        self.put(shnum, 2);
        self.put(shnum - 1, 2); // e_shstrndx
        for (.., bytes) in sections {
            self.out.extend(*bytes);
        }
        self.out.extend(&names);
        self.out.resize(shoff as usize, 0);
        self.out.extend([0; 64]);
        let text_size = 0x1_0000;
        for (i, (_, kind, addr, bytes)) in sections.iter().enumerate() {
            let size = if *kind == 8 { text_size } else { bytes.len() as u64 };
            self.section(name_at[i], *kind, *addr, offsets[i], size);
        }
        self.section(name_at[sections.len()], 3, 0, names_at, names.len() as u64);
        self.out
    }

    fn section(&mut self, name: u64, kind: u32, addr: u64, offset: u64, size: u64) {
        self.put(name, 4);
        self.put(kind.into(), 4);
        self.put(if addr != 0 { 2 } else { 0 }, 8); // SHF_ALLOC
        self.put(addr, 8);
        self.put(offset, 8);
        self.put(size, 8);
        self.put(0, 4);
        self.put(0, 4);
        self.put(8, 8);
        self.put(0, 8);
    }
}
