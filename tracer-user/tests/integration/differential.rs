//! Differential test against simple-frame-rs 0.3.0, an independent SFrame reader: for every
//! `.sframe` of the fixture corpus (`fixtures/bin`, walked for ELF files), of programs compiled
//! here (so the test is never vacuous), and of the oracle's own binutils test cases (when its
//! source is on disk), compare function starts and sizes and, row by row, start, CFA base and
//! offset, RA and FP rules, and lookups.
//!
//! Known differences of the oracle, each handled explicitly:
//! 1. It ignores `auxhdr_len` when locating the sub-sections: sections with an auxiliary
//!    header are not compared (binutils writes none).
//! 2. Its MASK lookup uses the absolute PC modulo rep_size and takes the first row whose start
//!    is <= that: MASK rows are compared by iteration only, never through its `find_fre`.
//! 3. Its register words are raw: s390x v2 register-held values come back as `(n << 1) | 1`,
//!    RA padding as `Some(0)`, and amd64 RA as the header's fixed offset. We map our rules to
//!    those encodings before comparing.
//! 4. FLEX: it reads control words sign-extended (a 1-byte control word >= 0x80 yields a
//!    negative register number) and returns the s390x CFA offset undecoded; we mask the
//!    register number to the word width and apply s390x's `offset * 8 + 160` to its value.
//! 5. A v3 DEFAULT function without rows: it has no rows (and its lookup finds none), we have
//!    one synthetic outermost row (see `sframe/mod.rs`).
//! 6. Functions are compared by on-disk index (`Function::index`): we sort by address, it
//!    keeps descriptor order. Lookups are compared only when functions do not overlap.

use std::path::{Path, PathBuf};

use fallible_iterator::FallibleIterator as _;
use simple_frame_rs::{self as oracle, SFrameFRE, SFrameSection, v3::SFrameFlexRecoveryRule};
use tracer_unwind::elf;
use tracer_unwind::sframe::{Abi, FdeType, PcType, Reg, Row, Rule, Section};

/// One oracle row, reduced to what is compared.
struct ORow {
    start: u32,
    base_reg: u8,
    words: usize,
    word_size: u32,
    cfa: Option<i32>,
    ra: Option<i32>,
    fp: Option<i32>,
    flex: Option<oracle::v3::SFrameFlexRecoveryRules>,
}

struct OFn {
    start: u64,
    size: u32,
    rows: Vec<ORow>,
}

fn orow(fre: SFrameFRE, start: u32, words: usize, word_size: u32, sec: &SFrameSection<'_>) -> ORow {
    let flex = match &fre {
        SFrameFRE::V3(f) => f.get_flex_recovery_rules(),
        _ => None,
    };
    ORow {
        start,
        base_reg: fre.get_cfa_base_reg_id(),
        words,
        word_size,
        cfa: fre.get_cfa_offset(sec).expect("oracle cfa"),
        ra: fre.get_ra_offset(sec).expect("oracle ra"),
        fp: fre.get_fp_offset(sec).expect("oracle fp"),
        flex,
    }
}

/// Every function of the oracle's view, in descriptor order.
fn oracle_functions(sec: &SFrameSection<'_>) -> Vec<OFn> {
    macro_rules! walk {
        ($s:expr, $v:ident, $variant:ident) => {
            (0..$s.get_fde_count())
                .map(|i| {
                    let fde = $s.get_fde(i).expect("oracle fde").expect("in range");
                    let fres: Vec<oracle::$v::SFrameFRE> = fde.iter_fre($s).collect().expect("oracle rows");
                    let rows = fres
                        .into_iter()
                        .map(|f| {
                            let size = match f.stack_offsets.first() {
                                Some(oracle::$v::SFrameFREStackOffset::I16(_)) => 2,
                                Some(oracle::$v::SFrameFREStackOffset::I32(_)) => 4,
                                _ => 1,
                            };
                            let (start, words) = (f.start_address.get(), f.stack_offsets.len());
                            orow(SFrameFRE::$variant(f), start, words, size, sec)
                        })
                        .collect();
                    OFn {
                        start: fde.get_pc($s),
                        size: fde.func_size,
                        rows,
                    }
                })
                .collect()
        };
    }
    match sec {
        SFrameSection::V1(s) => walk!(s, v1, V1),
        SFrameSection::V2(s) => walk!(s, v2, V2),
        SFrameSection::V3(s) => walk!(s, v3, V3),
    }
}

fn dwarf(abi: Abi, reg: Reg) -> i32 {
    match (abi, reg) {
        (_, Reg::Dwarf(n)) => i32::from(n),
        (Abi::Amd64Le, Reg::Sp) => 7,
        (Abi::Amd64Le, Reg::Fp) => 6,
        (Abi::S390xBe, Reg::Sp) => 15,
        (Abi::S390xBe, Reg::Fp) => 11,
        (_, Reg::Sp) => 31,
        (_, Reg::Fp) => 29,
    }
}

/// Our DEFAULT rule in the oracle's raw encoding (difference 3); `None` = not tracked.
fn raw(abi: Abi, rule: Rule) -> Option<i32> {
    match rule {
        Rule::Unchanged => None,
        Rule::AtCfa(o) => Some(o as i32),
        Rule::InRegister(r) => Some((dwarf(abi, r) << 1) | 1),
        other => panic!("DEFAULT rows have no {other:?}"),
    }
}

/// The oracle's register number as if its control word had been read unsigned (difference 4).
fn unsigned_reg(regnum: i32, word_size: u32) -> i32 {
    if word_size >= 4 {
        regnum
    } else {
        regnum & ((1 << (8 * word_size - 3)) - 1)
    }
}

/// Our FLEX rule against the oracle's (difference 4: register masked to the word width).
fn same_flex(abi: Abi, ours: Rule, theirs: Option<SFrameFlexRecoveryRule>, word_size: u32) -> bool {
    let Some(t) = theirs.filter(|t| !t.control.is_padding()) else {
        return ours == Rule::Unchanged;
    };
    let reg = unsigned_reg(t.control.regnum(), word_size);
    let off = i64::from(t.offset);
    match (t.control.reg_p(), t.control.deref_p(), ours) {
        (false, true, Rule::AtCfa(o)) | (false, false, Rule::ValCfa(o)) => o == off,
        (true, false, Rule::InRegister(r)) => off == 0 && dwarf(abi, r) == reg,
        (true, d, Rule::Expr { base, offset, deref }) => d == deref && offset == off && dwarf(abi, base) == reg,
        _ => false,
    }
}

fn compare_row(what: &str, s: &Section<'_>, fde_type: FdeType, row: &Row, o: &ORow) {
    let h = s.header();
    let abi = h.abi;
    assert_eq!(row.start, o.start, "{what}: start");
    if o.words == 0 {
        assert!(row.ra_undefined, "{what}: no words = RA undefined");
        return;
    }
    assert!(!row.ra_undefined, "{what}");
    if fde_type == FdeType::Flex {
        let flex = o.flex.as_ref().unwrap_or_else(|| panic!("{what}: oracle FLEX rules"));
        let cfa = &flex.cfa;
        let reg = unsigned_reg(cfa.control.regnum(), o.word_size);
        let off = if abi == Abi::S390xBe {
            i64::from(cfa.offset) * 8 + 160
        } else {
            i64::from(cfa.offset)
        };
        assert_eq!(
            (dwarf(abi, row.cfa.base), row.cfa.offset, row.cfa.deref),
            (reg, off, cfa.control.deref_p()),
            "{what}: FLEX CFA"
        );
        assert!(
            same_flex(abi, row.ra, flex.ra, o.word_size),
            "{what}: FLEX RA {:?} vs {:?}",
            row.ra,
            flex.ra
        );
        assert!(
            same_flex(abi, row.fp, flex.fp, o.word_size),
            "{what}: FLEX FP {:?} vs {:?}",
            row.fp,
            flex.fp
        );
        return;
    }
    assert_eq!(o.base_reg, u8::from(row.cfa.base == Reg::Sp), "{what}: CFA base");
    assert_eq!(o.cfa, Some(row.cfa.offset as i32), "{what}: CFA offset");
    let ra = match (h.fixed_ra_offset, raw(abi, row.ra)) {
        (0, None) if o.ra == Some(0) => Some(0), // s390x RA padding
        (0, ra) => ra,
        (fixed, _) => Some(i32::from(fixed)),
    };
    assert_eq!(o.ra, ra, "{what}: RA {:?}", row.ra);
    let fp = if h.version == 1 && h.fixed_fp_offset != 0 {
        Some(i32::from(h.fixed_fp_offset))
    } else {
        raw(abi, row.fp)
    };
    assert_eq!(o.fp, fp, "{what}: FP {:?}", row.fp);
}

/// Compare one section; false when it is excluded (difference 1).
fn compare(name: &str, data: &[u8], vaddr: u64) -> bool {
    let s = Section::parse(data, vaddr).unwrap_or_else(|e| panic!("{name}: {e}"));
    if s.header().auxhdr_len != 0 {
        return false;
    }
    let sec = SFrameSection::from(data, vaddr).unwrap_or_else(|e| panic!("{name}: oracle: {e}"));
    let theirs = oracle_functions(&sec);
    assert_eq!(s.functions().len(), theirs.len(), "{name}: function count");
    for f in s.functions() {
        let o = &theirs[f.index as usize];
        let what = format!("{name} function {} at {:#x}", f.index, f.start);
        assert_eq!((f.start, f.size), (o.start, o.size), "{what}");
        let rows = s.rows(f).unwrap_or_else(|e| panic!("{what}: {e}"));
        if s.header().version >= 3 && f.fde_type == FdeType::Default && f.num_fres == 0 {
            assert!(
                o.rows.is_empty() && rows.len() == 1 && rows[0].ra_undefined,
                "{what}: difference 5"
            );
            continue;
        }
        assert_eq!(rows.len(), o.rows.len(), "{what}: row count");
        for (i, (row, orow)) in rows.iter().zip(&o.rows).enumerate() {
            compare_row(&format!("{what} row {i}"), &s, f.fde_type, row, orow);
        }
    }
    compare_lookups(name, &s, &sec);
    true
}

/// Function and row lookups agree where both are well defined (differences 2 and 6).
fn compare_lookups(name: &str, s: &Section<'_>, sec: &SFrameSection<'_>) {
    if s.functions().windows(2).any(|w| w[0].end() > w[1].start) {
        return;
    }
    for f in s.functions().iter().filter(|f| f.size > 0) {
        let theirs = sec
            .find_fde(f.start)
            .expect("oracle lookup")
            .unwrap_or_else(|| panic!("{name}: oracle finds {:#x}", f.start));
        assert_eq!(s.find_function(f.start).map(|g| g.start), Some(f.start), "{name}");
        let synthetic = s.header().version >= 3 && f.fde_type == FdeType::Default && f.num_fres == 0;
        if f.pc_type == PcType::Mask || synthetic {
            continue;
        }
        for row in s.rows(f).expect("rows") {
            let pc = f.start + u64::from(row.start);
            let mine = s.find_row(pc).expect("lookup").map(|(_, r)| r.start);
            let their = theirs.find_fre(sec, pc).expect("oracle row").map(|r| start_of(&r));
            assert_eq!(mine, their, "{name}: row at {pc:#x} of {:#x}", f.start);
        }
    }
}

fn start_of(fre: &SFrameFRE) -> u32 {
    match fre {
        SFrameFRE::V1(f) => f.start_address.get(),
        SFrameFRE::V2(f) => f.start_address.get(),
        SFrameFRE::V3(f) => f.start_address.get(),
    }
}

/// ELF files under `dir`, recursively (anything starting with the ELF magic).
fn elf_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            elf_files(&path, out);
        } else if std::fs::read(&path).is_ok_and(|b| b.starts_with(b"\x7fELF")) {
            out.push(path);
        }
    }
}

fn compare_file(path: &Path) -> bool {
    let bytes = std::fs::read(path).expect("read");
    let name = path.display().to_string();
    match elf::find_sframe(&bytes).unwrap_or_else(|e| panic!("{name}: {e}")) {
        Some(found) => compare(&name, &found.data, found.vaddr),
        None => false,
    }
}

/// Fixture corpus, compiled programs and the oracle's test cases all agree with simple-frame-rs.
#[test]
fn agrees_with_simple_frame_rs() {
    let mut compared = 0usize;
    let dir = tempfile::tempdir().expect("tempdir");
    let compiled = [
        crate::reader::compile(dir.path(), "prog", crate::reader::PROGRAM, &[]),
        crate::reader::compile(
            dir.path(),
            "prog-fp",
            crate::reader::PROGRAM,
            &["-fno-omit-frame-pointer"],
        ),
        crate::reader::compile(dir.path(), "libprog.so", crate::reader::PROGRAM, &["-shared", "-fPIC"]),
        crate::reader::compile(dir.path(), "prog.o", crate::reader::PROGRAM, &["-c"]),
    ];
    for path in &compiled {
        assert!(compare_file(path), "{} compared", path.display());
        compared += 1;
    }
    let mut corpus = Vec::new();
    elf_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/bin"),
        &mut corpus,
    );
    corpus.sort();
    let corpus_compared = corpus.iter().filter(|p| compare_file(p)).count();
    compared += corpus_compared + oracle_testcases();
    eprintln!("differential: {compared} sections compared ({corpus_compared} from fixtures/bin)");
    assert!(compared >= compiled.len());
}

/// simple-frame-rs ships binutils test cases as JSON (section bytes + address); compare them
/// too when its source is in the cargo registry. Returns how many were compared.
fn oracle_testcases() -> usize {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let Some(registry) = home.map(|h| h.join("registry/src")) else {
        return 0;
    };
    let dirs = std::fs::read_dir(registry).into_iter().flatten().flatten();
    let Some(cases) = dirs
        .map(|d| d.path().join("simple-frame-rs-0.3.0/testcases"))
        .find(|p| p.is_dir())
    else {
        eprintln!("differential: simple-frame-rs test cases not on disk; skipped that part");
        return 0;
    };
    let mut n = 0;
    for entry in std::fs::read_dir(&cases).expect("read testcases").flatten() {
        let case: serde_json::Value =
            serde_json::from_slice(&std::fs::read(entry.path()).expect("read")).expect("json");
        let data: Vec<u8> = case["content"]
            .as_array()
            .expect("content")
            .iter()
            .map(|b| b.as_u64().expect("byte") as u8)
            .collect();
        let vaddr = case["section_base"].as_u64().expect("section_base");
        if !data.is_empty() && compare(&entry.path().display().to_string(), &data, vaddr) {
            n += 1;
        }
    }
    n
}
