//! What a frame costs (section 3b): the `deep` workload at three depths (104, 304 and 2004
//! frames: `deep`, `deeper`, `deepest` of fixtures/workloads), each traced with `--pid` at
//! 999 Hz with the default `--max-depth`, its BPF program time per walk taken from the kernel's
//! statistics as in `cost` (the rejecting runs' time, measured there, taken out). The time per
//! extra frame is the slope between the shallowest and the deepest; the ring-buffer bytes per
//! frame follow from the record's layout (`tracer_common::trace::SampleRecord::len`), which a
//! record is exactly as long as.

use std::{
    process::Command,
    thread::sleep,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use serde_json::json;
use tracer_common::trace::SampleRecord;

use super::{
    Bench,
    progstats::prog_stats,
    report::{Figure, Phase, Spread, Verdict, spread_json, table},
    runs::Runs,
    sys::{self, Sysctl},
    tool::{Spawned, Tool},
};

/// The workloads and their user frames per sample (`_start;main;run;recurse x N;leaf`).
const DEPTHS: [(&str, u32); 3] = [("deep", 104), ("deeper", 304), ("deepest", 2004)];

/// The ring buffer's own header before each record.
const RINGBUF_HEADER: usize = 8;

pub fn run(b: &Bench, runs: &Runs) -> anyhow::Result<Phase> {
    let _stats = Sysctl::set("kernel.bpf_stats_enabled", "1")?;
    let reject = runs
        .reject_ns
        .iter()
        .find(|(t, _)| *t == Tool::Ours)
        .map_or(0.0, |(_, s)| s.median);
    let (reps, secs) = if b.plan.quick { (1, 1) } else { (5, 3) };
    let mut points = Vec::new();
    for (name, frames) in DEPTHS {
        let walks: Vec<f64> = (0..reps)
            .map(|_| walk_ns(b, name, secs, reject))
            .collect::<anyhow::Result<_>>()?;
        points.push((name, frames, Spread::of(walks)));
    }
    let median = |i: usize| points[i].2.as_ref().map(|s| s.median);
    let (first, last) = (DEPTHS[0].1, DEPTHS[DEPTHS.len() - 1].1);
    let per_frame = median(0)
        .zip(median(points.len() - 1))
        .map(|(shallow, deep)| (deep - shallow) / f64::from(last - first));
    let bytes = |frames: u32| SampleRecord::len(0, frames) + RINGBUF_HEADER;
    let per_frame_bytes = (bytes(last) - bytes(first)) as f64 / f64::from(last - first);
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|(name, frames, walk)| {
            vec![
                format!("`{name}`"),
                frames.to_string(),
                walk.as_ref()
                    .map_or("—".to_owned(), |s| s.show(|ns| format!("{:.1} µs", ns / 1000.0))),
                bytes(*frames).to_string(),
            ]
        })
        .collect();
    let figures = vec![
        Figure::context_ns(
            format!("BPF time per extra frame ({first} to {last} frames, 999 Hz, `--pid`)"),
            per_frame,
        ),
        Figure::new(
            "Ring-buffer bytes per extra frame",
            format!(
                "{per_frame_bytes:.0} B ({} B at {first} frames, {} B at {last})",
                bytes(first),
                bytes(last)
            ),
            "— (context)",
            Verdict::Peer,
        ),
    ];
    Ok(Phase {
        key: "depth",
        title: "Cost per frame",
        text: format!(
            "The recursive workload at three depths, walked whole with the default `--max-depth` \
             (2048); BPF program time per walk (median [min, max] of {reps} runs of {secs} s), the \
             rejecting runs' time taken out as in the kernel cost above, and the bytes each sample \
             takes in the ring buffer.\n\n{}\n",
            table(&["workload", "user frames", "BPF time per walk", "record bytes"], &rows)
        ),
        json: json!({
            "points": points.iter().map(|(name, frames, walk)| json!({
                "workload": name, "frames": frames, "walk_ns": spread_json(*walk),
                "record_bytes": bytes(*frames),
            })).collect::<Vec<_>>(),
            "ns_per_frame": per_frame,
            "bytes_per_frame": per_frame_bytes,
        }),
        figures,
    })
}

/// BPF nanoseconds per walk of workload `name` traced with `--pid` for `secs` seconds: the
/// programs' time less `reject` per run that was not a sample of the workload, over the
/// samples the tracer's JSON summary counts.
fn walk_ns(b: &Bench, name: &str, secs: u64, reject: f64) -> anyhow::Result<f64> {
    let program = b.workload(b.plan.peer_set(), name);
    let (ns, _) = traced_walk_ns(b, Command::new(&program).arg("600"), name, &[], secs, reject)?;
    Ok(ns)
}

/// BPF nanoseconds per walk of the process `workload` starts, traced with `--pid` and
/// `extra` flags at 999 Hz for `secs` seconds (see [`walk_ns`]), and the tracer's JSON
/// summary. `name` names its files.
pub fn traced_walk_ns(
    b: &Bench,
    workload: &mut Command,
    name: &str,
    extra: &[&str],
    secs: u64,
    reject: f64,
) -> anyhow::Result<(f64, serde_json::Value)> {
    let workload = Spawned::start(workload, &b.scratch.join(format!("{name}-workload.stdout")))?;
    let mut cmd = Command::new(&b.tracer);
    cmd.args(["-F", "999", "--no-kernel", "--summary-format", "json", "-o"])
        .arg(b.scratch.join(format!("{name}.folded")))
        .args(extra)
        .args(["--pid", &workload.pid().to_string()]);
    let tracer = Spawned::start(&mut cmd, &b.scratch.join(format!("{name}-tracer.stdout")))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let first = loop {
        let s = prog_stats(tracer.pid())?;
        if s.run_cnt > 0 {
            break s;
        }
        anyhow::ensure!(Instant::now() < deadline, "sframe-trace ran no BPF program within 60 s");
        sleep(Duration::from_millis(10));
    };
    sleep(Duration::from_secs(secs));
    let stats = prog_stats(tracer.pid())?.since(first);
    sys::signal(tracer.pid(), libc::SIGINT);
    let (_, stderr) = tracer.reap(Duration::from_secs(30))?;
    drop(workload);
    let summary: serde_json::Value = stderr
        .lines()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
        .with_context(|| format!("no JSON summary from sframe-trace on {name}:\n{stderr}"))?;
    let samples = summary["samples"].as_u64().filter(|n| *n > 0).context("no samples")?;
    let rejected = stats.run_cnt.saturating_sub(samples) as f64;
    Ok(((stats.run_time_ns as f64 - reject * rejected) / samples as f64, summary))
}
