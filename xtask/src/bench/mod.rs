//! `cargo xtask bench`: measure, never assert. One run measures sframe-trace and its peers
//! (`perf record --call-graph dwarf|fp`, bpftrace's `ustack`) side by side and writes
//! `target/bench/report.md`, `report.json` (every figure) and `report.svg` (the charts).
//!
//! 1. Set up: the peers' Debian packages, the release tracer, the examples, the workloads.
//! 2. Phases, each in its own module: stack accuracy (`accuracy`); overhead, with the kernel
//!    cost per sample and the data volume read from the same runs (`overhead` and `measure`,
//!    `cost`, `volume`); the cost per frame at three depths (`depth`); map memory and table build rate (`memory`); attach time (`attach`); SFrame
//!    decode rate (`decode`); perf-map symbolization (`perfmap`); memory and open files under
//!    process and file churn (`soak`); system-wide attach with large objects mapped and new
//!    processes' completeness by executable size (`hostscale`).
//! 3. Report: `report` (Markdown, JSON) and `chart` (SVG).
//!
//! The machine may be busy with other work: the report records the load average before and
//! after, and every timed figure is repeated and given as median with its range.

mod accuracy;
mod attach;
mod bare;
mod chart;
mod cost;
mod decode;
mod depth;
mod fold;
/// The `/proc` readers of the hardening tests (one source file for both).
#[path = "../../../tracer-user/tests/integration/hardening/footprint.rs"]
mod footprint;
mod hostscale;
mod java;
mod measure;
mod memory;
mod node;
mod overhead;
mod perfmap;
mod progstats;
mod python;
mod report;
mod runs;
mod soak;
mod static_build;
mod sys;
mod tool;
mod volume;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use crate::{
    cmd::{output, sh},
    setup,
};

/// What the peers need, installed by the bench only (not by the test set-up).
const PEER_PACKAGES: &[&str] = &["linux-perf", "bpftrace"];

/// How much to measure: the full run (a few minutes) or `--quick` (a smoke run).
pub struct Plan {
    pub quick: bool,
    /// Repetitions of each overhead configuration and of the attach measurement.
    pub runs: usize,
    /// Work units of one cpubench run (about 0.8 ms of CPU each here).
    pub units: u32,
    /// Sampling time of each accuracy run.
    pub accuracy_secs: f64,
    /// SFrame versions whose workloads sframe-trace is judged on; the peers get the last.
    pub sets: &'static [&'static str],
    /// Time spent building tables over and over for the build rate.
    pub build_secs: f64,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                quick,
                runs: 2,
                units: 300,
                accuracy_secs: 0.5,
                sets: &["v3"],
                build_secs: 0.2,
            }
        } else {
            Plan {
                quick,
                // A run's CPU time varies by about 1.5 % (sd) on this VM, whatever is traced,
                // and the medians of 5 runs moved by up to 3 % from one bench to the next; the
                // median of 11 moves a third less.
                runs: 11,
                units: 1500,
                accuracy_secs: 2.0,
                sets: &["v1", "v2", "v3"],
                build_secs: 1.0,
            }
        }
    }

    /// The SFrame version the peers are compared on.
    pub fn peer_set(&self) -> &'static str {
        self.sets[self.sets.len() - 1]
    }
}

/// Where everything is.
pub struct Bench {
    pub root: PathBuf,
    pub plan: Plan,
    /// The release `sframe-trace`.
    pub tracer: PathBuf,
    /// `target/bench`: the reports.
    pub out: PathBuf,
    /// `target/bench/work`: the runs' files.
    pub scratch: PathBuf,
    /// `target/bench/workloads/{v1,v2,v3}`.
    pub workloads: PathBuf,
}

impl Bench {
    /// A workload program of SFrame version `set`.
    pub fn workload(&self, set: &str, name: &str) -> PathBuf {
        self.workloads.join(set).join(name)
    }

    /// The benchmark program: frame-pointer-less with SFrame, or with frame pointers.
    pub fn cpubench(&self, frame_pointers: bool) -> PathBuf {
        self.workload(
            self.plan.peer_set(),
            if frame_pointers { "cpubench-fp" } else { "cpubench" },
        )
    }
}

pub fn bench(root: &Path, quick: bool) -> anyhow::Result<()> {
    let plan = Plan::new(quick);
    setup::apt(PEER_PACKAGES)?;
    let out = root.join("target/bench");
    let b = Bench {
        root: root.to_path_buf(),
        tracer: root.join("target/release/sframe-trace"),
        scratch: out.join("work"),
        workloads: out.join("workloads"),
        out,
        plan,
    };
    let started = std::time::Instant::now();
    prepare(&b)?;
    eprintln!("bench: set-up and builds took {:.0} s", started.elapsed().as_secs_f64());

    let mut report = report::Report::start(&b);
    let accuracy = report.timed("accuracy", || accuracy::run(&b))?;
    report.add(accuracy);
    let runs = report.timed("overhead", || overhead::run(&b))?;
    let memory = report.timed("memory", || memory::run(&b, &runs))?;
    report.add(overhead::phase(&runs));
    let paired = report.timed("above bare", || bare::run(&b))?;
    report.add(paired);
    report.add(cost::phase(&runs));
    let depth = report.timed("depth", || depth::run(&b, &runs))?;
    report.add(depth);
    let python = report.timed("python", || python::run(&b))?;
    report.add(python);
    let java = report.timed("java", || java::run(&b))?;
    report.add(java);
    let node = report.timed("node", || node::run(&b))?;
    report.add(node);
    report.add(memory.phase(&b.root));
    let attach = report.timed("attach", || attach::run(&b, &memory))?;
    report.add(attach);
    report.add(volume::phase(&runs, &memory));
    let decode = report.timed("decode", || decode::run(&b))?;
    report.add(decode);
    let perfmap = report.timed("perfmap", || perfmap::run(&b))?;
    report.add(perfmap);
    let soak = report.timed("soak", || soak::run(&b))?;
    report.add(soak);
    let host = report.timed("host scale", || hostscale::run(&b))?;
    report.add(host);
    let static_build = report.timed("static build", || static_build::run(&b))?;
    report.add(static_build);
    report.finish(&b)?;
    let _ = std::fs::remove_dir_all(&b.scratch);
    Ok(())
}

/// `cargo xtask bench --phase NAME`: one phase (`perfmap`: the examples only; `hostscale`,
/// `python`, `java`, `node`, `static`, `soak`: the release tracer too, run as root; `bare`: also perf and the
/// benchmark program), printed (the report files of a full run are left as they are). `quick`
/// shortens the ones whose length the plan sets (the soak, the paired rounds, the Java runs); the others
/// always run as in `--quick`.
pub fn phase(root: &Path, name: &str, quick: bool) -> anyhow::Result<()> {
    let out = root.join("target/bench");
    let b = Bench {
        root: root.to_path_buf(),
        tracer: root.join("target/release/sframe-trace"),
        scratch: out.join("phase"),
        workloads: out.join("workloads"),
        out,
        plan: Plan::new(quick || !matches!(name, "soak" | "bare" | "java" | "node")),
    };
    let (run, example): (fn(&Bench) -> anyhow::Result<report::Phase>, _) = match name {
        "perfmap" => (perfmap::run, Some("perfmap_bench")),
        "hostscale" => {
            crate::cmd::build_release_tracer(root)?;
            (hostscale::run, Some("build_bench"))
        }
        "python" => {
            crate::cmd::build_release_tracer(root)?;
            (python::run, None)
        }
        "java" => {
            crate::cmd::build_release_tracer(root)?;
            (java::run, None)
        }
        "node" => {
            crate::cmd::build_release_tracer(root)?;
            (node::run, None)
        }
        "static" => {
            crate::cmd::build_release_tracer(root)?;
            crate::dist::dist(root, &[crate::dist::arch("x86_64")?])?;
            (static_build::run, None)
        }
        "soak" => {
            crate::cmd::build_release_tracer(root)?;
            (soak::run, None)
        }
        "bare" => {
            crate::cmd::build_release_tracer(root)?;
            setup::apt(PEER_PACKAGES)?;
            sh(Command::new("bash").arg(root.join("fixtures/toolchains.sh")))?;
            sh(Command::new("bash")
                .arg(root.join("fixtures/workloads/build.sh"))
                .arg(&b.workloads)
                .arg(b.plan.peer_set()))?;
            (bare::run, None)
        }
        other => {
            anyhow::bail!(
                "no phase {other:?} runs alone (perfmap, hostscale, python, java, node, static, soak and bare do)"
            )
        }
    };
    if let Some(example) = example {
        build_examples(&[example])?;
    }
    std::fs::create_dir_all(&b.scratch)?;
    let phase = run(&b)?;
    println!("## {}\n\n{}", phase.title, phase.text);
    for figure in &phase.figures {
        println!(
            "- {}: {} (target {}: {})",
            figure.what,
            figure.measured,
            figure.target,
            figure.verdict.text()
        );
    }
    let _ = std::fs::remove_dir_all(&b.scratch);
    Ok(())
}

/// Build the benchmark examples `names` (release; the eBPF program is the release tracer's,
/// already built).
fn build_examples(names: &[&str]) -> anyhow::Result<()> {
    let mut examples = cargo();
    examples.args(["build", "--release", "--package", "tracer-user"]);
    for name in names {
        examples.args(["--example", name]);
    }
    sh(&mut examples)
}

/// Build the release tracer, the benchmark examples and the workloads (binutils 2.44 and the
/// sid snapshot first, for SFrame v2 and v3).
fn prepare(b: &Bench) -> anyhow::Result<()> {
    sh(cargo().args(["build", "--release", "--package", "tracer-user"]))?;
    // The static executable the `static_build` phase measures beside it.
    crate::dist::dist(&b.root, &[crate::dist::arch("x86_64")?])?;
    build_examples(&EXAMPLES)?;
    let sets = b.plan.sets;
    if sets.iter().any(|s| *s != "v1") {
        sh(Command::new("bash").arg(b.root.join("fixtures/toolchains.sh")))?;
    }
    sh(Command::new("bash")
        .arg(b.root.join("fixtures/workloads/build.sh"))
        .arg(&b.workloads)
        .args(sets))?;
    let _ = std::fs::remove_dir_all(&b.scratch);
    std::fs::create_dir_all(&b.scratch)?;
    Ok(())
}

/// The benchmark examples of tracer-user (the pure readers and perf maps), built by [`prepare`].
const EXAMPLES: [&str; 3] = ["build_bench", "decode_bench", "perfmap_bench"];

/// One of [`EXAMPLES`], ready to run.
pub fn example(b: &Bench, name: &str) -> Command {
    Command::new(b.root.join("target/release/examples").join(name))
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
}

/// The first line of `program --version`, or "not found".
pub fn version(program: &str) -> String {
    output(Command::new(program).arg("--version"))
        .and_then(|v| v.lines().next().map(str::to_owned))
        .unwrap_or_else(|| "not found".to_owned())
}
