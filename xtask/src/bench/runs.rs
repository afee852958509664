//! The records of the overhead phase: the configurations compared ([`Config`]), what one run of
//! one measured ([`Run`], taken by `measure`), and every configuration's runs ([`Runs`], from
//! `overhead`), which the overhead, kernel cost, volume and memory sections read. Data and
//! arithmetic only: no process is run here.

use super::{
    progstats::ProgStats,
    report::Spread,
    tool::{OVERHEAD_TOOLS, Tool},
};

/// What one run measured.
pub struct Run {
    /// The workload's CPU time (user + system), seconds.
    pub workload_cpu: f64,
    /// Wall time of the work.
    pub window: f64,
    /// The tracer's CPU time in that window.
    pub tracer_window_cpu: f64,
    /// The tracer's CPU time outside it: start-up, loading, output.
    pub tracer_rest_cpu: f64,
    /// Samples of the workload the tracer reports, if it says.
    pub samples: Option<u64>,
    /// User frames in those samples, if it says.
    pub frames: Option<u64>,
    /// The BPF programs' statistics over the work (from resuming the workload to its second stop).
    pub bpf: Option<ProgStats>,
    /// Bytes of the tracer's output (folded stacks, perf.data, bpftrace's printed map).
    pub output_bytes: u64,
    /// `perf script` over perf.data: CPU seconds and output bytes (first run of a perf
    /// configuration only).
    pub post: Option<(f64, u64)>,
    /// The tracer's stderr (sframe-trace's summary).
    pub stderr: String,
}

impl Run {
    /// Seconds the run's BPF programs ran (BPF tracers only).
    pub fn bpf_seconds(&self) -> Option<f64> {
        self.bpf.map(|b| b.run_time_ns as f64 / 1e9)
    }
}

/// Sampling frequencies compared.
pub const FREQUENCIES: [u32; 2] = [99, 999];

/// What one configuration runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Config {
    /// cpubench alone (frame-pointer build or not).
    Baseline {
        frame_pointers: bool,
    },
    Traced {
        tool: Tool,
        hz: u32,
    },
}

impl Config {
    pub fn frame_pointers(self) -> bool {
        match self {
            Config::Baseline { frame_pointers } => frame_pointers,
            Config::Traced { tool, .. } => tool.frame_pointers(),
        }
    }

    pub fn all() -> Vec<Config> {
        let mut all = vec![
            Config::Baseline { frame_pointers: false },
            Config::Baseline { frame_pointers: true },
        ];
        for hz in FREQUENCIES {
            all.extend(OVERHEAD_TOOLS.map(|tool| Config::Traced { tool, hz }));
        }
        all
    }
}

/// Every configuration's runs.
pub struct Runs {
    pub configs: Vec<(Config, Vec<Run>)>,
    /// Nanoseconds of one BPF program run that only rejects a sample of another process, per
    /// BPF tracer (`cost::rejecting_run`).
    pub reject_ns: Vec<(Tool, Spread)>,
}

impl Runs {
    pub fn of(&self, config: Config) -> &[Run] {
        self.configs.iter().find(|(c, _)| *c == config).map_or(&[], |(_, r)| r)
    }

    /// Median CPU time of the untraced workload (of the build `config` uses).
    pub fn baseline(&self, config: Config) -> Option<f64> {
        let frame_pointers = config.frame_pointers();
        Spread::of(
            self.of(Config::Baseline { frame_pointers })
                .iter()
                .map(|r| r.workload_cpu),
        )
        .map(|s| s.median)
    }

    /// The part of each run's overhead measured exactly, in percent of the untraced median:
    /// the BPF programs' run time plus the tracer's CPU while the work runs (BPF tracers only).
    pub fn measured_part(&self, config: Config) -> Option<Spread> {
        let base = self.baseline(config)?;
        Spread::of(
            self.of(config)
                .iter()
                .filter_map(|r| Some(100.0 * (r.bpf_seconds()? + r.tracer_window_cpu) / base)),
        )
    }

    /// Overhead of each run of `config`, in percent.
    pub fn overhead(&self, config: Config) -> Option<Spread> {
        let base = self.baseline(config)?;
        Spread::of(
            self.of(config)
                .iter()
                .map(|r| 100.0 * (r.workload_cpu - base + r.tracer_window_cpu) / base),
        )
    }
}
