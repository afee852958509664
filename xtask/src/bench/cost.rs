//! Kernel cost per sample (section 3 of the report), from the kernel's BPF statistics
//! (`kernel.bpf_stats_enabled`, set by `overhead` for its runs): each BPF program's `run_time_ns`
//! and `run_cnt`, read from the tracer's program fds (`progstats`) when the work starts and when it
//! ends (`measure`); the figures are the differences.
//!
//! - A tail call does not pass through the kernel's accounting: `walk_user`'s own counters stay
//!   0 and `on_sample`'s run time includes every tail call it made. So the program time is the
//!   sum over the tracer's programs, and its runs are the largest `run_cnt` (the entry program).
//! - Both BPF tracers sample every CPU and filter by pid in the program, so some runs only
//!   reject a sample of another process. What one such run costs is measured apart
//!   ([`rejecting_run`]: the tracer on a stopped workload). Per walk = (program time - rejecting
//!   runs × that cost) / samples of the workload: the figure compared with the target. Also
//!   shown: per sample with the rejecting runs charged to the samples, and per program run
//!   (program time / runs, the rejecting runs included).
//! - The frame-pointer reference is bpftrace's `@[ustack] = count()` (`bpf_get_stackid`, the
//!   kernel's frame-pointer walk) on the frame-pointer build of the same program, in the same
//!   phase, at the same depth.

use std::{
    process::Command,
    thread::sleep,
    time::{Duration, Instant},
};

use serde_json::json;

use super::{
    Bench,
    progstats::prog_stats,
    report::{Figure, Phase, Spread, Verdict, spread_json, table},
    runs::{Config, FREQUENCIES, Run, Runs},
    sys,
    tool::{Spawned, Tool},
};

/// Our time per sample may be at most this many times the frame-pointer walk's.
const TARGET_RATIO: f64 = 3.0;

/// Nanoseconds per run of `tool`'s BPF programs when every run rejects its sample: the tracer
/// attached to a stopped `cpubench` (so every sample is of another process) for a second,
/// from its first program run on.
pub fn rejecting_run(b: &Bench, tool: Tool) -> anyhow::Result<f64> {
    let mut cmd = Command::new(b.cpubench(tool.frame_pointers()));
    cmd.args(["-s", "1"]);
    let workload = Spawned::start(&mut cmd, &b.scratch.join("reject-workload.stdout"))?;
    sys::wait_stopped(workload.pid(), Duration::from_secs(30))?;
    let pid = workload.pid().to_string();
    let out = tool.output(&b.scratch.join(format!("reject-{}", tool.key())));
    let mut cmd = match tool {
        Tool::Ours => {
            let mut cmd = Command::new(&b.tracer);
            cmd.args(["-F", "999", "-o"]).arg(&out).args(["--pid", &pid]);
            cmd
        }
        _ => {
            let mut cmd = Command::new("bpftrace");
            cmd.args(["-p", &pid, "-e"])
                .arg(format!("profile:hz:999 /pid == {pid}/ {{ @[ustack] = count(); }}"));
            cmd
        }
    };
    let tracer = Spawned::start(&mut cmd, &tool.output(&b.scratch.join("reject-tracer")))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let first = loop {
        let s = prog_stats(tracer.pid())?;
        if s.run_cnt > 0 {
            break s;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{} ran no BPF program within 60 s",
            tool.name()
        );
        sleep(Duration::from_millis(10));
    };
    sleep(Duration::from_secs(1));
    let runs = prog_stats(tracer.pid())?.since(first);
    sys::signal(tracer.pid(), libc::SIGINT);
    tracer.reap(Duration::from_secs(30))?;
    for _ in 0..2 {
        sys::signal(workload.pid(), libc::SIGCONT);
        let _ = sys::wait_stopped(workload.pid(), Duration::from_secs(10));
    }
    workload.reap(Duration::from_secs(30))?;
    anyhow::ensure!(runs.run_cnt > 0, "{} ran no BPF program in a second", tool.name());
    Ok(runs.run_time_ns as f64 / runs.run_cnt as f64)
}

/// Per-sample and per-run nanoseconds, and frames per sample, of `tool`'s runs at `hz`.
struct Cost {
    /// The walk: program time less the rejecting runs', per sample of the workload.
    per_walk: Option<Spread>,
    /// Program time per sample of the workload, the rejecting runs charged to the samples.
    per_sample: Option<Spread>,
    per_run: Option<Spread>,
    frames: Option<Spread>,
}

fn cost(runs: &Runs, tool: Tool, hz: u32) -> Cost {
    let rs = runs.of(Config::Traced { tool, hz });
    let reject = runs.reject_ns.iter().find(|(t, _)| *t == tool).map(|(_, s)| s.median);
    let ratio = |num: f64, den: Option<u64>| den.filter(|d| *d > 0).map(|d| num / d as f64);
    let walk = |r: &Run| {
        let (bpf, samples) = (r.bpf?, r.samples?);
        let rejected = bpf.run_cnt.saturating_sub(samples) as f64;
        ratio(bpf.run_time_ns as f64 - reject? * rejected, Some(samples))
    };
    Cost {
        per_walk: Spread::of(rs.iter().filter_map(walk)),
        per_sample: Spread::of(rs.iter().filter_map(|r| ratio(r.bpf?.run_time_ns as f64, r.samples))),
        per_run: Spread::of(
            rs.iter()
                .filter_map(|r| ratio(r.bpf?.run_time_ns as f64, r.bpf.map(|b| b.run_cnt))),
        ),
        frames: Spread::of(rs.iter().filter_map(|r| ratio(r.frames? as f64, r.samples))),
    }
}

pub fn phase(runs: &Runs) -> Phase {
    let us = |ns: f64| format!("{:.2} µs", ns / 1000.0);
    let show = |s: Option<Spread>, f: &dyn Fn(f64) -> String| s.map_or("—".to_owned(), |s| s.show(f));
    let mut rows = Vec::new();
    let mut json_rows = Vec::new();
    for hz in FREQUENCIES {
        for tool in [Tool::Ours, Tool::Bpftrace] {
            let c = cost(runs, tool, hz);
            let program = if tool.frame_pointers() {
                "`cpubench-fp`"
            } else {
                "`cpubench`"
            };
            rows.push(vec![
                tool.name().to_owned(),
                hz.to_string(),
                program.to_owned(),
                show(c.frames, &|x| format!("{x:.1}")),
                show(c.per_walk, &us),
                show(c.per_sample, &us),
                show(c.per_run, &us),
            ]);
            json_rows.push(json!({
                "tool": tool.key(), "hz": hz, "frames_per_sample": spread_json(c.frames),
                "ns_per_walk": spread_json(c.per_walk), "ns_per_sample": spread_json(c.per_sample),
                "ns_per_run": spread_json(c.per_run),
            }));
        }
    }
    let rejects: Vec<String> = runs
        .reject_ns
        .iter()
        .map(|(t, s)| format!("{} {}", t.name(), s.show(|ns| format!("{ns:.0} ns"))))
        .collect();
    let ours = cost(runs, Tool::Ours, 999).per_walk;
    let fp = cost(runs, Tool::Bpftrace, 999).per_walk;
    let ratio = ours.zip(fp).map(|(o, f)| o.median / f.median);
    let text = format!(
        "BPF program time from the kernel's statistics (`kernel.bpf_stats_enabled`, set for the \
         overhead runs and restored after), read from the tracers' program fds (`/proc/PID/fdinfo`) \
         when the work starts and when it ends. sframe-trace: `on_sample` and its `walk_user` tail \
         calls (a tail call is counted in its caller's run time). bpftrace: `profile:hz:N /pid == \
         cpid/ {{ @[ustack] = count(); }}`, the kernel's frame-pointer walk, on the frame-pointer \
         build. Both sample every CPU and reject other processes' samples in the program; one \
         rejecting run costs {} (measured on a stopped workload). Per walk: (program time − \
         rejecting runs × that) / samples of the workload; per sample: program time / samples; per \
         run: program time / program runs.\n\n{}\nRatio of the walks at 999 Hz (medians): {}.\n",
        rejects.join(", "),
        table(
            &[
                "tracer",
                "Hz",
                "program",
                "user frames per sample",
                "per walk",
                "per sample",
                "per program run"
            ],
            &rows
        ),
        ratio.map_or("not measured".to_owned(), |r| format!("{r:.2}×")),
    );
    let figures = vec![Figure::new(
        "BPF time per walk at 999 Hz, sframe-trace / bpftrace frame-pointer walk (same depth)",
        match (ours, fp, ratio) {
            (Some(o), Some(f), Some(r)) => format!("{r:.2}× ({} vs {})", us(o.median), us(f.median)),
            _ => "not measured".to_owned(),
        },
        format!("<= {TARGET_RATIO}×"),
        ratio.map_or(Verdict::NotMeasured, |r| Verdict::of(r <= TARGET_RATIO)),
    )];
    let reject_json: Vec<_> = runs
        .reject_ns
        .iter()
        .map(|(t, s)| json!({"tool": t.key(), "ns": s.json()}))
        .collect();
    Phase {
        key: "cost",
        title: "3. Kernel cost per sample",
        text,
        json: json!({"target_ratio": TARGET_RATIO, "ratio_at_999_hz": ratio, "rejecting_run": reject_json,
                     "rows": json_rows}),
        figures,
    }
}
