//! Every row of an FDE, for the table builder: [`RowReader`] reads the FDEs of one
//! [`CfiTable`] in turn, keeping what consecutive FDEs share (their CIE, parsed and evaluated
//! once), and evaluates each program with the fast evaluator (`program`), or with gimli's
//! `UnwindTable` where that one cannot promise gimli's exact result.
//!
//! It must not do I/O and must not panic on malformed input.

use gimli::{
    CommonInformationEntry, DebugFrameOffset, EhFrameOffset, Register, UnwindOffset, UnwindSection, UnwindTable,
};

use super::{
    Arch, CfiCfa, CfiError, CfiReg, CfiSource, CfiTable, FdeRange, Slice,
    program::{self, FdeRow, Initial},
    scan::entry_error,
};

/// Every row of one FDE and whether its CIE marks a signal trampoline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FdeRows {
    pub signal: bool,
    pub rows: Vec<FdeRow>,
}

/// How an FDE's program is evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Evaluator {
    /// `program` where it can, gimli elsewhere.
    Fast,
    /// gimli's `UnwindTable` only (the reference the fast one is tested against).
    #[cfg(test)]
    Gimli,
}

/// The CIE of the FDE read last, and what its initial program leaves.
struct LastCie<'t> {
    source: CfiSource,
    offset: usize,
    cie: CommonInformationEntry<Slice<'t>>,
    /// `None`: gimli evaluates the FDEs of this CIE.
    initial: Option<Initial>,
}

/// Reads the rows of a table's FDEs, one after the other.
pub(crate) struct RowReader<'t, 'a> {
    table: &'t CfiTable<'a>,
    evaluator: Evaluator,
    last: Option<LastCie<'t>>,
}

impl<'a> CfiTable<'a> {
    /// A reader of FDE rows (FDEs in section order share the most work).
    pub(crate) fn row_reader(&self, evaluator: Evaluator) -> RowReader<'_, 'a> {
        RowReader {
            table: self,
            evaluator,
            last: None,
        }
    }
}

impl<'t> RowReader<'t, '_> {
    /// Every row of `fde` (one of [`CfiTable::fdes`]) in program order, as gimli's `UnwindTable` gives them: one evaluation
    /// per FDE instead of one per address. The row count is bounded by the FDE's instruction
    /// bytes.
    /// They replace what `out` held.
    pub(crate) fn fde_rows(&mut self, fde: &FdeRange, out: &mut FdeRows) -> Result<(), CfiError> {
        out.signal = false;
        out.rows.clear();
        let table = self.table;
        let Some(part) = table.parts.iter().find(|p| p.source == fde.source) else {
            return Ok(());
        };
        let offset = usize::try_from(fde.offset).unwrap_or(usize::MAX);
        match part.source {
            CfiSource::EhFrameHdr | CfiSource::EhFrame => {
                let eh = table.eh_frame(part);
                self.rows_in(&eh, fde, EhFrameOffset(offset), out)
            }
            CfiSource::DebugFrame => {
                let debug = table.debug_frame(part);
                self.rows_in(&debug, fde, DebugFrameOffset(offset), out)
            }
        }
    }

    fn rows_in<S: UnwindSection<Slice<'t>>>(
        &mut self,
        section: &S,
        fde: &FdeRange,
        offset: S::Offset,
        out: &mut FdeRows,
    ) -> Result<(), CfiError> {
        let table = self.table;
        let name = fde.source.section();
        let last = self.last.take().filter(|l| l.source == fde.source);
        let parsed = section.fde_from_offset(&table.bases, offset, |section, bases, cie| match &last {
            Some(l) if l.offset == UnwindOffset::into(cie) => Ok(l.cie.clone()),
            _ => section.cie_from_offset(bases, cie),
        });
        let entry = match parsed {
            Ok(entry) => entry,
            Err(source) => {
                self.last = last;
                return Err(entry_error(name, UnwindOffset::into(offset), source));
            }
        };
        let cie_offset = entry.cie().offset();
        let last = match last {
            Some(l) if l.offset == cie_offset => l,
            _ => LastCie {
                source: fde.source,
                offset: cie_offset,
                cie: entry.cie().clone(),
                initial: Initial::of(table.arch(), section, &table.bases, entry.cie()),
            },
        };
        let initial = last.initial.filter(|_| self.evaluator == Evaluator::Fast);
        self.last = Some(last);
        let evaluate = |source| CfiError::Evaluate {
            section: name,
            fde_offset: fde.offset,
            pc: fde.start,
            source,
        };
        let rows = &mut out.rows;
        let fast = initial.and_then(|i| program::rows(table.arch(), section, &table.bases, &entry, &i, rows));
        let result = match fast {
            Some(result) => result,
            None => {
                rows.clear();
                gimli_rows(table, section, &entry, rows)
            }
        };
        if let Err(e) = result {
            rows.clear();
            return Err(evaluate(e));
        }
        out.signal = entry.is_signal_trampoline();
        Ok(())
    }
}

/// The rows of `fde` from gimli's `UnwindTable`.
fn gimli_rows<'t, S: UnwindSection<Slice<'t>>>(
    table: &CfiTable<'_>,
    section: &S,
    fde: &gimli::FrameDescriptionEntry<Slice<'t>>,
    out: &mut Vec<FdeRow>,
) -> gimli::Result<()> {
    let arch = table.arch();
    let mut ctx = table.ctx.borrow_mut();
    let mut unwind = UnwindTable::new(section, &table.bases, &mut ctx, fde)?;
    while let Some(row) = unwind.next_row()? {
        let cfa_expression = match row.cfa() {
            gimli::CfaRule::Expression(expr) => expr.get(section)?.0.slice().to_vec(),
            gimli::CfaRule::RegisterAndOffset { .. } => Vec::new(),
        };
        let mangled_ra = arch == Arch::Aarch64
            && row.register(gimli::AArch64::RA_SIGN_STATE) == Some(gimli::RegisterRule::Constant(1));
        out.push(FdeRow {
            start: row.start_address(),
            end: row.end_address(),
            cfa: CfiCfa::from_gimli(row.cfa()),
            cfa_expression,
            ra: CfiReg::from_gimli(row.register(Register(arch.ra()))),
            fp: CfiReg::from_gimli(row.register(Register(arch.fp()))),
            mangled_ra,
        });
    }
    Ok(())
}
