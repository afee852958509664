//! `sframe-trace check FILE`: validates an ELF file's SFrame section on its own (decoding, order,
//! bounds, plausible offsets) and against the file's DWARF CFI (`.eh_frame`, then `.debug_frame`),
//! which the assembler generated the SFrame rows from and so must agree with at every row.
//!
//! Pure: bytes in, a [`Report`] out. Problems with the input are findings in the report, not
//! errors; [`CheckError`] only means there was nothing to check. It must not print, and must not
//! decide exit codes (the CLI does: clean, findings, error).

mod compare;
mod structure;

use std::{collections::BTreeMap, fmt};

use object::Object as _;

use crate::{
    cfi::{CfiError, CfiSource, CfiTable},
    elf::{self, ElfError},
    sframe::{self, Header, Section},
};

/// Why a file could not be checked at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    #[error("cannot locate the .sframe section")]
    Elf(#[from] ElfError),
    #[error("no .sframe section (build with -Wa,--gsframe)")]
    NoSframe,
}

/// What kind of problem a [`Finding`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum FindingKind {
    /// The section, a descriptor or a row does not decode (the parser's error).
    Decode,
    /// Header fields this ABI does not allow (e.g. amd64 fixed RA offset other than -8).
    BadHeader,
    /// `FDE_SORTED` is set but the descriptors are not in address order.
    Unsorted,
    /// Two functions cover the same addresses.
    Overlap,
    /// A row starts at or beyond its function's size (or a MASK row beyond the repeat block).
    RowOutsideFunction,
    /// Row starts are not strictly ascending.
    RowsNotAscending,
    /// A MASK function with repetition size 0.
    BadRepSize,
    /// An implausible CFA offset (amd64: SP-based CFA must be positive and a multiple of 8).
    BadCfaOffset,
    /// FP or RA saved at a slot that is not below the CFA on an 8-byte boundary.
    BadSaveOffset,
    /// The SFrame ABI is not the ELF file's machine.
    AbiMismatch,
    /// CFA base register or offset differs from the CFI.
    CfaMismatch,
    /// FP save slot differs from the CFI.
    FpMismatch,
    /// Return-address rule differs from the CFI.
    RaMismatch,
    /// One side marks the outermost frame (RA undefined) and the other does not.
    OutermostMismatch,
    /// The v3 SIGNAL bit differs from the CIE's `S` augmentation.
    SignalMismatch,
    /// The CFI covers an address the SFrame function leaves without a row.
    MissingRow,
    /// The SFrame function reaches past the end of the CFI FDE that covers its start.
    FunctionRange,
    /// The CFI itself could not be read, so it could not be compared.
    CfiUnreadable,
}

impl FindingKind {
    /// Short kebab-case name, stable for scripts.
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::Decode => "decode",
            FindingKind::BadHeader => "bad-header",
            FindingKind::Unsorted => "unsorted",
            FindingKind::Overlap => "overlap",
            FindingKind::RowOutsideFunction => "row-outside-function",
            FindingKind::RowsNotAscending => "rows-not-ascending",
            FindingKind::BadRepSize => "bad-rep-size",
            FindingKind::BadCfaOffset => "bad-cfa-offset",
            FindingKind::BadSaveOffset => "bad-save-offset",
            FindingKind::AbiMismatch => "abi-mismatch",
            FindingKind::CfaMismatch => "cfa-mismatch",
            FindingKind::FpMismatch => "fp-mismatch",
            FindingKind::RaMismatch => "ra-mismatch",
            FindingKind::OutermostMismatch => "outermost-mismatch",
            FindingKind::SignalMismatch => "signal-mismatch",
            FindingKind::MissingRow => "missing-row",
            FindingKind::FunctionRange => "function-range",
            FindingKind::CfiUnreadable => "cfi-unreadable",
        }
    }
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One problem: its kind, the address it is about (a row's or function's address; for a section
/// that does not decode, the address of the bad byte; 0 for the header, an ABI mismatch or CFI
/// that cannot be read at all) and a sentence with the values involved (for mismatches, both
/// rules in one notation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub kind: FindingKind,
    pub address: u64,
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}: {}: {}", self.address, self.kind, self.message)
    }
}

/// The outcome of [`check`]. Every row the section declares is either compared or skipped:
/// `compared + skipped_by_reason.values().sum() == rows`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// `None` when the section header itself does not decode.
    pub header: Option<Header>,
    /// The CFI sections compared with, in lookup order; empty when there is none.
    pub cfi: Vec<CfiSource>,
    pub functions: u64,
    /// Rows decoded, plus the rows declared by functions whose rows do not decode.
    pub rows: u64,
    /// Rows compared with the CFI (at their start and at every CFI row change inside them).
    pub compared: u64,
    /// Addresses at which a CFI rule was evaluated and compared.
    pub addresses: u64,
    pub skipped_by_reason: BTreeMap<&'static str, u64>,
    pub findings: Vec<Finding>,
    /// What could not be judged for reasons that are not the file's fault (e.g. CFI that the
    /// reader does not support); printed with the summary, does not make the report unclean.
    pub notes: Vec<String>,
}

impl Report {
    /// No findings.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }

    fn skip(&mut self, reason: &'static str, rows: u64) {
        if rows > 0 {
            *self.skipped_by_reason.entry(reason).or_default() += rows;
        }
    }

    fn finding(&mut self, kind: FindingKind, address: u64, message: String) {
        self.findings.push(Finding { kind, address, message });
    }

    fn note(&mut self, note: &str) {
        if !self.notes.iter().any(|n| n == note) {
            self.notes.push(note.to_owned());
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(h) = &self.header {
            write!(f, "SFrame v{} {}, ", h.version, crate::dump::abi_name(h.abi as u8))?;
        }
        write!(
            f,
            "{} functions, {} rows; {} rows compared",
            self.functions, self.rows, self.compared
        )?;
        for (i, cfi) in self.cfi.iter().enumerate() {
            write!(f, "{}{cfi}", if i == 0 { " with " } else { " then " })?;
        }
        if self.cfi.is_empty() {
            f.write_str(" (no CFI)")?;
        } else {
            write!(f, " at {} addresses", self.addresses)?;
        }
        for (i, (reason, n)) in self.skipped_by_reason.iter().enumerate() {
            f.write_str(if i == 0 { "; skipped: " } else { ", " })?;
            write!(f, "{n} {reason}")?;
        }
        let n = self.findings.len();
        write!(f, "; {n} finding{}", if n == 1 { "" } else { "s" })?;
        for note in &self.notes {
            write!(f, "; note: {note}")?;
        }
        Ok(())
    }
}

/// Skip reasons (keys of [`Report::skipped_by_reason`]).
pub mod reason {
    pub const UNDECODED: &str = "in functions whose rows do not decode";
    pub const NO_CFI: &str = "without CFI in the file";
    pub const CFI_UNREADABLE: &str = "where the CFI could not be read";
    pub const CFI_UNSUPPORTED: &str = "where the CFI uses what the reader does not support";
    pub const CFI_MACHINE: &str = "where the CFI reader does not know the machine";
    pub const ABI_MISMATCH: &str = "whose SFrame ABI is not the ELF machine";
    pub const NO_FDE: &str = "outside every CFI FDE";
    pub const PLT_EXPRESSION: &str = "in PC-mask (PLT) functions whose CFI CFA is an expression";
    pub const CFA_EXPRESSION: &str = "where the CFI CFA is an expression";
    pub const OUTSIDE: &str = "outside their function";
    pub const UNMARKABLE_OUTERMOST: &str = "in outermost frames (SFrame before the v2 errata cannot mark them)";
    pub const RELOCATABLE: &str = "in a relocatable object (CFI is compared in linked files only)";
}

/// The note for CFI entries gimli cannot read although they are well-formed.
const UNSUPPORTED_CFI_NOTE: &str = "some CFI entries use an augmentation gimli cannot read (e.g. aarch64 \
     pointer authentication with key B); SFrame rows at their addresses are not compared";

/// Checks the `.sframe` section of an ELF file, and compares it with the file's CFI if any.
pub fn check(file: &[u8]) -> Result<Report, CheckError> {
    let found = elf::find_sframe(file)?.ok_or(CheckError::NoSframe)?;
    let mut report = Report::default();
    let section = match Section::parse(&found.data, found.vaddr) {
        Ok(section) => section,
        Err(e) => {
            let address = found.vaddr.saturating_add(e.offset());
            report.finding(FindingKind::Decode, address, format!(".sframe does not decode: {e}"));
            return Ok(report);
        }
    };
    let header = *section.header();
    report.header = Some(header);
    report.functions = section.functions().len() as u64;
    // In a `.o` every text section sits at address 0, so functions of different sections
    // overlap and the (unrelocated) CFI addresses mean nothing: those checks need a linked file.
    let relocatable = object::File::parse(file).is_ok_and(|obj| obj.kind() == object::ObjectKind::Relocatable);
    structure::header(&header, &mut report);
    structure::function_order(&header, section.functions(), !relocatable, &mut report);

    let cfi = if relocatable {
        Err(reason::RELOCATABLE)
    } else {
        open_cfi(file, &header, &mut report)
    };
    for f in section.functions() {
        let rows = match section.rows(f) {
            Ok(rows) => rows,
            Err(e) => {
                report.rows += u64::from(f.num_fres);
                report.finding(
                    kind_of(&e),
                    f.start,
                    format!("rows of function {:#x} do not decode: {e}", f.start),
                );
                report.skip(reason::UNDECODED, u64::from(f.num_fres));
                continue;
            }
        };
        report.rows += rows.len() as u64;
        structure::rows(&header, f, &rows, &mut report);
        match &cfi {
            Ok(comparer) => comparer.function(f, &rows, &mut report),
            Err(why) => report.skip(why, rows.len() as u64),
        }
    }
    Ok(report)
}

/// The parser's errors that correspond to a structural finding get that finding's kind.
fn kind_of(e: &sframe::Error) -> FindingKind {
    match e {
        sframe::Error::RowsOutOfOrder { .. } => FindingKind::RowsNotAscending,
        sframe::Error::ZeroRepSize { .. } => FindingKind::BadRepSize,
        _ => FindingKind::Decode,
    }
}

/// The CFI to compare with, or the reason every row is skipped.
fn open_cfi<'t>(file: &'t [u8], header: &Header, report: &mut Report) -> Result<compare::Comparer<'t>, &'static str> {
    let table = match CfiTable::from_elf(file) {
        Ok(Some(table)) => table,
        Ok(None) => return Err(reason::NO_CFI),
        Err(CfiError::UnsupportedMachine(_)) => return Err(reason::CFI_MACHINE),
        Err(e) => {
            report.finding(FindingKind::CfiUnreadable, 0, error_chain(&e));
            return Err(reason::CFI_UNREADABLE);
        }
    };
    if !compare::abi_matches(header.abi, table.arch()) {
        let message = format!("SFrame ABI {:?} but the ELF machine is {:?}", header.abi, table.arch());
        report.finding(FindingKind::AbiMismatch, 0, message);
        return Err(reason::ABI_MISMATCH);
    }
    let (unsupported, unreadable): (Vec<_>, Vec<_>) = table.unreadable().partition(|e| e.is_unsupported());
    if !unsupported.is_empty() {
        report.note(UNSUPPORTED_CFI_NOTE);
    }
    if let Some(first) = unreadable.first() {
        let message = format!(
            "{} CFI entries cannot be read, so the addresses they cover are not compared; the first: {}",
            unreadable.len(),
            error_chain(first)
        );
        report.finding(FindingKind::CfiUnreadable, 0, message);
    }
    report.cfi = table.sources();
    Ok(compare::Comparer::new(table, header))
}

/// An error and its chain of sources on one line, `a: b: c`.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests;
