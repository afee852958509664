//! Bounded corruption, part of the normal suite: about 20,000 deterministic mutations of real
//! sections (the worked example of docs/sframe-format.md in v1/v2/v3 and both byte orders, and
//! the sections of a compiled executable and relocatable object): every truncation, extreme
//! values in each header and descriptor field, random byte changes. Parsing, decoding every function's rows
//! and looking up a few PCs must never panic, and every error must name an offset inside the
//! data. The ELF side gets the same treatment on whole files, and each typed ELF error is
//! provoked once. Fuzzing proper lives in `fuzz/`.

use std::panic::{AssertUnwindSafe, catch_unwind};

use tracer_unwind::elf::{self, ElfError, FoundBy};

use crate::reader::{Craft, craft};
use crate::support::Rng;
use tracer_unwind::sframe::Section;

const GOLDEN: [(&str, &[(usize, usize)]); 3] = [
    (
        "e2de0101 0300f800 01000000 04000000 0f000000 00000000 11000000 \
         00f0ffff 19000000 00000000 04000000 00 000308 010510f0 040410f0 180508f0",
        &[(28, 4), (32, 4), (36, 4), (40, 4)],
    ),
    (
        "e2de0205 0300f800 01000000 04000000 0f000000 00000000 14000000 \
         e4efffff 19000000 00000000 04000000 00 00 0000 000308 010510f0 040410f0 180508f0",
        &[(28, 4), (32, 4), (36, 4), (40, 4), (46, 2)],
    ),
    (
        "e2de0305 0300f800 01000000 04000000 14000000 00000000 10000000 \
         e4efffffffffffff 19000000 00000000 0400 00 00 00 000308 010510f0 040410f0 180508f0",
        &[(28, 8), (36, 4), (40, 4), (44, 2)],
    ),
];

const HEADER_FIELDS: [(usize, usize); 6] = [(0, 2), (8, 4), (12, 4), (16, 4), (20, 4), (24, 4)];

fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).expect("ascii"), 16).expect("hex"))
        .collect()
}

/// The worked example in both byte orders (the big-endian twin swaps each field).
pub fn golden_sections() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (text, fields) in GOLDEN {
        let le = hex(text);
        let mut be = le.clone();
        for &(at, width) in HEADER_FIELDS.iter().chain(fields.iter()) {
            be[at..at + width].reverse();
        }
        out.push(le);
        out.push(be);
    }
    out
}

/// Parse, decode, look up; `Err` describes a broken invariant (a panic is caught outside).
fn exercise(data: &[u8], vaddr: u64, rng: &mut Rng) -> Result<(), String> {
    let len = data.len() as u64;
    let check = |e: &tracer_unwind::sframe::Error| {
        if e.offset() <= len {
            Ok(())
        } else {
            Err(format!("error offset past the data: {e}"))
        }
    };
    let s = match Section::parse(data, vaddr) {
        Ok(s) => s,
        Err(e) => return check(&e),
    };
    let mut pcs = vec![vaddr, rng.next_u64(), vaddr.wrapping_sub(0x1000)];
    for f in s.functions().iter().take(32) {
        match s.rows(f) {
            Ok(rows) if rows.windows(2).any(|w| w[0].start >= w[1].start) => {
                return Err("rows not ascending".into());
            }
            Ok(_) => {}
            Err(e) => check(&e)?,
        }
        pcs.extend([
            f.start,
            f.start.wrapping_add(u64::from(f.size / 2)),
            f.end().wrapping_sub(1),
        ]);
    }
    for pc in pcs {
        match s.find_row(pc) {
            Ok(Some((f, _))) if !f.contains(pc) => {
                return Err(format!("row for {pc:#x} outside its function"));
            }
            Ok(_) => {}
            Err(e) => check(&e)?,
        }
    }
    Ok(())
}

fn run(data: &[u8], vaddr: u64, rng: &mut Rng) {
    match catch_unwind(AssertUnwindSafe(|| exercise(data, vaddr, rng))) {
        Ok(Ok(())) => {}
        Ok(Err(msg)) => panic!("{msg} on input {data:02x?}"),
        Err(_) => panic!("panicked on input {data:02x?}"),
    }
}

/// Write `value`'s low `width` bytes at `at` in the section's byte order.
fn put(data: &mut [u8], at: usize, width: usize, value: u64) {
    let big = data.first() == Some(&0xde);
    let bytes = if big { value.to_be_bytes() } else { value.to_le_bytes() };
    let src = if big { &bytes[8 - width..] } else { &bytes[..width] };
    if let Some(dst) = data.get_mut(at..at + width) {
        dst.copy_from_slice(src);
    }
}

/// All mutations of one section; returns how many inputs were tried.
fn mutate(section: &[u8], vaddr: u64, random: usize, rng: &mut Rng) -> usize {
    let mut tried = 0;
    for len in 0..=section.len() {
        run(&section[..len], vaddr, rng);
        tried += 1;
    }
    let n = section.len() as u64;
    let extremes = [
        0,
        1,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_ffff,
        n,
        n + 1,
        n.saturating_sub(28),
    ];
    // Header counts/offsets, then the first descriptors' fields (v1/v2 layout; v3 overlaps).
    let fields = (8..28).step_by(4).chain((28..28 + 8 * 20).step_by(4));
    for at in fields.filter(|&at| at + 4 <= section.len()) {
        for &v in &extremes {
            let mut data = section.to_vec();
            put(&mut data, at, 4, v);
            run(&data, vaddr, rng);
            tried += 1;
        }
    }
    for at in 2..8 {
        for v in [0u8, 1, 2, 3, 4, 5, 0x7f, 0x80, 0xff] {
            let mut data = section.to_vec();
            data[at] = v;
            run(&data, vaddr, rng);
            tried += 1;
        }
    }
    for _ in 0..random {
        let mut data = section.to_vec();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(data.len());
            data[at] = match rng.below(3) {
                0 => data[at] ^ (1 << rng.below(8)),
                1 => data[at].wrapping_add(1),
                _ => rng.next_u64() as u8,
            };
        }
        run(&data, vaddr, rng);
        tried += 1;
    }
    tried
}

/// Sections of a compiled executable and `.o` (relocated): (bytes, vaddr).
fn compiled_sections() -> Vec<(Vec<u8>, u64)> {
    let dir = tempfile::tempdir().expect("tempdir");
    ["prog", "prog.o"]
        .iter()
        .map(|name| {
            let extra: &[&str] = if name.ends_with(".o") { &["-c"] } else { &[] };
            let path = crate::reader::compile(dir.path(), name, crate::reader::PROGRAM, extra);
            let bytes = std::fs::read(path).expect("read");
            let found = elf::find_sframe(&bytes).expect("ELF").expect(".sframe");
            (found.data.into_owned(), found.vaddr)
        })
        .collect()
}

/// About 20,000 corrupted sections: no panic, no hang, errors inside the data.
#[test]
fn corrupted_sections_never_panic() {
    let mut rng = Rng(0x5eed_5f4a_3e00_0001);
    let mut tried = 0;
    for section in golden_sections() {
        tried += mutate(&section, 0x402000, 2200, &mut rng);
    }
    for (section, vaddr) in compiled_sections() {
        tried += mutate(&section, vaddr, 2500, &mut rng);
    }
    assert!(tried >= 20_000, "only {tried} mutations");
}

/// Corrupted ELF files never make discovery, or decoding what it finds, panic.
#[test]
fn corrupted_elf_files_never_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = Rng(0xe1f0_0000_0000_0003);
    for (name, extra) in [("prog", &[][..]), ("prog.o", &["-c"][..])] {
        let path = crate::reader::compile(dir.path(), name, crate::reader::PROGRAM, extra);
        let file = std::fs::read(path).expect("read");
        let tables = table_offsets(&file);
        for i in 0..1500 {
            let mut data = file.clone();
            for _ in 0..1 + rng.below(3) {
                // Aim at the ELF header, the tables, or anywhere.
                let at = match i % 3 {
                    0 => rng.below(64),
                    1 => {
                        let (start, len) = tables[rng.below(tables.len())];
                        start + rng.below(len)
                    }
                    _ => rng.below(data.len()),
                };
                if let Some(b) = data.get_mut(at) {
                    *b = rng.next_u64() as u8;
                }
            }
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                if let Ok(Some(found)) = elf::find_sframe(&data) {
                    exercise(&found.data, found.vaddr, &mut Rng(7)).map_err(|e| format!("{name}: {e}"))
                } else {
                    Ok(())
                }
            }));
            assert!(matches!(outcome, Ok(Ok(()))), "{name} mutation {i}: {outcome:?}");
        }
    }
}

/// ELF64 LE program and section header tables as (offset, size), to aim mutations at them.
fn table_offsets(file: &[u8]) -> Vec<(usize, usize)> {
    let word = |at: usize| u64::from_le_bytes(file[at..at + 8].try_into().expect("8 bytes")) as usize;
    let half = |at: usize| usize::from(u16::from_le_bytes([file[at], file[at + 1]]));
    vec![(word(0x20), half(0x38) * 56), (word(0x28), half(0x3c) * 64)]
}

/// Each ELF discovery error is typed and says what and where (and damaged headers fall back).
#[test]
fn elf_errors_name_what_and_where() {
    let compressed = craft(&Craft {
        class64: true,
        sections: true,
        compressed: true,
        ..Craft::default()
    });
    // SHF_COMPRESSED over bytes that are no compressed stream: refused, naming the section.
    match elf::find_sframe(&compressed) {
        Err(ElfError::Compressed(e)) => assert!(e.to_string().contains("section .sframe"), "{e}"),
        other => panic!("{other:?}"),
    }
    let mut damaged = craft(&Craft {
        class64: true,
        sections: true,
        ..Craft::default()
    });
    damaged[0x3a] = 1; // e_shentsize
    let fallback = elf::find_sframe(&damaged).expect("falls back").expect("segment");
    assert_eq!(fallback.found_by, FoundBy::ProgramHeader);
    damaged[64..68].fill(0); // p_type: no PT_GNU_SFRAME either
    let e = elf::find_sframe(&damaged);
    assert!(
        matches!(
            e,
            Err(ElfError::Malformed {
                what: "section headers",
                ..
            })
        ),
        "{e:?}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let obj = std::fs::read(crate::reader::compile(
        dir.path(),
        "prog.o",
        crate::reader::PROGRAM,
        &["-c"],
    ))
    .expect("read");
    let rela = rela_sframe(&obj);
    let field = |at: usize| u64::from_le_bytes(obj[at..at + 8].try_into().expect("8 bytes"));
    let patch = |at: usize, v: u64| {
        let mut b = obj.clone();
        b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        b
    };
    let (offset, info) = (field(rela), field(rela + 8));
    let unknown = elf::find_sframe(&patch(rela + 8, (info & !0xffff_ffff) | 0xff)).map(|_| ());
    let want = ElfError::UnsupportedRelocation {
        section: ".sframe".into(),
        machine: 62,
        r_type: 255,
        offset,
    };
    assert_eq!(unknown, Err(want));
    let outside = elf::find_sframe(&patch(rela, 0x10_0000)).map(|_| ());
    assert!(matches!(
        outside,
        Err(ElfError::RelocationOutOfSection {
            offset: 0x10_0000,
            size: 4,
            ..
        })
    ));
    let huge = elf::find_sframe(&patch(rela + 16, 1 << 40)).map(|_| ());
    assert!(
        matches!(huge, Err(ElfError::RelocationOverflow { size: 4, .. })),
        "{huge:?}"
    );
}

/// File offset of the first entry of `.rela.sframe` in an ELF64 LE object.
fn rela_sframe(obj: &[u8]) -> usize {
    use object::read::elf::{FileHeader as _, SectionHeader as _};
    let header = object::elf::FileHeader64::<object::Endianness>::parse(obj).expect("ELF64");
    let endian = header.endian().expect("endian");
    let sections = header.sections(endian, obj).expect("sections");
    let (_, rela) = sections.section_by_name(endian, b".rela.sframe").expect(".rela.sframe");
    rela.sh_offset(endian) as usize
}
