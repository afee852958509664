//! The table builder: one object's SFrame section in, the kernel's paged unwind table out
//! (format and equations: `tracer_common::unwind`). Pure: no aya, no tokio, no I/O, no
//! knowledge of processes or mappings; loading into BPF maps is someone else's job.
//!
//! 1. `rules`: each SFrame row becomes an [`UnwindRule`] or an [`Unsupported`] reason
//!    (stored as `KIND_NO_INFO`, counted).
//! 2. `transitions`: the rows of all functions become one sorted, de-duplicated list of
//!    `(address, rule)` transitions (MASK functions expanded, `NO_INFO` at function ends,
//!    overlapping functions resolved as the reader's lookup resolves them).
//! 3. `paging`: the transitions become 64 KiB pages of 4-byte rows plus local rules.
//! 4. `global`: [`RuleTable`] merges the local rules of many objects into the shared table.
//!
//! `cfi` does steps 1-2 for call-frame information, and `object` merges an object's SFrame and
//! CFI transitions (SFrame first) and lets rules run on through alignment padding (`padding`)
//! before paging.
//!
//! Addresses are object-relative: what the ELF file places the code at (`Function::start`).
//! [`ObjectTable::lookup`] is the host-side twin of the kernel's lookup, used by tests and
//! table dumps.

mod cfi;
pub(crate) mod entry;
mod global;
mod gopcsp;
mod leaf;
mod object;
mod padding;
mod paging;
mod rules;
mod transitions;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use tracer_common::unwind::{PAGE_SHIFT, UnwindRow, UnwindRule};
use tracer_common::walk;

pub use cfi::build_from_cfi;
pub use global::{RuleTable, RulesFull};
pub use object::{BuiltFrom, ObjectError, build_object};
pub use rules::{Unsupported, convert, unsupported_rule};

use crate::sframe::{self, Function, Header, Row, Section};

/// Bytes of one page index entry in the kernel: `PageKey` + `PageEntry`.
pub const PAGE_ENTRY_BYTES: u64 = 16;
/// Bytes of one row (`UnwindRow`).
pub const ROW_BYTES: u64 = 4;
/// Bytes of one rule (`UnwindRule`).
pub const RULE_BYTES: u64 = 16;

/// One object's unwind table, paged as the kernel reads it.
#[derive(Clone, Debug, Default)]
pub struct ObjectTable {
    pages: Vec<(u32, Vec<UnwindRow>)>,
    rules: Vec<UnwindRule>,
    stats: TableStats,
}

/// What building a table saw and produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableStats {
    /// Function descriptors read.
    pub functions: u64,
    /// SFrame rows decoded (a v3 function without rows counts its one synthetic row).
    pub sframe_rows: u64,
    /// Rows in all pages (synthetic page-start rows and MASK expansion included).
    pub rows: u64,
    pub pages: u64,
    /// Local rules (index 0 is always `NO_INFO`).
    pub rules: u64,
    /// How often each reason made the builder emit `NO_INFO` or leave something out.
    pub unsupported: BTreeMap<Unsupported, u64>,
    /// Gaps between functions found to be alignment padding, which the rule before each runs
    /// on through (`build_object` only; see `padding`).
    pub padding_gaps: u64,
}

impl TableStats {
    /// Kernel memory of this object alone: rows, page index entries and its local rules
    /// (rules are shared between objects in the kernel, so this is an upper bound).
    pub fn map_bytes(&self) -> u64 {
        self.rows * ROW_BYTES + self.pages * PAGE_ENTRY_BYTES + self.rules * RULE_BYTES
    }

    /// Kernel bytes (rows and page index, without rules) per SFrame row; 0 without rows.
    pub fn bytes_per_sframe_row(&self) -> f64 {
        if self.sframe_rows == 0 {
            return 0.0;
        }
        (self.rows * ROW_BYTES + self.pages * PAGE_ENTRY_BYTES) as f64 / self.sframe_rows as f64
    }
}

/// Build the table of the object `section` belongs to. Errors are rows the reader cannot
/// decode; rows the kernel format cannot express are reasons in the stats.
pub fn build_from_sframe(section: &Section<'_>) -> Result<ObjectTable, sframe::Error> {
    build(section.header(), section.functions(), None, |f| section.rows(f))
}

/// [`build_from_sframe`] for a program whose entry point is `entry` (`elf::entry_point`): the
/// function holding it is the outermost frame.
pub fn build_from_sframe_with_entry(section: &Section<'_>, entry: Option<u64>) -> Result<ObjectTable, sframe::Error> {
    build(section.header(), section.functions(), entry, |f| section.rows(f))
}

/// [`build_from_sframe`] over already parsed parts (`functions` sorted by start, each one's
/// rows decoded by `decode`).
pub fn build(
    header: &Header,
    functions: &[Function],
    entry: Option<u64>,
    decode: impl FnMut(&Function) -> Result<Vec<Row>, sframe::Error>,
) -> Result<ObjectTable, sframe::Error> {
    Ok(finish(transitions::flatten(header, functions, entry, decode)?))
}

/// Page a flat transition list into an object's table, with its stats.
pub(crate) fn finish(mut flat: transitions::Flat) -> ObjectTable {
    let paged = paging::page(&flat.transitions, &mut flat.reasons);
    let stats = TableStats {
        functions: flat.functions,
        sframe_rows: flat.sframe_rows,
        rows: paged.pages.iter().map(|(_, rows)| rows.len() as u64).sum(),
        pages: paged.pages.len() as u64,
        rules: paged.rules.len() as u64,
        unsupported: flat.reasons,
        padding_gaps: flat.padding_gaps,
    };
    ObjectTable {
        pages: paged.pages,
        rules: paged.rules,
        stats,
    }
}

impl ObjectTable {
    /// `(page, rows)`, pages strictly ascending, rows strictly ascending in `addr_lo`, the
    /// first at 0.
    pub fn pages(&self) -> &[(u32, Vec<UnwindRow>)] {
        &self.pages
    }

    /// Local rules: a row's `rule` indexes this; index 0 is `NO_INFO`.
    pub fn rules(&self) -> &[UnwindRule] {
        &self.rules
    }

    pub fn stats(&self) -> &TableStats {
        &self.stats
    }

    /// See [`TableStats::map_bytes`].
    pub fn map_bytes(&self) -> u64 {
        self.stats.map_bytes()
    }

    /// The rule a row's index names (`NO_INFO` for an index no row of this table has).
    pub fn rule(&self, index: u16) -> UnwindRule {
        self.rules
            .get(usize::from(index))
            .copied()
            .unwrap_or(UnwindRule::NO_INFO)
    }

    /// The rule the kernel finds for object-relative `addr`, by its algorithm:
    /// 1. the page `addr >> PAGE_SHIFT` (a missing page, or an address whose page does not
    ///    fit `u32`, is `NO_INFO`);
    /// 2. the kernel's own search ([`walk::search_page`]): at most `PAGE_SEARCH_STEPS` steps
    ///    for the last row with `addr_lo <= addr & 0xffff` (the first row is at 0, so there
    ///    always is one).
    pub fn lookup(&self, addr: u64) -> UnwindRule {
        let Ok(page) = u32::try_from(addr >> PAGE_SHIFT) else {
            return UnwindRule::NO_INFO;
        };
        let Ok(at) = self.pages.binary_search_by_key(&page, |&(p, _)| p) else {
            return UnwindRule::NO_INFO;
        };
        let Some((_, rows)) = self.pages.get(at) else {
            return UnwindRule::NO_INFO;
        };
        let Ok(num_rows) = u32::try_from(rows.len()) else {
            return UnwindRule::NO_INFO;
        };
        let row_at = |i: u32| rows.get(usize::try_from(i).ok()?).copied();
        walk::search_page(num_rows, (addr & 0xffff) as u16, row_at).map_or(UnwindRule::NO_INFO, |rule| self.rule(rule))
    }
}
