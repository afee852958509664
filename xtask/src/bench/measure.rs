//! One overhead run of one configuration, and what is read from it: the workload's CPU time,
//! the tracer's CPU time while the work runs and apart from it, the BPF programs' statistics,
//! the samples and frames the tracer reports, its output's size.
//!
//! sframe-trace, bpftrace and the baseline (steps of `overhead`'s module comment):
//! 1. The tracer launches `cpubench -s UNITS` (the baseline: the bench itself), which stops
//!    itself (SIGSTOP) once loaded; sframe-trace must also have said it is sampling.
//! 2. Note the tracer's CPU clock and its BPF programs' statistics, resume the workload, wait
//!    for its second stop (the work is done), note both again.
//! 3. Resume the workload to let it exit; reap the tracer (`wait4`).
//!
//! perf runs `cpubench UNITS` without the stops: on this kernel a per-thread event stops
//! counting once its task has been stopped and resumed (`perf stat` and `perf record` see
//! almost nothing), while one inherited at exec counts as it should. perf's own events start at
//! the exec; its CPU clock is read when the workload appears and when it has exited.

use std::{
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::Context as _;

use super::{
    Bench, fold,
    progstats::{self, ProgStats},
    runs::{Config, Run},
    sys,
    tool::{Spawned, Tool},
};

/// The window: its wall time, and the tracer's CPU time and BPF statistics in it.
struct Window {
    secs: f64,
    tracer_cpu: f64,
    bpf: Option<ProgStats>,
}

/// One run of `config`.
pub fn one(b: &Bench, config: Config, round: usize) -> anyhow::Result<Run> {
    let program = b.cpubench(config.frame_pointers());
    let tool = match config {
        Config::Baseline { .. } => None,
        Config::Traced { tool, .. } => Some(tool),
    };
    let stops = !matches!(tool, Some(Tool::PerfDwarf | Tool::PerfFp | Tool::PerfBare));
    let mut args = vec![b.plan.units.to_string()];
    if stops {
        args.insert(0, "-s".to_owned());
    }
    let (mut cmd, base) = match config {
        Config::Baseline { frame_pointers } => {
            let mut cmd = Command::new(&program);
            cmd.args(&args);
            (cmd, b.scratch.join(format!("baseline-{frame_pointers}-{round}")))
        }
        Config::Traced { tool, hz } => {
            let base = b.scratch.join(format!("{}-{hz}-{round}", tool.key()));
            (tool.launch(&b.tracer, hz, &base, &program, &args), base)
        }
    };
    let spawned = Spawned::start(&mut cmd, &base.with_extension("stdout"))?;
    let comm = program
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let window = match tool {
        None => stopped_window(&spawned, spawned.pid(), None)?,
        Some(t) => {
            let workload = sys::find_descendant(spawned.pid(), &comm, Duration::from_secs(60))?;
            if stops {
                stopped_window(&spawned, workload, Some(t))?
            } else {
                exec_window(&spawned, workload)?
            }
        }
    };
    let (reaped, stderr) = spawned.reap(Duration::from_secs(120))?;
    anyhow::ensure!(reaped.success, "{cmd:?} failed:\n{stderr}");
    let workload_cpu = workload_cpu(&stderr).with_context(|| format!("no cpu_us line from {comm}:\n{stderr}"))?;
    let output = tool.map(|t| t.output(&base));
    let output_bytes = output.as_ref().map_or(0, |o| sys::file_size(o));
    let (samples, frames) = match (tool, &output) {
        (Some(Tool::Ours), _) => (number_before(&stderr, " samples in "), ours_frames(&stderr)),
        (Some(Tool::PerfDwarf | Tool::PerfFp | Tool::PerfBare), _) => (number_before(&stderr, " samples) ]"), None),
        (Some(Tool::Bpftrace), Some(out)) => {
            let (samples, frames) = fold::frames(&fold::bpftrace(&std::fs::read_to_string(out)?));
            (Some(samples), Some(frames))
        }
        _ => (None, None),
    };
    let post = match (tool, &output) {
        (Some(Tool::PerfDwarf | Tool::PerfFp), Some(data)) if round == 0 => Some(perf_script(data)?),
        _ => None,
    };
    if let Some(out) = &output {
        let _ = std::fs::remove_file(out);
    }
    Ok(Run {
        workload_cpu,
        window: window.secs,
        tracer_window_cpu: window.tracer_cpu,
        // The tracer reaped the workload: its rusage holds the workload's.
        tracer_rest_cpu: if tool.is_some() {
            reaped.cpu - workload_cpu - window.tracer_cpu
        } else {
            0.0
        },
        samples,
        frames,
        bpf: window.bpf,
        output_bytes,
        post,
        stderr,
    })
}

/// Steps 1-3 for a workload started with `-s` (`tool` `None`: the baseline, no tracer).
fn stopped_window(spawned: &Spawned, workload: u32, tool: Option<Tool>) -> anyhow::Result<Window> {
    sys::wait_stopped(workload, Duration::from_secs(60))?;
    if tool == Some(Tool::Ours) {
        spawned.wait_line("sampling", Duration::from_secs(60))?;
    }
    let tracer_cpu = || match tool {
        Some(_) => sys::process_cpu(spawned.pid()).unwrap_or(0.0),
        None => 0.0,
    };
    let bpf = || match tool {
        Some(Tool::Ours | Tool::Bpftrace) => progstats::prog_stats(spawned.pid()).map(Some),
        _ => Ok(None),
    };
    let bpf_before = bpf()?;
    let (start, before) = (Instant::now(), tracer_cpu());
    sys::signal(workload, libc::SIGCONT);
    sys::wait_stopped(workload, Duration::from_secs(600))?;
    let (secs, after) = (start.elapsed().as_secs_f64(), tracer_cpu());
    let bpf_after = bpf()?;
    sys::signal(workload, libc::SIGCONT);
    Ok(Window {
        secs,
        tracer_cpu: after - before,
        bpf: bpf_after.zip(bpf_before).map(|(a, b)| a.since(b)),
    })
}

/// perf's window: from the workload's appearance (its exec) to its exit.
fn exec_window(spawned: &Spawned, workload: u32) -> anyhow::Result<Window> {
    let tracer_cpu = || sys::process_cpu(spawned.pid()).unwrap_or(0.0);
    let (start, before) = (Instant::now(), tracer_cpu());
    sys::wait_exited(workload, Duration::from_secs(600))?;
    Ok(Window {
        secs: start.elapsed().as_secs_f64(),
        tracer_cpu: tracer_cpu() - before,
        bpf: None,
    })
}

/// `perf script` over `data` (every field it prints by default): its CPU seconds and output
/// bytes.
fn perf_script(data: &Path) -> anyhow::Result<(f64, u64)> {
    let out = data.with_extension("script");
    let mut cmd = Command::new("perf");
    cmd.args(["script", "-i"]).arg(data);
    let (reaped, stderr) = Spawned::start(&mut cmd, &out)?.reap(Duration::from_secs(600))?;
    anyhow::ensure!(reaped.success, "perf script failed:\n{stderr}");
    let bytes = sys::file_size(&out);
    let _ = std::fs::remove_file(&out);
    Ok((reaped.cpu, bytes))
}

/// cpubench's own CPU time, from its `..., cpu_us N` line.
fn workload_cpu(stderr: &str) -> Option<f64> {
    let us: f64 = stderr
        .lines()
        .find_map(|l| l.rsplit_once("cpu_us ")?.1.trim().parse().ok())?;
    Some(us * 1e-6)
}

/// The number just before `marker` on the first line holding it.
pub fn number_before(text: &str, marker: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.contains(marker))?;
    let before = &line[..line.find(marker)?];
    before.rsplit(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// sframe-trace's `user frames: A from SFrame, B from .eh_frame, C from frame pointers`.
fn ours_frames(stderr: &str) -> Option<u64> {
    let line = stderr.lines().find(|l| l.contains("user frames:"))?;
    let counts: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    (!counts.is_empty()).then(|| counts.iter().sum())
}

#[cfg(test)]
mod tests;
