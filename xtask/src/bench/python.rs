//! What a Python walk costs (section 3c): Debian's `python3.11` recursing in pure Python
//! (`fib`, about 25 Python frames deep under the interpreter's native frames), traced with
//! `--pid` at 999 Hz twice: with the kernel's walk of the CPython frame chain, and with
//! `--no-python` (the same native walk of the same stacks, without it). BPF program time per
//! sample from the kernel's statistics as in `depth`; the difference over the Python frames a
//! sample holds is the cost of a Python frame, beside the native cost per frame `depth`
//! measures.

use std::process::Command;

use serde_json::json;

use super::{
    Bench,
    depth::traced_walk_ns,
    report::{Figure, Phase, Spread, spread_json, table},
    sys::Sysctl,
};

/// The workload: recursion to depth 22 again and again, for at most ten minutes.
const SCRIPT: &str = "\
import time
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
end = time.monotonic() + 600
while time.monotonic() < end:
    fib(22)
";

/// The interpreter measured.
const PYTHON: &str = "/usr/bin/python3.11";

pub fn run(b: &Bench) -> anyhow::Result<Phase> {
    let _stats = Sysctl::set("kernel.bpf_stats_enabled", "1")?;
    let (reps, secs) = if b.plan.quick { (1, 2) } else { (5, 3) };
    let mut with = Vec::new();
    let mut without = Vec::new();
    let mut frames_per_walk = Vec::new();
    for rep in 0..reps {
        let (ns, summary) = traced_walk_ns(
            b,
            Command::new(PYTHON).args(["-c", SCRIPT]),
            &format!("python-{rep}"),
            &[],
            secs,
            0.0,
        )?;
        let walks = summary["python"]["walks"].as_u64().unwrap_or(0);
        let frames = summary["python"]["frames"].as_u64().unwrap_or(0);
        anyhow::ensure!(walks > 0, "no Python walk in the sessions of {PYTHON}: {summary}");
        frames_per_walk.push(frames as f64 / walks as f64);
        with.push(ns);
        let (ns, _) = traced_walk_ns(
            b,
            Command::new(PYTHON).args(["-c", SCRIPT]),
            &format!("native-{rep}"),
            &["--no-python"],
            secs,
            0.0,
        )?;
        without.push(ns);
    }
    let (with, without, frames) = (Spread::of(with), Spread::of(without), Spread::of(frames_per_walk));
    let per_frame = match (&with, &without, &frames) {
        (Some(w), Some(n), Some(f)) if f.median > 0.0 => Some((w.median - n.median) / f.median),
        _ => None,
    };
    let us = |s: &Option<Spread>| {
        s.as_ref()
            .map_or("—".to_owned(), |s| s.show(|ns| format!("{:.1} µs", ns / 1000.0)))
    };
    let rows = vec![
        vec!["Python walk on".to_owned(), us(&with)],
        vec!["`--no-python` (native walk only)".to_owned(), us(&without)],
    ];
    Ok(Phase {
        key: "python",
        title: "Cost of a Python walk",
        text: format!(
            "`{PYTHON}` recursing in `fib(22)`, traced with `--pid` at 999 Hz for {secs} s \
             ({reps} runs): BPF program time per sample (median [min, max]), with the walk of the \
             CPython frame chain and without it; {} Python frames per walk (median). The \
             rejecting runs' time is not taken out: it is the same in both.\n\n{}\n",
            frames.as_ref().map_or("—".to_owned(), |f| format!("{:.1}", f.median)),
            table(&["session", "BPF time per sample"], &rows)
        ),
        json: json!({
            "with_python_ns": spread_json(with),
            "without_python_ns": spread_json(without),
            "python_frames_per_walk": spread_json(frames),
            "ns_per_python_frame": per_frame,
        }),
        figures: vec![Figure::context_ns(
            "BPF time per Python frame (CPython 3.11, `--pid`, 999 Hz)",
            per_frame,
        )],
    })
}
