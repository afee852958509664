//! Filling alignment padding on real objects (the corpus of `equivalence`: every ELF file of
//! `fixtures/bin`, this machine's libc, ld.so and libstdc++) and on objects assembled here:
//! the table `build_object` gives reads exactly what it read before padding was filled (entry
//! code already marked, `table::entry`) at every
//! address except in gaps the recogniser accepted, and there the rule of the row before the
//! gap; every other gap still reads `NO_INFO`.
//!
//! Both tables are step functions that change only at a transition or at a page's first or
//! past-last byte, so comparing them at those addresses (and the byte before each) compares
//! them at every address.

use std::collections::BTreeMap;
use std::process::Command;

use object::{Architecture, Object as _, ObjectSegment as _};
use tracer_common::unwind::{KIND_CFA, PAGE_SHIFT, UnwindRule};

use super::equivalence::corpus;
use crate::cfi::{Arch, CfiSource, CfiTable, Evaluator};
use crate::table::padding::{MAX_PADDING, is_padding};
use crate::table::{ObjectTable, build_object, finish, object::flatten_object, object::flatten_sources};
use crate::{elf, sframe};

/// The `[start, end)` of every function the builder reads: SFrame functions and the FDEs of
/// `.eh_frame` (else `.debug_frame`), as `cfi::flatten_file_with` picks them.
fn function_ranges(bytes: &[u8]) -> Vec<(u64, u64)> {
    let mut ranges = Vec::new();
    if let Ok(Some(found)) = elf::find_sframe(bytes)
        && let Ok(section) = sframe::Section::parse(&found.data, found.vaddr)
    {
        ranges.extend(section.functions().iter().map(|f| (f.start, f.end())));
    }
    if let Ok(Some(table)) = CfiTable::from_elf(bytes) {
        let fdes = table.fdes();
        let eh = fdes.iter().any(|f| f.source != CfiSource::DebugFrame);
        let picked = fdes.iter().filter(|f| (f.source != CfiSource::DebugFrame) == eh);
        ranges.extend(picked.map(|f| (f.start, f.end)));
    }
    ranges
}

/// The file bytes of `[start, end)` in one `PT_LOAD` segment, with the machine's `Arch`.
fn code_bytes(bytes: &[u8], start: u64, end: u64) -> Option<(Arch, Vec<u8>)> {
    let obj = object::File::parse(bytes).ok()?;
    let arch = match obj.architecture() {
        Architecture::X86_64 => Arch::X86_64,
        Architecture::Aarch64 => Arch::Aarch64,
        _ => return None,
    };
    let data = obj
        .segments()
        .find_map(|s| s.data_range(start, end - start).ok().flatten())?;
    Some((arch, data.to_vec()))
}

/// Every address where either table may change, and the byte before each, sorted.
fn breakpoints(tables: [&ObjectTable; 2], transitions: [&[(u64, UnwindRule)]; 2]) -> Vec<u64> {
    let mut at: Vec<u64> = transitions.iter().flat_map(|t| t.iter().map(|&(a, _)| a)).collect();
    for table in tables {
        for &(page, _) in table.pages() {
            let base = u64::from(page) << PAGE_SHIFT;
            at.extend([base, base + (1 << PAGE_SHIFT)]);
        }
    }
    let before: Vec<u64> = at.iter().map(|a| a.saturating_sub(1)).collect();
    at.extend(before);
    at.sort_unstable();
    at.dedup();
    at
}

/// What one object's check saw.
#[derive(Default)]
struct Seen {
    filled: usize,
    /// NO_INFO runs of at most `MAX_PADDING` bytes between two rules that were not filled, by
    /// their first byte (or `None` when outside the file's segments).
    kept: BTreeMap<Option<u8>, usize>,
}

/// The new table of `bytes` against the one without filling, as the module docs say.
fn check_object(what: &str, bytes: &[u8]) -> Option<Seen> {
    let (mut old, _) = flatten_sources(bytes, Evaluator::Fast).ok()??;
    // The entry code is marked before padding is filled (`table::entry`, tested on its own),
    // and starts a run as a function does.
    let entry = elf::entry_address(bytes).ok().flatten();
    if let Some(entry) = entry {
        crate::table::entry::mark(&mut old, entry);
    }
    let (new, _) = flatten_object(bytes, Evaluator::Fast)
        .expect("builds as without filling")
        .expect("has a table as without filling");
    let (old_t, new_t) = (old.transitions.clone(), new.transitions.clone());
    let (old, new) = (finish(old), finish(new));
    let points = breakpoints([&old, &new], [&old_t, &new_t]);
    let functions = function_ranges(bytes);
    let mut seen = Seen::default();
    // Maximal ranges where the tables differ, from the segments between breakpoints.
    let mut diffs: Vec<(u64, u64)> = Vec::new();
    for (i, &p) in points.iter().enumerate() {
        let q = points.get(i + 1).copied().unwrap_or(p + 1);
        if old.lookup(p) != new.lookup(p) {
            match diffs.last_mut() {
                Some(last) if last.1 == p => last.1 = q,
                _ => diffs.push((p, q)),
            }
        }
    }
    for &(p, q) in &diffs {
        let before = old.lookup(p - 1);
        assert!(q - p <= MAX_PADDING, "{what}: [{p:#x}, {q:#x}) changed");
        assert_ne!(before, UnwindRule::NO_INFO, "{what}: nothing before [{p:#x}, {q:#x})");
        assert_ne!(
            old.lookup(q),
            UnwindRule::NO_INFO,
            "{what}: nothing after [{p:#x}, {q:#x})"
        );
        for addr in p..q {
            assert_eq!(old.lookup(addr), UnwindRule::NO_INFO, "{what} at {addr:#x}: was a rule");
            assert_eq!(new.lookup(addr), before, "{what} at {addr:#x}: not the rule before");
        }
        let overlaps = functions.iter().any(|&(s, e)| s < q && p < e);
        assert!(!overlaps, "{what}: a function covers part of [{p:#x}, {q:#x})");
        assert!(
            functions.iter().any(|&(_, e)| e == p),
            "{what}: no function ends at {p:#x}"
        );
        assert!(
            functions.iter().any(|&(s, _)| s == q) || entry == Some(q),
            "{what}: no function (or entry code) starts at {q:#x}"
        );
        let (arch, code) =
            code_bytes(bytes, p, q).unwrap_or_else(|| panic!("{what}: [{p:#x}, {q:#x}) not in the file"));
        assert!(is_padding(arch, p, &code), "{what}: [{p:#x}, {q:#x}) is {code:02x?}");
    }
    // The NO_INFO runs left between two rules.
    for w in old_t.windows(3) {
        let [(_, a), (p, gap), (q, b)] = [w[0], w[1], w[2]];
        let kept = gap == UnwindRule::NO_INFO && a != gap && b != gap && q - p <= MAX_PADDING;
        if kept && new.lookup(p) == UnwindRule::NO_INFO {
            let first = code_bytes(bytes, p, q).map(|(_, c)| c[0]);
            *seen.kept.entry(first).or_default() += 1;
        }
    }
    seen.filled = diffs.len();
    assert_eq!(
        seen.filled as u64,
        new.stats().padding_gaps,
        "{what}: the builder's count"
    );
    Some(seen)
}

#[test]
fn filled_padding_is_the_only_change() {
    let (mut objects, mut filled) = (0, 0);
    for path in corpus() {
        let what = path.display().to_string();
        let bytes = std::fs::read(&path).expect("read");
        let Some(seen) = check_object(&what, &bytes) else {
            continue;
        };
        let kept: usize = seen.kept.values().sum();
        if seen.filled + kept > 0 {
            eprintln!("{what}: {} gaps filled, {kept} kept ({:x?})", seen.filled, seen.kept);
        }
        if what.contains("libc.so") {
            assert!(
                seen.filled > 10 * kept,
                "{what}: {} gaps filled, {kept} kept",
                seen.filled
            );
        }
        (objects, filled) = (objects + 1, filled + seen.filled);
    }
    assert!(objects > 20, "only {objects} objects had a table");
    assert!(filled > 100, "only {filled} gaps filled in all");
}

/// x86-64 assembly: `a` (with CFI), `stub` (none), then `b`, `c`, `d` (with CFI) after
/// `.p2align` NOP fill, int3 fill and NOP fill.
const X86_64_SOURCE: &str = "
    .text
    .globl a, stub, b, c, d
a:  .cfi_startproc
    push %rbx
    .cfi_adjust_cfa_offset 8
    pop %rbx
    .cfi_adjust_cfa_offset -8
    ret
    .cfi_endproc
stub:
    mov $1, %eax
    ret
    .p2align 4
b:  .cfi_startproc
    push %rbx
    .cfi_adjust_cfa_offset 8
    pop %rbx
    .cfi_adjust_cfa_offset -8
    ret
    .cfi_endproc
    .p2align 4, 0xcc
c:  .cfi_startproc
    ret
    .cfi_endproc
    .p2align 5
d:  .cfi_startproc
    push %rbx
    .cfi_adjust_cfa_offset 8
    pop %rbx
    .cfi_adjust_cfa_offset -8
    ret
    .cfi_endproc
";

/// The same for aarch64 (`.p2align` fills code with NOPs there).
const AARCH64_SOURCE: &str = "
    .text
    .globl a, stub, b, c, d
a:  .cfi_startproc
    stp x29, x30, [sp, #-16]!
    .cfi_def_cfa_offset 16
    .cfi_offset 29, -16
    .cfi_offset 30, -8
    ldp x29, x30, [sp], #16
    .cfi_def_cfa_offset 0
    .cfi_restore 29
    .cfi_restore 30
    ret
    .cfi_endproc
stub:
    mov x0, #1
    ret
    .p2align 5
b:  .cfi_startproc
    ret
    .cfi_endproc
    .p2align 4
c:  .cfi_startproc
    ret
    .cfi_endproc
    .p2align 5
d:  .cfi_startproc
    ret
    .cfi_endproc
";

/// Assemble and link `source` with `gcc` into a shared object; `None` when `gcc` is missing.
fn shared_object(gcc: &str, source: &str) -> Option<Vec<u8>> {
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, out) = (dir.path().join("gaps.s"), dir.path().join("gaps.so"));
    std::fs::write(&src, source).expect("write source");
    let status = Command::new(gcc)
        .args(["-nostdlib", "-shared", "-o"])
        .arg(&out)
        .arg(&src)
        .status();
    match status {
        Ok(s) if s.success() => Some(std::fs::read(&out).expect("read object")),
        Ok(s) => panic!("{gcc} failed: {s}"),
        Err(e) => {
            eprintln!("skipped: no {gcc} ({e})");
            None
        }
    }
}

/// The address of each global symbol named in `names`.
fn symbols(bytes: &[u8], names: &[&str]) -> Vec<u64> {
    use object::ObjectSymbol as _;
    let obj = object::File::parse(bytes).expect("parse");
    names
        .iter()
        .map(|name| {
            obj.symbols()
                .chain(obj.dynamic_symbols())
                .find(|s| s.name() == Ok(name))
                .unwrap_or_else(|| panic!("no symbol {name}"))
                .address()
        })
        .collect()
}

/// The stub's gap (its code and the padding after it) stays NO_INFO; the padding gaps after
/// `b` and `c` carry the rule in effect at the end of `b` and `c`.
fn check_gaps(what: &str, bytes: &[u8]) {
    let [a, stub, b, c, d] = symbols(bytes, &["a", "stub", "b", "c", "d"])[..] else {
        unreachable!()
    };
    let functions = function_ranges(bytes);
    let end = |f: u64| {
        let found = functions.iter().find(|&&(s, _)| s == f);
        found.unwrap_or_else(|| panic!("{what}: no FDE at {f:#x}")).1
    };
    assert_eq!(end(a), stub, "{what}: the stub follows a");
    assert!(end(b) < c && end(c) < d, "{what}: no padding after b or c");
    let (table, built) = build_object(bytes).expect("builds").expect("has CFI");
    assert!(built.cfi, "{what}");
    for f in [a, b, c, d] {
        assert_eq!(table.lookup(f).kind, KIND_CFA, "{what}: at {f:#x}");
    }
    for addr in stub..b {
        assert_eq!(table.lookup(addr), UnwindRule::NO_INFO, "{what}: stub gap at {addr:#x}");
    }
    for (f, next) in [(b, c), (c, d)] {
        let last = table.lookup(end(f) - 1);
        for addr in end(f)..next {
            assert_eq!(table.lookup(addr), last, "{what}: padding at {addr:#x}");
        }
    }
    assert_eq!(table.stats().padding_gaps, 2, "{what}");
    // The stub's gap is the one kept.
    assert!(check_object(what, bytes).is_some_and(|seen| seen.filled == 2 && seen.kept.values().sum::<usize>() == 1));
}

#[test]
fn x86_64_stub_without_cfi_stays_no_info() {
    if let Some(bytes) = shared_object("gcc", X86_64_SOURCE) {
        check_gaps("x86-64", &bytes);
    }
}

#[test]
fn aarch64_stub_without_cfi_stays_no_info() {
    if let Some(bytes) = shared_object("aarch64-linux-gnu-gcc", AARCH64_SOURCE) {
        check_gaps("aarch64", &bytes);
    }
}
