//! `check` and the CFI reader against programs compiled here by the host gcc with
//! `-Wa,--gsframe` (SFrame v1 from binutils 2.40, plus gcc's own `.eh_frame`), against corrupted
//! copies of them, against `readelf --debug-dump=frames-interp` as an independent oracle for the
//! CFI reader, and over every FDE of this machine's libc.

mod readelf;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use object::{Object as _, ObjectSection as _};
use tracer_unwind::check::{self, FindingKind, Report, reason};
use tracer_unwind::{
    cfi::{CfiCfa, CfiSource, CfiTable},
    sframe::{Abi, FreType, PcType, Reg, Row, Rule, Section},
};

use crate::support::run;

/// Leaf and non-leaf functions, a VLA and an over-aligned local (both force a frame pointer),
/// a 70 KB frame, varargs, a jump table, setjmp/longjmp and a noreturn call.
const PROGRAM: &str = r#"
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

__attribute__((noinline)) long fib(long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__attribute__((noinline)) long vla(int n) {
    volatile long a[n];
    for (int i = 0; i < n; i++) a[i] = i * fib(i % 5);
    long s = 0;
    for (int i = 0; i < n; i++) s += a[i];
    return s;
}
__attribute__((noinline)) long aligned(int k) {
    _Alignas(64) volatile char b[128];
    memset((char *)b, k, sizeof b);
    return b[k & 127] + fib(k & 3);
}
__attribute__((noinline)) long sum(int n, ...) {
    va_list ap;
    va_start(ap, n);
    long s = 0;
    for (int i = 0; i < n; i++) s += va_arg(ap, long);
    va_end(ap);
    return s;
}
__attribute__((noinline)) long big(int k) {
    volatile char buf[70000];
    memset((char *)buf, k, sizeof buf);
    return buf[k] + buf[sizeof buf - 1 - k];
}
__attribute__((noinline)) long many(long a, long b, long c, long d, long e, long f) {
    long x = a * b, y = c * d, z = e * f;
    for (int i = 0; i < a; i++) { x += fib(i) * y; y ^= z + fib(b % 7); z += x >> 3; }
    return x + y + z;
}
__attribute__((noinline)) int dispatch(int op, int x) {
    switch (op) {
    case 0: return x + 1; case 1: return x * 3; case 2: return x - 7; case 3: return x ^ 0x55;
    case 4: return x << 2; case 5: return (int)fib(x & 7); default: return -x;
    }
}
static jmp_buf env;
__attribute__((noinline, noreturn)) void bail(int code) { longjmp(env, code); }
__attribute__((noinline)) int guarded(int x) { if (setjmp(env)) return -1; if (x > 100) bail(x); return x; }
int main(int argc, char **argv) {
    (void)argv;
    printf("%ld %ld %ld %ld %ld %ld %d %d\n", fib(argc + 10), vla(argc + 3), aligned(argc),
           sum(3, 1L, 2L, (long)argc), big(argc), many(argc, 2, 3, 4, 5, 6), dispatch(argc % 7, argc),
           guarded(argc * 50));
    return 0;
}
"#;

/// The flag sets every test program is built with (each also gets `-Wa,--gsframe`).
const BUILDS: &[&[&str]] = &[
    &["-O2", "-fomit-frame-pointer"],
    &["-O2", "-fno-omit-frame-pointer"],
    &["-O0"],
    &["-Os"],
    &["-O3", "-funroll-loops"],
    &["-O2", "-fomit-frame-pointer", "-shared", "-fPIC"],
    &["-O2", "-fomit-frame-pointer", "-static"],
];

/// Compiles `PROGRAM` into `dir` with the host gcc and `flags`.
fn compile(dir: &Path, flags: &[&str]) -> PathBuf {
    compile_with("gcc", dir, flags)
}

/// Compiles `PROGRAM` into `dir` with `compiler` and `flags`; panics with its stderr on failure.
fn compile_with(compiler: &str, dir: &Path, flags: &[&str]) -> PathBuf {
    let source = dir.join("program.c");
    if !source.exists() {
        std::fs::write(&source, PROGRAM).expect("write program.c");
    }
    let out = dir.join(format!("{compiler}-program{}", flags.concat()));
    run(Command::new(compiler)
        .args(flags)
        .args(["-Wa,--gsframe", "-o"])
        .arg(&out)
        .arg(&source));
    out
}

/// `objcopy --remove-section` for each name, into a new file.
fn without_sections(input: &Path, names: &[&str]) -> PathBuf {
    let out = input.with_extension(format!("no{}", names.concat().replace('.', "-")));
    let mut cmd = Command::new("objcopy");
    for name in names {
        cmd.args(["--remove-section", name]);
    }
    run(cmd.arg(input).arg(&out));
    out
}

fn check_file(path: &Path) -> Report {
    let bytes = std::fs::read(path).expect("read binary");
    let report = check::check(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    println!("{}: {report}", path.display());
    let skipped: u64 = report.skipped_by_reason.values().sum();
    assert_eq!(
        report.compared + skipped,
        report.rows,
        "{}: every row compared or skipped",
        path.display()
    );
    report
}

fn assert_clean(path: &Path, report: &Report) {
    let findings: Vec<String> = report.findings.iter().map(ToString::to_string).collect();
    assert!(findings.is_empty(), "{}:\n{}", path.display(), findings.join("\n"));
}

fn assert_clean_and_compared(binary: &Path) -> Report {
    let report = check_file(binary);
    assert_clean(binary, &report);
    assert!(
        report.compared > 0 && report.compared * 10 >= report.rows * 8,
        "{}: {report}",
        binary.display()
    );
    let other: u64 = report
        .skipped_by_reason
        .iter()
        .filter(|(r, _)| **r != reason::PLT_EXPRESSION)
        .map(|(_, n)| n)
        .sum();
    assert_eq!(other, 0, "{}: {report}", binary.display());
    report
}

/// gcc's SFrame agrees with gcc's CFI at every row in every build of the program, and most rows
/// are actually compared (only the PLT's PC-mask rows, whose CFI is an expression, are skipped).
#[test]
fn gcc_builds_check_clean() {
    let dir = tempfile::tempdir().expect("tempdir");
    for flags in BUILDS {
        assert_clean_and_compared(&compile(dir.path(), flags));
    }
}

/// The same for aarch64 (SFrame tracks RA and FP per row; leaf RA stays in x30), including
/// pointer authentication, built with the Debian cross gcc.
#[test]
fn aarch64_builds_check_clean() {
    let compiler = "aarch64-linux-gnu-gcc";
    if Command::new(compiler).arg("--version").output().is_err() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{compiler} is needed under CI"
        );
        crate::support::skipped(
            "check::aarch64_builds_check_clean",
            &format!("no {compiler} (apt install gcc-aarch64-linux-gnu)"),
        );
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    for flags in [
        &["-O2"][..],
        &["-O0"],
        &["-O2", "-fno-omit-frame-pointer"],
        &["-O2", "-mbranch-protection=pac-ret"],
    ] {
        let report = assert_clean_and_compared(&compile_with(compiler, dir.path(), flags));
        assert_eq!(report.header.map(|h| h.abi), Some(Abi::Aarch64Le));
    }
}

/// With the CFI only in `.debug_frame` the rows are compared against it; with no CFI at all every
/// row is skipped for that reason and nothing is reported.
#[test]
fn debug_frame_only_and_no_cfi() {
    let dir = tempfile::tempdir().expect("tempdir");
    let binary = compile(dir.path(), &["-O2", "-g", "-fno-asynchronous-unwind-tables"]);
    let debug_only = without_sections(&binary, &[".eh_frame", ".eh_frame_hdr"]);
    let report = check_file(&debug_only);
    assert_clean(&debug_only, &report);
    assert_eq!(report.cfi, [CfiSource::DebugFrame]);
    assert!(report.compared > 0, "{report}");

    let plain = compile(dir.path(), &["-O2"]);
    let no_cfi = without_sections(&plain, &[".eh_frame", ".eh_frame_hdr"]);
    let report = check_file(&no_cfi);
    assert_clean(&no_cfi, &report);
    assert!(report.cfi.is_empty());
    assert_eq!(
        (report.compared, report.skipped_by_reason.get(reason::NO_CFI).copied()),
        (0, Some(report.rows))
    );
}

/// A row of the program's SFrame, found through the parser: its address and the file offset of
/// its data words (with their size).
struct Located {
    address: u64,
    row: Row,
    words: u64,
    word_size: u64,
}

/// The first INC row past a function's start that satisfies `want` and has 1-byte words.
fn find_row(file: &[u8], want: impl Fn(&Row) -> bool) -> Located {
    let obj = object::File::parse(file).expect("ELF");
    let sframe = obj.section_by_name(".sframe").expect(".sframe");
    let (file_offset, _) = sframe.file_range().expect("in file");
    let section = Section::parse(sframe.data().expect("data"), sframe.address()).expect("parse");
    for f in section.functions().iter().filter(|f| f.pc_type == PcType::Inc) {
        for row in section
            .rows(f)
            .expect("rows")
            .into_iter()
            .filter(|r| r.start > 0 && want(r))
        {
            let start_size = match f.fre_type {
                FreType::Addr1 => 1,
                FreType::Addr2 => 2,
                FreType::Addr4 => 4,
            };
            let info_at = usize::try_from(file_offset + u64::from(row.offset) + start_size).unwrap();
            let word_size = 1 << ((file[info_at] >> 5) & 3);
            if word_size == 1 {
                let address = f.start + u64::from(row.start);
                return Located {
                    address,
                    row,
                    words: info_at as u64 + 1,
                    word_size,
                };
            }
        }
    }
    panic!("no matching row");
}

/// Patching one FRE's CFA offset (or FP save slot) in a copy yields exactly one finding, of the
/// matching kind, at that row's address, quoting both rules.
#[test]
fn corrupted_row_is_the_one_finding() {
    let dir = tempfile::tempdir().expect("tempdir");
    let binary = compile(dir.path(), &["-O2", "-fomit-frame-pointer"]);
    let original = std::fs::read(&binary).expect("read");
    fn sp_row(r: &Row) -> bool {
        !r.ra_undefined && r.cfa.base == Reg::Sp && (16..100).contains(&r.cfa.offset)
    }
    fn fp_row(r: &Row) -> bool {
        sp_row(r) && matches!(r.fp, Rule::AtCfa(-100..=-16))
    }
    // (which rows qualify, data word to patch, what to add to it, the finding it must cause)
    let cases = [
        (sp_row as fn(&Row) -> bool, 0, 8, FindingKind::CfaMismatch),
        (fp_row, 1, -8, FindingKind::FpMismatch),
    ];
    for (want, word, delta, kind) in cases {
        let found = find_row(&original, want);
        let at = usize::try_from(found.words + word * found.word_size).unwrap();
        let mut corrupt = original.clone();
        corrupt[at] = corrupt[at].wrapping_add_signed(delta);
        let path = dir.path().join(format!("corrupt-{kind}"));
        std::fs::write(&path, &corrupt).expect("write");
        let report = check_file(&path);
        let got: Vec<_> = report.findings.iter().map(|f| (f.kind, f.address)).collect();
        assert_eq!(got, [(kind, found.address)], "{report}: {:?}", report.findings);
        let message = &report.findings[0].message;
        let (cfa, fp) = (found.row.cfa.offset, found.row.fp);
        let expected = match kind {
            FindingKind::CfaMismatch => (format!("SFrame CFA=rsp+{}", cfa + 8), format!("CFI CFA=rsp+{cfa}")),
            _ => {
                let Rule::AtCfa(slot) = fp else { unreachable!() };
                (
                    format!("FP=*(CFA{})", slot - 8),
                    format!("CFI CFA=rsp+{cfa} FP=*(CFA{slot})"),
                )
            }
        };
        assert!(
            message.contains(&expected.0) && message.contains(&expected.1),
            "{message}"
        );
    }
}

/// Every single-byte change to `.sframe`, `.eh_frame_hdr` or `.eh_frame` gives a report or an
/// error, never a panic; changes to `.sframe` are mostly noticed.
#[test]
fn corrupted_sections_never_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let original = std::fs::read(compile(dir.path(), &["-O2", "-fomit-frame-pointer"])).expect("read");
    let obj = object::File::parse(&*original).expect("ELF");
    let range = |name: &str| {
        let (offset, size) = obj.section_by_name(name).and_then(|s| s.file_range()).expect(name);
        usize::try_from(offset).unwrap()..usize::try_from(offset + size).unwrap()
    };
    let mut noticed = BTreeMap::new();
    for name in [".sframe", ".eh_frame_hdr", ".eh_frame"] {
        let (mut changed, mut reported) = (0, 0);
        for i in range(name) {
            for value in [0x00, 0x80, 0xff, original[i] ^ 0x04] {
                if value == original[i] {
                    continue;
                }
                let mut corrupt = original.clone();
                corrupt[i] = value;
                changed += 1;
                if check::check(&corrupt).is_ok_and(|r| !r.is_clean()) {
                    reported += 1;
                }
            }
        }
        noticed.insert(name, (reported, changed));
    }
    println!("corruptions reported / made: {noticed:?}");
    let (reported, changed) = noticed[".sframe"];
    assert!(reported * 2 > changed, "{noticed:?}");
}

/// The CFI reader gives readelf's rules at every row readelf prints, through each lookup path:
/// `.eh_frame_hdr` search, `.eh_frame` scan, and `.debug_frame`.
#[test]
fn cfi_rules_match_readelf() {
    let dir = tempfile::tempdir().expect("tempdir");
    let binary = compile(dir.path(), &["-O2", "-fno-omit-frame-pointer"]);
    let debug = compile(dir.path(), &["-O2", "-g", "-fno-asynchronous-unwind-tables"]);
    let cases = [
        (binary.clone(), CfiSource::EhFrameHdr),
        (without_sections(&binary, &[".eh_frame_hdr"]), CfiSource::EhFrame),
        (
            without_sections(&debug, &[".eh_frame", ".eh_frame_hdr"]),
            CfiSource::DebugFrame,
        ),
    ];
    for (path, source) in cases {
        let bytes = std::fs::read(&path).expect("read");
        let table = CfiTable::from_elf(&bytes).expect("CFI").expect("some CFI");
        assert_eq!(table.sources(), [source]);
        let text = String::from_utf8(run(Command::new("readelf")
            .arg("--debug-dump=frames-interp")
            .arg(&path)))
        .expect("utf-8");
        let fdes = readelf::parse(&text);
        assert!(fdes.len() > 5, "{}: readelf shows {} FDEs", path.display(), fdes.len());
        let checked = readelf::compare(&table, &fdes);
        println!("{}: {checked} addresses agree with readelf", path.display());
    }
}

/// Every FDE of this machine's libc evaluates at its start, middle and last byte, through the
/// `.eh_frame_hdr` search and through a scan of a copy without it, with the same result; the
/// CFA is register + offset for the vast majority.
#[test]
fn libc_every_fde_evaluates() {
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    if !libc.exists() {
        crate::support::skipped(
            "check::libc_every_fde_evaluates",
            &format!("no {} on this machine", libc.display()),
        );
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let scanned_copy = std::fs::read(without_sections_at(libc, dir.path())).expect("read copy");
    let bytes = std::fs::read(libc).expect("read libc");
    let table = CfiTable::from_elf(&bytes).expect("CFI").expect("some CFI");
    let scanned = CfiTable::from_elf(&scanned_copy).expect("CFI").expect("some CFI");
    assert_eq!(
        (table.sources(), scanned.sources()),
        (vec![CfiSource::EhFrameHdr], vec![CfiSource::EhFrame])
    );
    assert_eq!(scanned.unreadable().count(), 0, "{:?}", scanned.unreadable().next());
    let fdes = table.fdes();
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for fde in &fdes {
        for pc in [fde.start, fde.start + (fde.end - fde.start) / 2, fde.end - 1] {
            let rule = table.rule_at(pc).unwrap_or_else(|e| panic!("{pc:#x}: {e}"));
            let rule = rule.unwrap_or_else(|| panic!("no rule at {pc:#x} inside FDE {fde:?}"));
            assert_eq!((rule.fde_start, rule.fde_end), (fde.start, fde.end), "at {pc:#x}");
            assert!(rule.row_start <= pc && pc < rule.row_end, "at {pc:#x}: {rule:?}");
            let other = scanned.rule_at(pc).expect("scan lookup").expect("scan finds it");
            assert_eq!(
                other,
                tracer_unwind::cfi::CfiRule {
                    source: CfiSource::EhFrame,
                    ..rule
                },
                "at {pc:#x}"
            );
            let kind = match rule.cfa {
                CfiCfa::RegOffset { .. } => "register + offset",
                CfiCfa::Expression => "expression",
            };
            *counts.entry(kind).or_default() += 1;
        }
    }
    println!("libc: {} FDEs, CFA rules at 3 addresses each: {counts:?}", fdes.len());
    let regular = counts.get("register + offset").copied().unwrap_or(0);
    let total: u64 = counts.values().sum();
    assert!(fdes.len() > 1000 && regular * 100 >= total * 99, "{counts:?}");
}

fn without_sections_at(input: &Path, dir: &Path) -> PathBuf {
    let copy = dir.join("libc.so.6");
    std::fs::copy(input, &copy).expect("copy libc");
    without_sections(&copy, &[".eh_frame_hdr"])
}

/// `check` reads every checked-in fixture (SFrame v1 to v3, x86-64 and aarch64, linked files and
/// `.o`s) without error, and compares rows of every linked one with its CFI.
#[test]
fn fixtures_check_without_errors() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/bin");
    let mut pending = vec![root.clone()];
    let mut checked = 0;
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let bytes = std::fs::read(&path).expect("read fixture");
            if !bytes.starts_with(b"\x7fELF") {
                continue;
            }
            let report = check_file(&path);
            if path.extension().is_none_or(|e| e != "o") {
                assert!(report.compared > 0, "{}: {report}", path.display());
            }
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} fixtures under {}", root.display());
}
