//! CPython frames in real sessions of the `sframe-trace` command. The five programs of
//! `python::programs` run on one interpreter: at once when traced with `--pid` or started
//! while the tracer samples the whole host (`-a`), one after the other when launched with
//! `--`. Every sample of theirs taken while they work is judged from the json output: its
//! frames of source `python` (qualified names, and callers on the line of their call) against
//! the program's call structure, with native frames of the interpreter still below them. The folded and pprof
//! outputs of the same session name the same functions. `--no-python` turns the walk off.
//! Needs root; under `CI=true` it fails instead of skipping.

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::Stdio;

use crate::python::programs::{
    self, ALL, Program, PyFrame, Tally, dones, goings, interpreters, is_older, older, three_versions,
};
use crate::support::{Running, SUMMARY_JSON, Summary, Tracer, json_frames, json_samples, read_pprof};

/// Seconds of CPU each program works for: about 400 samples at [`HZ`], as many as 2 s at
/// 199 Hz gave (the CPU time of a test run, not the samples judged, is what a higher rate
/// saves).
const CPU_SECONDS: &str = "0.8";
/// The sampling rate of the sessions.
const HZ: &str = "499";
/// Samples judged per program at least (of about 400).
const LEAST: usize = 150;
/// Samples taken this soon after a program said it went to work, or before it said it was
/// done, are not judged (the tracer's clock and the program's differ by less).
const MARGIN_NS: u64 = 20_000_000;

/// How the programs are traced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Started first, each waiting for a line on stdin, and traced with `--pid`.
    Pid,
    /// Started by the tracer (`-- sh -c 'exec python ...'`), one session each.
    Launch,
    /// Started while the tracer samples every process (`-a`).
    SystemWide,
}

/// What a session of the programs on `python` gave.
struct Session {
    /// The json output, the folded output, the pprof output (of the launched `sorted` only).
    json: String,
    folded: String,
    pprof: Option<sframe_trace::export::pprof::Profile>,
    summary: Summary,
    /// Each program's pid, with the program and the Unix time it went to work.
    programs: HashMap<u32, (&'static Program, u64)>,
    /// When each program's work ended (Unix time), by pid.
    done: HashMap<u32, u64>,
    /// The interpreter names frames by `co_name` (before 3.11).
    short_names: bool,
}

/// Start every program on `python` (`PY_WALK_WAIT`: wait for a line on stdin first).
fn start_programs(python: &[String], wait: bool) -> Vec<Running> {
    ALL.iter()
        .map(|program| {
            let mut command = programs::command(python);
            command
                .args(["-c", program.script, program.name])
                .env("PY_WALK_CPU", CPU_SECONDS)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped());
            if wait {
                command.env("PY_WALK_WAIT", "1");
            }
            Running(
                command
                    .spawn()
                    .unwrap_or_else(|err| panic!("starting {python:?}: {err}")),
            )
        })
        .collect()
}

/// Read a started program's output to its end (it prints `ready`, then `going ...`).
fn output_of(running: &mut Running) -> String {
    let mut text = String::new();
    for line in BufReader::new(running.0.stdout.take().expect("stdout")).lines() {
        text.push_str(&line.expect("the program's output"));
        text.push('\n');
    }
    text
}

/// Trace the programs on `python` in `mode`, the tracer given `extra` flags too.
fn session(python: &[String], mode: Mode, extra: &[&str]) -> Session {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = |name: &str| dir.path().join(name).to_str().expect("a UTF-8 path").to_owned();
    let (json, folded, pprof, said) = (file("out.json"), file("out.folded"), file("out.pb.gz"), file("said"));
    let mut args: Vec<String> = ["-F", HZ, "-f", "json", "-o", &json, "-f", "folded", "-o", &folded]
        .map(String::from)
        .to_vec();
    args.extend(SUMMARY_JSON.iter().chain(extra).map(|s| s.to_string()));
    let mut said_text = String::new();
    let stderr = match mode {
        Mode::Pid => {
            let mut programs = start_programs(python, true);
            for program in &mut programs {
                let stdout = program.0.stdout.as_mut().expect("stdout");
                let mut line = String::new();
                BufReader::new(stdout).read_line(&mut line).expect("read");
                assert_eq!(line.trim(), "ready");
            }
            let pids: Vec<String> = programs.iter().map(|p| p.pid().to_string()).collect();
            args.extend(["--pid".to_owned(), pids.join(",")]);
            let tracer = Tracer::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
            for program in &mut programs {
                program
                    .0
                    .stdin
                    .as_mut()
                    .expect("stdin")
                    .write_all(b"go\n")
                    .expect("tell it to go");
            }
            for program in &mut programs {
                said_text.push_str(&output_of(program));
            }
            tracer.finish()
        }
        Mode::Launch => {
            // One session per program (the tracer follows the command it launched, not its
            // children); the shell says where the output goes and becomes the interpreter.
            let mut stderr = String::new();
            let mut json_text = String::new();
            let mut folded_text = String::new();
            for program in ALL {
                let mut args = args.clone();
                if program.name == "sorted" {
                    args.extend(["-f", "pprof", "-o", &pprof].map(String::from));
                }
                let script = format!("exec >> '{said}'; PY_WALK_CPU={CPU_SECONDS} exec \"$@\"");
                args.extend(["--", "/bin/sh", "-c", &script, "sh"].map(String::from));
                args.extend(python.iter().cloned());
                args.extend(["-c", program.script, program.name].map(String::from));
                stderr = Tracer::start(&args.iter().map(String::as_str).collect::<Vec<_>>()).finish();
                json_text.push_str(&std::fs::read_to_string(&json).expect("the json output"));
                folded_text.push_str(&std::fs::read_to_string(&folded).expect("the folded output"));
            }
            std::fs::write(&json, json_text).expect("keep the json outputs");
            std::fs::write(&folded, folded_text).expect("keep the folded outputs");
            said_text = std::fs::read_to_string(&said).expect("the programs' output");
            stderr
        }
        Mode::SystemWide => {
            args.push("-a".to_owned());
            let tracer = Tracer::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
            let mut programs = start_programs(python, false);
            for program in &mut programs {
                said_text.push_str(&output_of(program));
                program.0.wait().expect("the program ends");
            }
            tracer.interrupt()
        }
    };
    let programs = goings(&said_text);
    assert_eq!(programs.len(), ALL.len(), "every program went to work: {said_text}");
    Session {
        json: std::fs::read_to_string(&json).expect("the json output"),
        folded: std::fs::read_to_string(&folded).expect("the folded output"),
        pprof: (mode == Mode::Launch).then(|| read_pprof(Path::new(&pprof))),
        summary: Summary::of(&stderr),
        programs,
        done: dones(&said_text),
        short_names: is_older(python),
    }
}

/// The Unix time of a json sample, in nanoseconds.
pub fn time_ns(sample: &serde_json::Value) -> u64 {
    let text = sample["time"].to_string();
    let (secs, frac) = text.split_once('.').unwrap_or((&text, "0"));
    let frac = format!("{frac:0<9}");
    secs.parse::<u64>().expect("seconds") * 1_000_000_000 + frac[..9].parse::<u64>().expect("nanoseconds")
}

/// Judge every program's samples in `session` (see the module's description).
fn judge(session: &Session, what: &str) {
    for (&pid, &(program, went)) in &session.programs {
        let mut tally = Tally {
            short_names: session.short_names,
            ..Tally::default()
        };
        let mut unbacked = 0;
        for sample in json_samples(&session.json, pid) {
            let done = session.done.get(&pid).copied().unwrap_or(u64::MAX);
            let at = time_ns(&sample);
            if at < went + MARGIN_NS || at.saturating_add(MARGIN_NS) > done {
                continue;
            }
            let frames = json_frames(&sample);
            let python: Vec<PyFrame> = frames
                .iter()
                .filter(|f| f["source"] == "python")
                .map(|f| {
                    let name = f["symbol"]
                        .as_str()
                        .map_or_else(|| format!("unnamed {}", f["addr"]), str::to_owned);
                    (name, f["line"].as_i64().map(|l| l as i32))
                })
                .collect();
            // The interpreter's own frames go on below the outermost Python frame.
            unbacked += usize::from(frames.last().is_some_and(|f| f["source"] == "python"));
            tally.judge(program, &python, true);
        }
        tally.check(&format!("{what}: {} (pid {pid})", program.name), LEAST);
        assert_eq!(unbacked, 0, "{what}: {}: stacks ending in a Python frame", program.name);
    }
}

/// The folded output names the Python functions in their places (outermost first), and
/// pprof has them as functions with their file and line.
fn judge_outputs(session: &Session, what: &str) {
    // Before 3.11 each Python call is a C call too: its native frames are between them.
    let python_only = |line: &str| {
        let frames = line.rsplit_once(' ').map_or(line, |(stack, _)| stack).split(';');
        let python = frames.filter(|f| *f == "<module>" || f.ends_with("_py_walk"));
        python.collect::<Vec<_>>().join(";")
    };
    assert!(
        session.folded.lines().any(|l| {
            let l = if session.short_names {
                python_only(l)
            } else {
                l.to_owned()
            };
            l.contains("<module>;spin_py_walk;fib_py_walk;fib_py_walk")
        }),
        "{what}: no fib stack in the folded output"
    );
    let Some(pprof) = &session.pprof else { return };
    let string = |i: i64| pprof.string_table[i as usize].as_str();
    let lambda = if session.short_names {
        "<lambda>"
    } else {
        "sort_py_walk.<locals>.<lambda>"
    };
    let function = pprof
        .function
        .iter()
        .find(|f| string(f.name) == lambda)
        .unwrap_or_else(|| panic!("{what}: no lambda function in the pprof"));
    assert_eq!(string(function.filename), "<string>", "{what}: the lambda's file");
    let lines: Vec<i64> = pprof
        .location
        .iter()
        .flat_map(|l| &l.line)
        .filter(|l| l.function_id == function.id)
        .map(|l| l.line)
        .collect();
    assert!(
        !lines.is_empty() && lines.iter().all(|&l| l > 0),
        "{what}: the lambda's lines {lines:?}"
    );
}

/// Every program, every interpreter: traced with `--pid`.
#[test]
fn python_session_pid() {
    privileged_test!(paired);
    for python in interpreters("python_session_pid") {
        let session = session(&python, Mode::Pid, &[]);
        let what = format!("--pid, {}", python.join(" "));
        judge(&session, &what);
        judge_outputs(&session, &what);
    }
}

/// Debian's 3.11, pyenv's 3.13 and trixie's 3.13 (chrooted), launched with `--` (with a
/// pprof output).
#[test]
fn python_session_launched() {
    privileged_test!(paired);
    for python in three_versions("python_session_launched") {
        let session = session(&python, Mode::Launch, &[]);
        let what = format!("--, {}", python.join(" "));
        judge(&session, &what);
        judge_outputs(&session, &what);
    }
}

/// Debian's 3.11, pyenv's 3.13 and trixie's 3.13, started while the whole host is traced: new
/// processes,
/// registered as their exec is noticed.
#[test]
fn python_session_system_wide() {
    privileged_test!(paired);
    for python in three_versions("python_session_system_wide") {
        let session = session(&python, Mode::SystemWide, &[]);
        judge(&session, &format!("-a, {}", python.join(" ")));
    }
}

/// pyenv's 3.6 to 3.10 (`PyFrameObject` frames, named by `co_name`), traced with `--pid`.
#[test]
fn python_session_pid_older() {
    privileged_test!(paired);
    for python in older("python_session_pid_older") {
        let session = session(&python, Mode::Pid, &[]);
        let what = format!("--pid, {}", python.join(" "));
        judge(&session, &what);
        judge_outputs(&session, &what);
    }
}

/// pyenv's 3.6 to 3.10 launched with `--` (with a pprof output). Run by `cargo xtask test`
/// (`xtask/src/run.rs`), after the suite: a session per program and version.
#[test]
#[ignore = "run by cargo xtask test (external)"]
fn python_session_launched_older() {
    privileged_test!();
    for python in older("python_session_launched_older") {
        let session = session(&python, Mode::Launch, &[]);
        let what = format!("--, {}", python.join(" "));
        judge(&session, &what);
        judge_outputs(&session, &what);
    }
}

/// pyenv's 3.6 to 3.10 started while the whole host is traced. Run by `cargo xtask test`.
#[test]
#[ignore = "run by cargo xtask test (external)"]
fn python_session_system_wide_older() {
    privileged_test!();
    for python in older("python_session_system_wide_older") {
        let session = session(&python, Mode::SystemWide, &[]);
        judge(&session, &format!("-a, {}", python.join(" ")));
    }
}

/// pyenv's 2.7 launched with `--`: its interpreter is refused by name and counted, its
/// process traced with native stacks only.
#[test]
fn python_session_refuses_2_7() {
    privileged_test!();
    let Some(python) = crate::support::required(
        "python_session_refuses_2_7",
        programs::pyenv("2.7"),
        "no pyenv python2.7",
    ) else {
        return;
    };
    let script = "import time\nend = time.time() + 1\nwhile time.time() < end: pass\n";
    let mut args = SUMMARY_JSON.to_vec();
    args.extend(["-f", "folded", "-o", "/dev/null", "--", &python, "-c", script]);
    let summary = Summary::of(&Tracer::start(&args).finish());
    let refused = &summary.0["python"]["refused"];
    let reasons: Vec<&String> = refused.as_object().expect("refused by reason").keys().collect();
    assert_eq!(reasons.len(), 1, "{refused}");
    assert!(reasons[0].contains("2.7"), "{refused}");
    assert_eq!(refused[reasons[0]], 1, "the interpreter counted once: {refused}");
    assert_eq!(summary.count("python.walks"), 0, "{}", summary.0);
    assert!(summary.count("samples") > 0, "{}", summary.0);
}

/// Debian unstable's 3.14 and 3.15 (chrooted into their private root: layouts from their own
/// debug offsets, tagged code references, 3.15's base frame, the loop in an unnamed cold part),
/// traced with `--pid`: every program judged, no interpreter refused.
#[test]
fn python_session_pid_3_14_and_3_15() {
    privileged_test!(paired);
    for python in programs::sid("python_session_pid_3_14_and_3_15") {
        let session = session(&python, Mode::Pid, &[]);
        let what = format!("--pid, {}", python.join(" "));
        assert_nothing_refused(&session, &what);
        judge(&session, &what);
        judge_outputs(&session, &what);
    }
}

/// Debian unstable's 3.14 and 3.15 launched with `--` (with a pprof output).
#[test]
fn python_session_launched_3_14_and_3_15() {
    privileged_test!(paired);
    for python in programs::sid("python_session_launched_3_14_and_3_15") {
        let session = session(&python, Mode::Launch, &[]);
        let what = format!("--, {}", python.join(" "));
        assert_nothing_refused(&session, &what);
        judge(&session, &what);
        judge_outputs(&session, &what);
    }
}

/// Debian unstable's 3.14 and 3.15 started while the whole host is traced. Run by
/// `cargo xtask test` (external).
#[test]
#[ignore = "run by cargo xtask test (external)"]
fn python_session_system_wide_3_14_and_3_15() {
    privileged_test!(paired);
    for python in programs::sid("python_session_system_wide_3_14_and_3_15") {
        let session = session(&python, Mode::SystemWide, &[]);
        let what = format!("-a, {}", python.join(" "));
        assert_nothing_refused(&session, &what);
        judge(&session, &what);
    }
}

/// pyenv's 3.11 and 3.12 launched with `--` (with a pprof output) and started while the whole
/// host is traced. Run by `cargo xtask test` (external).
#[test]
#[ignore = "run by cargo xtask test (external)"]
fn python_session_launched_and_system_wide_3_11_and_3_12() {
    privileged_test!(paired);
    for python in programs::pyenv_3_11_and_3_12("python_session_launched_and_system_wide_3_11_and_3_12") {
        let launched = session(&python, Mode::Launch, &[]);
        let what = format!("--, {}", python.join(" "));
        judge(&launched, &what);
        judge_outputs(&launched, &what);
        let system_wide = session(&python, Mode::SystemWide, &[]);
        judge(&system_wide, &format!("-a, {}", python.join(" ")));
    }
}

/// The session's summary counts no interpreter refused.
fn assert_nothing_refused(session: &Session, what: &str) {
    let refused = &session.summary.0["python"]["refused"];
    assert!(
        refused.as_object().is_none_or(serde_json::Map::is_empty),
        "{what}: refused {refused}"
    );
}

/// `--no-python`: no walk and no Python frame; the evaluation loop stays a native frame.
#[test]
fn python_session_no_python() {
    privileged_test!();
    let session = session(&["/usr/bin/python3.11".to_owned()], Mode::Pid, &["--no-python"]);
    assert_eq!(session.summary.count("python.walks"), 0, "{}", session.summary.0);
    assert_eq!(
        session.summary.count("python.stacks.frames"),
        0,
        "{}",
        session.summary.0
    );
    let samples: Vec<_> = session
        .programs
        .keys()
        .flat_map(|&pid| json_samples(&session.json, pid))
        .collect();
    assert!(samples.len() >= LEAST, "too few samples: {}", samples.len());
    let frames = || samples.iter().flat_map(json_frames);
    assert!(
        frames().all(|f| f["source"] != "python"),
        "a Python frame with --no-python"
    );
    assert!(
        frames().any(|f| f["symbol"] == "_PyEval_EvalFrameDefault"),
        "the evaluation loop is a native frame"
    );
}
