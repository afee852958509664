//! Text rendering of a dump, laid out like `readelf --sframe` so the two can be read side by
//! side: a header block, then per function its `pc`, size and a row table whose columns are
//! `STARTPC` (`STARTPC[m]` for PLT-style mask functions), `CFA`, `FP`, `RA`.
//!
//! Cell notation: `sp+16` / `fp+16` a CFA base plus offset, `c-16` saved at CFA-16, `u` not
//! tracked, `f` the header's fixed offset, `U` undefined RA (outermost frame), `[s]` a signed
//! (PAuth-mangled) RA, `*(...)` a dereference, `r<N>` a DWARF register.

use std::fmt::Write as _;

use super::{DumpFunction, DumpRow, DumpRule, DumpSection, abi_name};
use crate::sframe::{FLAG_FDE_FUNC_START_PCREL, FLAG_FDE_SORTED, FLAG_FRAME_POINTER};

/// Render a whole section; `name` is the section or file name shown in the title.
pub fn render_text(dump: &DumpSection, name: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Contents of the SFrame section {name}:");
    out.push_str(&render_header(dump));
    out.push_str("\n  Function Index :\n");
    for (i, f) in dump.functions.iter().enumerate() {
        out.push('\n');
        out.push_str(&render_function(i, f, dump));
    }
    out
}

/// The header block.
pub fn render_header(dump: &DumpSection) -> String {
    let mut out = String::from("  Header :\n\n");
    let _ = writeln!(out, "    Version: SFRAME_VERSION_{}", dump.version);
    let _ = writeln!(out, "    Flags: {}", flag_names(dump.version, dump.flags));
    let _ = writeln!(out, "    ABI: {}", abi_name(dump.abi));
    if dump.fixed_fp_offset != 0 {
        let _ = writeln!(out, "    CFA fixed FP offset: {}", dump.fixed_fp_offset);
    }
    if dump.fixed_ra_offset != 0 {
        let _ = writeln!(out, "    CFA fixed RA offset: {}", dump.fixed_ra_offset);
    }
    let rows: usize = dump.functions.iter().map(|f| f.rows.len()).sum();
    let _ = writeln!(out, "    Num FDEs: {}", dump.functions.len());
    let _ = writeln!(out, "    Num FREs: {rows}");
    out
}

fn flag_names(version: u8, flags: u8) -> String {
    let mut names = Vec::new();
    if flags & FLAG_FDE_SORTED != 0 {
        names.push("SFRAME_F_FDE_SORTED");
    }
    if version < 3 && flags & FLAG_FRAME_POINTER != 0 {
        names.push("SFRAME_F_FRAME_POINTER");
    }
    if flags & FLAG_FDE_FUNC_START_PCREL != 0 {
        names.push("SFRAME_F_FDE_FUNC_START_PCREL");
    }
    let known = FLAG_FDE_SORTED | FLAG_FRAME_POINTER | FLAG_FDE_FUNC_START_PCREL;
    let unknown = format!("0x{:x}", flags & !known);
    if flags & !known != 0 {
        names.push(&unknown);
    }
    if names.is_empty() {
        "NONE".to_owned()
    } else {
        names.join(",\n           ")
    }
}

/// One function: its title line and its row table.
pub fn render_function(index: usize, f: &DumpFunction, dump: &DumpSection) -> String {
    let mut out = String::new();
    let mut attrs = Vec::new();
    if f.pc_type == "mask" {
        attrs.push(format!("pc_type = mask, rep_size = {}", f.rep_size));
    }
    if f.fde_type == "flex" {
        attrs.push("fde_type = flex".to_owned());
    }
    if f.signal {
        attrs.push("signal".to_owned());
    }
    if f.pauth_key == "b" {
        attrs.push("pauth_key = b".to_owned());
    }
    let attrs: String = attrs.iter().map(|a| format!(", {a}")).collect();
    let _ = writeln!(
        out,
        "    func idx [{index}]: pc = {:#x}, size = {} bytes{attrs}",
        f.start, f.size
    );
    let startpc = if f.pc_type == "mask" { "STARTPC[m]" } else { "STARTPC" };
    let _ = writeln!(out, "    {startpc:<16}  {:<9} {:<9} {:<9}", "CFA", "FP", "RA");
    if f.rows.is_empty() {
        let what = if dump.version >= 3 && f.fde_type == "default" {
            "outermost frame"
        } else {
            "no unwind information"
        };
        let _ = writeln!(out, "    (no rows: {what})");
    }
    for row in &f.rows {
        out.push_str(&render_row(row, dump));
    }
    out
}

/// One row of a function's table.
pub fn render_row(row: &DumpRow, dump: &DumpSection) -> String {
    let cfa = if row.cfa.deref {
        format!("*({})", base_plus(&row.cfa.base, row.cfa.offset))
    } else {
        base_plus(&row.cfa.base, row.cfa.offset)
    };
    let fp = cell(row.fp_offset, row.fp_rule.as_ref(), dump.fixed_fp_offset, false);
    let mut ra = cell(
        row.ra_offset,
        row.ra_rule.as_ref(),
        dump.fixed_ra_offset,
        row.ra_undefined,
    );
    if row.mangled_ra {
        ra.push_str("[s]");
    }
    format!("    {:016x}  {cfa:<9} {fp:<9} {ra:<9}\n", row.start)
}

fn cell(offset: Option<i64>, rule: Option<&DumpRule>, fixed: i8, undefined: bool) -> String {
    if undefined {
        return "U".to_owned();
    }
    match (offset, rule) {
        (Some(offset), _) => format!("c{offset:+}"),
        (None, Some(rule)) if rule.deref => format!("*({})", base_plus(&rule.base, rule.offset)),
        (None, Some(rule)) => base_plus(&rule.base, rule.offset),
        (None, None) if fixed != 0 => "f".to_owned(),
        (None, None) => "u".to_owned(),
    }
}

fn base_plus(base: &str, offset: i64) -> String {
    let base = if base == "cfa" { "c" } else { base };
    if offset == 0 {
        base.to_owned()
    } else {
        format!("{base}{offset:+}")
    }
}
