//! `table::build_from_cfi` (DWARF CFI -> kernel rows) against independent expectations: every
//! row boundary of this machine's libc against `CfiTable::rule_at` converted here by hand, a gcc
//! program against `readelf --debug-dump=frames-interp` (its `.plt` expanded, `_start`
//! outermost), and truncated or corrupted `.eh_frame` ELF files, which must never panic.

use std::{
    collections::BTreeMap,
    ops::Range,
    panic::{AssertUnwindSafe, catch_unwind},
    path::{Path, PathBuf},
    process::Command,
};

use crate::support::{Rng, run};
use object::{Object as _, ObjectSection as _, ObjectSymbol as _};
use tracer_common::unwind::{
    FLAG_FP_SAVED, FLAG_RA_SAVED, FLAG_SIGNAL, FLAG_TOPMOST_ONLY, KIND_CFA, KIND_NO_INFO, KIND_OUTERMOST,
    REG_DWARF_BASE, REG_FP, REG_SP, UnwindRule,
};
use tracer_unwind::cfi::{CfiCfa, CfiReg, CfiRule, CfiTable};
use tracer_unwind::table::{ObjectTable, build_from_cfi};

const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";

/// The `K` of the `.plt` CFA expression ld 2.40 writes for lazy x86-64 PLT entries (no IBT).
const PLT_THRESHOLD: u64 = 11;

/// Several functions with different frames, and three libc calls (three `.plt` stubs).
const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) long fib(long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__attribute__((noinline)) long vla(int n) {
    volatile long a[n];
    for (int i = 0; i < n; i++) a[i] = i * fib(i % 5);
    long s = 0;
    for (int i = 0; i < n; i++) s += a[i];
    return s;
}
__attribute__((noinline)) long many(long a, long b, long c, long d, long e, long f) {
    long x = a * b, y = c * d, z = e * f;
    for (int i = 0; i < a; i++) { x += fib(i) * y; y ^= z + fib(b % 7); z += x >> 3; }
    return x + y + z;
}
int main(int argc, char **argv) {
    char buf[64];
    strncpy(buf, argv[0], sizeof buf - 1);
    buf[63] = 0;
    printf("%ld %ld %s\n", vla(argc + 3), many(argc, 2, 3, 4, 5, 6), buf);
    return atoi(argv[argc - 1]) & 1;
}
"#;

/// `PROGRAM` built by the host gcc with `flags` into `dir`.
fn compile(dir: &Path, flags: &[&str]) -> PathBuf {
    let source = dir.join("program.c");
    std::fs::write(&source, PROGRAM).expect("write program.c");
    let out = dir.join("program");
    run(Command::new("gcc").args(flags).arg("-o").arg(&out).arg(&source));
    out
}

fn section_range(file: &[u8], name: &str) -> Option<Range<u64>> {
    let obj = object::File::parse(file).expect("ELF");
    let s = obj.section_by_name(name)?;
    Some(s.address()..s.address() + s.size())
}

fn symbol(file: &[u8], name: &str) -> u64 {
    let obj = object::File::parse(file).expect("ELF");
    obj.symbols()
        .find(|s| s.name() == Ok(name))
        .unwrap_or_else(|| panic!("no symbol {name}"))
        .address()
}

fn cfa_rule(reg: u8, offset: i32, flags: u8) -> UnwindRule {
    UnwindRule {
        kind: KIND_CFA,
        cfa_reg: reg,
        flags,
        cfa_offset: offset,
        ..UnwindRule::NO_INFO
    }
}

/// The `.plt` stub rule at `pc`: `CFA = rsp + 8 + ((pc & 15) >= K ? 8 : 0)`, RA at CFA - 8.
fn plt_rule(pc: u64) -> UnwindRule {
    let offset = if pc & 15 >= PLT_THRESHOLD { 16 } else { 8 };
    UnwindRule {
        ra_offset: -8,
        ..cfa_rule(REG_SP, offset, FLAG_RA_SAVED)
    }
}

/// The kernel rule for `rule` at `pc`, written from the x86-64 DWARF numbering (rsp 7, rbp 6)
/// without the builder's code; `Err` names why there is none (the row is then `NO_INFO`).
fn expected(rule: &CfiRule, pc: u64, plt: &Range<u64>) -> Result<UnwindRule, &'static str> {
    let signal = if rule.signal { FLAG_SIGNAL } else { 0 };
    if rule.ra == CfiReg::Undefined {
        return Ok(UnwindRule {
            kind: KIND_OUTERMOST,
            flags: signal,
            ..UnwindRule::NO_INFO
        });
    }
    let mut out = match rule.cfa {
        CfiCfa::Expression if plt.contains(&pc) => plt_rule(pc),
        CfiCfa::Expression => return Err("cfa expression"),
        CfiCfa::RegOffset { reg, offset } => {
            let offset = i32::try_from(offset).map_err(|_| "cfa offset")?;
            match reg {
                7 => cfa_rule(REG_SP, offset, 0),
                6 => cfa_rule(REG_FP, offset, 0),
                r if r < 250 => cfa_rule(REG_DWARF_BASE + r as u8, offset, FLAG_TOPMOST_ONLY),
                _ => return Err("cfa register"),
            }
        }
    };
    out.flags |= signal;
    match rule.ra {
        CfiReg::Offset(n) => {
            out.flags |= FLAG_RA_SAVED;
            out.ra_offset = i32::try_from(n).map_err(|_| "ra offset")?;
        }
        _ => return Err("ra not at cfa + n"),
    }
    match rule.fp {
        CfiReg::Offset(n) => {
            out.flags |= FLAG_FP_SAVED;
            out.fp_offset = i32::try_from(n).map_err(|_| "fp offset")?;
        }
        CfiReg::SameValue => {}
        _ => return Err("fp neither saved nor unchanged"),
    }
    Ok(out)
}

/// Every FDE of this machine's libc, at the first and last byte of every row `rule_at` gives:
/// the table's lookup is the rule written independently from the CFI (or `NO_INFO` where that
/// has a reason), and at least 95% of the rows are executable.
#[test]
fn libc_rows_match_cfi() {
    if !Path::new(LIBC).exists() {
        crate::support::skipped("eh_frame::libc_rows_match_cfi", &format!("no {LIBC} on this machine"));
        return;
    }
    let bytes = std::fs::read(LIBC).expect("read libc");
    let table = build_from_cfi(&bytes, None).expect("table").expect("libc has CFI");
    let cfi = CfiTable::from_elf(&bytes).expect("CFI").expect("libc has CFI");
    let plt = section_range(&bytes, ".plt").unwrap_or(0..0);
    let fdes = cfi.fdes();
    let (mut rows, mut executable) = (0u64, 0u64);
    let mut no_info: BTreeMap<&str, u64> = BTreeMap::new();
    for fde in &fdes {
        let mut pc = fde.start;
        while pc < fde.end {
            let rule = cfi.rule_at(pc).expect("evaluates").expect("inside an FDE");
            let row_end = rule.row_end.min(fde.end);
            assert!(row_end > pc, "row at {pc:#x} does not advance: {rule:?}");
            for addr in [pc, row_end - 1] {
                let at = cfi.rule_at(addr).expect("evaluates").expect("inside an FDE");
                let want = expected(&at, addr, &plt).unwrap_or(UnwindRule {
                    flags: if at.signal { FLAG_SIGNAL } else { 0 },
                    ..UnwindRule::NO_INFO
                });
                assert_eq!(table.lookup(addr), want, "at {addr:#x}: {at:?}");
            }
            rows += 1;
            match expected(&rule, pc, &plt) {
                Ok(r) if r.kind != KIND_NO_INFO && r.flags & FLAG_SIGNAL == 0 => executable += 1,
                Ok(_) => *no_info.entry("signal").or_default() += 1,
                Err(reason) => *no_info.entry(reason).or_default() += 1,
            }
            pc = row_end;
        }
    }
    let stats = table.stats();
    eprintln!(
        "libc: {} FDEs, {rows} CFI rows checked ({} in stats), {executable} executable ({:.2}%), \
         not executable by reason: {no_info:?}; builder reasons: {:?}; {} kernel rows in {} pages, \
         {} rules, {:.2} bytes per CFI row, {} map bytes",
        fdes.len(),
        stats.sframe_rows,
        executable as f64 * 100.0 / rows as f64,
        stats
            .unsupported
            .iter()
            .map(|(r, n)| (r.name(), *n))
            .collect::<Vec<_>>(),
        stats.rows,
        stats.pages,
        stats.rules,
        stats.bytes_per_sframe_row(),
        stats.map_bytes(),
    );
    assert_eq!(stats.functions, fdes.len() as u64);
    assert!(fdes.len() > 1000, "{} FDEs", fdes.len());
    assert!(executable * 100 >= rows * 95, "{executable} of {rows} rows executable");
}

/// One FDE of `readelf --debug-dump=frames-interp` (x86-64): its range and rows.
#[derive(Debug)]
struct ReadelfFde {
    start: u64,
    end: u64,
    rows: Vec<ReadelfRow>,
}

/// One printed row: its address and the CFA, ra and rbp cells (`None`: column not shown).
#[derive(Clone, Debug)]
struct ReadelfRow {
    loc: u64,
    cfa: String,
    ra: Option<String>,
    fp: Option<String>,
}

/// A minimal reader of readelf's interpreted frames (the `check` tests have a fuller one,
/// private to them): an FDE without rows gets its CIE's first row at its start.
fn parse_readelf(text: &str) -> Vec<ReadelfFde> {
    let hex = |s: &str| u64::from_str_radix(s, 16).unwrap_or_else(|e| panic!("{s}: {e}"));
    let mut cies: BTreeMap<String, ReadelfRow> = BTreeMap::new();
    let mut fdes: Vec<(ReadelfFde, String)> = Vec::new();
    let (mut cie, mut columns): (Option<String>, Vec<String>) = (None, Vec::new());
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [offset, _, _, "CIE", ..] => cie = Some((*offset).to_owned()),
            [_, _, _, "FDE", parent, pc, ..] => {
                let (start, end) = pc.strip_prefix("pc=").and_then(|r| r.split_once("..")).expect("pc=");
                let parent = parent.strip_prefix("cie=").expect("cie=").to_owned();
                let fde = ReadelfFde {
                    start: hex(start),
                    end: hex(end),
                    rows: Vec::new(),
                };
                fdes.push((fde, parent));
                cie = None;
            }
            ["LOC", ..] => columns = fields.iter().map(|c| (*c).to_owned()).collect(),
            [loc, cfa, ..] if loc.len() == 16 => {
                let cell = |name: &str| columns.iter().position(|c| c == name).map(|i| fields[i].to_owned());
                let row = ReadelfRow {
                    loc: hex(loc),
                    cfa: (*cfa).to_owned(),
                    ra: cell("ra"),
                    fp: cell("rbp"),
                };
                match (&cie, fdes.last_mut()) {
                    (Some(cie), _) => {
                        cies.entry(cie.clone()).or_insert(row);
                    }
                    (None, Some((fde, _))) => fde.rows.push(row),
                    (None, None) => panic!("row outside an entry: {line}"),
                }
            }
            _ => {}
        }
    }
    fdes.into_iter()
        .map(|(mut fde, parent)| {
            if fde.rows.is_empty() {
                let initial = cies.get(&parent).expect("CIE rows").clone();
                fde.rows.push(ReadelfRow {
                    loc: fde.start,
                    ..initial
                });
            }
            fde
        })
        .collect()
}

/// The kernel rule a readelf `frames-interp` row gives at `pc` (x86-64 cells: CFA `rsp+8`,
/// `rbp+16`, `exp`; RA `c-8` or `u`; rbp absent, `u`, `s` or `c-16`).
fn readelf_rule(row: &ReadelfRow, pc: u64, plt: &Range<u64>) -> UnwindRule {
    if row.ra.as_deref() == Some("u") {
        return UnwindRule {
            kind: KIND_OUTERMOST,
            ..UnwindRule::NO_INFO
        };
    }
    let mut rule = if row.cfa == "exp" {
        assert!(plt.contains(&pc), "CFA expression outside .plt at {pc:#x}");
        plt_rule(pc)
    } else {
        let split = row.cfa.find(['+', '-']).expect("reg+offset");
        let offset: i32 = row.cfa[split..].trim_start_matches('+').parse().expect("offset");
        match &row.cfa[..split] {
            "rsp" => cfa_rule(REG_SP, offset, 0),
            "rbp" => cfa_rule(REG_FP, offset, 0),
            other => panic!("CFA register {other} at {pc:#x}"),
        }
    };
    let at_cfa = |cell: &str| cell.strip_prefix('c').map(|n| n.parse::<i32>().expect("offset"));
    let ra = row.ra.as_deref().and_then(at_cfa).expect("RA saved at CFA + n");
    rule.flags |= FLAG_RA_SAVED;
    rule.ra_offset = ra;
    if let Some(fp) = row.fp.as_deref().and_then(at_cfa) {
        rule.flags |= FLAG_FP_SAVED;
        rule.fp_offset = fp;
    }
    rule
}

/// A `gcc -O2` program: at the first and last byte of every row readelf prints, the table's
/// rule is readelf's; every `.plt` stub is `SP + 8` from its start and `SP + 16` from start + 11;
/// `_start` (crt1.o's `.cfi_undefined rip`) is outermost, and so is the entry point's FDE.
#[test]
fn gcc_program_matches_readelf() {
    let dir = tempfile::tempdir().expect("tempdir");
    let binary = compile(dir.path(), &["-O2"]);
    let bytes = std::fs::read(&binary).expect("read");
    let table = build_from_cfi(&bytes, None).expect("table").expect("some CFI");
    let plt = section_range(&bytes, ".plt").expect(".plt");
    let text = String::from_utf8(run(Command::new("readelf")
        .arg("--debug-dump=frames-interp")
        .arg(&binary)))
    .expect("utf-8");
    let fdes = parse_readelf(&text);
    assert_eq!(table.stats().functions, fdes.len() as u64);
    let mut checked = 0;
    for fde in fdes.iter().filter(|f| f.start != 0 && f.end > f.start) {
        for (i, row) in fde.rows.iter().enumerate() {
            let next = fde.rows.get(i + 1).map_or(fde.end, |r| r.loc);
            for pc in [row.loc, next - 1] {
                let want = readelf_rule(row, pc, &plt);
                if row.cfa != "exp" {
                    assert_eq!(table.lookup(pc), want, "at {pc:#x}: readelf {row:?}");
                    checked += 1;
                }
            }
        }
        if !fdes.iter().any(|f| f.start == fde.end) {
            assert_eq!(table.lookup(fde.end), UnwindRule::NO_INFO, "after FDE {:#x}", fde.start);
        }
    }
    // PLT0 (rows rsp+16, rsp+24) is checked above; each stub after it byte by byte.
    let stubs: Vec<u64> = (plt.start + 16..plt.end).step_by(16).collect();
    assert!(stubs.len() >= 3, "{} .plt stubs", stubs.len());
    for stub in stubs {
        for pc in stub..stub + 16 {
            assert_eq!(table.lookup(pc), plt_rule(pc), "at {pc:#x} in .plt");
            checked += 1;
        }
        assert_eq!(table.lookup(stub).cfa_offset, 8);
        assert_eq!(table.lookup(stub + 11).cfa_offset, 16);
    }
    let start = symbol(&bytes, "_start");
    assert_eq!(table.lookup(start).kind, KIND_OUTERMOST, "_start");
    let main = symbol(&bytes, "main");
    assert_eq!(table.lookup(main).kind, KIND_CFA, "main");
    let with_entry = build_from_cfi(&bytes, Some(main + 1))
        .expect("table")
        .expect("some CFI");
    let main_end = fdes.iter().find(|f| f.start == main).expect("main's FDE").end;
    for pc in main..main_end {
        assert_eq!(with_entry.lookup(pc).kind, KIND_OUTERMOST, "entry FDE at {pc:#x}");
    }
    eprintln!("{checked} addresses agree with readelf; {:?}", table.stats());
}

/// Table invariants the kernel relies on: pages and rows strictly ascending, rows start at 0,
/// every row names a rule.
fn assert_well_formed(table: &ObjectTable) {
    assert!(table.pages().windows(2).all(|w| w[0].0 < w[1].0));
    for (_, rows) in table.pages() {
        assert_eq!(rows.first().map(|r| r.addr_lo), Some(0));
        assert!(rows.windows(2).all(|w| w[0].addr_lo < w[1].addr_lo));
        assert!(rows.iter().all(|r| usize::from(r.rule) < table.rules().len()));
    }
}

/// Builds a table from `data` without panicking: `Ok` tables are well formed and answer lookups.
fn build_never_panics(data: &[u8], what: &str) -> bool {
    let outcome = catch_unwind(AssertUnwindSafe(|| match build_from_cfi(data, Some(0x1000)) {
        Ok(Some(table)) => {
            assert_well_formed(&table);
            for pc in [0, 0x1000, 0x1040, 0x1100, u64::MAX] {
                table.lookup(pc);
            }
            true
        }
        Ok(None) => true,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            false
        }
    }));
    outcome.unwrap_or_else(|_| panic!("build_from_cfi panicked on {what}"))
}

/// Every truncation of a small gcc program (with and without `.eh_frame_hdr`), every byte of its
/// `.eh_frame` and `.eh_frame_hdr` inverted, and 4,000 random byte changes there and elsewhere:
/// `build_from_cfi` gives a table or a typed error, never a panic.
#[test]
fn corrupted_eh_frame_never_panics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let binary = compile(dir.path(), &["-O2"]);
    let scanned = dir.path().join("program-nohdr");
    run(Command::new("objcopy")
        .args(["--remove-section", ".eh_frame_hdr"])
        .arg(&binary)
        .arg(&scanned));
    let mut rng = Rng(0x05ee_dcf1);
    let (mut tables, mut errors) = (0u64, 0u64);
    let mut tally = |ok: bool| if ok { tables += 1 } else { errors += 1 };
    for path in [binary, scanned] {
        let bytes = std::fs::read(&path).expect("read");
        let obj = object::File::parse(&*bytes).expect("ELF");
        let ranges: Vec<Range<usize>> = [".eh_frame", ".eh_frame_hdr"]
            .iter()
            .filter_map(|name| obj.section_by_name(name)?.file_range())
            .map(|(offset, size)| offset as usize..(offset + size) as usize)
            .collect();
        assert!(!ranges.is_empty());
        for len in 0..bytes.len() {
            tally(build_never_panics(
                &bytes[..len],
                &format!("{} truncated to {len}", path.display()),
            ));
        }
        for i in ranges.iter().cloned().flatten() {
            let mut copy = bytes.clone();
            copy[i] ^= 0xff;
            tally(build_never_panics(
                &copy,
                &format!("{} byte {i:#x} inverted", path.display()),
            ));
        }
        for n in 0..2000 {
            let mut copy = bytes.clone();
            let range = &ranges[n % ranges.len()];
            for _ in 0..1 + rng.below(4) {
                let i = if n % 4 == 3 {
                    rng.below(bytes.len())
                } else {
                    range.start + rng.below(range.len())
                };
                copy[i] = rng.next_u64() as u8;
            }
            tally(build_never_panics(&copy, &format!("{} mutation {n}", path.display())));
        }
    }
    eprintln!("corrupted inputs: {tables} tables, {errors} typed errors");
    assert!(tables > 0 && errors > 0);
}
