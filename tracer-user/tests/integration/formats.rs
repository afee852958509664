//! Each output format of a real tracing session, read by a real consumer: `go tool pprof` reads
//! the pprof file, inferno's perf collapser the perf-script text, the SVG holds the frames, the
//! json stream arrives while the traced program still runs. The workload (fixtures/formats) is
//! built here with `-g -O2`, so its hot loop shows an inlined function, and with a stripped
//! library whose hot function has no symbol. Privileged, like every tracing test.

use std::{
    fs::File,
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use inferno::collapse::{
    Collapse as _,
    perf::{Folder, Options},
};

use crate::{
    consumers::EveryFormat,
    support::{Progress, Running, SFRAME_CFLAGS, SILENCE, run_text as run, wait_tracer},
};

/// Sampling frequency of every run, and the period it gives (perf-script's period field).
const HZ: u64 = 499;
const PERIOD_NS: u64 = 1_000_000_000 / HZ;
/// How long the workload runs when the tracer launches it.
const SECS: &str = "2";
/// At least this many samples of a 2 s run (nominally ~1000): a tracer that samples nothing
/// cannot pass, and a machine busy with the rest of the suite (which took up to 90% of a run's
/// CPU time on 2 CPUs) still can.
const MIN_SAMPLES: u64 = 50;

/// The fixtures/formats workload and its stripped library, built in a temporary directory.
struct Workload {
    dir: tempfile::TempDir,
}

impl Workload {
    fn build() -> Workload {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/formats");
        let flags = [&SFRAME_CFLAGS[..], &["-g"]].concat();
        let lib = dir.path().join("libhidden.so");
        let unstripped = dir.path().join("libhidden.unstripped.so");
        run(Command::new("gcc")
            .args(&flags)
            .args(["-fno-toplevel-reorder", "-shared", "-fPIC"])
            .arg(src.join("hidden.c"))
            .arg("-o")
            .arg(&unstripped));
        run(Command::new("strip")
            .arg("--strip-all")
            .arg(&unstripped)
            .arg("-o")
            .arg(&lib));
        run(Command::new("gcc")
            .args(&flags)
            .arg(src.join("formats.c"))
            .arg("-o")
            .arg(dir.path().join("formats"))
            .arg(format!("-L{}", dir.path().display()))
            .args(["-lhidden", "-Wl,-rpath,$ORIGIN"]));
        Workload { dir }
    }

    fn bin(&self) -> PathBuf {
        self.dir.path().join("formats")
    }

    /// The symbol table entry `name` of the unstripped library: (start, size).
    fn unstripped_symbol(&self, name: &str) -> (u64, u64) {
        let out = run(Command::new("nm")
            .arg("-S")
            .arg(self.dir.path().join("libhidden.unstripped.so")));
        out.lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() == 4 && f[3] == name).then(|| {
                    (
                        u64::from_str_radix(f[0], 16).expect("hex"),
                        u64::from_str_radix(f[1], 16).expect("hex"),
                    )
                })
            })
            .unwrap_or_else(|| panic!("no {name} in nm -S output:\n{out}"))
    }
}

/// `sframe-trace -F HZ --no-kernel ARGS -o OUT -- formats SECS MODE`; the output file's bytes.
/// Fails with the tracer's stderr when it does not succeed, or is still running a minute after
/// it started sampling (see `support::wait_tracer`).
fn trace(workload: &Workload, args: &[&str], mode: &str) -> Vec<u8> {
    let scratch = tempfile::tempdir().expect("tempdir");
    let output = scratch.path().join("out");
    let stderr = scratch.path().join("stderr");
    let mut child = Running(
        Command::new(env!("CARGO_BIN_EXE_sframe-trace"))
            .args(["-F", &HZ.to_string(), "--no-kernel"])
            .args(args)
            .arg("-o")
            .arg(&output)
            .arg("--")
            .arg(workload.bin())
            .args([SECS, mode])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("spawn sframe-trace"),
    );
    let status = wait_tracer(&mut child.0, &stderr, Duration::from_secs(60));
    let summary = std::fs::read_to_string(&stderr).unwrap_or_default();
    assert!(status.success(), "sframe-trace {args:?} failed ({status}):\n{summary}");
    std::fs::read(&output).unwrap_or_else(|e| panic!("read the output of sframe-trace {args:?}: {e}"))
}

/// Folded text as (stack, count), the heaviest first.
fn parse_folded(text: &str) -> Vec<(String, u64)> {
    let mut stacks: Vec<(String, u64)> = text
        .lines()
        .map(|l| {
            let (stack, count) = l.rsplit_once(' ').unwrap_or_else(|| panic!("not folded: {l}"));
            (
                stack.to_owned(),
                count.parse().unwrap_or_else(|_| panic!("not folded: {l}")),
            )
        })
        .collect();
    stacks.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    stacks
}

/// The heaviest stack and the total count of folded text.
fn hottest(stacks: &[(String, u64)]) -> (&str, u64) {
    let total = stacks.iter().map(|(_, n)| n).sum();
    assert!(total >= MIN_SAMPLES, "only {total} samples: {stacks:?}");
    (stacks[0].0.as_str(), total)
}

/// The known chain of `formats ... inline`, outermost first, as its tail in folded stacks.
const INLINE_CHAIN: &str = "main;run_inline;hot_loop;mix";

/// `go tool pprof -top` reads the pprof file and names the inlined function of the hot loop as
/// the hottest, from the names in the file (the mappings are marked symbolized).
#[test]
fn go_tool_pprof_reads_pprof() {
    privileged_test!(paired);
    let go = Command::new("go").arg("version").output();
    assert!(
        go.is_ok_and(|o| o.status.success()),
        "`go` is missing: install the Debian package golang-go (cargo xtask setup does)"
    );
    let workload = Workload::build();
    let pprof = trace(&workload, &["-f", "pprof"], "inline");
    let file = workload.dir.path().join("profile.pb.gz");
    std::fs::write(&file, &pprof).expect("write the profile");
    let top = run(Command::new("go").args(["tool", "pprof", "-top"]).arg(&file));
    let mut rows = top.lines().skip_while(|l| !l.trim_start().starts_with("flat")).skip(1);
    let first = rows
        .next()
        .unwrap_or_else(|| panic!("no rows in go tool pprof -top:\n{top}"));
    assert!(first.ends_with(" mix (inline)"), "hottest is not mix:\n{top}");
    assert!(top.contains(" hot_loop"), "no hot_loop:\n{top}");
    let lines = run(Command::new("go").args(["tool", "pprof", "-top", "-lines"]).arg(&file));
    assert!(lines.contains("formats.c:"), "no file:line in -top -lines:\n{lines}");
}

/// inferno's perf collapser turns the perf-script output into the stacks of the folded output:
/// the same hottest stack, with counts in periods, and one record per sample.
#[test]
fn perf_script_collapses_into_the_folded_stacks() {
    privileged_test!(paired);
    let workload = Workload::build();
    let folded_text = String::from_utf8(trace(&workload, &["-f", "folded"], "inline")).expect("utf-8");
    let script = trace(&workload, &["-f", "perf-script"], "inline");
    let mut options = Options::default();
    options.nthreads = 1;
    let mut collapsed = Vec::new();
    Folder::from(options)
        .collapse(script.as_slice(), &mut collapsed)
        .expect("inferno collapses the perf-script text");
    let collapsed = parse_folded(&String::from_utf8(collapsed).expect("utf-8"));
    let records = String::from_utf8_lossy(&script)
        .lines()
        .filter(|l| l.contains(" cpu-clock:"))
        .count() as u64;
    let in_periods: Vec<(String, u64)> = collapsed
        .iter()
        .map(|(stack, weight)| {
            assert_eq!(
                weight % PERIOD_NS,
                0,
                "{stack}: {weight} is not a whole number of periods"
            );
            (stack.clone(), weight / PERIOD_NS)
        })
        .collect();
    let (collapsed_hot, collapsed_total) = hottest(&in_periods);
    assert_eq!(collapsed_total, records, "every record counts once");
    let folded = parse_folded(&folded_text);
    let (folded_hot, _) = hottest(&folded);
    assert_eq!(collapsed_hot, folded_hot, "the hottest stacks differ");
    assert!(folded_hot.ends_with(INLINE_CHAIN), "{folded_hot}");
}

/// The flame graph is an SVG document with a box for each frame of the hot chain.
#[test]
fn svg_has_the_hot_frames() {
    privileged_test!(paired);
    let workload = Workload::build();
    let svg = String::from_utf8(trace(&workload, &["-f", "svg"], "inline")).expect("utf-8");
    assert!(
        svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"),
        "not an SVG document"
    );
    for frame in ["all", "formats", "main", "run_inline", "hot_loop", "mix"] {
        assert!(
            svg.contains(&format!("<title>{frame} (")),
            "no box for {frame} in the flame graph"
        );
    }
}

/// Inlined functions are frames of their own (with --no-inline they are not), and the json
/// stream gives them their source line.
#[test]
fn inlined_functions_are_frames() {
    privileged_test!(paired);
    let workload = Workload::build();
    let folded = parse_folded(&String::from_utf8(trace(&workload, &["-f", "folded"], "inline")).expect("utf-8"));
    let (hot, _) = hottest(&folded);
    assert!(
        hot.ends_with(INLINE_CHAIN),
        "the hottest stack does not end in {INLINE_CHAIN}: {hot}"
    );
    let plain =
        parse_folded(&String::from_utf8(trace(&workload, &["-f", "folded", "--no-inline"], "inline")).expect("utf-8"));
    let (hot, _) = hottest(&plain);
    assert!(hot.ends_with("main;run_inline;hot_loop"), "with --no-inline: {hot}");
    assert!(
        plain.iter().all(|(stack, _)| !stack.contains(";mix")),
        "an inlined frame with --no-inline: {plain:?}"
    );
}

/// A frame in a function without any symbol (a static function of a stripped library) is
/// named by its object and offset, and the offset lies in that function; the exported function
/// just below it is not used instead.
#[test]
fn unknown_frames_are_object_and_offset() {
    privileged_test!(paired);
    let workload = Workload::build();
    let folded = parse_folded(&String::from_utf8(trace(&workload, &["-f", "folded"], "hidden")).expect("utf-8"));
    let (hot, _) = hottest(&folded);
    let (outer, leaf) = hot.rsplit_once(';').expect("frames");
    assert!(outer.ends_with("main;run_hidden;hidden_entry"), "{hot}");
    let offset = leaf
        .strip_prefix("[libhidden.so+0x")
        .and_then(|l| l.strip_suffix(']'))
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .unwrap_or_else(|| panic!("the hidden function is not named by object and offset: {hot}"));
    let (start, size) = workload.unstripped_symbol("spin_hidden");
    assert!(
        (start..start + size).contains(&offset),
        "offset {offset:#x} is not in spin_hidden [{start:#x}, {:#x})",
        start + size
    );
}

/// `-f json` writes a line per sample while the traced program is still running; each line is
/// a JSON object with the documented fields, and the inlined frame has its source line.
#[test]
fn json_streams_while_the_program_runs() {
    privileged_test!();
    let workload = Workload::build();
    // The workload runs far longer than the lines take to arrive on a busy machine; it is
    // killed once they have.
    let mut tracer = Running(
        Command::new(env!("CARGO_BIN_EXE_sframe-trace"))
            .args(["-F", &HZ.to_string(), "--no-kernel", "-f", "json", "--"])
            .arg(workload.bin())
            .args(["120", "inline"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn sframe-trace"),
    );
    let stdout = tracer.0.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Lines are waited for as long as the tracer makes progress (loading tables, sampling).
    let mut progress = Progress::new(tracer.pid());
    let mut next_line = |lines: usize| loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => break line,
            Err(mpsc::RecvTimeoutError::Timeout) if !progress.stuck(lines) => {}
            Err(err) => panic!("{lines} json lines, then none ({err}): the tracer made no progress for {SILENCE:?}"),
        }
    };
    let first = next_line(0);
    let v: serde_json::Value = serde_json::from_str(&first).unwrap_or_else(|e| panic!("{e}: {first}"));
    let pid = v["pid"].as_u64().unwrap_or_else(|| panic!("no pid: {first}"));
    let alive = || {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        state.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z'))
    };
    assert!(alive(), "the first line arrived after the traced program {pid} ended");
    let mut lines = vec![first];
    while lines.len() < 50 {
        lines.push(next_line(lines.len()));
    }
    assert!(alive(), "50 lines arrived only after the traced program {pid} ended");
    // The pid of the traced program, which the test's tracer launched and which is still
    // running (checked just above).
    let _ = sframe_trace::sys::process::kill(pid as libc::pid_t, libc::SIGKILL);
    drop(tracer);
    let mut inlined_seen = false;
    for line in &lines {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_eq!(v["comm"], "formats", "{line}");
        assert_eq!(v["event"], "cpu-clock", "{line}");
        assert!(v["time"].as_f64().is_some_and(|t| t > 1.6e9), "{line}");
        assert!(v["tid"].is_u64() && v["cpu"].is_u64(), "{line}");
        let frames = v["frames"].as_array().unwrap_or_else(|| panic!("no frames: {line}"));
        assert!(!frames.is_empty(), "{line}");
        for f in frames {
            assert!(
                ["sframe", "eh_frame", "fp"].contains(&f["source"].as_str().unwrap_or("")),
                "{line}"
            );
            assert!(f["addr"].as_str().is_some_and(|a| a.starts_with("0x")), "{line}");
        }
        if frames[0]["symbol"] == "mix" {
            assert_eq!(frames[0]["inlined"], true, "{line}");
            assert!(
                frames[0]["file"].as_str().is_some_and(|f| f.ends_with("formats.c")),
                "{line}"
            );
            assert!(frames[0]["line"].is_u64(), "{line}");
            assert_eq!(frames[1]["symbol"], "hot_loop", "{line}");
            assert_eq!(frames[1]["inlined"], false, "{line}");
            assert_eq!(frames[1]["addr"], frames[0]["addr"], "{line}");
            inlined_seen = true;
        }
    }
    assert!(
        inlined_seen,
        "no sample in the inlined function among {} lines",
        lines.len()
    );
}

/// One session writing every format at once (folded, json, perf-script, pprof and SVG files,
/// and an OTLP export every second): each, read back by its consumer, carries exactly the
/// stacks of the folded output, inlined frames and frames without a symbol included.
#[test]
fn every_format_of_one_session_carries_the_same_stacks() {
    privileged_test!(paired);
    let workload = Workload::build();
    let bin = workload.bin().display().to_string();
    let run = EveryFormat::run(HZ, &[], &[&bin, "3", "both"], &[], Duration::from_secs(60));
    run.assert_all_the_same();
    let total: u64 = run.folded.values().sum();
    assert!(total >= MIN_SAMPLES, "only {total} samples:\n{}", run.traced.stderr);
    assert!(
        run.folded.keys().any(|s| s.contains(";main;run_both;hot_loop;mix")),
        "no stack through the inlined function: {:#?}",
        run.folded
    );
    assert!(
        run.folded.keys().any(|s| s.contains(";hidden_entry;[libhidden.so+0x")),
        "no stack through the function without a symbol: {:#?}",
        run.folded
    );
}
