//! Unit tests of the rule comparison on hand-made SFrame rows and CFI rules.

use super::*;
use crate::cfi::CfiSource;

const AMD64: Target = Target {
    arch: Arch::X86_64,
    fixed_ra: -8,
    fixed_fp: 0,
    version: 2,
};
const AARCH64: Target = Target {
    arch: Arch::Aarch64,
    fixed_ra: 0,
    fixed_fp: 0,
    version: 2,
};

fn row(base: Reg, offset: i64, fp: Rule, ra: Rule) -> Row {
    crate::sframe::testing::row(0, base, offset, ra, fp)
}

fn cfi(reg: u16, offset: i64, fp: CfiReg, ra: CfiReg) -> CfiRule {
    CfiRule {
        cfa: CfiCfa::RegOffset { reg, offset },
        ra,
        fp,
        source: CfiSource::EhFrameHdr,
        fde_start: 0x1000,
        fde_end: 0x1100,
        row_start: 0x1000,
        row_end: 0x1010,
        signal: false,
    }
}

/// amd64: SP/FP map to DWARF 7/6 and the untracked RA is the fixed CFA-8 slot.
#[test]
fn amd64_equal_rules_agree() {
    let r = row(Reg::Sp, 16, Rule::AtCfa(-16), Rule::Unchanged);
    assert_eq!(
        AMD64.differences(&r, false, &cfi(7, 16, CfiReg::Offset(-16), CfiReg::Offset(-8))),
        []
    );
    let r = row(Reg::Fp, 16, Rule::AtCfa(-16), Rule::Unchanged);
    assert_eq!(
        AMD64.differences(&r, false, &cfi(6, 16, CfiReg::Offset(-16), CfiReg::Offset(-8))),
        []
    );
}

/// A different CFA offset, base register, or a dereferenced SFrame CFA is a CFA mismatch.
#[test]
fn cfa_differences_are_found() {
    let rule = cfi(7, 16, CfiReg::SameValue, CfiReg::Offset(-8));
    for r in [
        row(Reg::Sp, 24, Rule::Unchanged, Rule::Unchanged),
        row(Reg::Fp, 16, Rule::Unchanged, Rule::Unchanged),
        Row {
            cfa: CfaRule {
                base: Reg::Sp,
                offset: 16,
                deref: true,
            },
            ..row(Reg::Sp, 16, Rule::Unchanged, Rule::Unchanged)
        },
    ] {
        assert_eq!(AMD64.differences(&r, false, &rule), [FindingKind::CfaMismatch], "{r:?}");
    }
}

/// FP slots are compared only where both sides track one.
#[test]
fn fp_compared_only_when_both_track() {
    let r = row(Reg::Sp, 24, Rule::AtCfa(-24), Rule::Unchanged);
    let differs = cfi(7, 24, CfiReg::Offset(-16), CfiReg::Offset(-8));
    assert_eq!(AMD64.differences(&r, false, &differs), [FindingKind::FpMismatch]);
    let untracked = cfi(7, 24, CfiReg::SameValue, CfiReg::Offset(-8));
    assert_eq!(AMD64.differences(&r, false, &untracked), []);
    let sframe_untracked = row(Reg::Sp, 24, Rule::Unchanged, Rule::Unchanged);
    assert_eq!(AMD64.differences(&sframe_untracked, false, &differs), []);
}

/// amd64's fixed RA slot must match the CFI's RA rule.
#[test]
fn ra_difference_is_found() {
    let r = row(Reg::Sp, 16, Rule::Unchanged, Rule::Unchanged);
    let rule = cfi(7, 16, CfiReg::SameValue, CfiReg::Offset(-16));
    assert_eq!(AMD64.differences(&r, false, &rule), [FindingKind::RaMismatch]);
}

/// aarch64: an untracked RA (no fixed slot) is the link register, i.e. CFI "same value"; a
/// tracked one must match the CFI slot; a FLEX "RA = x30" equals CFI's register rule.
#[test]
fn aarch64_ra_rules() {
    let leaf = row(Reg::Sp, 0, Rule::Unchanged, Rule::Unchanged);
    assert_eq!(
        AARCH64.differences(&leaf, false, &cfi(31, 0, CfiReg::SameValue, CfiReg::SameValue)),
        []
    );
    assert_eq!(
        AARCH64.differences(&leaf, false, &cfi(31, 0, CfiReg::SameValue, CfiReg::Offset(-8))),
        [FindingKind::RaMismatch]
    );
    let framed = row(Reg::Fp, 16, Rule::AtCfa(-16), Rule::AtCfa(-8));
    assert_eq!(
        AARCH64.differences(&framed, false, &cfi(29, 16, CfiReg::Offset(-16), CfiReg::Offset(-8))),
        []
    );
    let flex = row(
        Reg::Sp,
        0,
        Rule::Unchanged,
        Rule::Expr {
            base: Reg::Dwarf(30),
            offset: 0,
            deref: false,
        },
    );
    assert_eq!(
        AARCH64.differences(&flex, false, &cfi(31, 0, CfiReg::SameValue, CfiReg::Register(30))),
        []
    );
}

/// Outermost frames: SFrame's RA-undefined row must meet CFI's undefined RA, and vice versa;
/// nothing else is compared then.
#[test]
fn outermost_frames_must_agree() {
    let outermost = Row {
        ra_undefined: true,
        ..row(Reg::Sp, 0, Rule::Unchanged, Rule::Unchanged)
    };
    let cfi_outermost = cfi(7, 8, CfiReg::SameValue, CfiReg::Undefined);
    let normal = cfi(7, 8, CfiReg::SameValue, CfiReg::Offset(-8));
    assert_eq!(AMD64.differences(&outermost, false, &cfi_outermost), []);
    assert_eq!(
        AMD64.differences(&outermost, false, &normal),
        [FindingKind::OutermostMismatch]
    );
    let r = row(Reg::Sp, 8, Rule::Unchanged, Rule::Unchanged);
    assert_eq!(
        AMD64.differences(&r, false, &cfi_outermost),
        [FindingKind::OutermostMismatch]
    );
}

/// The SIGNAL bit exists from v3 on; before, the CIE's `S` is not compared.
#[test]
fn signal_bit_compared_from_v3() {
    let r = row(Reg::Sp, 8, Rule::Unchanged, Rule::Unchanged);
    let rule = CfiRule {
        signal: true,
        ..cfi(7, 8, CfiReg::SameValue, CfiReg::Offset(-8))
    };
    assert_eq!(AMD64.differences(&r, false, &rule), []);
    let v3 = Target { version: 3, ..AMD64 };
    assert_eq!(v3.differences(&r, false, &rule), [FindingKind::SignalMismatch]);
    assert_eq!(v3.differences(&r, true, &rule), []);
}

/// Both sides are described in the same notation, with the ABI's register names.
#[test]
fn descriptions_use_one_notation() {
    let r = row(Reg::Sp, 24, Rule::AtCfa(-24), Rule::Unchanged);
    assert_eq!(AMD64.describe_sframe(&r), "CFA=rsp+24 FP=*(CFA-24) RA=*(CFA-8)");
    let rule = cfi(6, 16, CfiReg::SameValue, CfiReg::Offset(-8));
    assert_eq!(AMD64.describe_cfi(&rule), "CFA=rbp+16 FP=same RA=*(CFA-8)");
    let expr = CfiRule {
        cfa: CfiCfa::Expression,
        ..rule
    };
    assert_eq!(AMD64.describe_cfi(&expr), "CFA=expr FP=same RA=*(CFA-8)");
    let outermost = Row {
        ra_undefined: true,
        ..r
    };
    assert_eq!(AMD64.describe_sframe(&outermost), "outermost (RA undefined)");
    assert_eq!(
        AARCH64.describe_sframe(&row(Reg::Fp, 16, Rule::AtCfa(-16), Rule::AtCfa(-8))),
        "CFA=x29+16 FP=*(CFA-16) RA=*(CFA-8)"
    );
}

/// Only matching ABI/machine pairs are compared.
#[test]
fn abi_must_match_machine() {
    assert!(abi_matches(Abi::Amd64Le, Arch::X86_64));
    assert!(abi_matches(Abi::Aarch64Le, Arch::Aarch64));
    assert!(abi_matches(Abi::Aarch64Be, Arch::Aarch64));
    assert!(!abi_matches(Abi::Amd64Le, Arch::Aarch64));
    assert!(abi_matches(Abi::S390xBe, Arch::S390x));
    assert!(!abi_matches(Abi::S390xBe, Arch::X86_64));
}
