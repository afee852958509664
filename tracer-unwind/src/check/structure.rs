//! Checks of an SFrame section on its own: header fields the ABI allows, descriptor order and
//! overlap, rows inside their function, plausible CFA and save-slot offsets. Row order and MASK
//! repetition sizes are enforced by the parser itself (its errors become findings in `check`).
//!
//! It must not look at the CFI (that is `compare`), and must not stop at the first finding.

use crate::sframe::{Abi, CfaRule, Function, Header, PcType, Reg, Row, Rule};

use super::{FindingKind, Report};

/// Header fields: fixed save slots must be below the CFA on an 8-byte boundary (0 = not fixed),
/// and amd64 always has its return address at CFA - 8.
pub(super) fn header(h: &Header, report: &mut Report) {
    for (what, offset) in [("FP", h.fixed_fp_offset), ("RA", h.fixed_ra_offset)] {
        if offset != 0 && !valid_save_slot(i64::from(offset)) {
            let message = format!("fixed {what} offset {offset} is not below the CFA on an 8-byte boundary");
            report.finding(FindingKind::BadHeader, 0, message);
        }
    }
    if h.abi == Abi::Amd64Le && h.fixed_ra_offset != -8 {
        let message = format!("amd64 fixed RA offset is {}, must be -8", h.fixed_ra_offset);
        report.finding(FindingKind::BadHeader, 0, message);
    }
}

/// `functions` is in resolved-address order; `Function::index` is the order in the section.
/// `overlaps`: whether overlapping functions are a problem (not in a `.o`, where every text
/// section starts at address 0).
pub(super) fn function_order(h: &Header, functions: &[Function], overlaps: bool, report: &mut Report) {
    if h.is_sorted() {
        for pair in functions.windows(2) {
            let [a, b] = pair else { continue };
            if a.start < b.start && a.index > b.index {
                let message = format!(
                    "FDE_SORTED is set but descriptor #{} ({:#x}) precedes descriptor #{} ({:#x})",
                    b.index, b.start, a.index, a.start
                );
                report.finding(FindingKind::Unsorted, b.start, message);
            }
        }
    }
    if !overlaps {
        return;
    }
    // The function reaching furthest so far: anything starting before its end overlaps it.
    let mut widest: Option<&Function> = None;
    for f in functions {
        if let Some(w) = widest
            && f.start < w.end()
        {
            let message = format!(
                "function {:#x}..{:#x} overlaps function {:#x}..{:#x}",
                f.start,
                f.end(),
                w.start,
                w.end()
            );
            report.finding(FindingKind::Overlap, f.start, message);
        }
        if widest.is_none_or(|w| f.end() > w.end()) {
            widest = Some(f);
        }
    }
}

/// One function's rows: inside the function (and the repeat block), plausible offsets.
pub(super) fn rows(h: &Header, f: &Function, rows: &[Row], report: &mut Report) {
    for row in rows {
        let address = f.start.saturating_add(u64::from(row.start));
        if row.start >= f.size {
            let message = format!(
                "row at offset {:#x} of function {:#x} is beyond its size {:#x}",
                row.start, f.start, f.size
            );
            report.finding(FindingKind::RowOutsideFunction, address, message);
        } else if f.pc_type == PcType::Mask && f.rep_size != 0 && row.start >= u32::from(f.rep_size) {
            let message = format!(
                "row at offset {:#x} of PC-mask function {:#x} is beyond its {}-byte repeat block",
                row.start, f.start, f.rep_size
            );
            report.finding(FindingKind::RowOutsideFunction, address, message);
        }
        if row.ra_undefined {
            continue;
        }
        if let Some(problem) = cfa_problem(h.abi, row) {
            let message = format!("row of function {:#x}: {problem}", f.start);
            report.finding(FindingKind::BadCfaOffset, address, message);
        }
        for (what, rule) in [("FP", row.fp), ("RA", row.ra)] {
            if let Rule::AtCfa(offset) = rule
                && !valid_save_slot(offset)
            {
                let message = format!(
                    "row of function {:#x}: {what} saved at CFA{offset:+}, not below the CFA on an 8-byte boundary",
                    f.start
                );
                report.finding(FindingKind::BadSaveOffset, address, message);
            }
        }
    }
}

/// Every ABI SFrame supports saves registers in 8-byte slots below the CFA.
fn valid_save_slot(offset: i64) -> bool {
    offset < 0 && offset % 8 == 0
}

/// An SP-based CFA is the SP at the call plus what the function pushed or reserved: 8-byte
/// aligned, and on amd64 past the return address the call pushed, unless the row keeps the RA
/// in a register (v3 FLEX). aarch64 (CFA = SP + 0 at entry) and s390x (the 160-byte register
/// save area) are only checked for sign and alignment.
fn cfa_problem(abi: Abi, row: &Row) -> Option<String> {
    let CfaRule { base, offset, deref } = row.cfa;
    if deref || base != Reg::Sp {
        return None;
    }
    let ra_on_stack = matches!(row.ra, Rule::Unchanged | Rule::AtCfa(_));
    let minimum = if abi == Abi::Amd64Le && ra_on_stack { 8 } else { 0 };
    (offset < minimum || offset % 8 != 0)
        .then(|| format!("CFA = SP{offset:+} (an SP-based CFA offset must be at least {minimum} and a multiple of 8)"))
}

#[cfg(test)]
mod tests;
