//! What `sframe-trace dump` prints: a serialisable model of a parsed SFrame section (the JSON
//! contract other tools and our tests rely on) and its two renderings, JSON and a text layout
//! close to `readelf --sframe`. Pure: takes a parsed [`Section`], returns values and strings;
//! it never reads files and never decides exit codes.
//!
//! JSON contract (one object): header fields, then `functions` sorted by start, each with
//! `rows`. A function's `start` is its address as the ELF file places it; a row's `start` is
//! absolute in `inc` functions and the offset inside the repeating block in `mask` functions.
//! `fp_offset`/`ra_offset` are CFA-relative save slots, `null` when the row does not track the
//! register (`ra_offset: null` = the header's fixed RA offset applies). Rules that are not a
//! plain save slot (FLEX register or dereference rules, s390x register-held values) add
//! `fp_rule`/`ra_rule` objects.

mod schema;
mod table;
mod text;

pub use schema::schema;

pub use table::{TableCfa, TableDump, TableRow, render_table, row_of, table_rows};
pub use text::{render_function, render_text};

use serde::Serialize;

use crate::sframe::{Abi, CfaRule, FdeType, Function, PauthKey, PcType, Reg, Row, Rule, Section};

/// `dump --pc --json`: the address asked for and the function covering it, with only the row
/// that applies.
#[derive(Debug, Serialize)]
pub struct DumpPc {
    pub pc: u64,
    pub function: DumpFunction,
}

/// The whole section, as dumped.
#[derive(Debug, Serialize)]
pub struct DumpSection {
    pub version: u8,
    pub flags: u8,
    pub abi: u8,
    pub fixed_fp_offset: i8,
    pub fixed_ra_offset: i8,
    pub functions: Vec<DumpFunction>,
}

#[derive(Debug, Serialize)]
pub struct DumpFunction {
    pub start: u64,
    pub size: u32,
    pub pc_type: &'static str,
    pub rep_size: u8,
    pub fde_type: &'static str,
    pub signal: bool,
    pub pauth_key: &'static str,
    pub rows: Vec<DumpRow>,
}

#[derive(Debug, Serialize)]
pub struct DumpRow {
    pub start: u64,
    pub cfa: DumpCfa,
    pub fp_offset: Option<i64>,
    pub ra_offset: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fp_rule: Option<DumpRule>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ra_rule: Option<DumpRule>,
    pub ra_undefined: bool,
    pub mangled_ra: bool,
}

#[derive(Debug, Serialize)]
pub struct DumpCfa {
    pub base: String,
    pub offset: i64,
    pub deref: bool,
}

/// A rule that is not "saved at CFA + offset": `value = deref ? *(base + offset) : base + offset`,
/// where `base` is `cfa` or a register name.
#[derive(Debug, Serialize)]
pub struct DumpRule {
    pub base: String,
    pub offset: i64,
    pub deref: bool,
}

/// Build the dump model of a whole section. Fails on the first function whose rows do not decode.
pub fn model(section: &Section<'_>) -> Result<DumpSection, crate::sframe::Error> {
    let mut dump = model_header(section);
    dump.functions = section
        .functions()
        .iter()
        .map(|f| Ok(function_model(f, &listed_rows(section, f)?)))
        .collect::<Result<Vec<_>, crate::sframe::Error>>()?;
    Ok(dump)
}

/// The rows a listing shows. A v3 function with no rows is an outermost marker; the reader
/// hands out one synthetic outermost row for it (what `--pc` shows), but a listing, like
/// readelf's, shows none.
fn listed_rows(section: &Section<'_>, f: &Function) -> Result<Vec<Row>, crate::sframe::Error> {
    if f.num_fres == 0 {
        return Ok(Vec::new());
    }
    section.rows(f)
}

/// The header fields of a section, with no functions.
pub fn model_header(section: &Section<'_>) -> DumpSection {
    let header = section.header();
    DumpSection {
        version: header.version,
        flags: header.flags,
        abi: header.abi as u8,
        fixed_fp_offset: header.fixed_fp_offset,
        fixed_ra_offset: header.fixed_ra_offset,
        functions: Vec::new(),
    }
}

/// The model of one function and its decoded rows.
pub fn function_model(f: &Function, rows: &[Row]) -> DumpFunction {
    DumpFunction {
        start: f.start,
        size: f.size,
        pc_type: pc_type_name(f.pc_type),
        rep_size: f.rep_size,
        fde_type: match f.fde_type {
            FdeType::Default => "default",
            FdeType::Flex => "flex",
        },
        signal: f.signal,
        pauth_key: match f.pauth_key {
            PauthKey::A => "a",
            PauthKey::B => "b",
        },
        rows: rows.iter().map(|r| row_model(f, r)).collect(),
    }
}

/// The model of one row of `f`.
pub fn row_model(f: &Function, row: &Row) -> DumpRow {
    let start = match f.pc_type {
        PcType::Inc => f.start.wrapping_add(u64::from(row.start)),
        PcType::Mask => u64::from(row.start),
    };
    DumpRow {
        start,
        cfa: cfa_model(&row.cfa),
        fp_offset: save_slot(&row.fp),
        ra_offset: save_slot(&row.ra),
        fp_rule: other_rule(&row.fp),
        ra_rule: other_rule(&row.ra),
        ra_undefined: row.ra_undefined,
        mangled_ra: row.mangled_ra,
    }
}

pub(crate) fn pc_type_name(t: PcType) -> &'static str {
    match t {
        PcType::Inc => "inc",
        PcType::Mask => "mask",
    }
}

fn cfa_model(cfa: &CfaRule) -> DumpCfa {
    DumpCfa {
        base: reg_name(cfa.base),
        offset: cfa.offset,
        deref: cfa.deref,
    }
}

fn save_slot(rule: &Rule) -> Option<i64> {
    match rule {
        Rule::AtCfa(offset) => Some(*offset),
        _ => None,
    }
}

fn other_rule(rule: &Rule) -> Option<DumpRule> {
    let (base, offset, deref) = match *rule {
        Rule::Unchanged | Rule::AtCfa(_) => return None,
        Rule::ValCfa(offset) => ("cfa".to_owned(), offset, false),
        Rule::InRegister(reg) => (reg_name(reg), 0, false),
        Rule::Expr { base, offset, deref } => (reg_name(base), offset, deref),
    };
    Some(DumpRule { base, offset, deref })
}

/// `sp`, `fp` or `r<N>` (DWARF register number).
pub fn reg_name(reg: Reg) -> String {
    match reg {
        Reg::Sp => "sp".to_owned(),
        Reg::Fp => "fp".to_owned(),
        Reg::Dwarf(n) => format!("r{n}"),
    }
}

/// Readable name of the header's ABI byte, for the text dump.
pub(crate) fn abi_name(abi: u8) -> &'static str {
    match abi {
        x if x == Abi::Aarch64Be as u8 => "AARCH64 BIG-ENDIAN",
        x if x == Abi::Aarch64Le as u8 => "AARCH64 LITTLE-ENDIAN",
        x if x == Abi::Amd64Le as u8 => "AMD64 LITTLE-ENDIAN",
        x if x == Abi::S390xBe as u8 => "S390X BIG-ENDIAN",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests;
