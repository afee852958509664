//! `dump --source eh_frame` (and any other source turned into kernel rows): the table exactly
//! as it is loaded, one line (or JSON object) per transition, each rule written as its
//! equation. Pure: takes an [`ObjectTable`], returns values and strings.

use std::fmt::Write as _;

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
pub fn render_table(rows: &[TableRow]) -> String {
    let mut out = String::new();
    for row in rows {
        let mut line = format!("{:016x}  ", row.start);
        match &row.cfa {
            Some(cfa) => {
                let base = format!("{}{:+}", cfa.base.to_uppercase(), cfa.offset);
                let cfa = if row.kind == "cfa_deref" {
                    format!("*({base})")
                } else {
                    base
                };
                let _ = write!(line, "CFA={cfa:<12}");
                let ra = row
                    .ra_offset
                    .map_or_else(|| "LR".to_owned(), |o| format!("*(CFA{o:+})"));
                let fp = row
                    .fp_offset
                    .map_or_else(|| "same".to_owned(), |o| format!("*(CFA{o:+})"));
                let _ = write!(line, "RA={ra:<12}FP={fp}");
            }
            None => line.push_str(if row.kind == "outermost" {
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
                let _ = write!(line, " [{name}]");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
