//! Sections written here, byte by byte (v2, amd64, little-endian, 4-byte row starts), for
//! shapes the corpus lacks: a function over three page boundaries, a MASK function whose last
//! block is partial, and functions overlapping in every way. Each goes through the same
//! reader-equivalence check as the corpus, at every address.

use std::ops::Range;

use tracer_unwind::sframe::Section;
use tracer_unwind::table::ObjectTable;

use super::{check_section, expected};

/// Section address; FDE starts are relative to it (v2 without FUNC_START_PCREL).
const VADDR: u64 = 0x10_0000;

/// One function: start, size, MASK repetition size (0 = INC), rows as (start, SP offset).
struct Fde {
    start: u64,
    size: u32,
    rep_size: u8,
    rows: Vec<(u32, i8)>,
}

/// A v2 amd64 section (fixed RA offset -8) with `fdes` in the given order.
fn section(fdes: &[Fde]) -> Vec<u8> {
    let mut fres = Vec::new();
    let mut descriptors = Vec::new();
    for f in fdes {
        let offset = fres.len() as u32;
        for &(start, cfa) in &f.rows {
            fres.extend(start.to_le_bytes());
            fres.push(1 | 1 << 1); // CFA on SP, one 1-byte word.
            fres.push(cfa as u8);
        }
        descriptors.extend((f.start.wrapping_sub(VADDR) as i32).to_le_bytes());
        descriptors.extend(f.size.to_le_bytes());
        descriptors.extend(offset.to_le_bytes());
        descriptors.extend((f.rows.len() as u32).to_le_bytes());
        let mask = if f.rep_size == 0 { 0 } else { 1 << 4 };
        descriptors.extend([2 | mask, f.rep_size, 0, 0]); // ADDR4 rows.
    }
    let num_fres: usize = fdes.iter().map(|f| f.rows.len()).sum();
    let mut out = vec![0xe2, 0xde, 2, 1, 3, 0, 0xf8, 0]; // v2, sorted, amd64, RA at CFA - 8.
    for word in [fdes.len(), num_fres, fres.len(), 0, descriptors.len()] {
        out.extend((word as u32).to_le_bytes());
    }
    out.extend(descriptors);
    out.extend(fres);
    out
}

/// Parse `fdes`, run the corpus check, and compare every address of `every` too.
fn check(name: &str, fdes: &[Fde], every: Range<u64>) -> ObjectTable {
    let bytes = section(fdes);
    let s = Section::parse(&bytes, VADDR).unwrap_or_else(|e| panic!("{name}: {e}"));
    let (t, _) = check_section(name, &s);
    for pc in every {
        assert_eq!(t.lookup(pc), expected(&s, pc), "{name} at {pc:#x}");
    }
    t
}

/// A 200 KiB function from inside page 1 to inside page 5, with a row exactly at the start of
/// page 2, then nothing until page 4: every page gets its own correct first row.
#[test]
fn function_over_three_page_boundaries() {
    let f = Fde {
        start: 0x1_f000,
        size: 0x3_2000,
        rep_size: 0,
        rows: vec![(0, 8), (0x1000, 16), (0x3_0010, 8)],
    };
    let t = check("three pages", &[f], 0x1_e000..0x5_2000);
    let pages: Vec<u32> = t.pages().iter().map(|(p, _)| *p).collect();
    assert_eq!(pages, [1, 2, 3, 4, 5]);
    assert_eq!(t.pages()[2].1.len(), 1, "page 3 is one synthetic row");
}

/// A 40-byte MASK function with 16-byte blocks: the third block is cut at the function end.
#[test]
fn partial_mask_block() {
    let plt = Fde {
        start: 0x1000,
        size: 40,
        rep_size: 16,
        rows: vec![(0, 8), (11, 16)],
    };
    check("partial block", &[plt], 0xff0..0x1040);
}

/// Overlapping functions as in a `.o` (equal starts, nesting, a tail past the first).
#[test]
fn overlapping_functions() {
    let fdes = [
        Fde {
            start: 0x2000,
            size: 0x40,
            rep_size: 0,
            rows: vec![(0, 8), (0x30, 16)],
        },
        Fde {
            start: 0x2000,
            size: 0x10,
            rep_size: 0,
            rows: vec![(0, 24)],
        },
        Fde {
            start: 0x2008,
            size: 0x4,
            rep_size: 0,
            rows: vec![(2, 32)],
        },
        Fde {
            start: 0x2020,
            size: 0x40,
            rep_size: 0,
            rows: vec![(4, 40)],
        },
    ];
    let t = check("overlap", &fdes, 0x1ff0..0x2070);
    let overlaps = t
        .stats()
        .unsupported
        .iter()
        .find(|(r, _)| r.name() == "overlapping functions");
    assert_eq!(overlaps.map(|(_, n)| *n), Some(3));
}
