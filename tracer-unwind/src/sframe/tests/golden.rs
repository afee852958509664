//! The worked example of docs/sframe-format.md (v1, v2+PCREL, v3) byte for byte, in both byte
//! orders, plus the layout variations around it: auxiliary header, start-field and word
//! widths, MASK lookup, descriptor sorting.

use super::build::{Fde, Spec, amd64, fde, fre, hex, worked};
use crate::sframe::testing;
use crate::sframe::{CfaRule, Endian, Error, FLAG_FDE_SORTED, PcType, Reg, Row, Rule, Section};

const ROWS_HEX: &str = "00 03 08 | 01 05 10 f0 | 04 04 10 f0 | 18 05 08 f0";

/// The golden bytes of docs/sframe-format.md for each version.
fn golden(version: u8) -> Vec<u8> {
    let body = match version {
        1 => {
            "e2de 01 01 03 00 f8 00 | 01000000 04000000 0f000000 00000000 11000000 | \
              00f0ffff 19000000 00000000 04000000 00"
        }
        2 => {
            "e2de 02 05 03 00 f8 00 | 01000000 04000000 0f000000 00000000 14000000 | \
              e4efffff 19000000 00000000 04000000 00 00 0000"
        }
        _ => {
            "e2de 03 05 03 00 f8 00 | 01000000 04000000 14000000 00000000 10000000 | \
              e4efffffffffffff 19000000 00000000 | 0400 00 00 00"
        }
    };
    hex(&format!("{body} {ROWS_HEX}"))
}

/// Multi-byte fields (offset, width) of the golden sections, for the big-endian twin.
fn fields(version: u8) -> Vec<(usize, usize)> {
    let mut f = vec![(0, 2), (8, 4), (12, 4), (16, 4), (20, 4), (24, 4)];
    match version {
        1 => f.extend([(28, 4), (32, 4), (36, 4), (40, 4)]),
        2 => f.extend([(28, 4), (32, 4), (36, 4), (40, 4), (46, 2)]),
        _ => f.extend([(28, 8), (36, 4), (40, 4), (44, 2)]),
    }
    f
}

fn swap_fields(bytes: &[u8], fields: &[(usize, usize)]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for &(at, width) in fields {
        out[at..at + width].reverse();
    }
    out
}

fn row(start: u32, base: Reg, cfa: i64, fp: Rule, offset: u32) -> Row {
    Row {
        offset,
        ..testing::row(start, base, cfa, Rule::Unchanged, fp)
    }
}

/// The four rows of the example; `first` = offset of the first row in the section.
fn expected_rows(first: u32) -> Vec<Row> {
    vec![
        row(0, Reg::Sp, 8, Rule::Unchanged, first),
        row(1, Reg::Sp, 16, Rule::AtCfa(-16), first + 3),
        row(4, Reg::Fp, 16, Rule::AtCfa(-16), first + 7),
        row(0x18, Reg::Sp, 8, Rule::AtCfa(-16), first + 11),
    ]
}

/// The golden bytes of docs/sframe-format.md, every version and byte order, decode and look up
/// as documented.
#[test]
fn worked_example_decodes_in_every_version_and_byte_order() {
    for version in 1..=3 {
        let le = golden(version);
        let be = swap_fields(&le, &fields(version));
        assert_eq!(
            worked(version).build(Endian::Little),
            le,
            "builder matches docs/sframe-format.md, v{version}"
        );
        assert_eq!(
            worked(version).build(Endian::Big),
            be,
            "builder matches the swapped twin, v{version}"
        );
        for (bytes, endian) in [(&le, Endian::Little), (&be, Endian::Big)] {
            let s = Section::parse(bytes, 0x402000).expect("parses");
            assert_eq!(s.endian(), endian);
            assert_eq!(s.header().version, version);
            assert_eq!(s.num_rows(), 4);
            let [f] = s.functions() else { panic!("one function") };
            assert_eq!((f.start, f.size, f.num_fres, f.pc_type), (0x401000, 25, 4, PcType::Inc));
            let first = match version {
                1 => 45,
                2 => 48,
                _ => 49,
            };
            assert_eq!(s.rows(f).expect("rows"), expected_rows(first), "v{version} {endian:?}");
            let at = |pc| s.find_row(pc).expect("lookup").map(|(_, r)| r.start);
            assert_eq!(at(0x401000), Some(0));
            assert_eq!(at(0x401003), Some(1));
            assert_eq!(at(0x401017), Some(4));
            assert_eq!(at(0x401018), Some(0x18));
            assert_eq!(at(0x401019), None, "one past the end");
            assert_eq!(at(0x400fff), None);
            assert_eq!(crate::sframe::decode_all(&s), Ok(4));
        }
    }
}

/// The auxiliary header is skipped: sub-section offsets count from its end.
#[test]
fn auxiliary_header_is_skipped() {
    for version in 1..=3 {
        let mut spec = worked(version);
        spec.aux = vec![0xaa; 5];
        for endian in [Endian::Little, Endian::Big] {
            let bytes = spec.build(endian);
            let s = Section::parse(&bytes, 0x402000).expect("parses");
            assert_eq!(s.header().auxhdr_len, 5);
            assert_eq!(s.functions()[0].start, 0x401000);
            let first = spec.fre_at() as u32 + if version >= 3 { 5 } else { 0 };
            assert_eq!(s.rows(&s.functions()[0]).expect("rows"), expected_rows(first));
        }
    }
}

/// ADDR2/ADDR4 start fields and 2-/4-byte data words decode in both byte orders.
#[test]
fn start_and_word_widths() {
    let mut wide = fre(0x1234, true, &[300, -300]);
    wide.size = 2;
    let mut f2 = fde(0x500000, 0x2000, vec![fre(0, true, &[8]), wide]);
    f2.fre_type = 1;
    let mut huge = fre(0x12345, false, &[100_000, -16]);
    huge.size = 4;
    let mut f4 = fde(0x600000, 0x20000, vec![fre(0, true, &[8]), huge]);
    f4.fre_type = 2;
    for version in 1..=3 {
        for endian in [Endian::Little, Endian::Big] {
            let bytes = amd64(version, vec![f2.clone(), f4.clone()]).build(endian);
            let s = Section::parse(&bytes, 0x402000).expect("parses");
            let rows: Vec<Vec<Row>> = s.functions().iter().map(|f| s.rows(f).expect("rows")).collect();
            assert_eq!(
                (rows[0][1].start, rows[0][1].cfa.offset, rows[0][1].fp),
                (0x1234, 300, Rule::AtCfa(-300))
            );
            assert_eq!(
                (rows[1][1].start, rows[1][1].cfa),
                (
                    0x12345,
                    CfaRule {
                        base: Reg::Fp,
                        offset: 100_000,
                        deref: false
                    }
                )
            );
            let (f, r) = s.find_row(0x600000 + 0x12346).expect("lookup").expect("covered");
            assert_eq!((f.start, r.start), (0x600000, 0x12345));
        }
    }
}

fn plt(version: u8, rep_size: u8) -> Spec {
    let mut f = fde(0x1030, 32, vec![fre(0, true, &[8]), fre(11, true, &[16])]);
    f.mask = true;
    f.rep_size = rep_size;
    amd64(version, vec![f])
}

/// MASK functions select rows by `(pc - start) % rep_size` (a PLT of 16-byte entries).
#[test]
fn mask_lookup_uses_the_repetition_size() {
    for version in 2..=3 {
        for endian in [Endian::Little, Endian::Big] {
            let bytes = plt(version, 16).build(endian);
            let s = Section::parse(&bytes, 0x402000).expect("parses");
            let at = |pc| s.find_row(pc).expect("lookup").map(|(_, r)| r.cfa.offset);
            assert_eq!(at(0x1030 + 16 + 3), Some(8));
            assert_eq!(at(0x1030 + 16 + 12), Some(16));
            assert_eq!(at(0x1030 + 11), Some(16));
            assert_eq!(at(0x1030 + 32), None);
        }
    }
}

/// MASK without repetition size: no row in v1 (no such field), `ZeroRepSize` in v2.
#[test]
fn mask_without_repetition_size() {
    let bytes = plt(1, 0).build(Endian::Little);
    let s = Section::parse(&bytes, 0x402000).expect("parses");
    assert_eq!(s.find_row(0x1035), Ok(None));
    let spec = plt(2, 0);
    let bytes = spec.build(Endian::Little);
    let s = Section::parse(&bytes, 0x402000).expect("parses");
    assert_eq!(
        s.find_row(0x1035),
        Err(Error::ZeroRepSize {
            offset: spec.fde_at(0) as u64
        })
    );
}

/// Descriptors out of address order come back sorted by resolved start, keeping their index.
#[test]
fn functions_are_sorted_by_resolved_start() {
    let fdes: Vec<Fde> = [0x403000u64, 0x401000, 0x402000]
        .iter()
        .map(|&start| fde(start, 0x100, vec![fre(0, true, &[8])]))
        .collect();
    for version in 1..=3 {
        let mut spec = amd64(version, fdes.clone());
        spec.flags &= !FLAG_FDE_SORTED;
        let bytes = spec.build(Endian::Little);
        let s = Section::parse(&bytes, 0x402000).expect("parses");
        let got: Vec<(u64, u32)> = s.functions().iter().map(|f| (f.start, f.index)).collect();
        assert_eq!(got, [(0x401000, 1), (0x402000, 2), (0x403000, 0)]);
        assert_eq!(s.find_function(0x4020ff).map(|f| f.index), Some(2));
        assert_eq!(s.find_function(0x402100), None, "gap between functions");
    }
}

/// Start resolution wraps like pointer arithmetic instead of panicking on extreme values.
#[test]
fn start_resolution_wraps() {
    let spec = amd64(3, vec![fde(u64::MAX - 0x10, 0x100, vec![fre(0, true, &[8])])]);
    let bytes = spec.build(Endian::Little);
    let s = Section::parse(&bytes, 0x402000).expect("parses");
    let f = s.functions()[0];
    assert_eq!((f.start, f.end()), (u64::MAX - 0x10, u64::MAX));
    assert_eq!(s.find_row(u64::MAX - 1).expect("lookup").map(|(_, r)| r.start), Some(0));
}

/// The fixture example of docs/sframe-format.md: libshlib.so's `.sframe` (v2, binutils 2.44)
/// has the header bytes, descriptors and rows the document decodes by hand.
#[test]
fn fixture_example_of_the_format_document() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/bin/v2/x86_64/libshlib.so");
    let file = std::fs::read(path).expect("read the fixture");
    let sframe = crate::elf::find_sframe(&file).expect("ELF").expect("has .sframe");
    assert_eq!((sframe.vaddr, sframe.data.len()), (0x5f8, 0x81));
    assert_eq!(
        &sframe.data[..28],
        &hex("e2de 0201 0300 f800 0400 0000 0700 0000 1500 0000 0000 0000 5000 0000")[..]
    );
    let section = Section::parse(&sframe.data, sframe.vaddr).expect("parses");
    let fdes: Vec<_> = section
        .functions()
        .iter()
        .map(|f| {
            (
                f.index,
                f.start,
                f.size,
                f.fre_offset,
                f.num_fres,
                f.pc_type,
                f.rep_size,
            )
        })
        .collect();
    assert_eq!(
        fdes,
        [
            (0, 0x430, 16, 12, 2, PcType::Inc, 16),
            (1, 0x440, 8, 18, 1, PcType::Mask, 8),
            (2, 0x510, 20, 0, 3, PcType::Inc, 0),
            (3, 0x530, 5, 9, 1, PcType::Inc, 0),
        ]
    );
    let apply = &section.functions()[2];
    let rows: Vec<(u32, Reg, i64)> = section
        .rows(apply)
        .expect("rows decode")
        .iter()
        .map(|r| (r.start, r.cfa.base, r.cfa.offset))
        .collect();
    assert_eq!(rows, [(0, Reg::Sp, 8), (4, Reg::Sp, 16), (0x10, Reg::Sp, 8)]);
}
