//! The table builder on real files: over the whole fixture corpus (x86_64 and aarch64; s390x
//! is out of scope for unwinding) and programs compiled here, the paged table's lookup gives,
//! at every address checked, exactly the rule of the row the SFrame reader finds there; every
//! table has the kernel's shape; and the kernel memory per SFrame row is measured.

mod cases;
mod synthetic;

use std::path::{Path, PathBuf};

use tracer_common::unwind::UnwindRule;
use tracer_unwind::elf;
use tracer_unwind::sframe::{Abi, Error, Function, PcType, Section};
use tracer_unwind::table::{ObjectTable, RuleTable, build_from_sframe, convert, unsupported_rule};

/// Functions up to this size are checked at every address; larger ones at row boundaries
/// (and their neighbours) plus a deterministic sample.
const EXHAUSTIVE: u64 = 4096;

/// ELF files under `dir`, recursively, sorted.
fn elf_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).expect("read fixture dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if std::fs::read(&path).is_ok_and(|b| b.starts_with(b"\x7fELF")) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn corpus() -> Vec<PathBuf> {
    elf_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/bin"))
}

/// The rule at `pc` according to the reader: the converted row `find_row` returns, `NO_INFO`
/// where it finds none. Where `find_row` cannot answer for a MASK function without a
/// repetition size, the builder's documented choice: v1 amd64 blocks are 16 bytes (a `.plt`
/// entry), any other is `NO_INFO`.
fn expected(s: &Section<'_>, pc: u64) -> UnwindRule {
    let h = s.header();
    match s.find_row(pc) {
        Ok(Some((f, row))) => convert(h, &f, &row).unwrap_or_else(|_| unsupported_rule(&f)),
        Ok(None) | Err(Error::ZeroRepSize { .. }) => match s.find_function(pc) {
            Some(f) if f.pc_type == PcType::Mask && f.rep_size == 0 => {
                if h.version == 1 && h.abi == Abi::Amd64Le {
                    let rows = s.rows(f).expect("rows");
                    let key = (pc - f.start) % 16;
                    rows.iter()
                        .rev()
                        .find(|r| u64::from(r.start) <= key)
                        .map_or(UnwindRule::NO_INFO, |r| {
                            convert(h, f, r).unwrap_or_else(|_| unsupported_rule(f))
                        })
                } else {
                    unsupported_rule(f)
                }
            }
            _ => UnwindRule::NO_INFO,
        },
        Err(e) => panic!("find_row({pc:#x}): {e}"),
    }
}

/// The addresses checked for `f`: all of them when small, else every row boundary +-1 and
/// every 97th byte; plus the bytes just outside it.
fn addresses(s: &Section<'_>, f: &Function) -> Vec<u64> {
    let mut out = vec![f.start.saturating_sub(1), f.end()];
    if u64::from(f.size) <= EXHAUSTIVE {
        out.extend(f.start..f.end());
        return out;
    }
    for row in s.rows(f).expect("rows") {
        let at = f.start + u64::from(row.start);
        out.extend([at.saturating_sub(1), at, at + 1]);
    }
    out.extend((f.start..f.end()).step_by(97));
    out
}

/// Invariants the kernel relies on: pages ascending, each starting with a row at 0, rows
/// ascending, no row repeating the previous row's rule (redundant rows are merged, and the
/// synthetic page-start row always differs from the next one), no page of only `NO_INFO`.
fn check_shape(name: &str, t: &ObjectTable) {
    assert_eq!(t.rules().first(), Some(&UnwindRule::NO_INFO), "{name}");
    assert!(t.pages().windows(2).all(|w| w[0].0 < w[1].0), "{name}");
    for (page, rows) in t.pages() {
        assert_eq!(rows.first().map(|r| r.addr_lo), Some(0), "{name} page {page:#x}");
        assert!(rows.windows(2).all(|w| w[0].addr_lo < w[1].addr_lo), "{name} {page:#x}");
        assert!(rows.windows(2).all(|w| w[0].rule != w[1].rule), "{name} page {page:#x}");
        assert!(rows.iter().any(|r| t.rule(r.rule) != UnwindRule::NO_INFO), "{name}");
    }
}

/// Build the table of `s` and check it at the addresses of every function; returns it and
/// the number of addresses checked.
fn check_section(name: &str, s: &Section<'_>) -> (ObjectTable, usize) {
    let t = build_from_sframe(s).unwrap_or_else(|e| panic!("{name}: {e}"));
    check_shape(name, &t);
    let mut checked = 0;
    for f in s.functions() {
        for pc in addresses(s, f) {
            assert_eq!(t.lookup(pc), expected(s, pc), "{name} at {pc:#x}");
            if s.find_function(pc).is_none() {
                assert_eq!(t.lookup(pc), UnwindRule::NO_INFO, "{name} outside at {pc:#x}");
            }
            checked += 1;
        }
    }
    (t, checked)
}

/// Totals over several objects, for the memory measurement.
#[derive(Default)]
struct Totals {
    objects: u64,
    sframe_rows: u64,
    rows: u64,
    pages: u64,
    local_rules: u64,
}

/// Every address of every function of every x86_64/aarch64 corpus file (and of programs
/// compiled here) looks up the rule of the row the reader finds; tables have the kernel's
/// shape; and the kernel memory per SFrame row stays at most 6 bytes (measured, printed).
#[test]
fn lookup_equals_reader_over_the_corpus() {
    let dir = tempfile::tempdir().expect("tempdir");
    let program = crate::reader::PROGRAM;
    let mut files = corpus();
    files.push(crate::reader::compile(dir.path(), "prog", program, &[]));
    files.push(crate::reader::compile(
        dir.path(),
        "lib.so",
        program,
        &["-shared", "-fPIC"],
    ));
    let (mut totals, mut global, mut checked) = (Totals::default(), RuleTable::new(), 0);
    for path in &files {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).expect("read");
        let Some(found) = elf::find_sframe(&bytes).unwrap_or_else(|e| panic!("{name}: {e}")) else {
            continue;
        };
        let s = Section::parse(&found.data, found.vaddr).unwrap_or_else(|e| panic!("{name}: {e}"));
        if s.header().abi == Abi::S390xBe {
            continue;
        }
        let (t, n) = check_section(&name, &s);
        checked += n;
        global.remap(&t).expect("the corpus fits one rule table");
        let st = t.stats();
        totals.objects += 1;
        totals.sframe_rows += st.sframe_rows;
        totals.rows += st.rows;
        totals.pages += st.pages;
        totals.local_rules += st.rules;
    }
    assert!(totals.objects >= 40, "the corpus has x86_64 and aarch64 files of v1-v3");
    let index = totals.rows * 4 + totals.pages * 16;
    let per_row = |bytes: u64| bytes as f64 / totals.sframe_rows as f64;
    let shared = index + global.rules().len() as u64 * 12;
    let alone = index + totals.local_rules * 12;
    eprintln!(
        "table: {} objects, {checked} addresses checked; {} SFrame rows -> {} table rows in {} \
         pages; {} rules shared ({} local); bytes per SFrame row: {:.2} rows+index, {:.2} with \
         shared rules, {:.2} with per-object rules",
        totals.objects,
        totals.sframe_rows,
        totals.rows,
        totals.pages,
        global.rules().len(),
        totals.local_rules,
        per_row(index),
        per_row(shared),
        per_row(alone),
    );
    assert!(
        per_row(index) <= 6.0,
        "regression: {:.2} bytes per SFrame row",
        per_row(index)
    );
}

/// s390x sections decode but give an empty table, every row counted as unsupported.
#[test]
fn s390x_tables_are_empty_with_a_reason() {
    let mut seen = 0;
    for path in corpus().iter().filter(|p| p.to_string_lossy().contains("s390x")) {
        let bytes = std::fs::read(path).expect("read");
        let found = elf::find_sframe(&bytes).expect("ELF").expect(".sframe");
        let s = Section::parse(&found.data, found.vaddr).expect("parses");
        let t = build_from_sframe(&s).expect("builds");
        assert!(t.pages().is_empty(), "{}", path.display());
        let counts: Vec<(&str, u64)> = t.stats().unsupported.iter().map(|(r, n)| (r.name(), *n)).collect();
        assert_eq!(counts.first(), Some(&("unsupported abi", t.stats().sframe_rows)));
        seen += 1;
    }
    assert!(seen >= 3, "chain, chain.o and libshlib.so");
}

/// The dynamic loader this test runs under (glibc's `ld-linux-*.so`): its entry code (`_start`,
/// then `_dl_start_user`, which has no unwind information) is outermost in its table, so that
/// a walk of a process still in its loader's start ends there complete, not `no_info`; the
/// functions around it keep their rules.
#[test]
fn the_loaders_entry_code_is_outermost() {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
    let loader = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.rsplit('/').next().is_some_and(|n| n.starts_with("ld-linux")))
        .expect("this test runs under a dynamic loader named ld-linux*");
    let bytes = std::fs::read(loader).expect("read the loader");
    let entry = elf::entry_address(&bytes)
        .expect("an ELF file")
        .expect("an entry point");
    let (table, _) = tracer_unwind::table::build_object(&bytes)
        .expect("a table")
        .expect("unwind information");
    // The return address of its first call (`call _dl_start` on x86-64, `bl _dl_start` on
    // aarch64), where a walk from `_dl_start` arrives.
    for pc in [entry, entry + 7] {
        assert_eq!(
            table.lookup(pc).kind,
            tracer_common::unwind::KIND_OUTERMOST,
            "{loader}: {pc:#x} (entry {entry:#x})"
        );
    }
    // Before the entry code: the function before it, or the gap between them, untouched.
    assert_ne!(
        table.lookup(entry - 1).kind,
        tracer_common::unwind::KIND_OUTERMOST,
        "{loader}"
    );
}
