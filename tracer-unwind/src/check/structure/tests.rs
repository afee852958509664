//! Unit tests of `check::structure`; each test says what it proves.

use super::*;
use crate::sframe::testing;

fn header(abi: Abi, fixed_ra: i8) -> Header {
    testing::header(abi, 2, fixed_ra)
}

fn function(index: u32, start: u64, size: u32) -> Function {
    Function {
        index,
        ..testing::function(start, size)
    }
}

fn row(start: u32, base: Reg, cfa: i64, fp: Rule) -> Row {
    testing::row(start, base, cfa, Rule::Unchanged, fp)
}

fn kinds(report: &Report) -> Vec<(FindingKind, u64)> {
    report.findings.iter().map(|f| (f.kind, f.address)).collect()
}

/// Well-formed amd64 rows (the worked example of docs/sframe-format.md) produce no findings.
#[test]
fn plausible_rows_are_clean() {
    let h = header(Abi::Amd64Le, -8);
    let f = function(0, 0x401000, 25);
    let rows = [
        row(0, Reg::Sp, 8, Rule::Unchanged),
        row(1, Reg::Sp, 16, Rule::AtCfa(-16)),
        row(4, Reg::Fp, 16, Rule::AtCfa(-16)),
        row(0x18, Reg::Sp, 8, Rule::AtCfa(-16)),
    ];
    let mut report = Report::default();
    super::header(&h, &mut report);
    function_order(&h, &[f], true, &mut report);
    super::rows(&h, &f, &rows, &mut report);
    assert_eq!(kinds(&report), []);
}

/// A row at or past the function's size, and a MASK row past the repeat block, are reported
/// at their addresses.
#[test]
fn rows_outside_function_are_reported() {
    let h = header(Abi::Amd64Le, -8);
    let f = function(0, 0x1000, 0x10);
    let mut report = Report::default();
    super::rows(
        &h,
        &f,
        &[
            row(0, Reg::Sp, 8, Rule::Unchanged),
            row(0x10, Reg::Sp, 8, Rule::Unchanged),
        ],
        &mut report,
    );
    let plt = Function {
        pc_type: PcType::Mask,
        rep_size: 16,
        size: 48,
        ..function(1, 0x2000, 48)
    };
    super::rows(
        &h,
        &plt,
        &[
            row(0, Reg::Sp, 8, Rule::Unchanged),
            row(0x11, Reg::Sp, 16, Rule::Unchanged),
        ],
        &mut report,
    );
    assert_eq!(
        kinds(&report),
        [
            (FindingKind::RowOutsideFunction, 0x1010),
            (FindingKind::RowOutsideFunction, 0x2011)
        ]
    );
}

/// amd64 SP-based CFA offsets must be positive multiples of 8 (SP + 0 only with the RA in a
/// register); aarch64 allows SP + 0; FP-based rows are not judged.
#[test]
fn implausible_cfa_offsets_are_reported() {
    let f = function(0, 0x1000, 0x40);
    let rows = [
        row(0, Reg::Sp, 0, Rule::Unchanged),
        row(1, Reg::Sp, 12, Rule::Unchanged),
        row(2, Reg::Sp, -8, Rule::Unchanged),
        row(3, Reg::Fp, 4, Rule::Unchanged),
    ];
    let mut amd64 = Report::default();
    super::rows(&header(Abi::Amd64Le, -8), &f, &rows, &mut amd64);
    assert_eq!(
        kinds(&amd64),
        [
            (FindingKind::BadCfaOffset, 0x1000),
            (FindingKind::BadCfaOffset, 0x1001),
            (FindingKind::BadCfaOffset, 0x1002)
        ]
    );
    let mut ra_in_register = Report::default();
    let flex = Row {
        ra: Rule::InRegister(Reg::Dwarf(11)),
        ..row(0, Reg::Sp, 0, Rule::Unchanged)
    };
    super::rows(&header(Abi::Amd64Le, -8), &f, &[flex], &mut ra_in_register);
    assert_eq!(kinds(&ra_in_register), []);
    let mut aarch64 = Report::default();
    super::rows(&header(Abi::Aarch64Le, 0), &f, &rows, &mut aarch64);
    assert_eq!(
        kinds(&aarch64),
        [(FindingKind::BadCfaOffset, 0x1001), (FindingKind::BadCfaOffset, 0x1002)]
    );
}

/// FP/RA saved at or above the CFA, or off an 8-byte slot, is reported; outermost rows are not
/// judged (they carry no offsets).
#[test]
fn bad_save_slots_are_reported() {
    let f = function(0, 0x1000, 0x40);
    let mut ra_above = row(2, Reg::Sp, 16, Rule::Unchanged);
    ra_above.ra = Rule::AtCfa(8);
    let mut outermost = row(3, Reg::Sp, 0, Rule::AtCfa(4));
    outermost.ra_undefined = true;
    let rows = [
        row(0, Reg::Sp, 16, Rule::AtCfa(0)),
        row(1, Reg::Sp, 16, Rule::AtCfa(-12)),
        ra_above,
        outermost,
    ];
    let mut report = Report::default();
    super::rows(&header(Abi::Amd64Le, -8), &f, &rows, &mut report);
    assert_eq!(
        kinds(&report),
        [
            (FindingKind::BadSaveOffset, 0x1000),
            (FindingKind::BadSaveOffset, 0x1001),
            (FindingKind::BadSaveOffset, 0x1002)
        ]
    );
}

/// Overlapping functions are reported pairwise, also when the overlapped one is not adjacent,
/// unless overlaps are expected (a `.o`).
#[test]
fn overlaps_are_reported() {
    let h = header(Abi::Amd64Le, -8);
    let functions = [
        function(0, 0x1000, 0x100),
        function(1, 0x1010, 0x10),
        function(2, 0x1080, 0x10),
        function(3, 0x1100, 8),
    ];
    let mut report = Report::default();
    function_order(&h, &functions, true, &mut report);
    assert_eq!(
        kinds(&report),
        [(FindingKind::Overlap, 0x1010), (FindingKind::Overlap, 0x1080)]
    );
    assert!(
        report.findings[1].message.contains("0x1000..0x1100"),
        "{}",
        report.findings[1].message
    );
    let mut relocatable = Report::default();
    function_order(&h, &functions, false, &mut relocatable);
    assert_eq!(kinds(&relocatable), []);
}

/// With FDE_SORTED set, descriptors out of address order are reported; without it they are fine.
#[test]
fn unsorted_descriptors_are_reported_only_when_flagged_sorted() {
    let mut h = header(Abi::Amd64Le, -8);
    let functions = [
        function(0, 0x1000, 0x10),
        function(2, 0x1010, 0x10),
        function(1, 0x1020, 0x10),
    ];
    let mut report = Report::default();
    function_order(&h, &functions, true, &mut report);
    assert_eq!(kinds(&report), [(FindingKind::Unsorted, 0x1020)]);
    h.flags = 0;
    let mut unflagged = Report::default();
    function_order(&h, &functions, true, &mut unflagged);
    assert_eq!(kinds(&unflagged), []);
}

/// An amd64 header whose fixed RA offset is not -8, or a fixed FP offset above the CFA, is reported.
#[test]
fn bad_header_offsets_are_reported() {
    let mut h = header(Abi::Amd64Le, 0);
    h.fixed_fp_offset = 8;
    let mut report = Report::default();
    super::header(&h, &mut report);
    assert_eq!(
        kinds(&report),
        [(FindingKind::BadHeader, 0), (FindingKind::BadHeader, 0)]
    );
}
