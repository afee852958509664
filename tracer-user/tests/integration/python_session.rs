//! CPython frames in real sessions of the `sframe-trace` command: a process running Debian's
//! `/usr/bin/python3.11` (started with `--`, or traced with `--pid`) is registered with the
//! kernel's Python walk when it is loaded, so the summary counts Python walks and frames;
//! `--no-python` turns the walk off. Needs root; under `CI=true` it fails instead of skipping.

use crate::support::{Running, SUMMARY_JSON, Summary, Tracer, privileged};

/// A recursive fib, run for a few seconds of CPU (the tracer ends when it exits).
const FIB: &str = "\
import time
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
def outer():
    end = time.monotonic() + 3
    while time.monotonic() < end:
        fib(16)
outer()
";

/// The JSON summary of tracing `python3.11 FIB` to the end, with `extra` flags; `attach`:
/// started first and traced with `--pid`, else launched with `--`.
fn session(extra: &[&str], attach: bool) -> Summary {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let script = dir.path().join("fib_session.py");
    std::fs::write(&script, FIB).expect("write the script");
    let script = script.to_str().expect("a UTF-8 path");
    let mut args: Vec<&str> = vec!["-f", "folded", "-o", "/dev/null"];
    args.extend(SUMMARY_JSON);
    args.extend(extra);
    let _running;
    let pid;
    if attach {
        let child = std::process::Command::new("/usr/bin/python3.11")
            .arg(script)
            .spawn()
            .expect("start python3.11");
        _running = Running(child);
        pid = _running.pid().to_string();
        args.extend(["--pid", pid.as_str()]);
    } else {
        args.extend(["--", "/usr/bin/python3.11", script]);
    }
    Summary::of(&Tracer::start(&args).finish())
}

/// The launched interpreter is registered, launched with `--` or traced with `--pid`: the kernel walks its Python frames in (nearly)
/// every sample, each walk several frames deep (`outer`, `fib`...), hardly any cut short.
#[test]
fn python_session_registers_the_interpreter() {
    let Some(_serial) = privileged("python_session_registers_the_interpreter") else {
        return;
    };
    for attach in [false, true] {
        judge_walks(&session(&[], attach));
    }
}

/// Nearly every sample walked, each walk several frames deep, hardly any cut short.
fn judge_walks(summary: &Summary) {
    let (samples, walks, frames) = (
        summary.count("samples"),
        summary.count("python.walks"),
        summary.count("python.frames"),
    );
    assert!(samples >= 50, "too few samples to judge: {}", summary.0);
    assert!(
        walks * 100 >= samples * 90,
        "walks {walks} of {samples} samples: {}",
        summary.0
    );
    assert!(frames >= walks * 3, "frames {frames} for {walks} walks: {}", summary.0);
    // A sample before the interpreter made its first thread state has no chain to walk.
    let cut = summary.count("python.cut_short");
    assert!(cut * 20 <= walks, "{cut} of {walks} walks cut short: {}", summary.0);
}

/// `--no-python`: no walk at all.
#[test]
fn python_session_no_python() {
    let Some(_serial) = privileged("python_session_no_python") else {
        return;
    };
    let summary = session(&["--no-python"], false);
    assert!(summary.count("samples") >= 50, "too few samples: {}", summary.0);
    assert_eq!(summary.count("python.walks"), 0, "{}", summary.0);
    assert_eq!(summary.count("python.frames"), 0, "{}", summary.0);
}
