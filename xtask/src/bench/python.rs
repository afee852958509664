//! What a Python walk costs (section 3c), per CPython version: Debian's `python3.11`, each
//! pyenv 3.6-3.13 found, trixie's 3.13 and unstable's 3.14 and 3.15 (run chrooted into their
//! private roots, `setup/python_root.rs`), recursing in pure Python (`fib`, about 25 Python frames deep under the
//! interpreter's native frames), traced with `--pid` at 999 Hz twice: with the kernel's walk of
//! the CPython frame chain, and with `--no-python` (the same native walk of the same stacks,
//! without it). BPF program time per sample from the kernel's statistics as in `depth`; the
//! difference over the Python frames a sample holds is the cost of a Python frame (3.6-3.10
//! walk `PyFrameObject` chains, 3.11+ `_PyInterpreterFrame`s, 3.13+ located by their debug
//! offsets), beside the native cost per frame
//! `depth` measures.

use std::process::Command;

use serde_json::json;

use crate::setup::python_root;

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

/// Debian's interpreter, measured first (the figure of the report's summary).
const PYTHON: &str = "/usr/bin/python3.11";
/// pyenv's versions measured beside it, where installed.
const PYENV_MINORS: [&str; 8] = ["3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13"];

/// One interpreter's sessions: BPF time per sample with and without the Python walk, and
/// Python frames per walk.
struct Measured {
    label: String,
    with: Option<Spread>,
    without: Option<Spread>,
    frames: Option<Spread>,
}

impl Measured {
    fn per_frame(&self) -> Option<f64> {
        match (&self.with, &self.without, &self.frames) {
            (Some(w), Some(n), Some(f)) if f.median > 0.0 => Some((w.median - n.median) / f.median),
            _ => None,
        }
    }
}

/// The interpreters measured: Debian's, then each pyenv version installed, then the Debian
/// interpreters of the private roots that are there (`cargo xtask setup` makes them): a label
/// and the command that starts it.
fn interpreters() -> Vec<(String, Vec<String>)> {
    let mut out = vec![(format!("3.11 (Debian, {PYTHON})"), vec![PYTHON.to_owned()])];
    let root = Command::new("pyenv")
        .arg("root")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| std::path::PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let versions: Vec<std::path::PathBuf> = root
        .and_then(|root| std::fs::read_dir(root.join("versions")).ok())
        .map(|dir| dir.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default();
    for minor in PYENV_MINORS {
        let found = versions
            .iter()
            .filter(|v| {
                v.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{minor}.")))
            })
            .map(|v| v.join(format!("bin/python{minor}")))
            .find(|p| p.exists());
        if let Some(python) = found {
            out.push((format!("{minor} (pyenv)"), vec![python.display().to_string()]));
        }
    }
    let roots = [
        (python_root::path(), "3.13", "trixie"),
        (python_root::sid_path(), "3.14", "unstable"),
        (python_root::sid_path(), "3.15", "unstable"),
    ];
    for (root, minor, suite) in roots {
        let Ok(root) = root else { continue };
        let python = format!("/usr/bin/python{minor}");
        if root.join(python.trim_start_matches('/')).exists() {
            let argv = vec!["chroot".to_owned(), root.display().to_string(), python];
            out.push((format!("{minor} (Debian {suite}, chrooted)"), argv));
        } else {
            eprintln!(
                "bench: no {minor} root at {} (cargo xtask setup makes it)",
                root.display()
            );
        }
    }
    out
}

pub fn run(b: &Bench) -> anyhow::Result<Phase> {
    let _stats = Sysctl::set("kernel.bpf_stats_enabled", "1")?;
    let (reps, secs) = if b.plan.quick { (1, 2) } else { (3, 3) };
    let mut all = Vec::new();
    for (index, (label, python)) in interpreters().into_iter().enumerate() {
        all.push(measure(b, index, label, &python, reps, secs)?);
    }
    let us = |s: &Option<Spread>| {
        s.as_ref()
            .map_or("—".to_owned(), |s| s.show(|ns| format!("{:.1} µs", ns / 1000.0)))
    };
    let rows: Vec<Vec<String>> = all
        .iter()
        .map(|m| {
            vec![
                m.label.clone(),
                m.frames.as_ref().map_or("—".to_owned(), |f| format!("{:.1}", f.median)),
                us(&m.with),
                us(&m.without),
                m.per_frame().map_or("—".to_owned(), |ns| format!("{ns:.0} ns")),
            ]
        })
        .collect();
    let debian = all.first().and_then(Measured::per_frame);
    Ok(Phase {
        key: "python",
        title: "Cost of a Python walk",
        text: format!(
            "Each interpreter recursing in `fib(22)`, traced with `--pid` at 999 Hz for {secs} s \
             ({reps} runs each): BPF program time per sample (median [min, max]), with the walk of \
             the CPython frame chain and without it (`--no-python`), Python frames per walk \
             (median), and the difference per Python frame (medians). The rejecting runs' time \
             is not taken out: it is the same in both. A native frame's cost is in the depth \
             section.\n\n{}\n",
            table(
                &[
                    "CPython",
                    "Python frames per walk",
                    "Python walk on",
                    "`--no-python`",
                    "per Python frame"
                ],
                &rows
            )
        ),
        json: json!({
            "interpreters": all.iter().map(|m| json!({
                "interpreter": m.label,
                "with_python_ns": spread_json(m.with),
                "without_python_ns": spread_json(m.without),
                "python_frames_per_walk": spread_json(m.frames),
                "ns_per_python_frame": m.per_frame(),
            })).collect::<Vec<_>>(),
        }),
        figures: vec![Figure::context_ns(
            "BPF time per Python frame (CPython 3.11, `--pid`, 999 Hz)",
            debian,
        )],
    })
}

/// `reps` pairs of sessions of `python` (with the Python walk, then without it).
fn measure(
    b: &Bench,
    index: usize,
    label: String,
    python: &[String],
    reps: usize,
    secs: u64,
) -> anyhow::Result<Measured> {
    let start = || {
        let mut command = Command::new(&python[0]);
        command.args(&python[1..]).args(["-c", SCRIPT]);
        command
    };
    let mut with = Vec::new();
    let mut without = Vec::new();
    let mut frames_per_walk = Vec::new();
    for rep in 0..reps {
        let (ns, summary) = traced_walk_ns(b, &mut start(), &format!("python{index}-{rep}"), &[], secs, 0.0)?;
        let walks = summary["python"]["walks"].as_u64().unwrap_or(0);
        let frames = summary["python"]["frames"].as_u64().unwrap_or(0);
        anyhow::ensure!(
            walks > 0,
            "no Python walk in the sessions of {}: {summary}",
            python.join(" ")
        );
        frames_per_walk.push(frames as f64 / walks as f64);
        with.push(ns);
        let (ns, _) = traced_walk_ns(
            b,
            &mut start(),
            &format!("native{index}-{rep}"),
            &["--no-python"],
            secs,
            0.0,
        )?;
        without.push(ns);
    }
    Ok(Measured {
        label,
        with: Spread::of(with),
        without: Spread::of(without),
        frames: Spread::of(frames_per_walk),
    })
}
