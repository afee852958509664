//! Where the time of `cargo xtask test` goes: each stage timed as it ends, and the slowest
//! privileged tests (each records how long it held its turn in [`TIMES_FILE`], through the
//! variable [`TIMES_VAR`] the integration tests read), reported at the end, passed or failed.

use std::{
    path::Path,
    time::{Duration, Instant},
};

/// The file privileged tests append `SECONDS NAME` lines to, and the variable naming it (read by
/// tracer-user/tests/integration/support.rs).
pub const TIMES_FILE: &str = "target/test-times";
pub const TIMES_VAR: &str = "SFRAME_TRACE_TEST_TIMES";

/// Slowest tests listed at the end.
const SLOWEST: usize = 15;

/// The stages of `cargo xtask test`, in the order they start (`--from` names one); the guests
/// and clippy run in the background of the stages after them (`background.rs`).
pub const STAGES: [&str; 11] = [
    "toolchains",
    "workspace-tests",
    "dist",
    "x86-64-guests",
    "arm64-guest",
    "clippy",
    "pure-readers",
    "conformance",
    "external",
    "dist-tests",
    "fuzz",
];

/// The stages run so far and how long each took.
pub struct Stages {
    started: Instant,
    /// Each stage: its name, time, verdict and how busy the CPUs were (see [`busy`]).
    done: Vec<(&'static str, Duration, bool, String)>,
    /// The machine's CPU time at the start ([`cpu_times`]).
    cpu: Option<(u64, u64)>,
    /// Stages before this one are skipped (the toolchains' set-up is not).
    from: Option<usize>,
}

impl Stages {
    /// Start timing, from stage `from` if given; forget the test times of an earlier run.
    pub fn new(root: &Path, from: Option<&str>) -> anyhow::Result<Stages> {
        let from = match from {
            Some(name) => Some(
                STAGES
                    .iter()
                    .position(|s| *s == name)
                    .ok_or_else(|| anyhow::anyhow!("no stage {name:?}: the stages are {}", STAGES.join(", ")))?,
            ),
            None => None,
        };
        let _ = std::fs::remove_file(root.join(TIMES_FILE));
        Ok(Stages {
            started: Instant::now(),
            done: Vec::new(),
            cpu: cpu_times(),
            from,
        })
    }

    /// Run stage `name`, and say how long it took; a stage before `--from` is skipped (and
    /// gives `T::default()`).
    pub fn run<T: Default>(
        &mut self,
        name: &'static str,
        stage: impl FnOnce() -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        if self.skipped(name) {
            return Ok(T::default());
        }
        let since = Instant::now();
        let cpu = cpu_times();
        let result = stage();
        let took = since.elapsed();
        let busy = busy(cpu, cpu_times());
        println!(
            "xtask: stage {name}: {} in {} s{busy}",
            verdict(result.is_ok()),
            took.as_secs(),
        );
        self.done.push((name, took, result.is_ok(), busy));
        result
    }

    /// Whether stage `name` comes before `--from` (and is not the toolchains'), said when so.
    pub fn skipped(&self, name: &str) -> bool {
        let index = STAGES.iter().position(|s| *s == name);
        debug_assert!(index.is_some(), "stage {name} is not in STAGES");
        match (self.from, index) {
            (Some(from), Some(index)) if index < from && index > 0 => {
                println!("xtask: stage {name}: skipped (--from {})", STAGES[from]);
                true
            }
            _ => false,
        }
    }

    /// Record a stage that ran in the background (`background::Ended`), for the report.
    pub fn record(&mut self, name: &'static str, took: Duration, ok: bool) {
        self.done.push((name, took, ok, String::new()));
    }

    /// Every stage's time, the whole, and the slowest tests recorded.
    pub fn report(&self, root: &Path) {
        println!("xtask: the stages took:");
        for (name, took, ok, busy) in &self.done {
            println!("  {:>6} s  {name} ({}{busy})", took.as_secs(), verdict(*ok));
        }
        println!(
            "  {:>6} s  in all{}",
            self.started.elapsed().as_secs(),
            busy(self.cpu, cpu_times())
        );
        let text = std::fs::read_to_string(root.join(TIMES_FILE)).unwrap_or_default();
        let slowest = slowest(&text, SLOWEST);
        if !slowest.is_empty() {
            println!("xtask: the slowest privileged tests:");
            for (seconds, test) in slowest {
                println!("  {seconds:>6.1} s  {test}");
            }
        }
    }
}

/// The machine's CPU time so far, in ticks: (busy, all), from the first line of `/proc/stat`
/// (idle and iowait are not busy).
pub fn cpu_times() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .map_while(|t| t.parse().ok())
        .collect();
    let all: u64 = ticks.iter().take(8).sum();
    let idle = ticks.get(3)? + ticks.get(4).unwrap_or(&0);
    Some((all - idle, all))
}

/// `, N % of the CPUs busy` between two [`cpu_times`] (what a stage left idle is what the
/// background builds and stages could have had), or nothing when unknown.
pub fn busy(from: Option<(u64, u64)>, to: Option<(u64, u64)>) -> String {
    match (from, to) {
        (Some((busy0, all0)), Some((busy1, all1))) if all1 > all0 => {
            format!(", {} % of the CPUs busy", (busy1 - busy0) * 100 / (all1 - all0))
        }
        _ => String::new(),
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok { "passed" } else { "FAILED" }
}

/// The `n` longest of the `SECONDS NAME` lines of `text`, longest first (lines that are not
/// that are left out).
pub fn slowest(text: &str, n: usize) -> Vec<(f64, &str)> {
    let mut times: Vec<(f64, &str)> = text
        .lines()
        .filter_map(|line| {
            let (seconds, test) = line.split_once(' ')?;
            Some((seconds.parse::<f64>().ok().filter(|s| s.is_finite())?, test.trim()))
        })
        .collect();
    times.sort_by(|a, b| b.0.total_cmp(&a.0));
    times.truncate(n);
    times
}

#[cfg(test)]
mod tests;
