//! One SFrame row (with its function and the section header) turned into the kernel's
//! [`UnwindRule`], or the [`Unsupported`] reason it cannot be expressed in that format. Pure and
//! total: every row gives a rule or a reason, never a panic. It does not decide addresses,
//! merge rows or count reasons (see `transitions`).
//!
//! 1. s390x: decoding is supported, unwinding is not: every row is a reason.
//! 2. `ra_undefined` (a row without data words, or a v3 DEFAULT function without rows):
//!    `KIND_OUTERMOST`.
//! 3. CFA: `SP`/`FP` + offset (`KIND_CFA`), dereferenced for FLEX DRAP rows
//!    (`KIND_CFA_DEREF`); another register `n` is `REG_DWARF_BASE + n` and topmost-only.
//! 4. RA: `*(CFA + w)` when tracked, else `*(CFA + header fixed RA offset)` when that is
//!    non-zero (amd64: -8); on aarch64 an untracked RA is still in the link register (x30),
//!    which only the first frame knows: `FLAG_TOPMOST_ONLY` without `FLAG_RA_SAVED`.
//! 5. FP: `*(CFA + w)` when tracked, else the header's fixed FP offset when non-zero, else
//!    unchanged.
//! 6. A signal function keeps `FLAG_SIGNAL` on every rule, including `KIND_OUTERMOST` and the
//!    `KIND_NO_INFO` of its unsupported rows: the walker checks it first.

use tracer_common::unwind::{
    FLAG_FP_SAVED, FLAG_MANGLED_RA, FLAG_RA_SAVED, FLAG_SIGNAL, FLAG_TOPMOST_ONLY, KIND_CFA, KIND_CFA_DEREF,
    KIND_OUTERMOST, REG_DWARF_BASE, REG_FP, REG_SP, UnwindRule,
};

use crate::sframe::{Abi, Function, Header, Reg, Row, Rule};

/// DWARF number of the aarch64 link register (x30), where an untracked RA still is.
const AARCH64_LR: u16 = 30;

/// Why an address got `KIND_NO_INFO` (or was left out) although SFrame describes it.
///
/// Row reasons count SFrame rows (once, however often a MASK function repeats them) or CFI
/// rows; function reasons (overlap, MASK size, address range, row budget) count functions
/// (FDEs for CFI); `TooManyRules` counts the rules left out and `TooManyPages` objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Unsupported {
    /// s390x sections decode, but the kernel format does not unwind s390x.
    Abi,
    /// A CFA register whose DWARF number does not fit `cfa_reg` (`REG_DWARF_BASE + n > 255`).
    CfaRegister,
    /// A CFA offset outside `i32`.
    CfaOffset,
    /// An RA saved at a CFA offset outside `i32`.
    RaOffset,
    /// An FP saved at a CFA offset outside `i32`.
    FpOffset,
    /// RA neither tracked nor at a fixed offset, on an ABI without a link register.
    RaUntracked,
    /// `RA = CFA + offset` (FLEX, no dereference).
    RaValCfa,
    /// RA held in a register (other than the aarch64 link register).
    RaInRegister,
    /// RA computed from a register (FLEX `reg_p`).
    RaExpr,
    /// `FP = CFA + offset` (FLEX, no dereference).
    FpValCfa,
    /// FP held in another register.
    FpInRegister,
    /// FP computed from a register, e.g. DRAP's `FP = *(FP + 0)`.
    FpExpr,
    /// A MASK (PLT) function without a repetition size on an ABI whose PLT entry size is
    /// not known (v1 writes none; v2/v3 must).
    MaskWithoutRepSize,
    /// A function starting before the previous one ends: the later one wins from its start.
    OverlappingFunctions,
    /// A function reaching past 2^48: its page number would not fit `PageKey::page`.
    AddressRange,
    /// The object would need more transitions than the builder's limit (a hostile section).
    TooManyRows,
    /// More than 65536 distinct rules in one object (the row's `u16` index).
    TooManyRules,
    /// The object needs more pages than the builder's limit (`MAX_PAGES`).
    TooManyPages,
    /// DWARF CFI: a CFA computed by a DWARF expression other than the x86-64 PLT one.
    CfaExpression,
    /// DWARF CFI: RA found by a DWARF expression (`DW_CFA_expression`/`val_expression`).
    RaDwarfExpression,
    /// DWARF CFI: FP found by a DWARF expression (`DW_CFA_expression`/`val_expression`).
    FpDwarfExpression,
    /// DWARF CFI: FP undefined while RA is not (the caller's FP cannot be recovered).
    FpUndefined,
    /// DWARF CFI: an architectural or constant register rule for RA or FP.
    RegisterRuleOther,
    /// DWARF CFI: an FDE whose program (or an entry gimli cannot read) could not be evaluated;
    /// counts FDEs and skipped entries.
    UnreadableCfi,
}

impl Unsupported {
    /// Stable name for stats and logs.
    pub const fn name(self) -> &'static str {
        match self {
            Unsupported::Abi => "unsupported abi",
            Unsupported::CfaRegister => "cfa register out of range",
            Unsupported::CfaOffset => "cfa offset out of range",
            Unsupported::RaOffset => "ra offset out of range",
            Unsupported::FpOffset => "fp offset out of range",
            Unsupported::RaUntracked => "ra not tracked",
            Unsupported::RaValCfa => "ra is cfa + offset",
            Unsupported::RaInRegister => "ra in register",
            Unsupported::RaExpr => "ra register expression",
            Unsupported::FpValCfa => "fp is cfa + offset",
            Unsupported::FpInRegister => "fp in register",
            Unsupported::FpExpr => "fp register expression",
            Unsupported::MaskWithoutRepSize => "mask function without repetition size",
            Unsupported::OverlappingFunctions => "overlapping functions",
            Unsupported::AddressRange => "address above 2^48",
            Unsupported::TooManyRows => "too many rows",
            Unsupported::TooManyRules => "more than 65536 rules",
            Unsupported::TooManyPages => "too many pages",
            Unsupported::CfaExpression => "cfa expression",
            Unsupported::RaDwarfExpression => "ra dwarf expression",
            Unsupported::FpDwarfExpression => "fp dwarf expression",
            Unsupported::FpUndefined => "fp undefined",
            Unsupported::RegisterRuleOther => "architectural or constant register rule",
            Unsupported::UnreadableCfi => "unreadable cfi",
        }
    }
}

/// The rule of `row` of `function`, or why it cannot be expressed.
pub fn convert(header: &Header, function: &Function, row: &Row) -> Result<UnwindRule, Unsupported> {
    let signal = if function.signal { FLAG_SIGNAL } else { 0 };
    let aarch64 = matches!(header.abi, Abi::Aarch64Le | Abi::Aarch64Be);
    if header.abi == Abi::S390xBe {
        return Err(Unsupported::Abi);
    }
    if row.ra_undefined {
        return Ok(UnwindRule {
            kind: KIND_OUTERMOST,
            flags: signal,
            ..UnwindRule::NO_INFO
        });
    }
    let (cfa_reg, cfa_topmost) = cfa_register(row.cfa.base)?;
    let mut rule = UnwindRule {
        kind: if row.cfa.deref { KIND_CFA_DEREF } else { KIND_CFA },
        cfa_reg,
        flags: signal | if cfa_topmost { FLAG_TOPMOST_ONLY } else { 0 },
        _pad: 0,
        cfa_offset: i32::try_from(row.cfa.offset).map_err(|_| Unsupported::CfaOffset)?,
        fp_offset: 0,
        ra_offset: 0,
    };
    match (row.ra, header.fixed_ra_offset) {
        (Rule::AtCfa(offset), _) => saved_ra(&mut rule, offset)?,
        (Rule::Unchanged, fixed) if fixed != 0 => saved_ra(&mut rule, i64::from(fixed))?,
        (Rule::Unchanged, _) | (Rule::InRegister(Reg::Dwarf(AARCH64_LR)), _) if aarch64 => {
            rule.flags |= FLAG_TOPMOST_ONLY;
        }
        (Rule::Unchanged, _) => return Err(Unsupported::RaUntracked),
        (Rule::ValCfa(_), _) => return Err(Unsupported::RaValCfa),
        (Rule::InRegister(_), _) => return Err(Unsupported::RaInRegister),
        (Rule::Expr { .. }, _) => return Err(Unsupported::RaExpr),
    }
    if aarch64 && row.mangled_ra {
        rule.flags |= FLAG_MANGLED_RA;
    }
    let fp = match (row.fp, header.fixed_fp_offset) {
        (Rule::AtCfa(offset), _) => Some(offset),
        (Rule::Unchanged, fixed) if fixed != 0 => Some(i64::from(fixed)),
        (Rule::Unchanged, _) => None,
        (Rule::ValCfa(_), _) => return Err(Unsupported::FpValCfa),
        (Rule::InRegister(_), _) => return Err(Unsupported::FpInRegister),
        (Rule::Expr { .. }, _) => return Err(Unsupported::FpExpr),
    };
    if let Some(offset) = fp {
        rule.flags |= FLAG_FP_SAVED;
        rule.fp_offset = i32::try_from(offset).map_err(|_| Unsupported::FpOffset)?;
    }
    Ok(rule)
}

/// The rule stored for a row of `function` that [`convert`] rejected: `KIND_NO_INFO`, keeping
/// `FLAG_SIGNAL` so the walker still recognises a signal trampoline.
pub fn unsupported_rule(function: &Function) -> UnwindRule {
    UnwindRule {
        flags: if function.signal { FLAG_SIGNAL } else { 0 },
        ..UnwindRule::NO_INFO
    }
}

/// `cfa_reg` for `base`, and whether it makes the rule topmost-only.
fn cfa_register(base: Reg) -> Result<(u8, bool), Unsupported> {
    match base {
        Reg::Sp => Ok((REG_SP, false)),
        Reg::Fp => Ok((REG_FP, false)),
        Reg::Dwarf(n) => u8::try_from(n)
            .ok()
            .and_then(|n| n.checked_add(REG_DWARF_BASE))
            .map(|reg| (reg, true))
            .ok_or(Unsupported::CfaRegister),
    }
}

fn saved_ra(rule: &mut UnwindRule, offset: i64) -> Result<(), Unsupported> {
    rule.flags |= FLAG_RA_SAVED;
    rule.ra_offset = i32::try_from(offset).map_err(|_| Unsupported::RaOffset)?;
    Ok(())
}
