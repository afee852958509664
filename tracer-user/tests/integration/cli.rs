//! The `sframe-trace` command line: exit statuses, one-line messages, and the `--pc`/`--json`
//! views, run as a user would run them.

use std::{path::Path, process::Command};

fn fixture(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/bin").join(rel)
}

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sframe-trace"))
        .args(args)
        .output()
        .expect("run sframe-trace");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A file without `.sframe` exits 1 with one line that says so and how to get one.
#[test]
fn dump_without_sframe_is_one_line_and_status_1() {
    let (code, stdout, stderr) = run(&["dump", "/bin/true"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("no .sframe section") && stderr.contains("--gsframe"),
        "{stderr}"
    );
}

/// A malformed section is an error (status 2) whose message names the byte offset.
#[test]
fn dump_of_a_malformed_section_names_the_offset() {
    let path = fixture("v1/x86_64/chain");
    let mut bytes = std::fs::read(&path).expect("fixture");
    let at = {
        let found = tracer_unwind::elf::find_sframe(&bytes)
            .expect("elf")
            .expect("has .sframe");
        found.data.as_ptr() as usize - bytes.as_ptr() as usize
    };
    bytes[at + 2] = 9; // version byte
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad");
    std::fs::write(&bad, &bytes).expect("write");
    let (code, _, stderr) = run(&["dump", bad.to_str().expect("utf-8 path")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("malformed .sframe") && stderr.contains("0x2"),
        "{stderr}"
    );
}

/// `--pc` finds the function and row covering an address, in text and JSON, and exits 1 outside.
#[test]
fn dump_pc_finds_the_covering_row() {
    let path = fixture("v2/x86_64/chain");
    let path = path.to_str().expect("utf-8 path");
    let (code, stdout, stderr) = run(&["dump", "--json", path]);
    assert_eq!(code, Some(0), "{stderr}");
    let all: serde_json::Value = serde_json::from_str(&stdout).expect("dump --json is JSON");
    let f = all["functions"]
        .as_array()
        .expect("functions")
        .iter()
        .find(|f| f["rows"].as_array().is_some_and(|r| r.len() >= 2) && f["pc_type"] == "inc")
        .expect("a function with two rows")
        .clone();
    let second = &f["rows"][1];
    let pc = second["start"].as_u64().expect("row start");
    let (code, stdout, stderr) = run(&["dump", "--json", "--pc", &format!("{pc:#x}"), path]);
    assert_eq!(code, Some(0), "{stderr}");
    let hit: serde_json::Value = serde_json::from_str(&stdout).expect("--pc --json is JSON");
    assert_eq!(hit["pc"], pc);
    assert_eq!(hit["function"]["start"], f["start"]);
    assert_eq!(hit["function"]["rows"], serde_json::json!([second]));
    let (code, stdout, _) = run(&["dump", "--pc", &pc.to_string(), path]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains(&format!("{pc:016x}")), "{stdout}");
    let (code, _, stderr) = run(&["dump", "--pc", "0x10", path]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("no SFrame row covers 0x10"), "{stderr}");
}

/// `check` exits 0 on a clean file and 1 with findings, listing each finding on its own line.
#[test]
fn check_status_follows_findings() {
    let (code, stdout, stderr) = run(&["check", fixture("v1/x86_64/chain").to_str().expect("path")]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("0 findings"), "{stdout}");
    // The hand-written CFI fixture uses an SP-based CFA of 316 on purpose.
    let (code, stdout, _) = run(&["check", fixture("v3/x86_64/cfi").to_str().expect("path")]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("bad-cfa-offset") && l.contains("SP+316")),
        "{stdout}"
    );
}

/// `--help` teaches: it names the subcommands and shows examples.
#[test]
fn help_teaches() {
    let (code, stdout, _) = run(&["--help"]);
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains("dump") && stdout.contains("check") && stdout.contains("Exit status"),
        "{stdout}"
    );
    let (_, stdout, _) = run(&["dump", "--help"]);
    assert!(stdout.contains("sframe-trace dump --pc 0x401136 ./app"), "{stdout}");
}

/// Several formats pair with their outputs in order; what does not pair is refused before
/// anything is traced, in one sentence with status 2.
#[test]
fn formats_and_outputs_that_do_not_pair_are_refused() {
    let cases: &[(&[&str], &str)] = &[
        (&["-f", "folded", "-f", "pprof"], "2 file formats and no --output"),
        (
            &["-f", "folded", "-o", "a", "-o", "b"],
            "1 file format(s) (-f) and 2 --output",
        ),
        (
            &["-f", "json", "-o", "same", "-f", "folded", "-o", "same"],
            "--output same is given twice",
        ),
        (
            &["-f", "otlp", "-f", "otlp", "--otlp-endpoint", "http://localhost:4317"],
            "-f otlp is given twice",
        ),
        (
            &["-f", "svg", "-o", "a.svg", "-f", "otlp", "-o", "b"],
            "1 file format(s) (-f) and 2 --output",
        ),
    ];
    for (args, expected) in cases {
        let mut args = args.to_vec();
        args.extend(["--", "true"]);
        crate::support::assert_refused(&args, expected);
    }
}
