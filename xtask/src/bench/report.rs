//! The report's shape and its three files: each phase hands in a [`Phase`] (its Markdown, its
//! JSON, and the [`Figure`]s that have targets); [`Report::finish`] writes `report.md` (the
//! conditions, the summary of targets, then every phase), `report.json` and `report.svg`, and
//! prints the summary. Also [`Spread`], the median and range of repeated measurements.

use std::{fmt::Write as _, process::Command, time::Instant};

use serde_json::{Value, json};

use super::{Bench, chart, sys, version};
use crate::cmd::output;

/// One phase's part of the report.
pub struct Phase {
    /// Its key in report.json.
    pub key: &'static str,
    pub title: &'static str,
    /// Markdown: tables and notes.
    pub text: String,
    pub json: Value,
    pub figures: Vec<Figure>,
}

/// A figure of the summary table.
pub struct Figure {
    pub what: String,
    pub measured: String,
    pub target: String,
    pub verdict: Verdict,
}

/// How a figure compares with its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Meets,
    Misses,
    /// A peer's figure, shown for comparison: no target of ours applies.
    Peer,
    /// Not measured (the reason is in `measured`).
    NotMeasured,
}

impl Verdict {
    pub fn of(meets: bool) -> Verdict {
        if meets { Verdict::Meets } else { Verdict::Misses }
    }

    pub fn text(self) -> &'static str {
        match self {
            Verdict::Meets => "meets",
            Verdict::Misses => "misses",
            Verdict::Peer => "—",
            Verdict::NotMeasured => "not measured",
        }
    }
}

impl Figure {
    pub fn new(
        what: impl Into<String>,
        measured: impl Into<String>,
        target: impl Into<String>,
        verdict: Verdict,
    ) -> Figure {
        Figure {
            what: what.into(),
            measured: measured.into(),
            target: target.into(),
            verdict,
        }
    }

    /// A figure given for context (no target), in nanoseconds: "not measured" without one.
    pub fn context_ns(what: impl Into<String>, ns: Option<f64>) -> Figure {
        Figure::new(
            what,
            ns.map_or("not measured".to_owned(), |ns| format!("{ns:.1} ns")),
            "— (context)",
            if ns.is_some() {
                Verdict::Peer
            } else {
                Verdict::NotMeasured
            },
        )
    }

    pub fn json(&self) -> Value {
        json!({"what": self.what, "measured": self.measured, "target": self.target,
               "verdict": self.verdict.text()})
    }
}

/// The median and range of repeated measurements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Spread {
    /// `None` without values. The median of an even count is the mean of the middle two.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        })
    }

    /// `median [min, max]` with `unit`, each value as `fmt` formats it.
    pub fn show(&self, fmt: impl Fn(f64) -> String) -> String {
        format!("{} [{}, {}]", fmt(self.median), fmt(self.min), fmt(self.max))
    }

    pub fn json(&self) -> Value {
        json!({"median": self.median, "min": self.min, "max": self.max, "n": self.n})
    }
}

/// `Spread::json` of an optional spread (`null` without one).
/// The rows of a runtime's cost, measured with it (`on`) and without (`off`): the BPF time
/// per sample of each, and the difference of their medians (the kernel's added cost).
pub fn with_and_without(on: &Option<Spread>, off: &Option<Spread>) -> (Option<f64>, Vec<String>) {
    let added = match (on, off) {
        (Some(on), Some(off)) => Some(on.median - off.median),
        _ => None,
    };
    let us = |ns: f64| format!("{:.1} µs", ns / 1000.0);
    (
        added,
        vec!["BPF time per sample".to_owned(), shown(on, &us), shown(off, &us)],
    )
}

/// A row measured with a runtime only: `label`, `s` shown with `fmt`, then `off` (what stands
/// for it without).
pub fn with_only(label: &str, s: &Option<Spread>, fmt: &dyn Fn(f64) -> String, off: &str) -> Vec<String> {
    vec![label.to_owned(), shown(s, fmt), off.to_owned()]
}

/// `s` shown with `fmt`, `—` when nothing was measured.
fn shown(s: &Option<Spread>, fmt: &dyn Fn(f64) -> String) -> String {
    s.as_ref().map_or("—".to_owned(), |s| s.show(fmt))
}

pub fn spread_json(s: Option<Spread>) -> Value {
    s.map_or(Value::Null, |s| s.json())
}

/// A Markdown table.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut t = format!("| {} |\n|{}\n", header.join(" | "), "---|".repeat(header.len()));
    for row in rows {
        let _ = writeln!(t, "| {} |", row.join(" | "));
    }
    t
}

/// The report being assembled.
pub struct Report {
    conditions: Value,
    phases: Vec<Phase>,
}

impl Report {
    /// Record the conditions of the run: when, where, how loaded, which peers.
    pub fn start(b: &Bench) -> Report {
        let date = output(Command::new("date").args(["-u", "+%Y-%m-%d %H:%M UTC"])).unwrap_or_default();
        // The tracer is built from the working tree, which may differ from the commit.
        let commit = output(Command::new("git").args(["describe", "--always", "--dirty"])).unwrap_or_default();
        let conditions = json!({
            "date": date.trim(),
            "commit": commit.trim(),
            "kernel": sys::kernel_release(),
            "cpus": sys::cpus(),
            "loadavg_before": sys::loadavg(),
            "quick": b.plan.quick,
            "runs": b.plan.runs,
            "perf": version("perf"),
            "bpftrace": version("bpftrace"),
            "phase_secs": {},
        });
        eprintln!("bench: load average {:?} at the start", sys::loadavg());
        Report {
            conditions,
            phases: Vec::new(),
        }
    }

    /// Run one phase's measurements, noting how long they took.
    pub fn timed<T>(&mut self, name: &str, f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
        let start = Instant::now();
        let result = f();
        let secs = start.elapsed().as_secs_f64();
        eprintln!("bench: {name} took {secs:.0} s, load average now {:?}", sys::loadavg());
        self.conditions["phase_secs"][name] = json!(secs);
        result
    }

    pub fn add(&mut self, phase: Phase) {
        self.phases.push(phase);
    }

    /// Write report.md, report.json and report.svg; print the summary.
    pub fn finish(mut self, b: &Bench) -> anyhow::Result<()> {
        self.conditions["loadavg_after"] = json!(sys::loadavg());
        let figures: Vec<&Figure> = self.phases.iter().flat_map(|p| &p.figures).collect();
        let summary = table(
            &["figure", "measured", "target", "verdict"],
            &figures
                .iter()
                .map(|f| {
                    vec![
                        f.what.clone(),
                        f.measured.clone(),
                        f.target.clone(),
                        f.verdict.text().to_owned(),
                    ]
                })
                .collect::<Vec<_>>(),
        );
        let mut md = format!(
            "# sframe-trace benchmarks\n\n{}\n\n## Summary\n\n{summary}",
            self.conditions_line()
        );
        for p in &self.phases {
            let _ = write!(md, "\n## {}\n\n{}", p.title, p.text);
        }
        let mut json = json!({
            "conditions": self.conditions,
            "summary": figures.iter().map(|f| f.json()).collect::<Vec<_>>(),
        });
        for p in &self.phases {
            json[p.key] = p.json.clone();
        }
        std::fs::write(b.out.join("report.md"), &md)?;
        std::fs::write(b.out.join("report.json"), serde_json::to_vec_pretty(&json)?)?;
        std::fs::write(b.out.join("report.svg"), chart::svg(&json))?;
        println!("{}\n\n{summary}", self.conditions_line());
        eprintln!("bench: wrote {}/report.{{md,json,svg}}", b.out.display());
        Ok(())
    }

    fn conditions_line(&self) -> String {
        let c = &self.conditions;
        let load = |k: &str| {
            c[k].as_array()
                .map(|a| {
                    a.iter()
                        .map(|v| format!("{:.2}", v.as_f64().unwrap_or(f64::NAN)))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default()
        };
        format!(
            "{}{}, commit {}, Linux {}, {} CPUs; load average (1, 5, 15 min) {} at the start, {} at the end; \
             timed figures are median [min, max] of {} runs; peers: {}, {}.",
            if c["quick"].as_bool() == Some(true) {
                "Quick smoke run (`--quick`): not representative. "
            } else {
                ""
            },
            c["date"].as_str().unwrap_or(""),
            c["commit"].as_str().unwrap_or("?"),
            c["kernel"].as_str().unwrap_or(""),
            c["cpus"],
            load("loadavg_before"),
            load("loadavg_after"),
            c["runs"],
            c["perf"].as_str().unwrap_or(""),
            c["bpftrace"].as_str().unwrap_or(""),
        )
    }
}

#[cfg(test)]
mod tests;
