//! Overhead (section 2 of the report) on the fixed-work benchmark (fixtures/workloads/cpubench.c),
//! and the runs (`runs`) that the kernel cost (`cost`), the data volume (`volume`) and the table
//! memory (`memory`) are read from; one run is `measure`'s.
//!
//! Overhead = (workload CPU - untraced median + tracer CPU during the work) / untraced median.
//! The workload's CPU time is its own rusage (user + system; it prints it, since the tracer
//! reaps it); the kernel runs the tracers' BPF programs and perf's stack copies in the
//! workload's interrupt context, so their cost is in it. The tracer's start-up and output are
//! reported apart (its rusage minus the workload's), as is `perf script`.
//! Configurations alternate within each round, so slow drifts in the machine's load spread
//! over all of them.

use anyhow::Context as _;
use serde_json::{Value, json};

use super::{
    Bench, cost,
    measure::one,
    report::{Figure, Phase, Spread, Verdict, spread_json, table},
    runs::{Config, Run, Runs},
    sys::Sysctl,
    tool::Tool,
};

/// Overhead target at 999 Hz, in percent.
const TARGET_PCT: f64 = 1.0;
/// sframe-trace's overhead at 999 Hz above bare sampling's (`perf record` without call
/// graphs: the cost of the samples themselves), at most, in points.
const TARGET_ABOVE_BARE_POINTS: f64 = 0.5;

pub fn run(b: &Bench) -> anyhow::Result<Runs> {
    // For the kernel cost per sample (`cost`): on for the whole phase so that both BPF tracers
    // pay its two clock reads per program run alike.
    let _stats = Sysctl::set("kernel.bpf_stats_enabled", "1")?;
    let mut configs: Vec<(Config, Vec<Run>)> = Config::all().into_iter().map(|c| (c, Vec::new())).collect();
    for round in 0..b.plan.runs {
        for (config, runs) in &mut configs {
            let run = one(b, *config, round).with_context(|| format!("overhead run {round} of {config:?}"))?;
            eprintln!(
                "bench: {config:?} round {round}: workload {:.3} s CPU, tracer {:.3} s in the window, {:?} samples",
                run.workload_cpu, run.tracer_window_cpu, run.samples
            );
            runs.push(run);
        }
    }
    let mut reject_ns = Vec::new();
    for tool in [Tool::Ours, Tool::Bpftrace] {
        let mut ns = Vec::new();
        for _ in 0..b.plan.runs.min(3) {
            ns.push(cost::rejecting_run(b, tool).with_context(|| format!("rejecting runs of {}", tool.name()))?);
        }
        let spread = Spread::of(ns).context("no rejecting runs measured")?;
        eprintln!("bench: {} rejects a sample in {:.0} ns", tool.name(), spread.median);
        reject_ns.push((tool, spread));
    }
    Ok(Runs { configs, reject_ns })
}

fn pct(x: f64) -> String {
    format!("{x:.2}%")
}

pub fn phase(runs: &Runs) -> Phase {
    let mut rows = Vec::new();
    let mut json_rows = Vec::new();
    for (config, rs) in &runs.configs {
        let cpu = Spread::of(rs.iter().map(|r| r.workload_cpu));
        let (name, hz, overhead, workload, bpf, window, rest) = match *config {
            Config::Baseline { frame_pointers } => (
                format!(
                    "untraced (`{}`)",
                    if frame_pointers { "cpubench-fp" } else { "cpubench" }
                ),
                "—".to_owned(),
                None,
                None,
                None,
                None,
                None,
            ),
            Config::Traced { tool, hz } => {
                let base = runs.baseline(*config).unwrap_or(f64::NAN);
                (
                    tool.name().to_owned(),
                    hz.to_string(),
                    runs.overhead(*config),
                    Spread::of(rs.iter().map(|r| 100.0 * (r.workload_cpu - base) / base)),
                    Spread::of(rs.iter().filter_map(Run::bpf_seconds).map(|s| 100.0 * s / base)),
                    Spread::of(rs.iter().map(|r| 100.0 * r.tracer_window_cpu / base)),
                    Spread::of(rs.iter().map(|r| r.tracer_rest_cpu)),
                )
            }
        };
        let post = rs.iter().find_map(|r| r.post).map(|(cpu, _)| cpu);
        let show = |s: Option<Spread>, f: fn(f64) -> String| s.map_or("—".to_owned(), |s| s.show(f));
        rows.push(vec![
            name.clone(),
            hz.clone(),
            show(cpu, |x| format!("{x:.3} s")),
            show(overhead, pct),
            show(workload, pct),
            show(bpf, pct),
            show(window, pct),
            show(rest, |x| format!("{x:.2} s")),
            post.map_or("—".to_owned(), |p| format!("{p:.2} s")),
        ]);
        json_rows.push(json!({
            "config": name, "hz": hz, "workload_cpu_s": spread_json(cpu),
            "overhead_pct": spread_json(overhead), "workload_delta_pct": spread_json(workload),
            "bpf_time_pct": spread_json(bpf),
            "tracer_window_pct": spread_json(window), "tracer_startup_and_output_s": spread_json(rest),
            "post_processing_cpu_s": post,
            "runs": rs.iter().map(run_json).collect::<Vec<_>>(),
        }));
        if let Config::Traced { tool, .. } = config {
            json_rows.last_mut().expect("just pushed")["tool"] = json!(tool.key());
        }
    }
    let text = format!(
        "`cpubench` (fixtures/workloads/cpubench.c: fixed work, 44-46 frames deep, no clock reads), \
         launched by each tracer; CPU time is user + system. Overhead = (workload CPU − untraced median \
         + tracer CPU while the work runs) / untraced median. The tracer's start-up, table loading and \
         output, and `perf script` over the first run's perf.data, are listed apart and not in the \
         overhead. Frame-pointer tracers run the frame-pointer build `cpubench-fp` against its own \
         baseline. The BPF tracers' program time (kernel statistics, every CPU, while the work runs; \
         the workload's part of it is in the workload's CPU time) is shown against the untraced \
         median too: with the tracer's CPU, it is the part of the overhead measured exactly, which \
         the run-to-run spread of the workload's CPU time can hide (the interrupt that runs the \
         programs and their effect on caches are not in it).\n\n{}",
        table(
            &[
                "tracer",
                "Hz",
                "workload CPU",
                "overhead",
                "of which workload",
                "BPF programs",
                "of which tracer",
                "tracer start-up + output",
                "perf script"
            ],
            &rows,
        )
    );
    let summarized = [(Tool::Ours, 99), (Tool::Ours, 999)]
        .into_iter()
        .chain([Tool::PerfDwarf, Tool::PerfFp, Tool::Bpftrace, Tool::PerfBare].map(|t| (t, 999)));
    let figures = summarized
        .map(|(tool, hz)| {
            let o = runs.overhead(Config::Traced { tool, hz });
            let (target, verdict) = match (tool, hz) {
                (Tool::Ours, 999) => (
                    format!("<= {TARGET_PCT}%"),
                    o.map_or(Verdict::NotMeasured, |s| Verdict::of(s.median <= TARGET_PCT)),
                ),
                (Tool::Ours, _) => ("— (999 Hz is the target)".to_owned(), Verdict::Peer),
                _ => ("— (peer)".to_owned(), Verdict::Peer),
            };
            let measured = o.map_or("no runs".to_owned(), |s| s.show(pct));
            Figure::new(
                format!("Overhead at {hz} Hz, {}", tool.name()),
                measured,
                target,
                verdict,
            )
        })
        .chain(std::iter::once(above_bare(runs)))
        .chain([Tool::Ours, Tool::Bpftrace].map(|tool| {
            let part = runs.measured_part(Config::Traced { tool, hz: 999 });
            Figure::new(
                format!(
                    "Measured part of the 999 Hz overhead (BPF programs + tracer CPU), {}",
                    tool.name()
                ),
                part.map_or("no runs".to_owned(), |s| s.show(pct)),
                "— (context)",
                Verdict::Peer,
            )
        }))
        .collect();
    Phase {
        key: "overhead",
        title: "2. Overhead",
        text,
        json: json!({
            "target_pct_at_999_hz": TARGET_PCT,
            "target_points_above_bare_at_999_hz": TARGET_ABOVE_BARE_POINTS,
            "configs": json_rows,
        }),
        figures,
    }
}

/// sframe-trace's median overhead at 999 Hz minus bare sampling's, in points, with perf's
/// dwarf walk beside it (the same difference).
fn above_bare(runs: &Runs) -> Figure {
    let median = |tool| runs.overhead(Config::Traced { tool, hz: 999 }).map(|s| s.median);
    let bare = median(Tool::PerfBare);
    let above = |tool| Some(median(tool)? - bare?);
    let (ours, dwarf) = (above(Tool::Ours), above(Tool::PerfDwarf));
    let points = |x: Option<f64>| x.map_or("—".to_owned(), |x| format!("{x:+.2} points"));
    Figure::new(
        "Overhead at 999 Hz above bare sampling (`perf record` without call graphs), medians",
        format!(
            "sframe-trace {}; perf --call-graph dwarf {} (bare sampling {})",
            points(ours),
            points(dwarf),
            bare.map_or("—".to_owned(), pct)
        ),
        format!("<= {TARGET_ABOVE_BARE_POINTS} points"),
        ours.map_or(Verdict::NotMeasured, |x| Verdict::of(x <= TARGET_ABOVE_BARE_POINTS)),
    )
}

fn run_json(r: &Run) -> Value {
    json!({
        "workload_cpu_s": r.workload_cpu, "window_s": r.window,
        "tracer_window_cpu_s": r.tracer_window_cpu, "tracer_startup_and_output_cpu_s": r.tracer_rest_cpu,
        "samples": r.samples, "user_frames": r.frames, "output_bytes": r.output_bytes,
        "bpf": r.bpf.map(|s| json!({"run_time_ns": s.run_time_ns, "run_cnt": s.run_cnt, "programs": s.programs})),
        "post_processing": r.post.map(|(cpu, bytes)| json!({"cpu_s": cpu, "output_bytes": bytes})),
    })
}
