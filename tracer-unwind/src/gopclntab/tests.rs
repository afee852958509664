//! The reader against Go's own tools: every function `go tool nm` lists is found at its
//! address under its name, and every instruction `go tool objdump` lists is in the function,
//! file and line objdump gives it, in a program built normally and stripped; and a table
//! mangled at random never panics, hangs or reads out of itself.

use std::path::Path;

use super::{Bytes, Call, Loaded, Section, Table, Version};
use crate::testing::{Rng, go};

/// The spinning Go program built with each toolchain found (`None` outside CI when there is
/// none).
fn programs() -> Option<Vec<(std::path::PathBuf, tempfile::TempDir)>> {
    built("spin", go::SPIN_SOURCE)
}

/// The program `source` built as `name` (and `name-stripped`) with each toolchain found.
fn built(name: &str, source: &str) -> Option<Vec<(std::path::PathBuf, tempfile::TempDir)>> {
    let mut built = Vec::new();
    for toolchain in go::toolchains() {
        let dir = tempfile::tempdir().expect("tempdir");
        match go::build(&toolchain, dir.path(), name, source) {
            Ok(_) => built.push((toolchain, dir)),
            Err(e) if toolchain == Path::new("go") => {
                assert!(std::env::var("CI").as_deref() != Ok("true"), "no Go toolchain: {e}");
                eprintln!("skipped: {e}");
                return None;
            }
            Err(e) => panic!("{e}"),
        }
    }
    Some(built)
}

/// The table of the ELF file `bytes`, relocated as the tracer relocates it.
fn table(bytes: &[u8]) -> (Table, &[u8]) {
    let section = Section::find(bytes).expect("a .gopclntab");
    let data = &bytes[section.offset as usize..(section.offset + section.size) as usize];
    let mut table = Table::parse(data, section.size).expect("parse");
    if table.version != Version::Go116 {
        table.relocate(section.text_start(table.text_start()).expect("text start"));
    }
    (table, data)
}

/// Where the inline trees of the ELF file `bytes` are: the section holding them read by
/// address, and `go:func.*`'s address as the module data gives it.
fn trees<'a>(bytes: &'a [u8], table: &Table) -> (Loaded<'a, [u8]>, u64) {
    let section = Section::find(bytes).expect("a .gopclntab");
    let (part, gofunc) = section.trees(bytes, table).expect("go:func.* in the module data");
    (Loaded { file: bytes, part }, gofunc)
}

/// Go's name for an assembly function drops the ABI suffix the symbol table carries.
fn plain(name: &str) -> &str {
    name.strip_suffix(".abi0").unwrap_or(name)
}

#[test]
/// Every text symbol of the unstripped build is a function of the table, at the same address,
/// named alike, in both builds (the table is what a stripped binary keeps).
fn every_function_go_tool_nm_lists_is_found_at_its_address() {
    let Some(built) = programs() else { return };
    for (toolchain, dir) in built {
        let symbols = go::nm(&toolchain, &dir.path().join("spin"));
        assert!(symbols.len() > 500, "{toolchain:?}: nm listed {}", symbols.len());
        for binary in ["spin", "spin-stripped"] {
            let bytes = std::fs::read(dir.path().join(binary)).expect("read");
            let (table, data) = table(&bytes);
            let text = table.text(data).expect("text range");
            let mut checked = 0;
            for (addr, name) in symbols.iter().filter(|(a, _)| text.contains(a)) {
                let Some(found) = table.locate(data, *addr) else {
                    continue;
                };
                // Symbols without a function record (`runtime.text`, `go:buildid`) share its
                // address with a function or lie in padding; every function is checked.
                if found.range.start == *addr && plain(&found.function) == plain(name) {
                    checked += 1;
                }
            }
            let funcs = [
                "main.leaf",
                "main.worker",
                "runtime.goexit",
                "runtime.mstart",
                "runtime.main",
            ];
            for name in funcs {
                let (addr, _) = symbols.iter().find(|(_, n)| plain(n) == name).expect(name);
                let found = table.locate(data, *addr).expect(name);
                assert_eq!(
                    (plain(&found.function), found.range.start),
                    (name, *addr),
                    "{toolchain:?} {binary}"
                );
            }
            assert!(
                checked * 10 >= symbols.len() * 9,
                "{toolchain:?} {binary}: {checked} of {}",
                symbols.len()
            );
        }
    }
}

#[test]
/// Every instruction of the program's own functions and of the runtime's stack bases is in the
/// function, file and line `go tool objdump` gives it, stripped or not (the inlined `main.mix`
/// reported, as objdump does, at its own line inside `main.leaf`).
fn functions_files_and_lines_match_go_tool_objdump() {
    let Some(built) = programs() else { return };
    for (toolchain, dir) in built {
        let listed = go::objdump(
            &toolchain,
            &dir.path().join("spin"),
            r"^(main\.|runtime\.goexit|runtime\.mstart(\.abi0)?$)",
        );
        assert!(
            listed.iter().any(|i| i.function == "main.leaf"),
            "{toolchain:?}: {listed:?}"
        );
        assert!(
            listed.iter().any(|i| i.line == 18 && i.file == "spin.go"),
            "main.mix inlined at line 18"
        );
        for binary in ["spin", "spin-stripped"] {
            let bytes = std::fs::read(dir.path().join(binary)).expect("read");
            let (table, data) = table(&bytes);
            for instruction in &listed {
                let found = table.locate(data, instruction.addr).expect("located");
                let want = (plain(&instruction.function), instruction.line);
                assert_eq!(
                    (plain(&found.function), found.line.unwrap_or(0)),
                    want,
                    "{toolchain:?} {binary} {instruction:?}"
                );
                let file = found.file.unwrap_or_default();
                // objdump prints the file's last element (`<autogenerated>` has no other).
                let last = file.rsplit('/').next().unwrap_or_default();
                assert_eq!(last, instruction.file, "{file} for {instruction:?}");
            }
        }
    }
}

#[test]
/// The functions inlined at an address are those Go's runtime names there, innermost first,
/// with its lines, in the program built normally and stripped: a program printed, with
/// `runtime.CallersFrames`, its frames through two inlined calls (`main.inner` in
/// `main.middle` in `main.outer`), and each frame it printed is named alike from its tables;
/// without the trees' base the physical function alone is named.
fn inlined_calls_are_named_as_the_go_runtime_names_them() {
    let Some(built) = built("inline", go::INLINE_SOURCE) else {
        return;
    };
    for (toolchain, dir) in built {
        for binary in ["inline", "inline-stripped"] {
            let path = dir.path().join(binary);
            let out = std::process::Command::new(&path).output().expect("run the program");
            assert!(out.status.success(), "{path:?}: {out:?}");
            // `PC function file line`, innermost first.
            let printed: Vec<(u64, String, u32)> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(|line| {
                    let words: Vec<&str> = line.split_whitespace().collect();
                    let pc = u64::from_str_radix(words[0].trim_start_matches("0x"), 16).expect("pc");
                    (pc, words[1].to_owned(), words[3].parse().expect("line"))
                })
                .collect();
            let names: Vec<&str> = printed.iter().map(|(_, n, _)| n.as_str()).collect();
            let inner = names.iter().position(|&n| n == "main.inner").expect("main.inner");
            assert_eq!(
                names[inner..inner + 3],
                ["main.inner", "main.middle", "main.outer"],
                "{toolchain:?}: {names:?}"
            );
            let bytes = std::fs::read(&path).expect("read");
            let (table, data) = table(&bytes);
            let (image, gofunc) = trees(&bytes, &table);
            let named = |pc: u64, gofunc: Option<u64>| -> Vec<(String, u32, bool)> {
                let calls: Vec<Call> = table.calls(data, &image, gofunc, pc).expect("a function");
                calls
                    .into_iter()
                    .map(|c| (c.function, c.line.unwrap_or(0), c.inlined))
                    .collect()
            };
            // The runtime gives the chain at the innermost inlined call's PC.
            let chain: Vec<(String, u32, bool)> = printed[inner..inner + 3]
                .iter()
                .enumerate()
                .map(|(i, (_, name, line))| (name.clone(), *line, i < 2))
                .collect();
            let at = printed[inner].0;
            assert_eq!(named(at, Some(gofunc)), chain, "{toolchain:?} {binary} at {at:#x}");
            let (outer, outer_line) = (&printed[inner + 2].1, printed[inner + 2].2);
            assert_eq!(named(at, None).len(), 1);
            assert_eq!(&named(at, None)[0].0, outer);
            // Frames with nothing inlined at their PC: one function each, as printed.
            for (pc, name, line) in printed
                .iter()
                .filter(|(_, n, _)| n.starts_with("main.") && !n.contains("inner"))
            {
                if name == outer || name == "main.middle" {
                    continue;
                }
                assert_eq!(
                    named(*pc, Some(gofunc)),
                    [(name.clone(), *line, false)],
                    "{binary} {name}"
                );
            }
            assert!(outer_line > 0);
        }
    }
}

/// A table whose bytes read as zero past `len` of them, to count reads out of it.
struct Strict<'a>(&'a [u8]);

impl Bytes for Strict<'_> {
    fn read_at(&self, at: u64, buf: &mut [u8]) -> bool {
        assert!(
            at.saturating_add(buf.len() as u64) <= self.0.len() as u64,
            "read out of the table"
        );
        self.0.read_at(at, buf)
    }
}

#[test]
/// Tables cut short and mangled at random (header, function table, records, pc-value tables,
/// inline trees) give an error or fewer names, never a panic, a read out of the table or a
/// hang.
fn mangled_tables_never_panic_or_read_out_of_bounds() {
    let Some(built) = programs() else { return };
    let (_, dir) = &built[0];
    let bytes = std::fs::read(dir.path().join("spin-stripped")).expect("read");
    let (good, data) = table(&bytes);
    let text = good.text(data).expect("text");
    let (image, gofunc) = trees(&bytes, &good);
    // The inline trees mangled too (`.rodata`, read by address within its bounds).
    let mut rodata = bytes.clone();
    let part = image.part;
    let mut rng = Rng::new(34);
    for cut in (0..96).chain([data.len() / 2, data.len() - 1]) {
        let _ = Table::parse(&Strict(&data[..cut]), cut as u64);
    }
    for round in 0..300 {
        let mut mangled = data.to_vec();
        // The header in a third of the rounds, anywhere in the others.
        let span = if round % 3 == 0 { 96 } else { mangled.len() };
        for _ in 0..1 + rng.below(64) {
            let at = rng.below(span);
            mangled[at] = rng.next_u64() as u8;
        }
        let size = mangled.len() as u64;
        let Ok(mut table) = Table::parse(&Strict(&mangled), size) else {
            continue;
        };
        table.relocate(good.text_start());
        let _ = table.text(&Strict(&mangled));
        for _ in 0..1 + rng.below(64) {
            let at = part.offset as usize + rng.below(part.size as usize);
            rodata[at] = rng.next_u64() as u8;
        }
        let strict = Strict(&rodata[..(part.offset + part.size) as usize]);
        let image = Loaded { file: &strict, part };
        for _ in 0..50 {
            let pc = text.start + rng.below((text.end - text.start) as usize) as u64;
            if let Some(found) = table.locate(&Strict(&mangled), pc) {
                assert!(found.function.len() <= crate::names::MAX_NAME_BYTES);
            }
            if let Some(calls) = table.calls(&Strict(&mangled), &image, Some(gofunc), pc) {
                assert!(calls.len() <= super::MAX_INLINE_DEPTH + 1);
                assert!(calls.iter().all(|c| c.function.len() <= crate::names::MAX_NAME_BYTES));
                assert_eq!(calls.iter().filter(|c| !c.inlined).count(), 1, "one physical function");
            }
        }
    }
}

#[test]
/// Only the three Go 1.16+ magics are tables; 1.2's, and anything else, are refused by value.
fn other_magics_are_refused() {
    let mut header = [0u8; 128];
    header[..8].copy_from_slice(&[0xfb, 0xff, 0xff, 0xff, 0, 0, 1, 8]);
    assert_eq!(
        Table::parse(&header[..], 128),
        Err(super::GoTableError::Magic { magic: 0xffff_fffb })
    );
    header[0] = 0xf1;
    header[7] = 3;
    assert!(matches!(
        Table::parse(&header[..], 128),
        Err(super::GoTableError::Header { .. })
    ));
}
