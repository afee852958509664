//! Reads `readelf --debug-dump=frames-interp` (binutils 2.40, x86-64 layout) and compares its
//! rows with `CfiTable::rule_at`: an oracle for the CFI reader that shares no code with gimli.

use std::collections::HashMap;

use tracer_unwind::cfi::{CfiCfa, CfiReg, CfiRule, CfiTable};

/// One FDE as readelf interprets it; an FDE without instructions gets its CIE's rows.
#[derive(Debug)]
pub struct Fde {
    pub start: u64,
    pub end: u64,
    pub rows: Vec<Row>,
}

/// One printed row: its address and the CFA, rbp and ra cells (`None`: column not shown).
#[derive(Clone, Debug)]
pub struct Row {
    pub loc: u64,
    pub cfa: String,
    pub fp: Option<String>,
    pub ra: Option<String>,
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s, 16).unwrap_or_else(|e| panic!("{s}: {e}"))
}

pub fn parse(text: &str) -> Vec<Fde> {
    let mut cies: HashMap<String, Vec<Row>> = HashMap::new();
    let mut fdes: Vec<(Fde, String)> = Vec::new();
    let mut current_cie: Option<String> = None;
    let mut columns: Vec<&str> = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [offset, _, _, "CIE", ..] => {
                current_cie = Some((*offset).to_owned());
                cies.insert((*offset).to_owned(), Vec::new());
                columns.clear();
            }
            [_, _, _, "FDE", cie, pc, ..] => {
                let cie = cie.strip_prefix("cie=").expect("cie=").to_owned();
                let (start, end) = pc
                    .strip_prefix("pc=")
                    .and_then(|r| r.split_once(".."))
                    .expect("pc=a..b");
                fdes.push((
                    Fde {
                        start: hex(start),
                        end: hex(end),
                        rows: Vec::new(),
                    },
                    cie,
                ));
                current_cie = None;
                columns.clear();
            }
            ["LOC", ..] => columns = fields.clone(),
            [loc, cfa, ..] if loc.len() == 16 && !columns.is_empty() => {
                let cell = |name: &str| columns.iter().position(|c| *c == name).map(|i| fields[i].to_owned());
                let row = Row {
                    loc: hex(loc),
                    cfa: (*cfa).to_owned(),
                    fp: cell("rbp"),
                    ra: cell("ra"),
                };
                match (&current_cie, fdes.last_mut()) {
                    (Some(cie), _) => cies.get_mut(cie).expect("CIE seen").push(row),
                    (None, Some((fde, _))) => fde.rows.push(row),
                    (None, None) => panic!("row outside an entry: {line}"),
                }
            }
            _ => {}
        }
    }
    fdes.into_iter()
        .map(|(mut fde, cie)| {
            if fde.rows.is_empty() {
                let initial = cies.get(&cie).and_then(|rows| rows.first()).expect("CIE rows");
                fde.rows.push(Row {
                    loc: fde.start,
                    ..initial.clone()
                });
            }
            fde
        })
        .collect()
}

fn dwarf(name: &str) -> u16 {
    const NAMES: [&str; 16] = [
        "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
    ];
    let n = NAMES
        .iter()
        .position(|n| *n == name)
        .unwrap_or_else(|| panic!("register {name}"));
    u16::try_from(n).unwrap()
}

fn cfa_matches(cell: &str, cfa: CfiCfa) -> bool {
    if cell == "exp" {
        return cfa == CfiCfa::Expression;
    }
    let split = cell.find(['+', '-']).unwrap_or_else(|| panic!("CFA cell {cell}"));
    let offset: i64 = cell[split..].trim_start_matches('+').parse().expect("offset");
    cfa == CfiCfa::RegOffset {
        reg: dwarf(&cell[..split]),
        offset,
    }
}

/// readelf cells: `u` undefined (also every column not yet set, which gimli leaves unspecified,
/// i.e. same value), `s` same value, `c-16` at CFA-16, `v-16` CFA-16, `exp`/`vexp`, a register.
fn reg_matches(cell: Option<&str>, reg: CfiReg) -> bool {
    match cell {
        None | Some("u") => matches!(reg, CfiReg::Undefined | CfiReg::SameValue),
        Some("s") => reg == CfiReg::SameValue,
        Some("exp") => reg == CfiReg::Expression,
        Some("vexp") => reg == CfiReg::ValExpression,
        Some(c) if c.starts_with('c') => reg == CfiReg::Offset(c[1..].parse().expect("c offset")),
        Some(c) if c.starts_with('v') => reg == CfiReg::ValOffset(c[1..].parse().expect("v offset")),
        Some(name) => reg == CfiReg::Register(dwarf(name)),
    }
}

fn assert_row(fde: &Fde, row: &Row, pc: u64, rule: &CfiRule) {
    let what = format!("at {pc:#x} (readelf row {row:?}): {rule:?}");
    assert_eq!((rule.fde_start, rule.fde_end), (fde.start, fde.end), "{what}");
    assert!(rule.row_start <= pc && pc < rule.row_end, "{what}");
    assert!(cfa_matches(&row.cfa, rule.cfa), "CFA {what}");
    assert!(reg_matches(row.fp.as_deref(), rule.fp), "FP {what}");
    assert!(reg_matches(row.ra.as_deref(), rule.ra), "RA {what}");
}

/// Checks `table` at the first and last byte of every readelf row; returns how many addresses.
/// FDEs at address 0 (discarded code) are skipped: several can overlap there.
pub fn compare(table: &CfiTable<'_>, fdes: &[Fde]) -> usize {
    let mut checked = 0;
    for fde in fdes.iter().filter(|f| f.start != 0 && f.end > f.start) {
        for (i, row) in fde.rows.iter().enumerate() {
            let next = fde.rows.get(i + 1).map_or(fde.end, |r| r.loc);
            for pc in [row.loc, next - 1] {
                let rule = table.rule_at(pc).unwrap_or_else(|e| panic!("{pc:#x}: {e}"));
                let rule = rule.unwrap_or_else(|| panic!("no rule at {pc:#x}, readelf has {row:?}"));
                assert_row(fde, row, pc, &rule);
                checked += 1;
            }
        }
    }
    checked
}
