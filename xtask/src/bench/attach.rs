//! Section 5 of the report: table build rate (measured by `memory`) and attach-to-first-sample
//! time: from starting `sframe-trace --pid PID` on a busy process (and `--all`, when this build has
//! it) to its "sampling" line, which it prints once the programs are attached; the busy process's
//! first sample follows within one period (1 ms at 999 Hz).

use std::{
    process::Command,
    thread::sleep,
    time::{Duration, Instant},
};

use serde_json::json;

use super::{
    Bench,
    measure::number_before,
    memory::Memory,
    report::{Figure, Phase, Spread, Verdict, spread_json, table},
    sys,
    tool::Spawned,
};
use crate::cmd::output;

/// Attach within this many seconds.
const TARGET_ATTACH_SECS: f64 = 1.0;
/// Build at least this many unwind rows per second.
const TARGET_ROWS_PER_SEC: f64 = 10e6;
const HZ: u32 = 999;

pub fn run(b: &Bench, memory: &Memory) -> anyhow::Result<Phase> {
    // Busy for far longer than the measurements; killed when `workload` is dropped.
    let mut cmd = Command::new(b.cpubench(false));
    cmd.arg("1000000");
    let workload = Spawned::start(&mut cmd, &b.scratch.join("attach-workload.stdout"))?;
    sleep(Duration::from_millis(200));
    let pid = workload.pid().to_string();
    let by_pid = times(b, &["--pid", &pid]);
    let has_all = output(Command::new(&b.tracer).arg("--help")).is_some_and(|h| h.contains("--all"));
    let all = has_all.then(|| times(b, &["--all"]));
    drop(workload);
    Ok(phase(b, memory, by_pid, all))
}

/// Seconds from start to the "sampling" line, for each of the plan's runs of `sframe-trace
/// ARGS`; an error when a run fails or reports no sample.
fn times(b: &Bench, args: &[&str]) -> Result<Vec<f64>, String> {
    let mut secs = Vec::new();
    for i in 0..b.plan.runs {
        let mut cmd = Command::new(&b.tracer);
        cmd.args(["-F", &HZ.to_string(), "--no-kernel", "-o"])
            .arg(b.scratch.join(format!("attach-{i}.folded")))
            .args(args);
        let start = Instant::now();
        let run = Spawned::start(&mut cmd, &b.scratch.join("attach.stdout")).map_err(|e| format!("{e:#}"))?;
        let line = run.wait_line("sampling", Duration::from_secs(60));
        // A little sampling, so that the run shows it sampled the busy process.
        sleep(Duration::from_millis(100));
        sys::signal(run.pid(), libc::SIGINT);
        let (_, stderr) = run.reap(Duration::from_secs(60)).map_err(|e| format!("{e:#}"))?;
        let at = line.map_err(|e| format!("{e:#}"))?;
        if number_before(&stderr, " samples in ").unwrap_or(0) == 0 {
            return Err(format!("no samples:\n{stderr}"));
        }
        secs.push(at.duration_since(start).as_secs_f64());
    }
    Ok(secs)
}

fn phase(b: &Bench, memory: &Memory, by_pid: Result<Vec<f64>, String>, all: Option<Result<Vec<f64>, String>>) -> Phase {
    let ms = |s: f64| format!("{:.0} ms", s * 1000.0);
    let attach_figure = |what: &str, r: &Result<Vec<f64>, String>| match r {
        Ok(v) => {
            let s = Spread::of(v.iter().copied());
            Figure::new(
                what,
                s.map_or("no runs".to_owned(), |s| s.show(ms)),
                format!("<= {TARGET_ATTACH_SECS} s"),
                s.map_or(Verdict::NotMeasured, |s| Verdict::of(s.median <= TARGET_ATTACH_SECS)),
            )
        }
        Err(e) => Figure::new(
            what,
            format!("failed: {}", e.lines().next().unwrap_or("")),
            format!("<= {TARGET_ATTACH_SECS} s"),
            Verdict::NotMeasured,
        ),
    };
    let rate = |kind: &str| {
        let r = &memory.build[kind];
        (r["median"].as_f64(), r["best"].as_f64(), r["worst"].as_f64())
    };
    let mrows = |x: Option<f64>| x.map_or("?".to_owned(), |x| format!("{:.1} M rows/s", x / 1e6));
    let (cpu_median, cpu_best, cpu_worst) = rate("cpu_rows_per_sec");
    let (wall_median, wall_best, wall_worst) = rate("wall_rows_per_sec");
    let rows = memory.build["unwind_rows"].as_u64().unwrap_or(0);
    let mut figures = vec![
        Figure::new(
            format!("Table build rate (cpubench + libc + ld.so, {rows} unwind rows; per CPU second)"),
            format!("{} [{}, {}]", mrows(cpu_median), mrows(cpu_worst), mrows(cpu_best)),
            format!(">= {:.0} M rows/s", TARGET_ROWS_PER_SEC / 1e6),
            cpu_median.map_or(Verdict::NotMeasured, |r| Verdict::of(r >= TARGET_ROWS_PER_SEC)),
        ),
        attach_figure("Attach to first sample, `--pid`", &by_pid),
    ];
    figures.push(match &all {
        Some(r) => attach_figure("Attach to first sample, system-wide `--all`", r),
        None => Figure::new(
            "Attach to first sample, system-wide `--all`",
            "not yet available (no `--all` in `sframe-trace --help`)",
            format!("<= {TARGET_ATTACH_SECS} s"),
            Verdict::NotMeasured,
        ),
    });
    let text = format!(
        "Table build: `table::build_object` over cpubench, libc and ld.so, repeated for {} s \
         (`tracer-user/examples/build_bench.rs`), timed by the thread's CPU clock (by the wall \
         clock: {} [{}, {}], which on a loaded machine measures the neighbours too). Attach: from \
         starting `sframe-trace -F {HZ} --pid PID` on a busy `cpubench` (and `--all` when available) \
         to its \"sampling\" line, printed once the programs are attached; the first sample follows \
         within one period (1 ms).\n\n{}",
        b.plan.build_secs,
        mrows(wall_median),
        mrows(wall_worst),
        mrows(wall_best),
        table(
            &["figure", "measured", "target", "verdict"],
            &figures
                .iter()
                .map(|f| vec![
                    f.what.clone(),
                    f.measured.clone(),
                    f.target.clone(),
                    f.verdict.text().to_owned()
                ])
                .collect::<Vec<_>>()
        ),
    );
    let attach_json = |r: &Result<Vec<f64>, String>| match r {
        Ok(v) => json!({"secs": v, "spread": spread_json(Spread::of(v.iter().copied()))}),
        Err(e) => json!({"error": e}),
    };
    Phase {
        key: "build_and_attach",
        title: "5. Table build rate and attach time",
        text,
        json: json!({
            "target_rows_per_sec": TARGET_ROWS_PER_SEC,
            "target_attach_secs": TARGET_ATTACH_SECS,
            "build": {"unwind_rows": rows, "cpu_rows_per_sec": memory.build["cpu_rows_per_sec"],
                      "wall_rows_per_sec": memory.build["wall_rows_per_sec"], "passes": memory.build["passes"]},
            "attach_pid": attach_json(&by_pid),
            "attach_all": all.as_ref().map_or(json!("not available"), attach_json),
        }),
        figures,
    }
}
