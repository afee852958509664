//! `build` on functions stated as data: every address agrees with a direct per-address
//! reference (the reader's lookup rules), and the paged form has the shape the kernel expects.

use tracer_common::unwind::{KIND_NO_INFO, KIND_OUTERMOST, UnwindRow, UnwindRule};

use super::{function, header, sp};
use crate::sframe::{Abi, Error, Function, Header, PcType, Row};
use crate::table::{ObjectTable, RULE_BYTES, Unsupported, build, convert, unsupported_rule};

type Spec = Vec<(Function, Vec<Row>)>;

fn table(h: &Header, spec: &Spec) -> ObjectTable {
    table_with_entry(h, spec, None)
}

fn table_with_entry(h: &Header, spec: &Spec, entry: Option<u64>) -> ObjectTable {
    let functions: Vec<Function> = spec.iter().map(|(f, _)| *f).collect();
    let table = build(h, &functions, entry, |f| {
        Ok(spec
            .iter()
            .find(|(g, _)| g == f)
            .map(|(_, rows)| rows.clone())
            .unwrap_or_default())
    })
    .expect("builds");
    check_shape(&table);
    table
}

/// The rule at `pc` straight from the rows: last function starting at or before `pc`, then
/// the last row at or before the key (v1 amd64 MASK blocks are 16 bytes).
fn reference(h: &Header, spec: &Spec, pc: u64) -> UnwindRule {
    let Some((f, rows)) = spec.iter().rev().find(|(f, _)| f.start <= pc) else {
        return UnwindRule::NO_INFO;
    };
    if !f.contains(pc) {
        return UnwindRule::NO_INFO;
    }
    let key = match (f.pc_type, f.rep_size) {
        (PcType::Inc, _) => pc - f.start,
        (PcType::Mask, 0) if h.version == 1 && h.abi == Abi::Amd64Le => (pc - f.start) % 16,
        (PcType::Mask, 0) => return unsupported_rule(f),
        (PcType::Mask, n) => (pc - f.start) % u64::from(n),
    };
    match rows.iter().rev().find(|r| u64::from(r.start) <= key) {
        Some(r) => convert(h, f, r).unwrap_or_else(|_| unsupported_rule(f)),
        None => UnwindRule::NO_INFO,
    }
}

/// `lookup` equals `reference` at every address of `range`.
fn agrees(h: &Header, spec: &Spec, table: &ObjectTable, range: std::ops::Range<u64>) {
    for pc in range {
        assert_eq!(table.lookup(pc), reference(h, spec, pc), "at {pc:#x}");
    }
}

/// Invariants of every table: pages ascending, rows ascending from 0, no repeated rule,
/// indices in range, rule 0 is NO_INFO, no page entirely NO_INFO, stats match.
fn check_shape(t: &ObjectTable) {
    assert_eq!(t.rules().first(), Some(&UnwindRule::NO_INFO));
    assert!(t.pages().windows(2).all(|w| w[0].0 < w[1].0));
    for (page, rows) in t.pages() {
        assert_eq!(rows.first().map(|r| r.addr_lo), Some(0), "page {page:#x}");
        assert!(rows.windows(2).all(|w| w[0].addr_lo < w[1].addr_lo));
        assert!(rows.windows(2).all(|w| w[0].rule != w[1].rule), "page {page:#x}");
        assert!(rows.iter().all(|r| usize::from(r.rule) < t.rules().len()));
        assert!(rows.iter().any(|r| r.rule != 0), "page {page:#x} is all NO_INFO");
    }
    let rows: usize = t.pages().iter().map(|(_, r)| r.len()).sum();
    assert_eq!(t.stats().rows, rows as u64);
    assert_eq!(t.stats().pages, t.pages().len() as u64);
}

fn rows_of(t: &ObjectTable, page: u32) -> Vec<(u16, UnwindRule)> {
    let (_, rows) = t.pages().iter().find(|(p, _)| *p == page).expect("page");
    rows.iter().map(|r: &UnwindRow| (r.addr_lo, t.rule(r.rule))).collect()
}

fn reasons(t: &ObjectTable) -> Vec<(Unsupported, u64)> {
    t.stats().unsupported.iter().map(|(r, n)| (*r, *n)).collect()
}

/// Adjacent functions leave no NO_INFO between them, a gap and a late first row do, equal
/// neighbouring rules merge, and rows past the function end are dropped.
#[test]
fn functions_gaps_and_merging() {
    let h = header(Abi::Amd64Le, 2);
    let spec = vec![
        (
            function(0x1000, 0x10),
            vec![sp(0, 8), sp(1, 16), sp(4, 16), sp(0x20, 32)],
        ),
        (function(0x1010, 0x10), vec![sp(0, 16), sp(8, 8)]),
        (function(0x1030, 0x10), vec![sp(4, 8)]),
    ];
    let t = table(&h, &spec);
    agrees(&h, &spec, &t, 0xff0..0x1050);
    let r = |cfa| convert(&h, &spec[0].0, &sp(0, cfa)).expect("rule");
    let no = UnwindRule::NO_INFO;
    let expected = [
        (0, no),
        (0x1000, r(8)),
        (0x1001, r(16)),
        (0x1018, r(8)),
        (0x1020, no),
        (0x1034, r(8)),
        (0x1040, no),
    ];
    assert_eq!(rows_of(&t, 0), expected.map(|(a, r)| (a as u16, r)));
    assert_eq!(t.stats().functions, 3);
    assert_eq!(t.stats().sframe_rows, 7);
    assert_eq!(t.rules().len(), 3, "NO_INFO, SP+8, SP+16 and nothing else");
}

/// Every row of the function holding the entry point is outermost; the others are untouched.
#[test]
fn entry_point_function_is_outermost() {
    let h = header(Abi::Amd64Le, 2);
    let spec = vec![
        (function(0x1000, 0x10), vec![sp(0, 8), sp(4, 16)]),
        (function(0x1010, 0x10), vec![sp(0, 8), sp(1, 16)]),
    ];
    let plain = table(&h, &spec);
    let t = table_with_entry(&h, &spec, Some(0x1012));
    for pc in 0x1000..0x1010 {
        assert_eq!(t.lookup(pc), plain.lookup(pc), "{pc:#x} is not in the entry function");
    }
    for pc in 0x1010..0x1020 {
        assert_eq!(t.lookup(pc).kind, KIND_OUTERMOST, "{pc:#x}");
    }
    assert_eq!(t.lookup(0x1020).kind, KIND_NO_INFO);
}

/// A function over three page boundaries: an exact row at a page start, a synthetic row
/// carrying the rule over, one synthetic row for the page with no rows, and no page after it.
#[test]
fn function_spanning_pages() {
    let h = header(Abi::Amd64Le, 3);
    let f = function(0x1_f000, 0x3_1100);
    let spec = vec![(f, vec![sp(0, 8), sp(0x1000, 16), sp(0x3_0010, 8)])];
    let t = table(&h, &spec);
    let (r8, r16) = (t.lookup(0x1_f000), t.lookup(0x2_0000));
    let no = UnwindRule::NO_INFO;
    let pages: Vec<u32> = t.pages().iter().map(|(p, _)| *p).collect();
    assert_eq!(pages, [1, 2, 3, 4, 5]);
    assert_eq!(rows_of(&t, 1), [(0, no), (0xf000, r8)]);
    assert_eq!(rows_of(&t, 2), [(0, r16)]);
    assert_eq!(rows_of(&t, 3), [(0, r16)]);
    assert_eq!(rows_of(&t, 4), [(0, r16), (0xf010, r8)]);
    assert_eq!(rows_of(&t, 5), [(0, r8), (0x0100, no)]);
    agrees(&h, &spec, &t, 0x1_e000..0x5_1000);
    assert_eq!(t.lookup(0x5_0100), no);
    assert_eq!(t.lookup(0x6_0000), no);
    assert_eq!(t.lookup(u64::MAX), no);
    assert_eq!(t.map_bytes(), 8 * 4 + 5 * 16 + 3 * RULE_BYTES);
    assert_eq!(t.stats().bytes_per_sframe_row(), (8.0 * 4.0 + 5.0 * 16.0) / 3.0);
}

/// MASK functions repeat their rows per block (the last block partial); v1 amd64 uses
/// 16-byte blocks; other ABIs and later versions without a size are NO_INFO with a reason.
#[test]
fn mask_expansion() {
    let plt = |start, size, rep_size| Function {
        pc_type: PcType::Mask,
        rep_size,
        ..function(start, size)
    };
    let rows = vec![sp(0, 8), sp(11, 16)];
    let spec = vec![(plt(0x1000, 40, 16), rows.clone()), (plt(0x1030, 48, 0), rows.clone())];
    for version in [1, 2] {
        let h = header(Abi::Amd64Le, version);
        let t = table(&h, &spec);
        agrees(&h, &spec, &t, 0xff0..0x1070);
        let addrs: Vec<u16> = rows_of(&t, 0).iter().map(|&(a, _)| a).collect();
        let first: &[u16] = &[0, 0x1000, 0x100b, 0x1010, 0x101b, 0x1020, 0x1028];
        let v1_plt: &[u16] = &[0x1030, 0x103b, 0x1040, 0x104b, 0x1050, 0x105b, 0x1060];
        let expected = if version == 1 {
            [first, v1_plt].concat()
        } else {
            first.to_vec()
        };
        assert_eq!(addrs, expected, "v{version}");
        let mask = if version == 1 {
            vec![]
        } else {
            vec![(Unsupported::MaskWithoutRepSize, 1)]
        };
        assert_eq!(reasons(&t), mask);
    }
    let h = header(Abi::Aarch64Le, 1);
    let t = table(&h, &spec);
    agrees(&h, &spec, &t, 0x1030..0x1060);
    assert_eq!(reasons(&t).first(), Some(&(Unsupported::MaskWithoutRepSize, 1)));
}

/// Overlapping functions (a `.o`): the later one wins from its start, also with equal
/// starts and when nested; each overlap is counted.
#[test]
fn overlapping_functions() {
    let h = header(Abi::Amd64Le, 3);
    let spec = vec![
        (function(0, 0x40), vec![sp(0, 8), sp(0x30, 16)]),
        (function(0, 0x10), vec![sp(0, 24)]),
        (function(0x8, 0x4), vec![sp(2, 32)]),
        (function(0x20, 0x8), vec![sp(0, 40)]),
    ];
    let t = table(&h, &spec);
    agrees(&h, &spec, &t, 0..0x50);
    assert_eq!(reasons(&t), [(Unsupported::OverlappingFunctions, 3)]);
}

/// Unsupported rows become NO_INFO and are counted per SFrame row, not per expanded row.
#[test]
fn unsupported_rows_are_counted_once() {
    let h = header(Abi::Amd64Le, 2);
    let plt = Function {
        pc_type: PcType::Mask,
        rep_size: 16,
        ..function(0x100, 64)
    };
    let spec = vec![(plt, vec![sp(0, 8), sp(4, i64::from(i32::MAX) + 1)])];
    let t = table(&h, &spec);
    agrees(&h, &spec, &t, 0xf0..0x150);
    assert_eq!(reasons(&t), [(Unsupported::CfaOffset, 1)]);
    assert_eq!(t.lookup(0x114).kind, KIND_NO_INFO);
}

/// Functions reaching 2^48 are left out with a reason, the rest of the object is kept, and
/// one left out still ends the function it overlaps.
#[test]
fn addresses_above_2_pow_48() {
    let h = header(Abi::Amd64Le, 3);
    let spec = vec![
        (function(0x1000, 8), vec![sp(0, 8)]),
        (function((1 << 48) - 0x10, 0x10), vec![sp(0, 8)]),
        (function(1 << 48, 8), vec![sp(0, 8)]),
        (function(u64::MAX - 4, 8), vec![sp(0, 8)]),
    ];
    let t = table(&h, &spec);
    assert_eq!(reasons(&t), [(Unsupported::AddressRange, 3)]);
    assert_eq!(t.pages().len(), 1);
    assert_ne!(t.lookup(0x1000), UnwindRule::NO_INFO);
    assert_eq!(t.lookup((1 << 48) - 0x10), UnwindRule::NO_INFO);
    let top = (1 << 48) - 0x100;
    let nested = vec![
        (function(top, 0x80), vec![sp(0, 8)]),
        (function(top + 0x10, 0x100), vec![sp(0, 16)]),
    ];
    let t = table(&h, &nested);
    assert_ne!(t.lookup(top + 0xf), UnwindRule::NO_INFO);
    assert_eq!(
        t.lookup(top + 0x10),
        UnwindRule::NO_INFO,
        "left out, but still ends the first"
    );
    let last = vec![(function(top, 0x20), vec![sp(0, 8), sp(8, 16)])];
    let t = table(&h, &last);
    assert_eq!(t.pages().len(), 1, "the last page below 2^48, once");
    agrees(&h, &last, &t, top - 1..top + 0x21);
}

/// A hostile MASK function (4 GiB of 1-byte blocks) is refused by the row budget, quickly,
/// and still overrides the function it overlaps.
#[test]
fn row_budget() {
    let h = header(Abi::Amd64Le, 3);
    let plt = Function {
        pc_type: PcType::Mask,
        rep_size: 1,
        ..function(0, u32::MAX)
    };
    let t = table(&h, &vec![(function(0, 0x20), vec![sp(0, 16)]), (plt, vec![sp(0, 8)])]);
    assert_eq!(
        reasons(&t),
        [(Unsupported::OverlappingFunctions, 1), (Unsupported::TooManyRows, 1)]
    );
    assert_eq!(
        t.lookup(0),
        UnwindRule::NO_INFO,
        "left out, but still wins from its start"
    );
}

/// More than 65536 distinct rules in one object: the excess rows read NO_INFO, counted.
#[test]
fn rule_limit() {
    let h = header(Abi::Amd64Le, 3);
    let rows: Vec<Row> = (0..65_540u32).map(|i| sp(i, i64::from(i) + 8)).collect();
    let t = table(&h, &vec![(function(0, 65_540), rows)]);
    assert_eq!(t.rules().len(), 65_536);
    assert_eq!(reasons(&t), [(Unsupported::TooManyRules, 5)]);
    assert_eq!(t.pages().len(), 1, "page 1 would be NO_INFO only");
    assert_eq!(t.lookup(65_534).cfa_offset, 65_542);
    assert_eq!(t.lookup(65_535), UnwindRule::NO_INFO);
}

/// Every 4 GiB function spans 65536 pages; the 17th reaches the page limit (a reason).
#[test]
fn page_limit() {
    let h = header(Abi::Amd64Le, 3);
    let spec: Spec = (0..17u64)
        .map(|i| (function(i << 32, u32::MAX), vec![sp(0, 8)]))
        .collect();
    let t = table(&h, &spec);
    assert_eq!(t.pages().len(), 1 << 20);
    assert_eq!(reasons(&t), [(Unsupported::TooManyPages, 1)]);
    assert_ne!(t.lookup((16 << 32) - 2), UnwindRule::NO_INFO);
    assert_eq!(t.lookup(16 << 32), UnwindRule::NO_INFO);
}

/// A row the reader cannot decode fails the whole object with the reader's error.
#[test]
fn decode_errors_propagate() {
    let h = header(Abi::Amd64Le, 3);
    let err = Error::ZeroRepSize { offset: 7 };
    let got = build(&h, &[function(0, 8)], None, |_| Err(err.clone()));
    assert_eq!(got.map(|_| ()), Err(err));
}
