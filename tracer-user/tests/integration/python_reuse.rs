//! A Python program that frees its code objects and makes others at their addresses, turn
//! after turn: each turn compiles a module defining one function (`work_K` in `turn_K.py`),
//! runs it for about 0.4 s, and drops both code objects, so the next turn's are made where
//! they were, with their names and line tables often at the freed ones' addresses too. Every
//! sample taken inside a turn must name that turn's code objects: never an earlier turn's,
//! which the tracer met at the same addresses a moment before. Judged from the json output of
//! a `--pid` session against the turns' start and end times the program prints.
//!
//! Samples reach userspace up to 0.2 s after they were taken: a code object that lives less
//! than that may be gone before any of its samples is named (its frames are then named by
//! address, counted as unnamed), so a turn lasts longer, and at most one sample in twenty may
//! have an unnamed frame. Needs root; under `CI=true` it fails instead of skipping.

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};

use crate::python::programs::pyenv_required;
use crate::support::{Running, SUMMARY_JSON, Summary, Tracer, json_frames, json_samples};

/// The program: `ready`, a line on stdin, then turns for 4 s of CPU, each printing
/// `turn K START_NS END_NS` after it ran.
const SCRIPT: &str = r#"import sys, time
NS = getattr(time, "time_ns", lambda: int(time.time() * 1e9))
print("ready", flush=True)
sys.stdin.readline()
END = time.process_time() + 4
k = 0
while time.process_time() < END:
    k += 1
    src = "def work_%d():\n    s = 0\n    for i in range(12000000):\n        s += i\n    return s\nwork_%d()\n" % (k, k)
    code = compile(src, "turn_%d.py" % k, "exec")
    start = NS()
    exec(code, {})
    end = NS()
    del code
    print("turn", k, start, end, flush=True)
"#;

/// Samples this close to a turn's start or end are not judged (the tracer's clock and the
/// program's differ by less).
const MARGIN_NS: u64 = 20_000_000;
/// Samples judged at least, per interpreter.
const LEAST: usize = 300;

/// Debian's 3.11 (a static interpreter), pyenv's 3.8 (`PyFrameObject`s, `co_name`) and 3.12.
#[test]
fn code_objects_made_at_freed_ones_addresses_name_their_own_frames() {
    privileged_test!(paired, test);
    let mut pythons = vec![vec!["/usr/bin/python3.11".to_owned()]];
    pythons.extend(["3.8", "3.12"].iter().filter_map(|minor| pyenv_required(test, minor)));
    for python in pythons {
        judge(&python, &trace(&python));
    }
}

/// What a session of the program gave: its pid, the json output, the summary, and each turn's
/// start and end (Unix time, ns).
struct Traced {
    pid: u32,
    json: String,
    summary: Summary,
    turns: HashMap<u64, (u64, u64)>,
}

fn trace(python: &[String]) -> Traced {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let json = dir.path().join("out.json").to_str().expect("a UTF-8 path").to_owned();
    let mut running = Running(
        Command::new(&python[0])
            .args(&python[1..])
            .args(["-c", SCRIPT])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| panic!("starting {python:?}: {err}")),
    );
    let mut out = BufReader::new(running.0.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    assert_eq!(line.trim(), "ready", "{python:?}");
    let pid = running.pid().to_string();
    let mut args = vec!["-F", "999", "-f", "json", "-o", &json, "--pid", &pid];
    args.extend(SUMMARY_JSON);
    let tracer = Tracer::start(&args);
    running
        .0
        .stdin
        .as_mut()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("tell it to go");
    let mut turns = HashMap::new();
    for line in out.lines() {
        let line = line.expect("the program's output");
        let words: Vec<u64> = line
            .strip_prefix("turn ")
            .map(|rest| rest.split_whitespace().filter_map(|w| w.parse().ok()).collect())
            .unwrap_or_default();
        if let [k, start, end] = words[..] {
            turns.insert(k, (start, end));
        }
    }
    running.0.wait().expect("the program ends");
    let stderr = tracer.finish();
    assert!(turns.len() >= 4, "{python:?}: only {} turns", turns.len());
    Traced {
        pid: running.pid(),
        json: std::fs::read_to_string(&json).expect("the json output"),
        summary: Summary::of(&stderr),
        turns,
    }
}

/// The turn `file` (`turn_K.py`) belongs to.
fn turn_of_file(file: &str) -> Option<u64> {
    file.strip_prefix("turn_")?.strip_suffix(".py")?.parse().ok()
}

/// Every sample well inside a turn: its frames of `turn_*.py` all that turn's (`work_K` named
/// for its turn, a module body), at least one of them; a Python frame unnamed (its code object
/// replaced before it was named) is counted, never wrong.
fn judge(python: &[String], traced: &Traced) {
    let what = python.join(" ");
    let (mut exact, mut unnamed, mut wrong) = (0usize, 0usize, Vec::new());
    for sample in json_samples(&traced.json, traced.pid) {
        let at = crate::python_session::time_ns(&sample);
        let Some((&turn, _)) = traced
            .turns
            .iter()
            .find(|(_, (start, end))| at >= start + MARGIN_NS && at + MARGIN_NS <= *end)
        else {
            continue;
        };
        let python: Vec<&serde_json::Value> = json_frames(&sample)
            .iter()
            .filter(|f| f["source"] == "python")
            .collect();
        if python.iter().any(|f| f["symbol"].as_str().is_none()) {
            unnamed += 1;
            continue;
        }
        let ours: Vec<(&str, Option<u64>)> = python
            .iter()
            .filter_map(|f| {
                let file = f["file"].as_str()?;
                file.starts_with("turn_")
                    .then(|| (f["symbol"].as_str().unwrap_or_default(), turn_of_file(file)))
            })
            .collect();
        let own = |&(name, file): &(&str, Option<u64>)| {
            file == Some(turn) && (name == "<module>" || name == format!("work_{turn}"))
        };
        if !ours.is_empty() && ours.iter().all(own) {
            exact += 1;
        } else {
            wrong.push(format!("turn {turn}: {ours:?}"));
        }
    }
    eprintln!(
        "{what}: {} turns, {exact} samples named their turn's code objects, {unnamed} with an \
         unnamed Python frame, {} wrong",
        traced.turns.len(),
        wrong.len()
    );
    assert!(wrong.is_empty(), "{what}: samples named after another turn: {wrong:#?}");
    let replaced = traced.summary.count("python.stacks.replaced");
    eprintln!("{what}: {replaced} Python frames found their code object replaced");
    assert!(exact >= LEAST, "{what}: only {exact} samples judged");
    assert!(
        unnamed * 20 <= exact,
        "{what}: {unnamed} samples with unnamed frames; the summary's python figures: {}",
        traced.summary.0["python"]
    );
}
