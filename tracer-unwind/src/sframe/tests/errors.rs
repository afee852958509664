//! Every kind of malformed input gives its typed error at the right offset (header, counts,
//! offsets, descriptors, rows), in both byte orders where a field is patched.

use super::build::{Spec, amd64, fde, fre, put, worked};
use crate::sframe::{Endian, Error, Section};

/// Parse `spec` after `patch` (given the bytes and byte order), expecting `want`.
fn parse_err(spec: &Spec, patch: impl Fn(&mut Vec<u8>, Endian), want: impl Fn(&Spec) -> Error) {
    for endian in [Endian::Little, Endian::Big] {
        let mut bytes = spec.build(endian);
        patch(&mut bytes, endian);
        let got = Section::parse(&bytes, 0x402000).err();
        assert_eq!(got, Some(want(spec)), "{endian:?}");
        assert!(want(spec).offset() <= bytes.len() as u64);
    }
}

/// Rows of the first function after `patch`, expecting `want`.
fn rows_err(spec: &Spec, patch: impl Fn(&mut Vec<u8>, Endian), want: Error) {
    for endian in [Endian::Little, Endian::Big] {
        let mut bytes = spec.build(endian);
        patch(&mut bytes, endian);
        let s = Section::parse(&bytes, 0x402000).expect("parses");
        assert_eq!(s.rows(&s.functions()[0]), Err(want.clone()), "{endian:?}");
        assert_eq!(s.find_row(0x401000).err(), Some(want.clone()));
    }
}

fn none(_: &mut Vec<u8>, _: Endian) {}

/// The header's own fields: too short, bad magic, unknown version and ABI.
#[test]
fn header_errors() {
    let e = Section::parse(&worked(2).build(Endian::Little)[..12], 0).expect_err("short");
    assert_eq!(
        e,
        Error::Truncated {
            what: "header",
            offset: 0,
            need: 28,
            have: 12
        }
    );
    assert_eq!(e.to_string(), "truncated header: need 28 bytes at offset 0x0, have 12");
    let spec = worked(2);
    parse_err(
        &spec,
        |b, _| b[..2].copy_from_slice(&[0x12, 0x34]),
        |_| Error::BadMagic {
            offset: 0,
            found: 0x3412,
        },
    );
    parse_err(
        &spec,
        |b, _| b[2] = 4,
        |_| Error::UnsupportedVersion { offset: 2, version: 4 },
    );
    parse_err(&spec, |b, _| b[4] = 5, |_| Error::UnknownAbi { offset: 4, abi: 5 });
    parse_err(
        &spec,
        |b, _| b[7] = 255,
        |s| {
            let have = s.build(Endian::Little).len() as u64 - 28;
            Error::Truncated {
                what: "auxiliary header",
                offset: 28,
                need: 255,
                have,
            }
        },
    );
}

/// Counts and offsets of 0xffffffff in each header field name that field's offset.
#[test]
fn huge_header_fields() {
    let spec = worked(3);
    let len = spec.build(Endian::Little).len() as u64;
    let max = 0xffff_ffffu64;
    let set = |at: usize| move |b: &mut Vec<u8>, e: Endian| put(b, at, 4, max, e);
    parse_err(&spec, set(0x08), |_| Error::Truncated {
        what: "function descriptors",
        offset: 28,
        need: max * 16,
        have: len - 28,
    });
    parse_err(&spec, set(0x0c), |_| Error::OutOfBounds {
        what: "num_fres",
        offset: 0x0c,
        value: max,
        limit: 7,
    });
    parse_err(&spec, set(0x10), |_| Error::OutOfBounds {
        what: "fre_len",
        offset: 0x10,
        value: max,
        limit: 20,
    });
    parse_err(&spec, set(0x14), |_| Error::OutOfBounds {
        what: "fdeoff",
        offset: 0x14,
        value: max,
        limit: len - 28,
    });
    parse_err(&spec, set(0x18), |_| Error::OutOfBounds {
        what: "freoff",
        offset: 0x18,
        value: max,
        limit: len - 28,
    });
}

/// Bad descriptor fields (row offset/count, header FRE total, FRE/FDE type) name their offset.
#[test]
fn descriptor_errors() {
    let v2 = worked(2);
    let fde = v2.fde_at(0);
    let big = |at: usize| move |b: &mut Vec<u8>, e: Endian| put(b, at, 4, 100, e);
    parse_err(&v2, big(fde + 8), |_| Error::OutOfBounds {
        what: "start_fre_off",
        offset: 36,
        value: 100,
        limit: 15,
    });
    parse_err(&v2, big(fde + 12), |_| Error::OutOfBounds {
        what: "function num_fres",
        offset: 40,
        value: 100,
        limit: 7,
    });
    parse_err(
        &v2,
        |b, e| put(b, 0x0c, 4, 3, e),
        |_| Error::FreCountMismatch {
            offset: 0x0c,
            header: 3,
            total: 4,
        },
    );
    parse_err(
        &v2,
        |b, _| b[fde + 16] = 3,
        |_| Error::UnknownFreType { offset: 44, value: 3 },
    );
    let v3 = worked(3);
    let attr = v3.fre_at();
    parse_err(
        &v3,
        |b, e| put(b, v3.fde_at(0) + 12, 4, 16, e),
        |_| Error::OutOfBounds {
            what: "start_fre_off (attribute record)",
            offset: 40,
            value: 16,
            limit: 15,
        },
    );
    parse_err(
        &v3,
        |b, _| b[attr + 2] = 7,
        |_| Error::UnknownFreType { offset: 46, value: 7 },
    );
    parse_err(
        &v3,
        |b, _| b[attr + 3] = 2,
        |_| Error::UnknownFdeType { offset: 47, value: 2 },
    );
}

/// Bad rows (word size 3, out of order, cut by fre_len, too many words) name the row's bytes.
#[test]
fn row_errors() {
    let spec = worked(1);
    let first = spec.fre_at();
    rows_err(
        &spec,
        |b, _| b[first + 1] |= 0x60,
        Error::ReservedWordSize {
            offset: first as u64 + 1,
        },
    );
    rows_err(
        &spec,
        |b, _| b[first + 7] = 1,
        Error::RowsOutOfOrder {
            offset: first as u64 + 7,
            start: 1,
            previous: 1,
        },
    );
    rows_err(
        &spec,
        |b, _| b[first + 7] = 0,
        Error::RowsOutOfOrder {
            offset: first as u64 + 7,
            start: 0,
            previous: 1,
        },
    );
    let cut = |b: &mut Vec<u8>, e: Endian| {
        put(b, 0x10, 4, 14, e);
        b.push(0xff);
    };
    rows_err(
        &spec,
        cut,
        Error::Truncated {
            what: "row data words",
            offset: first as u64 + 13,
            need: 2,
            have: 1,
        },
    );
    let three = amd64(2, vec![fde(0x401000, 25, vec![fre(0, true, &[8, -16, 4])])]);
    let at = three.fre_at() as u64;
    rows_err(
        &three,
        none,
        Error::TooManyWords {
            offset: at,
            count: 3,
            max: 2,
        },
    );
}

/// Reading past a truncated section stays an error inside the data, never a panic.
#[test]
fn truncation_at_every_length() {
    for version in 1..=3 {
        let bytes = worked(version).build(Endian::Big);
        for len in 0..bytes.len() {
            let e = Section::parse(&bytes[..len], 0).expect_err("truncated");
            assert!(e.offset() <= len as u64, "v{version} len {len}: {e}");
        }
    }
}
