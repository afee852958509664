//! The flat form of one object's table: a sorted list of `(address, rule)` transitions, each
//! rule in effect from its address up to the next transition (and `NO_INFO` before the first).
//! It neither pages nor indexes rules (see `paging`), and does no I/O.
//!
//! 1. Functions are taken in the reader's order (sorted by start, stable). A function left
//!    out (reaching past 2^48, or over the budget of step 6) still ends what came before it:
//!    `NO_INFO` from its start (a reason).
//! 2. A function starting before the previous ones end (a `.o`, where every text section
//!    starts at 0) drops every transition at or after its start: the later function wins from
//!    its start, exactly as `Section::find_function` picks the last function starting at or
//!    before a PC (a reason).
//! 3. `NO_INFO` at the function start (a row starting later leaves a gap, as `find_row` does),
//!    then each row at `start + row.start`. MASK (PLT) functions repeat their rows in every
//!    block `start + k * rep_size`, for every block that begins inside the function (the last
//!    may be partial): the expansion is bounded by the function size, not by any count field.
//!    v1 writes no repetition size: amd64 uses 16, the size of a `.plt` entry (SysV x86-64
//!    psABI, and what binutils 2.41+ writes there); other ABIs get `NO_INFO` (a reason).
//! 4. Rows starting at or past the function end are unreachable and skipped. Every row of the
//!    function holding the program's entry point (when given) is `OUTERMOST`: the kernel
//!    enters it with no return address, which SFrame v1/v2 cannot express.
//! 5. `NO_INFO` at the function end; the next function's start replaces it when equal.
//! 6. Budget: a function whose expansion would take the object past `MAX_TRANSITIONS` is left
//!    out (step 1), so a hostile section (a 4 GiB MASK function with 1-byte blocks) cannot
//!    exhaust memory or time; real objects stay far below it.
//! 7. Every push replaces a transition at the same address and is dropped when it repeats the
//!    rule in effect, so the list is strictly ascending with no two equal neighbours.
//!
//! Every function's range, left out or not, is also recorded as covered (`Flat::covered`):
//! `padding` fills only the holes between covered runs.

use std::collections::BTreeMap;

use tracer_common::unwind::{KIND_OUTERMOST, UnwindRule};

use super::rules::{Unsupported, convert, unsupported_rule};
use crate::sframe::{Abi, Error, Function, Header, PcType, Row};

/// Object-relative addresses must stay below this: `address >> 16` then fits a `u32` page.
pub(crate) const ADDRESS_LIMIT: u64 = 1 << 48;
/// Step 6's limit: 2^24 transitions (64 MiB of kernel rows) for one object.
pub(crate) const MAX_TRANSITIONS: u64 = 1 << 24;
/// Repetition size of v1 amd64 MASK functions (one `.plt` entry).
pub(crate) const AMD64_PLT_ENTRY: u64 = 16;

/// Reasons with their counts (see [`Unsupported`] for what each one counts).
pub(crate) type Reasons = BTreeMap<Unsupported, u64>;

/// What the flattening found, besides the transitions.
#[derive(Debug, Default)]
pub(crate) struct Flat {
    /// `(address, rule)`, strictly ascending addresses, no two equal neighbouring rules.
    pub transitions: Vec<(u64, UnwindRule)>,
    pub functions: u64,
    pub sframe_rows: u64,
    pub reasons: Reasons,
    /// The address ranges functions cover, as maximal runs `[start, end)`: strictly ascending,
    /// neither overlapping nor touching (`padding` fills only the holes between them).
    pub covered: Vec<(u64, u64)>,
    /// Alignment-padding gaps `padding::fill` extended the rule before over.
    pub padding_gaps: u64,
}

impl Flat {
    /// Step 7: add a transition, keeping the list strictly ascending and free of repeats.
    /// Inlined: called once per row, with a rule its caller has just built in registers.
    #[inline]
    pub(crate) fn push(&mut self, addr: u64, rule: UnwindRule) {
        if self.transitions.last().is_some_and(|&(at, _)| at == addr) {
            self.transitions.pop();
        }
        let in_effect = self.transitions.last().map_or(UnwindRule::NO_INFO, |&(_, r)| r);
        if in_effect != rule {
            self.transitions.push((addr, rule));
        }
    }

    /// Record that a function covers `[start, end)`; functions come sorted by start.
    pub(crate) fn cover(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        match self.covered.last_mut() {
            Some(run) if start <= run.1 => run.1 = run.1.max(end),
            _ => self.covered.push((start, end)),
        }
    }

    /// Step 2: forget everything at or after `addr`.
    pub(crate) fn truncate_from(&mut self, addr: u64) {
        // Nearly always nothing to forget: no search over the whole list for that.
        if self.transitions.last().is_none_or(|&(at, _)| at < addr) {
            return;
        }
        let keep = self.transitions.partition_point(|&(at, _)| at < addr);
        self.transitions.truncate(keep);
    }
}

/// Flatten `functions` (sorted by start), decoding each one's rows with `decode`.
pub(crate) fn flatten(
    header: &Header,
    functions: &[Function],
    entry: Option<u64>,
    mut decode: impl FnMut(&Function) -> Result<Vec<Row>, Error>,
) -> Result<Flat, Error> {
    let mut flat = Flat::default();
    let mut covered_to = 0u64;
    for f in functions {
        let rows = decode(f)?;
        flat.functions += 1;
        flat.sframe_rows += rows.len() as u64;
        let n = rows.len() as u64;
        if f.start < covered_to {
            count(&mut flat.reasons, Unsupported::OverlappingFunctions, 1);
        }
        covered_to = covered_to.max(f.end());
        flat.cover(f.start, f.end());
        flat.truncate_from(f.start);
        if f.end() >= ADDRESS_LIMIT {
            count(&mut flat.reasons, Unsupported::AddressRange, 1);
            if f.start < ADDRESS_LIMIT {
                flat.push(f.start, UnwindRule::NO_INFO);
            }
            continue;
        }
        let block = match f.pc_type {
            PcType::Inc => Some(u64::from(f.size).max(1)),
            PcType::Mask => block_size(header, f),
        };
        let Some(block) = block else {
            count(&mut flat.reasons, Unsupported::MaskWithoutRepSize, 1);
            flat.push(f.start, unsupported_rule(f));
            flat.push(f.end(), UnwindRule::NO_INFO);
            continue;
        };
        // Step 6: every block adds at most one transition per row plus its leading NO_INFO.
        let cost = u64::from(f.size).div_ceil(block).saturating_mul(n + 1);
        if (flat.transitions.len() as u64).saturating_add(cost) > MAX_TRANSITIONS {
            count(&mut flat.reasons, Unsupported::TooManyRows, 1);
            flat.push(f.start, UnwindRule::NO_INFO);
            continue;
        }
        // The function holding the program's entry point is entered with no return address:
        // outermost, whatever its rows say (v1/v2 cannot say it).
        let is_entry = entry.is_some_and(|e| f.contains(e));
        let converted: Vec<UnwindRule> = rows
            .iter()
            .map(|row| match convert(header, f, row) {
                _ if is_entry => OUTERMOST,
                Ok(rule) => rule,
                Err(reason) => {
                    count(&mut flat.reasons, reason, 1);
                    unsupported_rule(f)
                }
            })
            .collect();
        let mut at = f.start;
        while at < f.end() {
            let block_end = at.saturating_add(block).min(f.end());
            add_rows(&mut flat, at, block_end, &rows, &converted);
            at = block_end;
        }
        flat.push(f.end(), UnwindRule::NO_INFO);
    }
    Ok(flat)
}

/// The rule of the entry point's function (step 4).
const OUTERMOST: UnwindRule = UnwindRule {
    kind: KIND_OUTERMOST,
    ..UnwindRule::NO_INFO
};

/// Step 3: the repeating block of a MASK function, `None` when unknown.
fn block_size(header: &Header, f: &Function) -> Option<u64> {
    match f.rep_size {
        0 if header.version == 1 && header.abi == Abi::Amd64Le => Some(AMD64_PLT_ENTRY),
        0 => None,
        n => Some(u64::from(n)),
    }
}

/// Steps 3-4: `NO_INFO` at `base`, then each row at `base + row.start` below `end`.
fn add_rows(flat: &mut Flat, base: u64, end: u64, rows: &[Row], rules: &[UnwindRule]) {
    flat.push(base, UnwindRule::NO_INFO);
    for (row, &rule) in rows.iter().zip(rules) {
        match base.checked_add(u64::from(row.start)) {
            Some(addr) if addr < end => flat.push(addr, rule),
            _ => break,
        }
    }
}

pub(crate) fn count(reasons: &mut Reasons, reason: Unsupported, n: u64) {
    if n > 0 {
        *reasons.entry(reason).or_default() += n;
    }
}
