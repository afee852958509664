//! The command line as an attacker or a typo meets it: values that once panicked or were
//! misread are refused in one sentence with status 2 (as root, where a lax value went on to
//! attach), and arguments and file names that are not UTF-8 go through as the bytes they are.

use std::{ffi::OsStr, os::unix::ffi::OsStrExt as _, process::Command};

use crate::support::{assert_refused, tracer_binary};

/// Regression (`-d 1e20`, `--export-interval 1e20` and `doctor -d 1e20` panicked, the last
/// after attaching; a leading non-ASCII space panicked the size parser and `' 100K'` read as
/// 10K; `--otlp-endpoint garbage` was accepted; `-d -1` suggested `-- -1`, which launches a
/// command named `-1`): each is one sentence, status 2, before anything is traced.
#[test]
fn bad_values_are_one_sentence_before_anything_happens() {
    privileged_test!(shared);
    let otlp = ["-f", "otlp", "--otlp-endpoint", "http://localhost:4317"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["-d", "1e20", "--pid", "1"], "at most 1000000000 seconds"),
        (vec!["-d", "-1", "--pid", "1"], "positive number of seconds"),
        (vec!["-d", "NaN", "--pid", "1"], "positive number of seconds"),
        (vec!["-d", "inf", "--pid", "1"], "at most 1000000000 seconds"),
        (
            [&otlp[..], &["--export-interval", "1e20", "--pid", "1"]].concat(),
            "at most 1000000000 seconds",
        ),
        (
            [&otlp[..], &["--export-interval", "-5", "--pid", "1"]].concat(),
            "positive number of seconds",
        ),
        (vec!["doctor", "-d", "1e20"], "at most 1000000000 seconds"),
        (vec!["doctor", "-d", "-1"], "positive number of seconds"),
        (vec!["--max-table-memory", " 100K", "--pid", "1"], "is not a size"),
        (
            vec!["--max-table-memory", "\u{2003}100K", "--pid", "1"],
            "is not a size",
        ),
        (vec!["--max-table-memory", "100K\u{a0}", "--pid", "1"], "is not a size"),
        (vec!["--ring-buffer-size", " 8M", "--pid", "1"], "is not a size"),
        (
            vec!["-f", "otlp", "--otlp-endpoint", "garbage", "--pid", "1"],
            "give http://HOST:PORT[/PATH]",
        ),
        (
            vec!["-f", "otlp", "--otlp-endpoint", "http://garbage", "--pid", "1"],
            "give http://HOST:PORT[/PATH]",
        ),
    ];
    for (args, says) in &cases {
        assert_refused(args, says);
        let out = Command::new(tracer_binary()).args(args).output().expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("-- -"),
            "{args:?}: a tip to launch a command: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

/// Regression (a command argument or file name that is not UTF-8 was refused): `-- COMMAND`
/// passes its arguments as the bytes given, and `dump`/`check` read a file whose name is not
/// UTF-8, naming it lossily where they must.
#[test]
fn arguments_and_file_names_are_bytes() {
    privileged_test!(shared);
    let dir = tempfile::tempdir().expect("tempdir");
    // (A program file whose name is not UTF-8 is a matter of reading /proc/PID/maps.)
    let program = "/bin/sh";
    let said = dir.path().join("said");
    let out = Command::new(tracer_binary())
        .args(["-F", "99", "--no-kernel", "-o"])
        .arg(dir.path().join("out.folded"))
        .arg("--")
        .arg(program)
        .arg("-c")
        .arg(r#"printf %s "$1" > "$2""#)
        .arg("sh")
        .arg(OsStr::from_bytes(b"arg\xc3\x28\xff"))
        .arg(&said)
        .output()
        .expect("run sframe-trace");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    assert_eq!(
        std::fs::read(&said).expect("read"),
        b"arg\xc3\x28\xff",
        "the argument, byte for byte"
    );

    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/bin/v1/x86_64/chain");
    let file = dir.path().join(OsStr::from_bytes(b"chain\xff"));
    std::fs::copy(&fixture, &file).expect("copy the fixture");
    for command in ["dump", "check"] {
        let out = Command::new(tracer_binary())
            .arg(command)
            .arg(&file)
            .output()
            .expect("run sframe-trace");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = Command::new(tracer_binary())
        .arg("dump")
        .arg(dir.path().join(OsStr::from_bytes(b"missing\xff")))
        .output()
        .expect("run sframe-trace");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("missing\u{fffd}"), "named lossily: {stderr}");
}
