//! sframe-trace's cost above bare sampling, paired (`cargo xtask bench --phase bare`, also in
//! the full bench after the overhead phase). The overhead phase's medians of independent runs
//! cannot settle half a point: a run's CPU time varies by about 2 % on this VM whatever is
//! traced. Here each round runs `perf record` without call graphs (bare sampling: the cost of
//! the samples alone) and sframe-trace at 999 Hz back to back, in alternating order, on the
//! same fixed-work program, and the figure is the median over the rounds of the difference
//! within each round, in points of the untraced median:
//! `(ours's workload CPU + ours's CPU in the window - bare's workload CPU - perf's CPU in the
//! window) / untraced median`, where a slow drift of the machine cancels. Its 90 % interval is a
//! bootstrap of that median (deterministic resampling): the target is met when the whole
//! interval is at most [`TARGET_POINTS`], missed when the whole interval is above it, and
//! neither shown nor refuted otherwise (the figure then says so, and counts as missed).

use anyhow::Context as _;
use serde_json::json;

use super::{
    Bench,
    measure::one,
    report::{Figure, Phase, Spread, Verdict},
    runs::{Config, Run},
    sys::Sysctl,
    tool::Tool,
};

/// sframe-trace's overhead above bare sampling at 999 Hz, at most, in points.
pub const TARGET_POINTS: f64 = 0.5;
/// Rounds (each an untraced run, a bare one and one of ours).
const ROUNDS: usize = 61;
const QUICK_ROUNDS: usize = 3;
/// Bootstrap resamples of the median difference.
const RESAMPLES: usize = 4000;

pub fn run(b: &Bench) -> anyhow::Result<Phase> {
    let rounds = if b.plan.quick { QUICK_ROUNDS } else { ROUNDS };
    // The BPF programs' run time, shown beside the figure (kernel statistics).
    let _stats = Sysctl::set("kernel.bpf_stats_enabled", "1")?;
    let ours = Config::Traced {
        tool: Tool::Ours,
        hz: 999,
    };
    let bare = Config::Traced {
        tool: Tool::PerfBare,
        hz: 999,
    };
    let mut untraced = Vec::new();
    let mut pairs: Vec<(Run, Run)> = Vec::new();
    for round in 0..rounds {
        untraced.push(one(b, Config::Baseline { frame_pointers: false }, round)?.workload_cpu);
        let first_ours = round % 2 == 0;
        let (a, c) = if first_ours { (ours, bare) } else { (bare, ours) };
        let ra = one(b, a, round).with_context(|| format!("round {round} of {a:?}"))?;
        let rc = one(b, c, round).with_context(|| format!("round {round} of {c:?}"))?;
        let (o, p) = if first_ours { (ra, rc) } else { (rc, ra) };
        eprintln!(
            "bench: bare round {round}: ours {:.3} s + {:.3} s, bare {:.3} s + {:.3} s",
            o.workload_cpu, o.tracer_window_cpu, p.workload_cpu, p.tracer_window_cpu
        );
        pairs.push((o, p));
    }
    let base = Spread::of(untraced.iter().copied()).context("no untraced runs")?;
    let cost = |r: &Run| r.workload_cpu + r.tracer_window_cpu;
    let diffs: Vec<f64> = pairs
        .iter()
        .map(|(o, p)| 100.0 * (cost(o) - cost(p)) / base.median)
        .collect();
    let median = Spread::of(diffs.iter().copied()).context("no rounds")?;
    let (low, high) = interval(&diffs);
    let verdict = if high <= TARGET_POINTS {
        Verdict::Meets
    } else {
        Verdict::Misses
    };
    let settled = if high <= TARGET_POINTS || low > TARGET_POINTS {
        ""
    } else {
        " (the interval holds the target: neither shown nor refuted)"
    };
    let figure = Figure::new(
        "Overhead at 999 Hz above bare sampling, paired rounds, median of the differences [90 % interval]",
        format!("{:+.2} points [{low:+.2}, {high:+.2}]{settled}", median.median),
        format!("<= {TARGET_POINTS} points"),
        verdict,
    );
    let bpf = Spread::of(
        pairs
            .iter()
            .filter_map(|(o, _)| o.bpf_seconds())
            .map(|s| 100.0 * s / base.median),
    );
    let text = format!(
        "{rounds} rounds of `cpubench` untraced, under `perf record -F 999` without call graphs and \
         under sframe-trace at 999 Hz (the last two back to back, in alternating order). Untraced \
         median {:.3} s of CPU; per round, sframe-trace's workload and tracer CPU less perf's, in \
         points of that median: median {:+.2}, 90 % interval of the median {low:+.2} to {high:+.2} \
         (bootstrap), single rounds {:+.2} to {:+.2}. sframe-trace's BPF programs alone: {}.",
        base.median,
        median.median,
        median.min,
        median.max,
        bpf.map_or("not read".to_owned(), |s| s.show(|x| format!("{x:.2} %"))),
    );
    Ok(Phase {
        key: "above_bare",
        title: "2b. Above bare sampling, paired",
        text,
        json: json!({
            "rounds": rounds, "untraced_median_s": base.median, "differences_points": diffs,
            "median_points": median.median, "interval_90_points": [low, high],
            "target_points": TARGET_POINTS,
        }),
        figures: vec![figure],
    })
}

/// The 5th and 95th percentiles of the median of `values` over [`RESAMPLES`] resamples with
/// replacement (a fixed xorshift sequence: the same data give the same interval).
fn interval(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut medians: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            let sample = (0..values.len()).map(|_| values[(next() % values.len() as u64) as usize]);
            Spread::of(sample).map_or(f64::NAN, |s| s.median)
        })
        .collect();
    medians.sort_by(f64::total_cmp);
    let at = |q: f64| medians[((medians.len() - 1) as f64 * q).round() as usize];
    (at(0.05), at(0.95))
}

#[cfg(test)]
mod tests {
    use super::interval;

    /// The interval holds the median, narrows as rounds agree, and is the same for the same data.
    #[test]
    fn the_interval_holds_the_median_and_is_repeatable() {
        let spread: Vec<f64> = (0..61).map(|i| f64::from(i % 7) - 3.0).collect();
        let (low, high) = interval(&spread);
        assert!(low <= 0.0 && 0.0 <= high, "[{low}, {high}]");
        assert_eq!(interval(&spread), (low, high));
        let agreeing: Vec<f64> = (0..61).map(|i| 0.2 + f64::from(i % 3) * 0.01).collect();
        let (l, h) = interval(&agreeing);
        assert!(0.19 < l && h < 0.23 && h - l < high - low, "[{l}, {h}]");
        assert!(interval(&[]).0.is_nan());
    }
}
