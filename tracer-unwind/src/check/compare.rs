//! SFrame rows against the DWARF CFI they were generated from. For each row, the CFI rule is
//! evaluated at the row's start and at every CFI row change inside the row's range (so a CFI
//! change SFrame dropped is caught too); the first disagreeing address is reported, once per row.
//! Rules are compared in DWARF terms: SFrame's SP/FP become the ABI's DWARF numbers, an untracked
//! RA becomes the header's fixed slot (or "same value", the link register on aarch64).
//!
//! It must not judge a row on its own (that is `structure`) and must not evaluate DWARF
//! expressions: rows whose CFI CFA is an expression are counted as skipped.

use crate::{
    cfi::{Arch, CfiCfa, CfiError, CfiReg, CfiRule, CfiTable},
    sframe::{Abi, CfaRule, Function, Header, PcType, Reg, Row, Rule},
};

use super::{FindingKind, Report, error_chain, reason};

/// Whether an SFrame ABI describes code of this ELF machine.
pub(super) fn abi_matches(abi: Abi, arch: Arch) -> bool {
    matches!(
        (abi, arch),
        (Abi::Amd64Le, Arch::X86_64) | (Abi::Aarch64Le | Abi::Aarch64Be, Arch::Aarch64) | (Abi::S390xBe, Arch::S390x)
    )
}

/// What the comparison needs from the SFrame header and the ELF machine.
#[derive(Clone, Copy, Debug)]
pub(super) struct Target {
    pub arch: Arch,
    pub fixed_ra: i8,
    pub fixed_fp: i8,
    pub version: u8,
}

/// Where a register's caller value is, in terms both sides can express.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loc {
    Same,
    AtCfa(i64),
    ValCfa(i64),
    Register(u16),
    Undefined,
    /// Expressions and architectural rules: not compared.
    Other,
}

impl Target {
    fn dwarf(self, reg: Reg) -> u16 {
        match reg {
            Reg::Sp => self.arch.sp(),
            Reg::Fp => self.arch.fp(),
            Reg::Dwarf(n) => n,
        }
    }

    fn sframe_loc(self, rule: Rule, fixed: i8) -> Loc {
        match rule {
            Rule::Unchanged if fixed != 0 => Loc::AtCfa(i64::from(fixed)),
            Rule::Unchanged => Loc::Same,
            Rule::AtCfa(n) => Loc::AtCfa(n),
            Rule::ValCfa(n) => Loc::ValCfa(n),
            Rule::InRegister(r)
            | Rule::Expr {
                base: r,
                offset: 0,
                deref: false,
            } => Loc::Register(self.dwarf(r)),
            Rule::Expr { .. } => Loc::Other,
        }
    }

    /// What differs between an SFrame row (of a function with the v3 SIGNAL bit `signal`) and the
    /// CFI rule at one address inside it. Empty when they agree.
    pub(super) fn differences(self, row: &Row, signal: bool, cfi: &CfiRule) -> Vec<FindingKind> {
        let mut out = Vec::new();
        if self.version >= 3 && signal != cfi.signal {
            out.push(FindingKind::SignalMismatch);
        }
        let cfi_outermost = cfi.ra == CfiReg::Undefined;
        if row.ra_undefined || cfi_outermost {
            if row.ra_undefined != cfi_outermost {
                out.push(FindingKind::OutermostMismatch);
            }
            // An outermost SFrame row carries no CFA or saved registers to compare.
            return out;
        }
        if let CfiCfa::RegOffset { reg, offset } = cfi.cfa {
            let CfaRule {
                base,
                offset: sframe_offset,
                deref,
            } = row.cfa;
            if deref || self.dwarf(base) != reg || sframe_offset != offset {
                out.push(FindingKind::CfaMismatch);
            }
        }
        let (ra, cfi_ra) = (self.sframe_loc(row.ra, self.fixed_ra), cfi_loc(cfi.ra));
        if ra != cfi_ra && ra != Loc::Other && cfi_ra != Loc::Other {
            out.push(FindingKind::RaMismatch);
        }
        // FP is compared where both sides track a save slot: a row may leave FP untracked while
        // the CFI still has it (e.g. after SFrame's last row that changes FP).
        if let (Loc::AtCfa(a), Loc::AtCfa(b)) = (self.sframe_loc(row.fp, self.fixed_fp), cfi_loc(cfi.fp))
            && a != b
        {
            out.push(FindingKind::FpMismatch);
        }
        out
    }

    /// `CFA=rsp+16 FP=*(CFA-16) RA=*(CFA-8)`, or `outermost (RA undefined)`.
    pub(super) fn describe_sframe(self, row: &Row) -> String {
        if row.ra_undefined {
            return "outermost (RA undefined)".into();
        }
        let CfaRule { base, offset, deref } = row.cfa;
        let cfa = format!("{}{offset:+}", self.arch.reg_name(self.dwarf(base)));
        let cfa = if deref { format!("*({cfa})") } else { cfa };
        let fp = self.describe(self.sframe_loc(row.fp, self.fixed_fp));
        let ra = self.describe(self.sframe_loc(row.ra, self.fixed_ra));
        format!("CFA={cfa} FP={fp} RA={ra}")
    }

    pub(super) fn describe_cfi(self, rule: &CfiRule) -> String {
        let cfa = match rule.cfa {
            CfiCfa::RegOffset { reg, offset } => format!("{}{offset:+}", self.arch.reg_name(reg)),
            CfiCfa::Expression => "expr".into(),
        };
        let (fp, ra) = (self.describe(cfi_loc(rule.fp)), self.describe(cfi_loc(rule.ra)));
        format!("CFA={cfa} FP={fp} RA={ra}")
    }

    fn describe(self, loc: Loc) -> String {
        match loc {
            Loc::Same => "same".into(),
            Loc::AtCfa(n) => format!("*(CFA{n:+})"),
            Loc::ValCfa(n) => format!("CFA{n:+}"),
            Loc::Register(r) => self.arch.reg_name(r),
            Loc::Undefined => "undefined".into(),
            Loc::Other => "expr".into(),
        }
    }
}

fn cfi_loc(reg: CfiReg) -> Loc {
    match reg {
        CfiReg::SameValue => Loc::Same,
        CfiReg::Offset(n) => Loc::AtCfa(n),
        CfiReg::ValOffset(n) => Loc::ValCfa(n),
        CfiReg::Register(r) => Loc::Register(r),
        CfiReg::Undefined => Loc::Undefined,
        CfiReg::Expression | CfiReg::ValExpression | CfiReg::Other => Loc::Other,
    }
}

/// The CFI of the file being checked, and how to read SFrame rules in its terms.
pub(super) struct Comparer<'t> {
    table: CfiTable<'t>,
    target: Target,
    /// Whether this SFrame version can mark an outermost frame (v2 errata and v3).
    marks_outermost: bool,
}

impl<'t> Comparer<'t> {
    pub(super) fn new(table: CfiTable<'t>, header: &Header) -> Self {
        let target = Target {
            arch: table.arch(),
            fixed_ra: header.fixed_ra_offset,
            fixed_fp: header.fixed_fp_offset,
            version: header.version,
        };
        let marks_outermost = header.version >= 3 || (header.version == 2 && header.is_pcrel());
        Comparer {
            table,
            target,
            marks_outermost,
        }
    }

    /// Compares one function's rows (already decoded) and its start with the CFI.
    pub(super) fn function(&self, f: &Function, rows: &[Row], report: &mut Report) {
        if let Err(why) = self.function_start(f, rows, report) {
            report.skip(why, rows.len() as u64);
            return;
        }
        // MASK rows describe the first repeat block; every later block repeats it.
        let block = match f.pc_type {
            PcType::Mask if f.rep_size != 0 => f.size.min(u32::from(f.rep_size)),
            PcType::Mask | PcType::Inc => f.size,
        };
        for (i, row) in rows.iter().enumerate() {
            let end = rows.get(i + 1).map_or(block, |next| next.start.min(block));
            if row.start >= end {
                report.skip(reason::OUTSIDE, 1);
                continue;
            }
            let lo = f.start.saturating_add(u64::from(row.start));
            let hi = f.start.saturating_add(u64::from(end));
            match self.table.rule_at(lo) {
                Err(e) => {
                    let why = self.cfi_error(f, lo, &e, report);
                    report.skip(why, (rows.len() - i) as u64);
                    return;
                }
                Ok(None) => report.skip(reason::NO_FDE, 1),
                Ok(Some(rule)) if rule.cfa == CfiCfa::Expression => match f.pc_type {
                    PcType::Mask => report.skip(reason::PLT_EXPRESSION, 1),
                    PcType::Inc => report.skip(reason::CFA_EXPRESSION, 1),
                },
                Ok(Some(rule)) if self.unmarkable_outermost(&rule) => report.skip(reason::UNMARKABLE_OUTERMOST, 1),
                Ok(Some(rule)) => {
                    report.compared += 1;
                    self.walk(f, row, rule, hi, report);
                }
            }
        }
    }

    /// The CFI rule at the function start: the FDE must cover the whole function, and a row must
    /// cover the start (the parser gives a v3 outermost function with no rows one synthetic row
    /// at offset 0). `Err(skip reason)` when the CFI could not be read there (already reported).
    fn function_start(&self, f: &Function, rows: &[Row], report: &mut Report) -> Result<(), &'static str> {
        let rule = match self.table.rule_at(f.start) {
            Ok(Some(rule)) if rule.cfa != CfiCfa::Expression => rule,
            Ok(_) => return Ok(()),
            Err(e) => return Err(self.cfi_error(f, f.start, &e, report)),
        };
        if rule.fde_end < f.end() {
            let message = format!(
                "function {:#x}..{:#x} reaches past the CFI FDE {:#x}..{:#x} that covers its start",
                f.start,
                f.end(),
                rule.fde_start,
                rule.fde_end
            );
            report.finding(FindingKind::FunctionRange, f.start, message);
        }
        let cfi = self.target.describe_cfi(&rule);
        match rows.first() {
            Some(first) if first.start == 0 => {}
            first => {
                let rows = first.map_or("has no rows".into(), |r| {
                    format!("has its first row at offset {:#x}", r.start)
                });
                let message = format!("function {:#x} {rows}; the CFI has {cfi} at its start", f.start);
                report.finding(FindingKind::MissingRow, f.start, message);
            }
        }
        Ok(())
    }

    /// Compares `row` with the CFI at its start and at each CFI row change before `hi`; reports
    /// the first address where they differ.
    fn walk(&self, f: &Function, row: &Row, mut rule: CfiRule, hi: u64, report: &mut Report) {
        let row_address = f.start.saturating_add(u64::from(row.start));
        let mut pc = row_address;
        loop {
            report.addresses += 1;
            let differences = self.target.differences(row, f.signal, &rule);
            if !differences.is_empty() {
                let at = if pc == row_address {
                    String::new()
                } else {
                    format!(" (at CFI row {pc:#x})")
                };
                let sframe = self.target.describe_sframe(row);
                let cfi = self.target.describe_cfi(&rule);
                for kind in differences {
                    let message = format!(
                        "function {:#x}, row {row_address:#x}{at}: SFrame {sframe}; CFI {cfi}",
                        f.start
                    );
                    report.finding(kind, pc, message);
                }
                return;
            }
            if rule.row_end <= pc || rule.row_end >= hi {
                return;
            }
            pc = rule.row_end;
            rule = match self.table.rule_at(pc) {
                Ok(Some(next)) if next.cfa != CfiCfa::Expression && !self.unmarkable_outermost(&next) => next,
                Ok(_) => return,
                Err(e) => {
                    self.cfi_error(f, pc, &e, report);
                    return;
                }
            };
        }
    }

    /// SFrame before the v2 errata (v1, and v2 without FUNC_START_PCREL: binutils up to 2.44)
    /// has no way to mark an outermost frame (RA undefined, e.g. `_start`); an ordinary row
    /// there is the format's limit, not a wrong row.
    fn unmarkable_outermost(&self, rule: &CfiRule) -> bool {
        !self.marks_outermost && rule.ra == CfiReg::Undefined
    }

    /// Reports CFI that cannot be read at `pc` (a note when it is the reader's limitation, a
    /// finding otherwise) and returns the reason to skip the function's remaining rows with.
    fn cfi_error(&self, f: &Function, pc: u64, e: &CfiError, report: &mut Report) -> &'static str {
        if e.is_unsupported() {
            report.note(super::UNSUPPORTED_CFI_NOTE);
            return reason::CFI_UNSUPPORTED;
        }
        let message = format!("function {:#x}: {}", f.start, error_chain(e));
        report.finding(FindingKind::CfiUnreadable, pc, message);
        reason::CFI_UNREADABLE
    }
}

#[cfg(test)]
mod tests;
