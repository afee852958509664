//! Golden tests against GNU readelf: for every fixture binary with a `NAME.readelf` next to it
//! (`readelf --sframe NAME` of the binutils that wrote it), `sframe-trace dump --json NAME` must
//! describe the same functions and rows. Covers the checked-in corpus (fixtures/bin: binutils
//! 2.40, 2.44 and the sid snapshot; x86-64, aarch64, s390x), a fresh build with the host's own
//! toolchain (fixtures/build-v1-local.sh), and an external corpus made by fixtures/conformance.sh
//! (`SFRAME_TRACE_CONFORMANCE_DIR`).
//!
//! The readelf text parser (`golden/readelf.rs`) shares nothing with the crate's SFrame reader:
//! it is the independent side of the comparison. Both sides are normalised to one model
//! (`readelf::Func`) and compared as sorted lists, so functions with equal starts may come in any
//! order. Relocatable objects written as v1/v2 are compared relative to each function's start
//! (readelf 2.40/2.44 print them unrelocated). What readelf cannot show is not compared: FRE
//! types, data-word sizes, `rep_size` (only checked non-zero for v2+ PCMASK functions), the CFA of
//! "RA undefined" rows, and whether a FLEX `c+N` rule dereferences (readelf prints both alike).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::Value;

mod dump;
mod readelf;

use dump::{json_func, json_get, json_i64, json_u64};
use readelf::{Func, Loc, Row, Val, parse_readelf};

/// The checked-in corpus has 45 binaries; fewer means the walk or the fixtures broke.
const MIN_CHECKED_IN: usize = 40;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

/// What the ELF header says: the SFrame ABI byte it implies (from `e_ident[EI_DATA]` and
/// `e_machine`) and whether the file is relocatable (`e_type` ET_REL).
fn elf_kind(bytes: &[u8]) -> Result<(u64, bool), String> {
    if bytes.len() < 20 || &bytes[..4] != b"\x7fELF" {
        return Err("not an ELF file".to_owned());
    }
    let big = bytes[5] == 2;
    let half = |at: usize| {
        let b = [bytes[at], bytes[at + 1]];
        if big {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        }
    };
    let (e_type, machine) = (half(16), half(18));
    let abi = match (machine, big) {
        (183, true) => 1,
        (183, false) => 2,
        (62, false) => 3,
        (22, true) => 4,
        _ => {
            return Err(format!("no SFrame ABI for e_machine {machine} (big-endian: {big})"));
        }
    };
    Ok((abi, e_type == 1))
}

/// Make a function's addresses relative to its own start (see `compare` for when).
fn relative(mut f: Func) -> Func {
    for row in &mut f.rows {
        if !f.mask {
            let (Row::RaUndefined { start } | Row::Rules { start, .. }) = row;
            *start = start.wrapping_sub(f.start);
        }
    }
    f.start = 0;
    f
}

/// `sp`/`fp` for the ABI's stack and frame pointer, however a side spells them.
fn canonical_reg(abi: u64, base: &str) -> String {
    let (sp, fp) = match abi {
        1 | 2 => ("r31", "r29"),
        3 => ("r7", "r6"),
        4 => ("r15", "r11"),
        _ => ("", ""),
    };
    match base {
        b if b == sp => "sp".to_owned(),
        b if b == fp => "fp".to_owned(),
        b => b.to_owned(),
    }
}

fn canonical_loc(abi: u64, loc: Loc) -> Loc {
    Loc {
        base: canonical_reg(abi, &loc.base),
        ..loc
    }
}

fn canonical_func(abi: u64, mut f: Func) -> Func {
    for row in &mut f.rows {
        if let Row::Rules { cfa, fp, ra, .. } = row {
            *cfa = canonical_loc(abi, cfa.clone());
            for v in [fp, ra] {
                if let Val::Reg(loc) = v {
                    *loc = canonical_loc(abi, loc.clone());
                }
            }
        }
    }
    f
}

/// Run `sframe-trace dump --json` on `binary` and compare it with the readelf listing at
/// `readelf`. Returns the number of functions compared, or every difference found.
pub(crate) fn compare(binary: &Path, readelf: &Path) -> Result<usize, String> {
    let text = std::fs::read_to_string(readelf).map_err(|e| format!("{}: {e}", readelf.display()))?;
    let listing = parse_readelf(&text)?;
    let (abi, relocatable) = elf_kind(&std::fs::read(binary).map_err(|e| format!("{}: {e}", binary.display()))?)?;
    let out = Command::new(env!("CARGO_BIN_EXE_sframe-trace"))
        .args(["dump", "--json"])
        .arg(binary)
        .output()
        .map_err(|e| format!("running sframe-trace: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "sframe-trace dump --json exited {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let dump: Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("JSON: {e}"))?;

    let mut diffs = Vec::new();
    let mut check = |what: &str, ours: i64, theirs: Option<i64>| {
        if let Some(t) = theirs.filter(|t| *t != ours) {
            diffs.push(format!("{what}: dump {ours}, readelf {t}"));
        }
    };
    check("version", json_i64(&dump, "version")?, Some(listing.version.into()));
    check("flags", json_i64(&dump, "flags")?, Some(listing.flags.into()));
    check("abi (from the ELF header)", json_i64(&dump, "abi")?, Some(abi as i64));
    check(
        "fixed_fp_offset",
        json_i64(&dump, "fixed_fp_offset")?,
        listing.fixed_fp_offset.map(i64::from),
    );
    check(
        "fixed_ra_offset",
        json_i64(&dump, "fixed_ra_offset")?,
        listing.fixed_ra_offset.map(i64::from),
    );
    if listing.functions.len() != listing.num_fdes
        || listing.functions.iter().map(|f| f.rows.len()).sum::<usize>() != listing.num_fres
    {
        diffs.push(format!(
            "readelf parser: header says {} FDEs / {} FREs, parsed otherwise",
            listing.num_fdes, listing.num_fres
        ));
    }

    let json_funcs = json_get(&dump, "functions")?
        .as_array()
        .ok_or("JSON: functions is not an array")?;
    let starts: Vec<u64> = json_funcs
        .iter()
        .map(|f| json_u64(f, "start"))
        .collect::<Result<_, _>>()?;
    if !starts.is_sorted() {
        diffs.push("dump: functions are not sorted by start".to_owned());
    }
    let version = json_i64(&dump, "version")?;
    let mut ours: Vec<Func> = json_funcs
        .iter()
        .map(|f| json_func(f, version).map(|f| canonical_func(abi, f)))
        .collect::<Result<_, _>>()?;
    let mut theirs: Vec<Func> = listing.functions.into_iter().map(|f| canonical_func(abi, f)).collect();
    // readelf 2.40 and 2.44 do not apply `.rela.sframe`: in a relocatable object they print the
    // unrelocated start field (pc = 0 for every function), where the dump applies relocations
    // (as the 2.47.50 snapshot's readelf does). Compare those objects relative to each start.
    if relocatable && listing.version <= 2 {
        ours = ours.into_iter().map(relative).collect();
        theirs = theirs.into_iter().map(relative).collect();
    }
    ours.sort();
    theirs.sort();
    if ours.len() != theirs.len() {
        diffs.push(format!("function count: dump {}, readelf {}", ours.len(), theirs.len()));
    }
    for (o, t) in ours.iter().zip(&theirs).filter(|(o, t)| o != t) {
        let row = o.rows.iter().zip(&t.rows).find(|(a, b)| a != b);
        diffs.push(format!(
            "function at {:#x} (size {}) differs:\n  dump:    {:?}\n  readelf: {:?}{}",
            t.start,
            t.size,
            Func {
                rows: Vec::new(),
                ..o.clone()
            },
            Func {
                rows: Vec::new(),
                ..t.clone()
            },
            match row {
                Some((a, b)) => format!("\n  first differing row:\n    dump:    {a:?}\n    readelf: {b:?}"),
                None if o.rows.len() != t.rows.len() => {
                    format!("\n  rows: dump {}, readelf {}", o.rows.len(), t.rows.len())
                }
                None => "\n  rows agree".to_owned(),
            }
        ));
        if diffs.len() > 10 {
            break;
        }
    }
    if diffs.is_empty() {
        Ok(theirs.len())
    } else {
        Err(diffs.join("\n"))
    }
}

/// Every `NAME` under `dir` (recursively) that has a `NAME.readelf` next to it.
pub(crate) fn listed_binaries(dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for path in entries.flatten().map(|e| e.path()) {
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "readelf") {
                let binary = path.with_extension("");
                if binary.is_file() {
                    found.push((binary, path));
                }
            }
        }
    }
    found.sort();
    found
}

/// Compare every listed binary under `dir`; panics with all failures. Returns how many matched.
pub(crate) fn compare_tree(dir: &Path) -> usize {
    let pairs = listed_binaries(dir);
    let failures: Vec<String> = pairs
        .iter()
        .filter_map(|(bin, listing)| compare(bin, listing).err().map(|e| format!("{}:\n{e}", bin.display())))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} differ from readelf:\n\n{}",
        failures.len(),
        pairs.len(),
        failures.join("\n\n")
    );
    pairs.len()
}

/// Every checked-in fixture's dump matches the readelf of the binutils that wrote it.
#[test]
fn checked_in_fixtures_match_readelf() {
    let n = compare_tree(&fixtures_dir().join("bin"));
    assert!(
        n >= MIN_CHECKED_IN,
        "only {n} fixtures compared, expected at least {MIN_CHECKED_IN}"
    );
}

/// A fresh build with the host's gcc and binutils (fixtures/build-v1-local.sh) also matches:
/// the host toolchain path works, not only the checked-in files.
#[test]
fn host_toolchain_build_matches_readelf() {
    let out = tempfile::tempdir().expect("tempdir");
    let build = Command::new(fixtures_dir().join("build-v1-local.sh"))
        .arg(out.path())
        .output()
        .expect("run fixtures/build-v1-local.sh (needs bash, gcc, binutils with --gsframe)");
    assert!(
        build.status.success(),
        "fixtures/build-v1-local.sh failed ({}):\n{}",
        build.status,
        String::from_utf8_lossy(&build.stderr)
    );
    let n = compare_tree(out.path());
    assert!(n >= 7, "only {n} host-built binaries compared");
}

/// The external corpus of fixtures/conformance.sh (real C code, three toolchains) matches.
/// Run by `SFRAME_TRACE_CONFORMANCE_DIR=... cargo test -- --ignored conformance`.
#[test]
#[ignore = "needs SFRAME_TRACE_CONFORMANCE_DIR from fixtures/conformance.sh"]
fn conformance_corpus_matches_readelf() {
    let dir = std::env::var_os("SFRAME_TRACE_CONFORMANCE_DIR")
        .expect("set SFRAME_TRACE_CONFORMANCE_DIR to the output of fixtures/conformance.sh");
    let n = compare_tree(Path::new(&dir));
    assert!(
        n >= 1,
        "no binaries with .readelf listings under {}",
        Path::new(&dir).display()
    );
}

/// The readelf parser reads every checked-in listing consistently with its own header, and the
/// corpus covers each feature the fixtures exist for (so the golden test cannot go vacuous).
#[test]
fn readelf_parser_covers_the_checked_in_corpus() {
    let pairs = listed_binaries(&fixtures_dir().join("bin"));
    assert!(pairs.len() >= MIN_CHECKED_IN, "only {} listings", pairs.len());
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut versions = BTreeMap::new();
    for (bin, path) in &pairs {
        let l = parse_readelf(&std::fs::read_to_string(path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(l.functions.len(), l.num_fdes, "{}", path.display());
        assert_eq!(
            l.functions.iter().map(|f| f.rows.len()).sum::<usize>(),
            l.num_fres,
            "{}",
            path.display()
        );
        *versions.entry(l.version).or_insert(0) += 1;
        let (abi, _) = elf_kind(&std::fs::read(bin).unwrap()).unwrap();
        *seen
            .entry(if abi == 4 {
                "big-endian (s390x)"
            } else {
                "little-endian"
            })
            .or_default() += 1;
        for f in &l.functions {
            let mut mark = |cond: bool, what| {
                if cond {
                    *seen.entry(what).or_default() += 1;
                }
            };
            mark(f.mask, "PCMASK");
            mark(f.flex, "FLEX");
            mark(f.signal, "SIGNAL");
            mark(f.key_b, "key B");
            mark(f.size > 0xffff, "function > 64 KiB");
            for r in &f.rows {
                mark(matches!(r, Row::RaUndefined { .. }), "RA undefined");
                if let Row::Rules {
                    cfa,
                    fp,
                    ra,
                    mangled_ra,
                    ..
                } = r
                {
                    mark(*mangled_ra, "mangled RA");
                    mark(cfa.deref, "CFA dereference");
                    mark(cfa.base.starts_with('r'), "CFA on another register");
                    mark(cfa.offset > 0xffff, "CFA offset > 16 bits");
                    mark(matches!(fp, Val::Reg(_)) || matches!(ra, Val::Reg(_)), "register rule");
                    mark(matches!(ra, Val::Cfa(_)), "tracked RA");
                }
            }
        }
    }
    for want in [
        "PCMASK",
        "FLEX",
        "SIGNAL",
        "key B",
        "function > 64 KiB",
        "RA undefined",
        "mangled RA",
        "CFA dereference",
        "CFA on another register",
        "CFA offset > 16 bits",
        "register rule",
        "tracked RA",
        "big-endian (s390x)",
    ] {
        assert!(
            seen.contains_key(want),
            "no checked-in fixture exercises {want}: {seen:?}"
        );
    }
    assert_eq!(versions.keys().copied().collect::<Vec<_>>(), [1, 2, 3], "{versions:?}");
}
