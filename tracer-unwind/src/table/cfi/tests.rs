//! Unit tests of the CFI conversion: row rules, the PLT expression and the flattening of
//! synthetic FDEs (libc and gcc programs are in the integration tests).

use tracer_common::unwind::{
    FLAG_FP_SAVED, FLAG_MANGLED_RA, FLAG_RA_SAVED, FLAG_SIGNAL, FLAG_TOPMOST_ONLY, KIND_CFA, KIND_OUTERMOST,
    REG_DWARF_BASE, REG_FP, REG_SP, UnwindRule,
};

use super::{Converted, convert_row, flatten, plt_threshold};
use crate::cfi::{Arch, CfiCfa, CfiError, CfiReg, CfiSource, FdeRange, FdeRow, FdeRows};
use crate::table::Unsupported;
use crate::table::transitions::MAX_TRANSITIONS;

/// The x86-64 `.plt` CFA expression with threshold `k`, as ld writes it.
fn plt_expression(k: u8) -> Vec<u8> {
    vec![0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x30 + k, 0x2a, 0x33, 0x24, 0x22]
}

fn row(start: u64, end: u64, cfa: CfiCfa, ra: CfiReg, fp: CfiReg) -> FdeRow {
    FdeRow {
        start,
        end,
        cfa,
        cfa_expression: Vec::new(),
        ra,
        fp,
        mangled_ra: false,
    }
}

fn sp(offset: i64) -> CfiCfa {
    CfiCfa::RegOffset { reg: 7, offset }
}

fn plt_row(start: u64, end: u64, k: u8) -> FdeRow {
    FdeRow {
        cfa_expression: plt_expression(k),
        ..row(start, end, CfiCfa::Expression, CfiReg::Offset(-8), CfiReg::SameValue)
    }
}

fn cfa(reg: u8, offset: i32, flags: u8, ra: i32, fp: i32) -> UnwindRule {
    UnwindRule {
        kind: KIND_CFA,
        cfa_reg: reg,
        flags,
        cfa_offset: offset,
        ra_offset: ra,
        fp_offset: fp,
        ..UnwindRule::NO_INFO
    }
}

fn rule(arch: Arch, r: &FdeRow) -> Result<UnwindRule, Unsupported> {
    match convert_row(arch, false, r)? {
        Converted::Rule(rule) => Ok(rule),
        Converted::Plt { .. } => panic!("unexpected PLT rule"),
    }
}

fn fde(start: u64, end: u64) -> FdeRange {
    FdeRange {
        start,
        end,
        source: CfiSource::EhFrame,
        offset: start,
    }
}

/// Flattens synthetic FDEs: `rows[i]` belongs to `fdes[i]` (`None`: unreadable).
fn flat(fdes: &[FdeRange], rows: Vec<Option<Vec<FdeRow>>>, entry: Option<u64>) -> super::Flat {
    let mut rows = rows.into_iter();
    flatten(Arch::X86_64, fdes, entry, |f, out| {
        *out = rows
            .next()
            .flatten()
            .map(|rows| FdeRows { signal: false, rows })
            .ok_or(CfiError::Evaluate {
                section: ".eh_frame",
                fde_offset: f.offset,
                pc: f.start,
                source: gimli::Error::UnexpectedEof(gimli::ReaderOffsetId(0)),
            })?;
        Ok(())
    })
}

/// x86-64 rows: SP/FP-based CFA, saved RA and FP, another CFA register, and out-of-range values.
#[test]
fn x86_64_rows() {
    let entry = row(0, 1, sp(8), CfiReg::Offset(-8), CfiReg::SameValue);
    assert_eq!(rule(Arch::X86_64, &entry), Ok(cfa(REG_SP, 8, FLAG_RA_SAVED, -8, 0)));
    let framed = row(
        0,
        1,
        CfiCfa::RegOffset { reg: 6, offset: 16 },
        CfiReg::Offset(-8),
        CfiReg::Offset(-16),
    );
    assert_eq!(
        rule(Arch::X86_64, &framed),
        Ok(cfa(REG_FP, 16, FLAG_RA_SAVED | FLAG_FP_SAVED, -8, -16))
    );
    let r10 = row(
        0,
        1,
        CfiCfa::RegOffset { reg: 10, offset: 0 },
        CfiReg::Offset(-8),
        CfiReg::SameValue,
    );
    assert_eq!(
        rule(Arch::X86_64, &r10),
        Ok(cfa(REG_DWARF_BASE + 10, 0, FLAG_RA_SAVED | FLAG_TOPMOST_ONLY, -8, 0))
    );
    let high = row(
        0,
        1,
        CfiCfa::RegOffset { reg: 254, offset: 0 },
        CfiReg::Offset(-8),
        CfiReg::SameValue,
    );
    assert_eq!(rule(Arch::X86_64, &high), Err(Unsupported::CfaRegister));
    let far = row(0, 1, sp(1 << 31), CfiReg::Offset(-8), CfiReg::SameValue);
    assert_eq!(rule(Arch::X86_64, &far), Err(Unsupported::CfaOffset));
    let ra_far = row(0, 1, sp(8), CfiReg::Offset(-(1 << 31) - 1), CfiReg::SameValue);
    assert_eq!(rule(Arch::X86_64, &ra_far), Err(Unsupported::RaOffset));
    let fp_far = row(0, 1, sp(8), CfiReg::Offset(-8), CfiReg::Offset(1 << 31));
    assert_eq!(rule(Arch::X86_64, &fp_far), Err(Unsupported::FpOffset));
    // A large aarch64 frame: the return address saved 40000 bytes below the CFA.
    let ra_deep = row(0, 1, sp(40016), CfiReg::Offset(-40000), CfiReg::SameValue);
    assert_eq!(rule(Arch::Aarch64, &ra_deep).map(|r| r.ra_offset), Ok(-40000));
}

/// Each RA and FP rule the format cannot express is its own reason; an undefined RA is the
/// outermost frame whatever else the row says.
#[test]
fn reasons_and_outermost() {
    let with = |ra, fp| row(0, 1, sp(8), ra, fp);
    let cases = [
        (with(CfiReg::SameValue, CfiReg::SameValue), Unsupported::RaUntracked),
        (with(CfiReg::ValOffset(8), CfiReg::SameValue), Unsupported::RaValCfa),
        (with(CfiReg::Register(3), CfiReg::SameValue), Unsupported::RaInRegister),
        (
            with(CfiReg::Expression, CfiReg::SameValue),
            Unsupported::RaDwarfExpression,
        ),
        (with(CfiReg::Other, CfiReg::SameValue), Unsupported::RegisterRuleOther),
        (with(CfiReg::Offset(-8), CfiReg::Undefined), Unsupported::FpUndefined),
        (with(CfiReg::Offset(-8), CfiReg::ValOffset(0)), Unsupported::FpValCfa),
        (with(CfiReg::Offset(-8), CfiReg::Register(3)), Unsupported::FpInRegister),
        (
            with(CfiReg::Offset(-8), CfiReg::ValExpression),
            Unsupported::FpDwarfExpression,
        ),
    ];
    for (r, reason) in cases {
        assert_eq!(rule(Arch::X86_64, &r), Err(reason), "{r:?}");
    }
    let other_expr = FdeRow {
        cfa_expression: vec![0x77, 0xa0, 0x01, 0x06],
        ..row(0, 1, CfiCfa::Expression, CfiReg::Offset(-8), CfiReg::SameValue)
    };
    assert_eq!(rule(Arch::X86_64, &other_expr), Err(Unsupported::CfaExpression));
    let start = FdeRow {
        cfa_expression: vec![0x77],
        ..row(0, 1, CfiCfa::Expression, CfiReg::Undefined, CfiReg::Undefined)
    };
    let outermost = UnwindRule {
        kind: KIND_OUTERMOST,
        ..UnwindRule::NO_INFO
    };
    assert_eq!(rule(Arch::X86_64, &start), Ok(outermost));
    assert_eq!(
        convert_row(Arch::X86_64, true, &start),
        Ok(Converted::Rule(UnwindRule {
            flags: FLAG_SIGNAL,
            ..outermost
        }))
    );
    assert_eq!(rule(Arch::S390x, &start), Err(Unsupported::Abi));
}

/// aarch64: an RA still in x30 is topmost-only without `FLAG_RA_SAVED`; a signed one is mangled.
#[test]
fn aarch64_rows() {
    let leaf = row(
        0,
        1,
        CfiCfa::RegOffset { reg: 31, offset: 0 },
        CfiReg::SameValue,
        CfiReg::SameValue,
    );
    assert_eq!(rule(Arch::Aarch64, &leaf), Ok(cfa(REG_SP, 0, FLAG_TOPMOST_ONLY, 0, 0)));
    let in_lr = FdeRow {
        ra: CfiReg::Register(30),
        ..leaf.clone()
    };
    assert_eq!(rule(Arch::Aarch64, &in_lr), Ok(cfa(REG_SP, 0, FLAG_TOPMOST_ONLY, 0, 0)));
    let framed = FdeRow {
        cfa: CfiCfa::RegOffset { reg: 29, offset: 16 },
        ra: CfiReg::Offset(-8),
        fp: CfiReg::Offset(-16),
        mangled_ra: true,
        ..leaf
    };
    assert_eq!(
        rule(Arch::Aarch64, &framed),
        Ok(cfa(
            REG_FP,
            16,
            FLAG_RA_SAVED | FLAG_FP_SAVED | FLAG_MANGLED_RA,
            -8,
            -16
        ))
    );
}

/// Only the exact ld PLT expression is recognised, with its threshold, and only on x86-64.
#[test]
fn plt_expression_recognised_exactly() {
    for k in [9, 10, 11] {
        assert_eq!(plt_threshold(Arch::X86_64, &plt_row(0, 16, k)), Some(u64::from(k)));
    }
    assert_eq!(plt_threshold(Arch::Aarch64, &plt_row(0, 16, 11)), None);
    let bytes = plt_expression(11);
    for i in 0..bytes.len() {
        if i == 6 {
            continue;
        }
        let mut other = plt_row(0, 16, 11);
        other.cfa_expression[i] ^= 0x01;
        assert_eq!(plt_threshold(Arch::X86_64, &other), None, "byte {i}");
    }
    let mut longer = plt_row(0, 16, 11);
    longer.cfa_expression.push(0x96);
    assert_eq!(plt_threshold(Arch::X86_64, &longer), None);
    assert_eq!(
        rule(
            Arch::X86_64,
            &FdeRow {
                cfa_expression: bytes[..10].to_vec(),
                ..plt_row(0, 16, 11)
            }
        ),
        Err(Unsupported::CfaExpression)
    );
}

/// A `.plt` FDE as ld writes it: PLT0's two rows, then the expression over three 16-byte
/// stubs, `SP + 8` at each stub start and `SP + 16` from stub + 11; `NO_INFO` at the end.
#[test]
fn plt_fde_expands_into_blocks() {
    let rows = vec![
        row(0x1020, 0x1026, sp(16), CfiReg::Offset(-8), CfiReg::SameValue),
        row(0x1026, 0x1030, sp(24), CfiReg::Offset(-8), CfiReg::SameValue),
        plt_row(0x1030, 0x1060, 11),
    ];
    let flat = flat(&[fde(0x1020, 0x1060)], vec![Some(rows)], None);
    let at = |offset| cfa(REG_SP, offset, FLAG_RA_SAVED, -8, 0);
    let mut expected = vec![(0x1020, at(16)), (0x1026, at(24))];
    for stub in [0x1030, 0x1040, 0x1050] {
        expected.extend([(stub, at(8)), (stub + 11, at(16))]);
    }
    expected.push((0x1060, UnwindRule::NO_INFO));
    assert_eq!(flat.transitions, expected);
    assert_eq!((flat.functions, flat.sframe_rows), (1, 3));
    assert!(flat.reasons.is_empty());
}

/// A PLT row starting or ending inside a block: the rule at the row start follows `rip & 15`.
#[test]
fn plt_row_inside_blocks() {
    let flat = flat(
        &[fde(0x100c, 0x1014)],
        vec![Some(vec![plt_row(0x100c, 0x1014, 11)])],
        None,
    );
    let at = |offset| cfa(REG_SP, offset, FLAG_RA_SAVED, -8, 0);
    assert_eq!(
        flat.transitions,
        [(0x100c, at(16)), (0x1010, at(8)), (0x1014, UnwindRule::NO_INFO)]
    );
}

/// Unsorted input is the caller's job; overlapping FDEs: the later one wins from its start
/// (a reason), the entry point's FDE is outermost, an unreadable FDE is `NO_INFO` (a reason),
/// and rows outside their FDE or going backwards are clipped.
#[test]
fn fdes_overlap_entry_unreadable_clipping() {
    let plain = |s, e| row(s, e, sp(8), CfiReg::Offset(-8), CfiReg::SameValue);
    let deeper = |s, e| row(s, e, sp(16), CfiReg::Offset(-8), CfiReg::SameValue);
    let fdes = [
        fde(0x100, 0x140),
        fde(0x120, 0x160),
        fde(0x200, 0x210),
        fde(0x300, 0x310),
        fde(0x400, 0x420),
    ];
    let rows = vec![
        Some(vec![plain(0x100, 0x140)]),
        Some(vec![deeper(0x120, 0x160)]),
        Some(vec![plain(0x200, 0x210)]),
        None,
        // Starts before the FDE, then goes backwards, then runs past the end.
        Some(vec![plain(0x3f0, 0x408), deeper(0x404, 0x400), deeper(0x408, 0x1000)]),
    ];
    let flat = flat(&fdes, rows, Some(0x204));
    let outermost = UnwindRule {
        kind: KIND_OUTERMOST,
        ..UnwindRule::NO_INFO
    };
    let (r8, r16) = (
        cfa(REG_SP, 8, FLAG_RA_SAVED, -8, 0),
        cfa(REG_SP, 16, FLAG_RA_SAVED, -8, 0),
    );
    assert_eq!(
        flat.transitions,
        [
            (0x100, r8),
            (0x120, r16),
            (0x160, UnwindRule::NO_INFO),
            (0x200, outermost),
            (0x210, UnwindRule::NO_INFO),
            (0x400, r8),
            (0x408, r16),
            (0x420, UnwindRule::NO_INFO),
        ]
    );
    let reasons: Vec<_> = flat.reasons.into_iter().collect();
    assert_eq!(
        reasons,
        [(Unsupported::OverlappingFunctions, 1), (Unsupported::UnreadableCfi, 1)]
    );
}

/// A hostile FDE whose PLT expansion would pass the transition budget is left out, not expanded.
#[test]
fn huge_plt_fde_is_left_out() {
    let end = 16 * MAX_TRANSITIONS;
    let flat = flat(&[fde(0, end)], vec![Some(vec![plt_row(0, end, 11)])], None);
    assert!(flat.transitions.is_empty());
    assert_eq!(
        flat.reasons.into_iter().collect::<Vec<_>>(),
        [(Unsupported::TooManyRows, 1)]
    );
}
