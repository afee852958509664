//! `dump --source eh_frame` (and any other source turned into kernel rows): the table exactly
//! as it is loaded, one line (or JSON object) per transition, each rule written as its
//! equation. Pure: takes an [`ObjectTable`], returns values and strings.

use serde::Serialize;
use tracer_common::unwind::{
    FLAG_FP_SAVED, FLAG_MANGLED_RA, FLAG_RA_SAVED, FLAG_SIGNAL, FLAG_TOPMOST_ONLY, KIND_CFA, KIND_CFA_DEREF,
    KIND_NO_INFO, KIND_OUTERMOST, PAGE_SHIFT, REG_DWARF_BASE, REG_FP, REG_SP, UnwindRule,
};

use crate::table::ObjectTable;

/// `dump --source eh_frame --json`: the converted table.
#[derive(Debug, Serialize)]
pub struct TableDump {
    pub source: &'static str,
    pub rows: Vec<TableRow>,
}

/// One transition of a kernel table: from `start` on, `rule` applies.
#[derive(Debug, Serialize)]
pub struct TableRow {
    pub start: u64,
    /// `cfa`, `cfa_deref`, `outermost` or `no_info`.
    pub kind: &'static str,
    /// `sp`, `fp` or `r<N>`; absent for `outermost` and `no_info`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cfa: Option<TableCfa>,
    pub fp_offset: Option<i32>,
    pub ra_offset: Option<i32>,
    pub topmost_only: bool,
    pub mangled_ra: bool,
    pub signal: bool,
}

#[derive(Debug, Serialize)]
pub struct TableCfa {
    pub base: String,
    pub offset: i32,
}

/// The transitions of `table` in address order: where the rule changes, the paging left out
/// (page-start rows that carry a rule over a page boundary change nothing; a missing page is
/// `no_info`).
pub fn table_rows(table: &ObjectTable) -> Vec<TableRow> {
    let mut out = Vec::new();
    let mut current = UnwindRule::NO_INFO;
    let mut covered_to: Option<u64> = None;
    for (page, rows) in table.pages() {
        let page_start = u64::from(*page) << PAGE_SHIFT;
        if let Some(end) = covered_to
            && end < page_start
            && current != UnwindRule::NO_INFO
        {
            current = UnwindRule::NO_INFO;
            out.push(row_of(end, &current));
        }
        for row in rows {
            let rule = table.rule(row.rule);
            if rule != current {
                out.push(row_of(page_start | u64::from(row.addr_lo), &rule));
                current = rule;
            }
        }
        covered_to = Some(page_start + (1 << PAGE_SHIFT));
    }
    out
}

/// One row: `rule` from `start` on.
pub fn row_of(start: u64, rule: &UnwindRule) -> TableRow {
    let kind = match rule.kind {
        KIND_CFA => "cfa",
        KIND_CFA_DEREF => "cfa_deref",
        KIND_OUTERMOST => "outermost",
        KIND_NO_INFO => "no_info",
        _ => "unknown",
    };
    let has_cfa = matches!(rule.kind, KIND_CFA | KIND_CFA_DEREF);
    TableRow {
        start,
        kind,
        cfa: has_cfa.then(|| TableCfa {
            base: reg_name(rule.cfa_reg),
            offset: rule.cfa_offset,
        }),
        fp_offset: (has_cfa && rule.flags & FLAG_FP_SAVED != 0).then_some(rule.fp_offset),
        ra_offset: (has_cfa && rule.flags & FLAG_RA_SAVED != 0).then_some(rule.ra_offset),
        topmost_only: rule.flags & FLAG_TOPMOST_ONLY != 0,
        mangled_ra: rule.flags & FLAG_MANGLED_RA != 0,
        signal: rule.flags & FLAG_SIGNAL != 0,
    }
}

fn reg_name(reg: u8) -> String {
    match reg {
        REG_SP => "sp".to_owned(),
        REG_FP => "fp".to_owned(),
        n => format!("r{}", n.wrapping_sub(REG_DWARF_BASE)),
    }
}

/// Text: `ADDRESS  CFA=SP+16  RA=*(CFA-8)  FP=*(CFA-16)  [flags]`.
///
/// Written into one string, numbers digit by digit, rather than through `format!`: a libc
/// table has tens of thousands of rows, and each formatted piece was an allocation and small
/// `memcpy` calls, which musl's static build makes several times dearer than glibc's
/// (`cargo xtask bench --phase static`).
pub fn render_table(rows: &[TableRow]) -> String {
    let mut out = String::with_capacity(rows.len() * 64);
    for row in rows {
        let line = out.len();
        push_hex16(&mut out, row.start);
        out.push_str("  ");
        match &row.cfa {
            Some(cfa) => {
                out.push_str("CFA=");
                let column = out.len();
                let deref = row.kind == "cfa_deref";
                if deref {
                    out.push_str("*(");
                }
                out.extend(cfa.base.chars().map(|c| c.to_ascii_uppercase()));
                push_signed(&mut out, cfa.offset);
                if deref {
                    out.push(')');
                }
                pad_to(&mut out, column + 12);
                out.push_str("RA=");
                let column = out.len();
                push_saved(&mut out, row.ra_offset, "LR");
                pad_to(&mut out, column + 12);
                out.push_str("FP=");
                push_saved(&mut out, row.fp_offset, "same");
            }
            None => out.push_str(if row.kind == "outermost" {
                "outermost"
            } else {
                "no information"
            }),
        }
        for (flag, name) in [
            (row.topmost_only, "topmost-only"),
            (row.mangled_ra, "signed-ra"),
            (row.signal, "signal"),
        ] {
            if flag {
                out.push_str(" [");
                out.push_str(name);
                out.push(']');
            }
        }
        let end = out[line..].trim_end().len() + line;
        out.truncate(end);
        out.push('\n');
    }
    out
}

/// `*(CFA+N)` for a register saved at CFA+N, else `otherwise`.
fn push_saved(out: &mut String, offset: Option<i32>, otherwise: &str) {
    match offset {
        Some(offset) => {
            out.push_str("*(CFA");
            push_signed(out, offset);
            out.push(')');
        }
        None => out.push_str(otherwise),
    }
}

/// Spaces up to byte `column` (nothing when the text is already that long), as `{:<N}` pads.
fn pad_to(out: &mut String, column: usize) {
    while out.len() < column {
        out.push(' ');
    }
}

/// `{:016x}`.
fn push_hex16(out: &mut String, value: u64) {
    for shift in (0..16).rev() {
        out.push(char::from(b"0123456789abcdef"[(value >> (shift * 4)) as usize & 0xf]));
    }
}

/// `{:+}`: the sign always, then the decimal digits.
fn push_signed(out: &mut String, value: i32) {
    out.push(if value < 0 { '-' } else { '+' });
    let mut digits = [0u8; 10];
    let mut first = digits.len();
    let mut rest = value.unsigned_abs();
    loop {
        first -= 1;
        digits[first] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend(digits[first..].iter().map(|&d| char::from(d)));
}
