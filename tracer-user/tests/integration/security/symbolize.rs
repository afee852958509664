//! `sframe-trace symbolize` on a profile a local user crafted (issue 29, defect 5): counts
//! near i64::MAX neither make json or perf-script write records without end (refused at once,
//! saying why, nothing written) nor wrap folded sums (they saturate); a signal stops the
//! command within 2 s with status 2, leaving no temporary file and what was at the path as it
//! was; `-o -` is stdout; `--help` offers only the formats it writes. Needs no privilege.

use std::{
    path::Path,
    process::{Command, Output, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

use prost::Message as _;
use sframe_trace::export::pprof;

use super::{LIMIT, temporaries_of, wait_bounded};
use crate::support::tracer_binary;

/// A profile of named kernel frames (nothing to look up): one stack `main` for each count of
/// `mains`, and one stack `other` (one frame, `inner` inlined in `outer`: two) for each count
/// of `others`. Every sample is its own; identical stacks add up in folded lines.
fn crafted(mains: &[i64], others: &[i64]) -> Vec<u8> {
    let strings = ["", "[kernel.kallsyms]", "main", "inner", "outer", "k.c", "comm", "app"];
    let sample = |location, count| pprof::Sample {
        location_id: vec![location],
        value: vec![count, count],
        label: vec![pprof::Label {
            key: 6,
            str: 7,
            ..pprof::Label::default()
        }],
    };
    let function = |id, name| pprof::Function {
        id,
        name,
        system_name: name,
        filename: 5,
    };
    let line = |function_id| pprof::Line { function_id, line: 1 };
    pprof::Profile {
        string_table: strings.iter().map(|s| (*s).to_owned()).collect(),
        mapping: vec![pprof::Mapping {
            id: 1,
            filename: 1,
            ..pprof::Mapping::default()
        }],
        function: vec![function(1, 2), function(2, 3), function(3, 4)],
        location: vec![
            pprof::Location {
                id: 1,
                mapping_id: 1,
                address: 0xffff_ffff_8100_0000,
                line: vec![line(1)],
            },
            pprof::Location {
                id: 2,
                mapping_id: 1,
                address: 0xffff_ffff_8100_0100,
                line: vec![line(2), line(3)],
            },
        ],
        sample: mains
            .iter()
            .map(|&c| sample(1, c))
            .chain(others.iter().map(|&c| sample(2, c)))
            .collect(),
        ..pprof::Profile::default()
    }
    .encode_to_vec()
}

/// `sframe-trace symbolize ARGS` run to its end in `dir` (killed after [`LIMIT`]), with how
/// long it took.
fn symbolize(dir: &Path, args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let mut child = Command::new(tracer_binary())
        .arg("symbolize")
        .args(args)
        .current_dir(dir)
        .env_remove("DEBUGINFOD_URLS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sframe-trace symbolize");
    let stdout = child.stdout.take().expect("stdout");
    let stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || read_all(stdout));
    let err = std::thread::spawn(move || read_all(stderr));
    let status = wait_bounded(&mut child);
    let output = Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    };
    (output, started.elapsed())
}

/// What `r` gives until its end.
fn read_all(mut r: impl std::io::Read) -> Vec<u8> {
    let mut bytes = Vec::new();
    let _ = r.read_to_end(&mut bytes);
    bytes
}

/// Regression (issue 29: a 102-byte pprof with counts near i64::MAX made `-f json` write
/// records forever and folded sums wrap to `9223372036854775805`): json and perf-script
/// refuse it at once, saying how many samples and frames and the bound, with status 2 and
/// nothing written; folded saturates (`u64::MAX`) and adds exactly below that; svg is drawn.
#[test]
fn counts_near_i64_max_are_refused_or_saturated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let near = i64::MAX - 1;
    // A thousand samples near i64::MAX of `main`, two of `outer;inner`.
    let profile = crafted(&[near; 1000], &[near, near]);
    std::fs::write(dir.path().join("crafted.pb"), &profile).expect("write the profile");
    for format in ["json", "perf-script"] {
        let out = dir.path().join(format!("out.{format}"));
        let (ran, took) = symbolize(
            dir.path(),
            &["crafted.pb", "-f", format, "-o", &format!("out.{format}")],
        );
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert_eq!(ran.status.code(), Some(2), "{format}: {stderr}");
        assert!(took < Duration::from_secs(30), "{format}: refused after {took:?}");
        // Samples and frames saturate: 1002 counts near i64::MAX pass u64::MAX.
        assert!(
            stderr.contains("the profile counts 18446744073709551615 samples")
                && stderr.contains("more than --max-frames 50000000"),
            "{format}: {stderr}"
        );
        assert!(!out.exists(), "{format}: an output was written");
        assert!(temporaries_of(&out).is_empty(), "{format}: a temporary file was left");
    }
    let (ran, _) = symbolize(dir.path(), &["crafted.pb", "-f", "folded", "-o", "out.folded"]);
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    let folded = std::fs::read_to_string(dir.path().join("out.folded")).expect("read folded");
    let two = 2 * near as u64;
    assert_eq!(
        folded,
        format!("app;main {}\napp;outer;inner {two}\n", u64::MAX),
        "the sums saturate, or are exact below u64::MAX"
    );
    let (ran, took) = symbolize(dir.path(), &["crafted.pb", "-f", "svg", "-o", "out.svg"]);
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    assert!(took < Duration::from_secs(30), "svg after {took:?}");
    let svg = std::fs::read_to_string(dir.path().join("out.svg")).expect("read svg");
    assert!(
        svg.contains("widths divided by"),
        "the subtitle says the widths are divided"
    );
}

/// The bound counts frames: records of one frame (`main`) and of two (`outer;inner`), 3 + 2×2
/// = 7 frames, are written to the last one under `--max-frames 7` and refused under 6.
#[test]
fn streamed_records_are_written_up_to_max_frames() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("small.pb"), crafted(&[1, 2], &[2])).expect("write the profile");
    let (ran, _) = symbolize(
        dir.path(),
        &["small.pb", "-f", "json", "-o", "out.json", "--max-frames", "7"],
    );
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    let json = std::fs::read_to_string(dir.path().join("out.json")).expect("read json");
    let frames: Vec<usize> = json.lines().map(|l| l.matches("\"addr\"").count()).collect();
    assert_eq!(frames.iter().filter(|&&n| n == 1).count(), 3, "{json}");
    assert_eq!(frames.iter().filter(|&&n| n == 2).count(), 2, "{json}");
    assert_eq!(frames.len(), 5, "{json}");
    let (ran, _) = symbolize(
        dir.path(),
        &["small.pb", "-f", "perf-script", "-o", "out.perf", "--max-frames", "6"],
    );
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(ran.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("counts 5 samples") && stderr.contains("7 frames in all, more than --max-frames 6"),
        "{stderr}"
    );
    assert!(!dir.path().join("out.perf").exists());
}

/// Regression (issue 31: `symbolize -o -` created a file named `-`): `-` is stdout, with the
/// same bytes the file output holds; nothing named `-` appears.
#[test]
fn dash_is_stdout() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("small.pb"), crafted(&[1, 2], &[2])).expect("write the profile");
    let (ran, _) = symbolize(dir.path(), &["small.pb", "-f", "folded", "-o", "-"]);
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    assert!(!dir.path().join("-").exists(), "a file named - was created");
    let (file, _) = symbolize(dir.path(), &["small.pb", "-f", "folded", "-o", "out.folded"]);
    assert!(file.status.success());
    let written = std::fs::read(dir.path().join("out.folded")).expect("read");
    assert_eq!(ran.stdout, written);
    assert_eq!(String::from_utf8_lossy(&written), "app;main 3\napp;outer;inner 2\n");
}

/// Regression (issue 31: `symbolize --help` offered `otlp`, then refused it): the help lists
/// the five file formats and not otlp, and `-f otlp` is refused as a value.
#[test]
fn help_offers_only_file_formats() {
    let help = Command::new(tracer_binary())
        .args(["symbolize", "--help"])
        .output()
        .expect("run --help");
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(help.status.success(), "{text}");
    for format in ["folded", "svg", "pprof", "json", "perf-script"] {
        assert!(text.contains(format), "{format} missing: {text}");
    }
    assert!(!text.contains("otlp"), "{text}");
    let refused = Command::new(tracer_binary())
        .args(["symbolize", "x.pb", "-f", "otlp", "-o", "/dev/null"])
        .output()
        .expect("run -f otlp");
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("invalid value 'otlp'"));
}

/// Regression (issue 29: SIGTERM left `symbolize`'s temporary output file behind): SIGTERM,
/// SIGINT and SIGHUP, sent while json records are being written, end the command within 2 s
/// with status 2 and the reason; no temporary file is left, and the file at the path keeps
/// what it held.
#[test]
fn a_signal_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 40 million one-frame records (under the default bound): minutes of writing.
    std::fs::write(dir.path().join("long.pb"), crafted(&[40_000_000], &[])).expect("write the profile");
    let out = dir.path().join("out.json");
    for (signal, name, why) in [
        (libc::SIGTERM, "SIGTERM", "terminated"),
        (libc::SIGINT, "SIGINT", "interrupted"),
        (libc::SIGHUP, "SIGHUP", "hung up"),
    ] {
        std::fs::write(&out, "old\n").expect("write the old output");
        let mut child = Command::new(tracer_binary())
            .args(["symbolize", "long.pb", "-f", "json", "-o", "out.json"])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sframe-trace symbolize");
        let stderr = child.stderr.take().expect("stderr");
        let reader = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
        // Its progress: a temporary file holding records.
        let started = Instant::now();
        while !temporaries_of(&out)
            .iter()
            .any(|t| std::fs::metadata(t).is_ok_and(|m| m.len() > 1 << 20))
        {
            assert!(started.elapsed() < LIMIT, "{name}: no record written after {LIMIT:?}");
            assert!(
                child.try_wait().expect("try_wait").is_none(),
                "{name}: it ended before the signal"
            );
            sleep(Duration::from_millis(10));
        }
        let sent = Instant::now();
        // Our own child, not reaped yet.
        let _ = sframe_trace::sys::process::kill(child.id() as libc::pid_t, signal);
        let status = wait_bounded(&mut child);
        let took = sent.elapsed();
        let stderr = reader.join().expect("stderr reader");
        assert!(took < Duration::from_secs(2), "{name}: ended {took:?} after the signal");
        assert_eq!(status.code(), Some(2), "{name}: {status}: {stderr}");
        assert!(stderr.contains(&format!("{why} ({name})")), "{name}: {stderr}");
        assert!(temporaries_of(&out).is_empty(), "{name}: a temporary file was left");
        assert_eq!(std::fs::read_to_string(&out).expect("read"), "old\n", "{name}");
    }
}
