//! `convert`: the kernel rule (or reason) of each kind of SFrame row, per ABI and FDE type.

use tracer_common::unwind::{
    FLAG_FP_SAVED, FLAG_MANGLED_RA, FLAG_RA_SAVED, FLAG_SIGNAL, FLAG_TOPMOST_ONLY, KIND_CFA, KIND_CFA_DEREF,
    KIND_OUTERMOST, REG_DWARF_BASE, REG_FP, REG_SP, UnwindRule,
};

use super::{function, header, row, sp};
use crate::sframe::{Abi, Reg, Rule};
use crate::table::{Unsupported, convert, unsupported_rule};

fn rule(kind: u8, cfa_reg: u8, flags: u8, cfa: i32, fp: i32, ra: i32) -> UnwindRule {
    UnwindRule {
        kind,
        cfa_reg,
        flags,
        _pad: 0,
        cfa_offset: cfa,
        fp_offset: fp,
        ra_offset: ra,
    }
}

/// amd64 DEFAULT rows: RA from the header's fixed -8, FP saved when tracked, CFA on SP or FP.
#[test]
fn amd64_default_rows() {
    let h = header(Abi::Amd64Le, 2);
    let f = function(0x1000, 0x20);
    assert_eq!(
        convert(&h, &f, &sp(0, 8)),
        Ok(rule(KIND_CFA, REG_SP, FLAG_RA_SAVED, 8, 0, -8))
    );
    let framed = row(4, Reg::Fp, 16, Rule::Unchanged, Rule::AtCfa(-16));
    assert_eq!(
        convert(&h, &f, &framed),
        Ok(rule(KIND_CFA, REG_FP, FLAG_RA_SAVED | FLAG_FP_SAVED, 16, -16, -8))
    );
}

/// A non-zero header fixed FP offset saves FP in every row that does not track it.
#[test]
fn fixed_fp_offset_applies_to_untracked_fp() {
    let mut h = header(Abi::Amd64Le, 2);
    h.fixed_fp_offset = -16;
    assert_eq!(
        convert(&h, &function(0, 8), &sp(0, 16)),
        Ok(rule(KIND_CFA, REG_SP, FLAG_RA_SAVED | FLAG_FP_SAVED, 16, -16, -8))
    );
}

/// aarch64: a tracked RA is saved; an untracked one is still in x30 (topmost only); the
/// mangled bit survives in both; an explicit "RA in x30" reads the same as untracked.
#[test]
fn aarch64_ra_saved_or_in_link_register() {
    let h = header(Abi::Aarch64Le, 3);
    let f = function(0, 0x40);
    let entry = row(0, Reg::Sp, 0, Rule::Unchanged, Rule::Unchanged);
    let in_lr = rule(KIND_CFA, REG_SP, FLAG_TOPMOST_ONLY, 0, 0, 0);
    assert_eq!(convert(&h, &f, &entry), Ok(in_lr));
    let explicit = row(0, Reg::Sp, 0, Rule::InRegister(Reg::Dwarf(30)), Rule::Unchanged);
    assert_eq!(convert(&h, &f, &explicit), Ok(in_lr));
    let mut signed = entry;
    signed.mangled_ra = true;
    assert_eq!(
        convert(&h, &f, &signed),
        Ok(rule(KIND_CFA, REG_SP, FLAG_TOPMOST_ONLY | FLAG_MANGLED_RA, 0, 0, 0))
    );
    let mut saved = row(8, Reg::Sp, 16, Rule::AtCfa(-8), Rule::AtCfa(-16));
    saved.mangled_ra = true;
    assert_eq!(
        convert(&h, &f, &saved),
        Ok(rule(
            KIND_CFA,
            REG_SP,
            FLAG_RA_SAVED | FLAG_FP_SAVED | FLAG_MANGLED_RA,
            16,
            -16,
            -8
        ))
    );
}

/// The mangled-RA bit means nothing on amd64 and is not carried.
#[test]
fn amd64_ignores_mangled_bit() {
    let mut r = sp(0, 8);
    r.mangled_ra = true;
    let got = convert(&header(Abi::Amd64Le, 2), &function(0, 8), &r).expect("rule");
    assert_eq!(got.flags & FLAG_MANGLED_RA, 0);
}

/// Outermost rows, in signal and ordinary functions; the signal flag is kept everywhere.
#[test]
fn outermost_and_signal() {
    let h = header(Abi::Amd64Le, 3);
    let mut end = sp(0, 0);
    end.ra_undefined = true;
    let mut f = function(0, 8);
    assert_eq!(convert(&h, &f, &end), Ok(rule(KIND_OUTERMOST, 0, 0, 0, 0, 0)));
    f.signal = true;
    assert_eq!(convert(&h, &f, &end), Ok(rule(KIND_OUTERMOST, 0, FLAG_SIGNAL, 0, 0, 0)));
    assert_eq!(
        convert(&h, &f, &sp(0, 8)),
        Ok(rule(KIND_CFA, REG_SP, FLAG_SIGNAL | FLAG_RA_SAVED, 8, 0, -8))
    );
    assert_eq!(unsupported_rule(&f).flags, FLAG_SIGNAL);
    assert_eq!(unsupported_rule(&function(0, 8)), UnwindRule::NO_INFO);
}

/// FLEX CFA rules: a dereferenced FP (DRAP) and another register (topmost only, if it fits).
#[test]
fn flex_cfa_rules() {
    let h = header(Abi::Amd64Le, 3);
    let f = function(0, 8);
    let mut drap = sp(0, -8);
    drap.cfa.base = Reg::Fp;
    drap.cfa.deref = true;
    assert_eq!(
        convert(&h, &f, &drap),
        Ok(rule(KIND_CFA_DEREF, REG_FP, FLAG_RA_SAVED, -8, 0, -8))
    );
    let mut r10 = sp(0, 0);
    r10.cfa.base = Reg::Dwarf(10);
    assert_eq!(
        convert(&h, &f, &r10),
        Ok(rule(
            KIND_CFA,
            REG_DWARF_BASE + 10,
            FLAG_RA_SAVED | FLAG_TOPMOST_ONLY,
            0,
            0,
            -8
        ))
    );
    r10.cfa.base = Reg::Dwarf(u16::from(u8::MAX - REG_DWARF_BASE));
    assert_eq!(convert(&h, &f, &r10).map(|r| r.cfa_reg), Ok(u8::MAX));
    r10.cfa.base = Reg::Dwarf(u16::from(u8::MAX - REG_DWARF_BASE) + 1);
    assert_eq!(convert(&h, &f, &r10), Err(Unsupported::CfaRegister));
}

/// RA and FP rules the format cannot hold are reasons, each with its own name.
#[test]
fn inexpressible_rules_are_reasons() {
    let h = header(Abi::Amd64Le, 3);
    let f = function(0, 8);
    let expr = Rule::Expr {
        base: Reg::Fp,
        offset: 0,
        deref: true,
    };
    let cases = [
        (Rule::ValCfa(8), Rule::Unchanged, Unsupported::RaValCfa),
        (
            Rule::InRegister(Reg::Dwarf(11)),
            Rule::Unchanged,
            Unsupported::RaInRegister,
        ),
        (expr, Rule::Unchanged, Unsupported::RaExpr),
        (Rule::Unchanged, Rule::ValCfa(8), Unsupported::FpValCfa),
        (
            Rule::Unchanged,
            Rule::InRegister(Reg::Dwarf(8)),
            Unsupported::FpInRegister,
        ),
        (Rule::Unchanged, expr, Unsupported::FpExpr),
    ];
    for (ra, fp, reason) in cases {
        assert_eq!(convert(&h, &f, &row(0, Reg::Sp, 8, ra, fp)), Err(reason));
    }
    let mut untracked = header(Abi::Amd64Le, 3);
    untracked.fixed_ra_offset = 0;
    assert_eq!(convert(&untracked, &f, &sp(0, 8)), Err(Unsupported::RaUntracked));
}

/// Offsets are checked against the field widths (CFA, RA and FP i32) at both ends, and an
/// aarch64 function with a 70000-byte frame, which saves its return address at the bottom of
/// it, has a rule (gcc's layout for fixtures/workloads/bigframe.c).
#[test]
fn offsets_must_fit_their_fields() {
    let h = header(Abi::Aarch64Le, 2);
    let f = function(0, 8);
    let (min, max) = (i64::from(i32::MIN), i64::from(i32::MAX));
    let fits = row(0, Reg::Sp, min, Rule::AtCfa(min), Rule::AtCfa(max));
    assert!(convert(&h, &f, &fits).is_ok());
    let big = row(0, Reg::Sp, 70016, Rule::AtCfa(-70016), Rule::Unchanged);
    assert_eq!(
        convert(&h, &f, &big),
        Ok(rule(KIND_CFA, REG_SP, FLAG_RA_SAVED, 70016, 0, -70016))
    );
    let cases = [
        (max + 1, -8, -16, Unsupported::CfaOffset),
        (16, min - 1, -16, Unsupported::RaOffset),
        (16, -8, max + 1, Unsupported::FpOffset),
    ];
    for (cfa, ra, fp, reason) in cases {
        let r = row(0, Reg::Sp, cfa, Rule::AtCfa(ra), Rule::AtCfa(fp));
        assert_eq!(convert(&h, &f, &r), Err(reason), "{cfa} {ra} {fp}");
    }
}

/// s390x decodes but never unwinds, even its outermost rows.
#[test]
fn s390x_is_unsupported() {
    let h = header(Abi::S390xBe, 3);
    let mut end = sp(0, 160);
    end.ra_undefined = true;
    assert_eq!(convert(&h, &function(0, 8), &end), Err(Unsupported::Abi));
    assert_eq!(Unsupported::Abi.name(), "unsupported abi");
}
