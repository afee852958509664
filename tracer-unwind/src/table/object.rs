//! One object's table from every source it has: `.sframe` rows where SFrame describes the code,
//! call-frame information (`.eh_frame`, else `.debug_frame`) where it does not — code
//! assembled without `--gsframe` inside an SFrame object, such as crt1.o's `_start`. Reads the
//! ELF bytes given; does no I/O.
//!
//! 1. Flatten each source into `(address, rule)` transitions (`transitions`, `cfi`), both with
//!    the entry point's function outermost.
//! 2. Merge: at every address the SFrame rule applies unless it is `NO_INFO`, then the CFI rule.
//!    In a Go object, the rules of its `.gopclntab`'s stack-pointer deltas (`gopcsp`) come
//!    first: the same rules a stripped build keeps, with where the frame pointer is saved and
//!    where Go's runtime ends its stacks, which Go's `.debug_frame` does not say. An aarch64
//!    object with none of these gets the rules of the leaf functions its code proves (`leaf`).
//! 3. Make entry code no function covers outermost (`entry`: the dynamic loader's `_start`).
//! 4. Fill alignment padding: the rule before a gap between functions that holds nothing but
//!    padding instructions runs on through it (`padding`, which says why that is safe).
//! 5. Page the merged list like any other (`finish`).
//!
//! Only this path marks entry code and fills padding: `build_from_sframe` and `build_from_cfi` give each source's
//! rows as they are (`dump` shows them, tests check them against the sources).

use super::{
    ObjectTable, cfi, entry, finish,
    padding::{self, Code},
    transitions::{Flat, Reasons},
};
use crate::{
    cfi::{CfiError, Evaluator},
    elf, sframe,
};
use tracer_common::unwind::UnwindRule;

/// Which sources an object's table holds rows of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuiltFrom {
    pub sframe: bool,
    pub cfi: bool,
    /// Neither: the leaf functions of aarch64 code without unwind information (`leaf`).
    pub leaves: bool,
    /// Go code's stack-pointer deltas from its `.gopclntab` (`gopcsp`).
    pub go: bool,
}

/// Why an object's table could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ObjectError {
    #[error(transparent)]
    Elf(#[from] elf::ElfError),
    #[error(".sframe: {0}")]
    Sframe(#[from] sframe::Error),
    #[error("call-frame information: {0}")]
    Cfi(#[from] CfiError),
}

/// The table of an ELF file from its `.sframe` and its call-frame information; `Ok(None)` when
/// it has neither.
pub fn build_object(file: &[u8]) -> Result<Option<(ObjectTable, BuiltFrom)>, ObjectError> {
    Ok(flatten_object(file, Evaluator::Fast)?.map(|(flat, built)| (finish(flat), built)))
}

/// Steps 1-4: the merged transitions of an ELF file, its CFI programs evaluated by `evaluator`.
pub(crate) fn flatten_object(file: &[u8], evaluator: Evaluator) -> Result<Option<(Flat, BuiltFrom)>, ObjectError> {
    let Some((mut flat, built)) = flatten_sources(file, evaluator)? else {
        return Ok(None);
    };
    if let Some(entry) = elf::entry_address(file)? {
        entry::mark(&mut flat, entry);
    }
    if let Some(code) = Code::of(file) {
        flat.padding_gaps = padding::fill(&mut flat, &code);
    }
    Ok(Some((flat, built)))
}

/// Steps 1-2: [`flatten_object`] without entry code or padding.
pub(crate) fn flatten_sources(file: &[u8], evaluator: Evaluator) -> Result<Option<(Flat, BuiltFrom)>, ObjectError> {
    let entry = elf::entry_point(file)?;
    let sframe = match elf::find_sframe(file)? {
        Some(found) => {
            let section = sframe::Section::parse(&found.data, found.vaddr)?;
            Some(super::transitions::flatten(
                section.header(),
                section.functions(),
                entry,
                |f| section.rows(f),
            )?)
        }
        None => None,
    };
    let cfi = cfi::flatten_file_with(file, entry, evaluator)?;
    let go = super::gopcsp::flatten(file);
    let mut built = BuiltFrom {
        sframe: sframe.is_some(),
        cfi: cfi.is_some(),
        leaves: false,
        go: go.is_some(),
    };
    let others = match (sframe, cfi) {
        (Some(primary), Some(fallback)) => Some(merge(primary, fallback)),
        (Some(only), None) | (None, Some(only)) => Some(only),
        (None, None) => None,
    };
    let flat = match (go, others) {
        (Some(go), Some(others)) => merge(go, others),
        (Some(only), None) | (None, Some(only)) => only,
        (None, None) => match super::leaf::flatten(file) {
            Some(leaves) => {
                built.leaves = true;
                leaves
            }
            None => return Ok(None),
        },
    };
    Ok(Some((flat, built)))
}

/// Step 2: `primary`'s rule wherever it has one, `fallback`'s elsewhere; what either covers is
/// covered.
pub(crate) fn merge(primary: Flat, fallback: Flat) -> Flat {
    let mut reasons: Reasons = primary.reasons;
    for (reason, n) in fallback.reasons {
        *reasons.entry(reason).or_default() += n;
    }
    let mut out = Flat {
        functions: primary.functions + fallback.functions,
        sframe_rows: primary.sframe_rows + fallback.sframe_rows,
        reasons,
        ..Flat::default()
    };
    let mut runs = [primary.covered.as_slice(), fallback.covered.as_slice()].concat();
    runs.sort_unstable();
    for (start, end) in runs {
        out.cover(start, end);
    }
    let (p, f) = (&primary.transitions, &fallback.transitions);
    let (mut i, mut j) = (0, 0);
    let (mut in_p, mut in_f) = (UnwindRule::NO_INFO, UnwindRule::NO_INFO);
    while i < p.len() || j < f.len() {
        let at = match (p.get(i), f.get(j)) {
            (Some(&(a, _)), Some(&(b, _))) => a.min(b),
            (Some(&(a, _)), None) => a,
            (None, Some(&(b, _))) => b,
            (None, None) => break,
        };
        if let Some(&(a, rule)) = p.get(i)
            && a == at
        {
            in_p = rule;
            i += 1;
        }
        if let Some(&(b, rule)) = f.get(j)
            && b == at
        {
            in_f = rule;
            j += 1;
        }
        out.push(at, if in_p == UnwindRule::NO_INFO { in_f } else { in_p });
    }
    out
}

#[cfg(test)]
mod tests;
