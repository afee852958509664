//! Kernel cost per sample (section 3 of the report), from the kernel's BPF statistics
//! (`kernel.bpf_stats_enabled`, set by `overhead` for its runs): each BPF program's `run_time_ns`
//! and `run_cnt`, read from `/proc/<tracer>/fdinfo/<fd>` of the tracer's program fds when the work
//! starts and when it ends (`measure`); the figures are the differences.
//!
//! - A tail call does not pass through the kernel's accounting: `walk_user`'s own counters stay
//!   0 and `on_sample`'s run time includes every tail call it made. So the program time is the
//!   sum over the tracer's programs, and its runs are the largest `run_cnt` (the entry program).
//! - Both BPF tracers sample every CPU and filter by pid in the program, so some runs only
//!   reject other processes. Per sample = program time / samples of the workload (the
//!   rejecting runs charged to the samples, alike for both); per run = program time / runs.
//! - The frame-pointer reference is bpftrace's `@[ustack] = count()` (`bpf_get_stackid`, the
//!   kernel's frame-pointer walk) on the frame-pointer build of the same program, in the same
//!   phase, at the same depth.

use std::path::Path;

use serde_json::json;

use super::{
    overhead::{Config, FREQUENCIES, Runs},
    report::{Figure, Phase, Spread, Verdict, spread_json, table},
    tool::Tool,
};

/// Our time per sample may be at most this many times the frame-pointer walk's.
const TARGET_RATIO: f64 = 3.0;

/// The BPF programs of one process, summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgStats {
    pub run_time_ns: u64,
    /// The entry program's runs (the largest count).
    pub run_cnt: u64,
    pub programs: usize,
}

impl ProgStats {
    /// What was added since `earlier` (of the same programs).
    pub fn since(self, earlier: ProgStats) -> ProgStats {
        ProgStats {
            run_time_ns: self.run_time_ns.saturating_sub(earlier.run_time_ns),
            run_cnt: self.run_cnt.saturating_sub(earlier.run_cnt),
            programs: self.programs,
        }
    }
}

/// The statistics of every BPF program `pid` holds an fd of.
pub fn prog_stats(pid: u32) -> anyhow::Result<ProgStats> {
    let mut stats = ProgStats::default();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        let entry = entry?;
        if std::fs::read_link(entry.path()).is_ok_and(|l| l == Path::new("anon_inode:bpf-prog")) {
            let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", entry.file_name().to_string_lossy()))?;
            let (time, runs) = parse_fdinfo(&info);
            stats.run_time_ns += time;
            stats.run_cnt = stats.run_cnt.max(runs);
            stats.programs += 1;
        }
    }
    Ok(stats)
}

/// `(run_time_ns, run_cnt)` of a program fd's fdinfo.
fn parse_fdinfo(info: &str) -> (u64, u64) {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or(0)
    };
    (field("run_time_ns:"), field("run_cnt:"))
}

/// Per-sample and per-run nanoseconds, and frames per sample, of `tool`'s runs at `hz`.
struct Cost {
    per_sample: Option<Spread>,
    per_run: Option<Spread>,
    frames: Option<Spread>,
}

fn cost(runs: &Runs, tool: Tool, hz: u32) -> Cost {
    let rs = runs.of(Config::Traced { tool, hz });
    let ratio = |num: u64, den: Option<u64>| den.filter(|d| *d > 0).map(|d| num as f64 / d as f64);
    Cost {
        per_sample: Spread::of(rs.iter().filter_map(|r| ratio(r.bpf?.run_time_ns, r.samples))),
        per_run: Spread::of(
            rs.iter()
                .filter_map(|r| ratio(r.bpf?.run_time_ns, r.bpf.map(|b| b.run_cnt))),
        ),
        frames: Spread::of(rs.iter().filter_map(|r| ratio(r.frames?, r.samples))),
    }
}

pub fn phase(runs: &Runs) -> Phase {
    let us = |ns: f64| format!("{:.2} µs", ns / 1000.0);
    let mut rows = Vec::new();
    let mut json_rows = Vec::new();
    for hz in FREQUENCIES {
        for tool in [Tool::Ours, Tool::Bpftrace] {
            let c = cost(runs, tool, hz);
            let show = |s: Option<Spread>, f: &dyn Fn(f64) -> String| s.map_or("—".to_owned(), |s| s.show(f));
            rows.push(vec![
                tool.name().to_owned(),
                hz.to_string(),
                if tool.frame_pointers() {
                    "`cpubench-fp`"
                } else {
                    "`cpubench`"
                }
                .to_owned(),
                show(c.frames, &|x| format!("{x:.1}")),
                show(c.per_sample, &us),
                show(c.per_run, &us),
            ]);
            json_rows.push(json!({
                "tool": tool.key(), "hz": hz, "frames_per_sample": spread_json(c.frames),
                "ns_per_sample": spread_json(c.per_sample), "ns_per_run": spread_json(c.per_run),
            }));
        }
    }
    let ours = cost(runs, Tool::Ours, 999).per_sample;
    let fp = cost(runs, Tool::Bpftrace, 999).per_sample;
    let ratio = ours.zip(fp).map(|(o, f)| o.median / f.median);
    let text = format!(
        "BPF program time per sample from the kernel's statistics (`kernel.bpf_stats_enabled`, \
         set for the overhead runs and restored after), read from the tracers' program fds \
         (`/proc/PID/fdinfo`) when the work starts and when it ends. sframe-trace: `on_sample` and its `walk_user` \
         tail calls (a tail call is counted in its caller's run time). bpftrace: \
         `profile:hz:N /pid == cpid/ {{ @[ustack] = count(); }}`, the kernel's frame-pointer walk, on \
         the frame-pointer build. Per sample: program time / samples of the workload (the runs that \
         only reject other processes are charged to them); per run: program time / program runs.\n\n{}\n\
         Ratio at 999 Hz (medians): {}.\n",
        table(
            &[
                "tracer",
                "Hz",
                "program",
                "user frames per sample",
                "per sample",
                "per program run"
            ],
            &rows
        ),
        ratio.map_or("not measured".to_owned(), |r| format!("{r:.2}×")),
    );
    let figures = vec![Figure::new(
        "BPF time per sample at 999 Hz, sframe-trace / bpftrace frame-pointer walk (same depth)",
        match (ours, fp, ratio) {
            (Some(o), Some(f), Some(r)) => format!("{r:.2}× ({} vs {})", us(o.median), us(f.median)),
            _ => "not measured".to_owned(),
        },
        format!("<= {TARGET_RATIO}×"),
        ratio.map_or(Verdict::NotMeasured, |r| Verdict::of(r <= TARGET_RATIO)),
    )];
    Phase {
        key: "cost",
        title: "3. Kernel cost per sample",
        text,
        json: json!({"target_ratio": TARGET_RATIO, "ratio_at_999_hz": ratio, "rows": json_rows}),
        figures,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two counters are read from a program fd's fdinfo.
    #[test]
    fn fdinfo_counters() {
        let info =
            "pos:\t0\nprog_type:\t7\nprog_id:\t6644\nrun_time_ns:\t21635143\nrun_cnt:\t2843\nrecursion_misses:\t0\n";
        assert_eq!(parse_fdinfo(info), (21_635_143, 2843));
        assert_eq!(parse_fdinfo("pos:\t0\n"), (0, 0));
    }
}
