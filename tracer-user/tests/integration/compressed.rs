//! Compressed debug sections as binutils and Go write them: the call-frame information of a
//! program whose only CFI is `.debug_frame` reads the same compressed with zlib (ELF and GNU
//! `.zdebug_*` forms) and zstd as uncompressed, through the library and `sframe-trace dump`; a
//! Go binary's compressed `.debug_frame` is read; and a compressed section that lies about its
//! size (a bomb, or an impossible claim) is refused with the section's name.

use std::{path::Path, process::Command};

use object::{Object as _, ObjectSection as _};
use tracer_unwind::cfi::{CfiError, CfiSource, CfiTable};
use tracer_unwind::compressed::DecompressError;

use crate::support::{gcc, run};

/// Three functions with different frames; built without `.eh_frame` of their own, so
/// `.debug_frame` is all they have (the C runtime's start files bring an `.eh_frame`).
const PROGRAM: &str = r#"
__attribute__((noinline)) long leaf(long n) { volatile long a[16]; for (int i = 0; i < 16; i++) a[i] = n + i; return a[n & 15]; }
__attribute__((noinline)) long mid(long n) { return leaf(n) * 3 + leaf(n + 1); }
int main(int argc, char **argv) { (void)argv; return (int)mid(argc); }
"#;

/// The program, plain, and with its debug sections compressed each way `objcopy` offers.
fn programs(dir: &Path) -> Vec<(&'static str, Vec<u8>)> {
    let src = dir.join("p.c");
    std::fs::write(&src, PROGRAM).expect("write the source");
    let plain = gcc(
        &src,
        &dir.join("plain"),
        &["-O1", "-g", "-fno-asynchronous-unwind-tables"],
    );
    let mut out = vec![("plain", std::fs::read(&plain).expect("read"))];
    for how in ["zlib", "zlib-gnu", "zstd"] {
        let path = dir.join(how);
        run(Command::new("objcopy")
            .arg(format!("--compress-debug-sections={how}"))
            .arg(&plain)
            .arg(&path));
        out.push((how, std::fs::read(&path).expect("read")));
    }
    out
}

/// Every FDE's range and the rule at each of its first 64 addresses.
fn rules(how: &str, file: &[u8]) -> Vec<String> {
    let table = CfiTable::from_elf(file).expect("readable CFI").expect("has CFI");
    assert!(
        table.sources().contains(&CfiSource::DebugFrame),
        "{how}: {:?}",
        table.sources()
    );
    let mut out = Vec::new();
    for fde in table.fdes() {
        for pc in fde.start..fde.end.min(fde.start + 64) {
            out.push(format!("{pc:#x}: {:?}", table.rule_at(pc).expect("rule")));
        }
    }
    out
}

#[test]
fn compressed_debug_frame_reads_as_the_uncompressed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = programs(dir.path());
    let expected = rules("plain", &files[0].1);
    assert!(expected.len() > 20, "too few rows to compare: {expected:?}");
    for (how, bytes) in &files[1..] {
        let obj = object::File::parse(bytes.as_slice()).expect("ELF");
        let name = if *how == "zlib-gnu" {
            ".zdebug_frame"
        } else {
            ".debug_frame"
        };
        let section = obj.section_by_name(name).expect("the CFI section");
        let form = section.compressed_file_range().expect("range").format;
        assert_ne!(form, object::CompressionFormat::None, "{how}: objcopy did not compress");
        assert_eq!(rules(how, bytes), expected, "{how}");
    }
    // `dump --source eh_frame` (the kernel rows from the CFI) prints the same.
    let dump = |name: &str| {
        run(Command::new(env!("CARGO_BIN_EXE_sframe-trace"))
            .args(["dump", "--source", "eh_frame"])
            .arg(dir.path().join(name)))
    };
    let plain = dump("plain");
    assert!(plain.len() > 100, "{}", String::from_utf8_lossy(&plain));
    for how in ["zlib", "zlib-gnu", "zstd"] {
        assert_eq!(dump(how), plain, "dump of {how}");
    }
}

/// The `Elf64_Chdr` of `name` in `file`: its offset (the compressed data follows it).
fn chdr_offset(file: &[u8], name: &str) -> usize {
    let obj = object::File::parse(file).expect("ELF");
    let range = obj
        .section_by_name(name)
        .expect("section")
        .compressed_file_range()
        .expect("range");
    range.offset as usize - 24
}

#[test]
fn compressed_sections_that_lie_about_their_size_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = programs(dir.path());
    for (how, bytes) in files.iter().filter(|(how, _)| *how == "zlib" || *how == "zstd") {
        let at = chdr_offset(bytes, ".debug_frame");
        let with_size = |size: u64| {
            let mut file = bytes.clone();
            file[at + 8..at + 16].copy_from_slice(&size.to_le_bytes());
            file
        };
        // A terabyte claimed: refused before any decoding.
        let huge = with_size(1 << 40);
        match CfiTable::from_elf(&huge) {
            Err(CfiError::Section {
                section: ".debug_frame",
                source: DecompressError::TooLarge { stated, .. },
            }) => assert_eq!(stated, 1 << 40),
            other => panic!("{how}: {other:?}"),
        }
        // Less claimed than the data holds (how a bomb hides): refused at the claim.
        let small = with_size(16);
        match CfiTable::from_elf(&small) {
            Err(CfiError::Section {
                source: DecompressError::LongerThanStated { stated: 16, .. },
                ..
            }) => {}
            other => panic!("{how}: {other:?}"),
        }
        // The command says what and where.
        let path = dir.path().join(format!("{how}-lying"));
        std::fs::write(&path, &small).expect("write");
        let out = Command::new(env!("CARGO_BIN_EXE_sframe-trace"))
            .args(["dump", "--source", "eh_frame"])
            .arg(&path)
            .output()
            .expect("run sframe-trace");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(".debug_frame decompresses to more than the 16 bytes it states"),
            "{stderr}"
        );
    }
}

/// A Go program built in `dir` (Go links its DWARF compressed: zlib, `SHF_COMPRESSED`).
fn go_binary(dir: &Path) -> std::path::PathBuf {
    let go = Command::new("go").arg("version").output();
    assert!(
        go.is_ok_and(|o| o.status.success()),
        "`go` is missing: install the Debian package golang-go (cargo xtask setup does)"
    );
    std::fs::write(dir.join("go.mod"), "module spin\ngo 1.19\n").expect("write go.mod");
    std::fs::write(
        dir.join("main.go"),
        "package main\n\nfunc spin(n int) int { s := 0; for i := 0; i < n; i++ { s += i % 7 }; return s }\n\nfunc main() { println(spin(300000000)) }\n",
    )
    .expect("write main.go");
    run(Command::new("go")
        .args(["build", "-o", "spin", "."])
        .current_dir(dir)
        .env("GOCACHE", dir.join("cache"))
        .env("GOPATH", dir.join("gopath"))
        .env("GOFLAGS", "-mod=mod"));
    dir.join("spin")
}

/// The Go binary's compressed `.debug_frame` is read.
#[test]
fn go_binary_compressed_debug_frame_is_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = std::fs::read(go_binary(dir.path())).expect("read the Go binary");
    let obj = object::File::parse(bytes.as_slice()).expect("ELF");
    let section = obj.section_by_name(".debug_frame").expect("Go writes .debug_frame");
    let form = section.compressed_file_range().expect("range").format;
    assert_eq!(form, object::CompressionFormat::Zlib, "this Go does not compress DWARF");
    let table = CfiTable::from_elf(&bytes).expect("readable CFI").expect("has CFI");
    assert!(
        table.sources().contains(&CfiSource::DebugFrame),
        "{:?}",
        table.sources()
    );
    let main = obj
        .symbols()
        .find(|s| object::ObjectSymbol::name(s) == Ok("main.main"))
        .expect("main.main");
    let rule = table.rule_at(object::ObjectSymbol::address(&main)).expect("rule");
    assert_eq!(rule.map(|r| r.source), Some(CfiSource::DebugFrame), "main.main");
}

/// Traced, the Go binary gets a table and its frames are named: no note about its
/// call-frame information.
#[test]
fn traced_go_binary_has_a_table_and_no_note() {
    use crate::support::{SUMMARY_JSON, Summary, tracer_binary};
    privileged_test!();
    let dir = tempfile::tempdir().expect("tempdir");
    let spin = go_binary(dir.path());
    let out = Command::new(tracer_binary())
        .args(["--no-kernel", "-F", "499"])
        .args(SUMMARY_JSON)
        .arg("--")
        .arg(&spin)
        .output()
        .expect("run sframe-trace");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let summary = Summary::of(&stderr);
    assert!(summary.notes().is_empty(), "{:?}", summary.notes());
    assert_eq!(summary.count("tables.without"), 0, "{stderr}");
    let folded = String::from_utf8_lossy(&out.stdout);
    assert!(
        folded
            .lines()
            .any(|l| l.contains(";main.main;main.spin") || l.contains(";main.main ")),
        "{folded}"
    );
}
