//! Stack accuracy (section 1 of the report): the share of samples whose stack is exactly the known
//! call chain, on the frame-pointer-less SFrame workloads of fixtures/workloads (judged as
//! tracer-user/tests/integration/trace.rs judges them). sframe-trace is run on every SFrame version
//! of the plan, the peers on the last one, each symbolizing its own frames.
//!
//! - sframe-trace and bpftrace attach to one running instance of each workload (`--pid`,
//!   `-p`); their sampling events are per CPU.
//! - perf launches its own instance and starts sampling 200 ms after its start (`-D`): on this
//!   kernel per-thread events opened on an already running process do not count (perf stat
//!   says `<not counted>`), while those inherited at exec do. `perf script` then unwinds and
//!   symbolizes (`--max-stack 1024`: the chain, not perf's default limit of 127, is the bound).
//! - bpftrace keeps its default `ustack` depth (127, the kernel's `perf_event_max_stack`).

use std::{path::Path, process::Command, thread::sleep, time::Duration};

use anyhow::Context as _;
use serde_json::json;

use super::{
    Bench, fold,
    report::{Figure, Phase, Verdict, table},
    tool::{Spawned, TOOLS, Tool},
};

/// Sampling frequency of the accuracy runs (the tests' own).
const HZ: u32 = 499;
/// sframe-trace's bar on these workloads (tracer-user/tests/integration/trace.rs).
const MIN_EXACT: f64 = 0.99;

/// A workload and the chain it spends its time at, outermost first.
struct Workload {
    name: &'static str,
    chain: Vec<String>,
}

fn workloads() -> Vec<Workload> {
    let chain = |frames: &[&str]| frames.iter().map(|f| (*f).to_owned()).collect::<Vec<_>>();
    let deep = |name, depth| {
        let mut c = chain(&["_start", "main", "run"]);
        c.extend(std::iter::repeat_n("recurse".to_owned(), depth));
        c.push("leaf".to_owned());
        Workload { name, chain: c }
    };
    vec![
        deep("deep", 100),
        deep("deeper", 300),
        Workload {
            name: "bigframe",
            chain: chain(&["_start", "main", "big", "spin"]),
        },
        Workload {
            name: "alloca",
            chain: chain(&["_start", "main", "dyn", "spin"]),
        },
        Workload {
            name: "plt",
            chain: chain(&["_start", "main", "lib_entry", "callback", "spin"]),
        },
    ]
}

/// One judged run.
struct Judged {
    set: &'static str,
    workload: &'static str,
    tool: Tool,
    samples: u64,
    exact: u64,
}

impl Judged {
    /// The exact share (0 without samples).
    fn share(&self) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            self.exact as f64 / self.samples as f64
        }
    }
}

pub fn run(b: &Bench) -> anyhow::Result<Phase> {
    let mut judged = Vec::new();
    for &set in b.plan.sets {
        let peers = set == b.plan.peer_set();
        for w in workloads() {
            let program = b.workload(set, w.name);
            let attached: &[Tool] = if peers {
                &[Tool::Ours, Tool::Bpftrace]
            } else {
                &[Tool::Ours]
            };
            let mut stacks = attach(b, &program, attached, w.name == "deeper")?;
            if peers {
                for tool in [Tool::PerfDwarf, Tool::PerfFp] {
                    stacks.push((tool, perf(b, tool, &program)?));
                }
            }
            for (tool, s) in stacks {
                let (samples, exact) = fold::exact(&s, &w.chain);
                eprintln!(
                    "bench: accuracy {set}/{} {}: {exact} of {samples} exact",
                    w.name,
                    tool.name()
                );
                judged.push(Judged {
                    set,
                    workload: w.name,
                    tool,
                    samples,
                    exact,
                });
            }
        }
    }
    Ok(phase(b, &judged))
}

/// Start `program`, let each of `tools` attach to it in turn for the planned time, and stop it;
/// each tool's stacks.
fn attach(b: &Bench, program: &Path, tools: &[Tool], deep: bool) -> anyhow::Result<Vec<(Tool, Vec<fold::Stack>)>> {
    let workload = Spawned::start(Command::new(program).arg("600"), &b.scratch.join("workload.stdout"))?;
    // Past ld.so and into its chain.
    sleep(Duration::from_millis(200));
    let pid = workload.pid();
    let secs = b.plan.accuracy_secs;
    let mut out = Vec::new();
    for &tool in tools {
        let stdout = tool.output(&b.scratch.join(format!("accuracy-{}", tool.key())));
        let mut cmd = match tool {
            Tool::Ours => {
                let mut cmd = Command::new(&b.tracer);
                cmd.args(["-F", &HZ.to_string(), "-d", &secs.to_string(), "--no-kernel"]);
                if deep {
                    cmd.args(["--max-depth", "512"]);
                }
                cmd.args(["--pid", &pid.to_string()]);
                cmd
            }
            _ => {
                let mut cmd = Command::new("bpftrace");
                cmd.args(["-p", &pid.to_string(), "-e"]).arg(format!(
                    "profile:hz:{HZ} /pid == {pid}/ {{ @[ustack] = count(); }} interval:ms:{} {{ exit(); }}",
                    (secs * 1000.0) as u64
                ));
                cmd
            }
        };
        let (reaped, stderr) = Spawned::start(&mut cmd, &stdout)?.reap(Duration::from_secs_f64(secs + 60.0))?;
        anyhow::ensure!(reaped.success, "{} failed:\n{stderr}", tool.name());
        let text = std::fs::read_to_string(&stdout).with_context(|| format!("reading {}", stdout.display()))?;
        out.push((
            tool,
            if tool == Tool::Ours {
                fold::folded(&text)
            } else {
                fold::bpftrace(&text)
            },
        ));
    }
    drop(workload);
    Ok(out)
}

/// `perf record` launching `program` (sampling from 200 ms after its start), then `perf script`.
fn perf(b: &Bench, tool: Tool, program: &Path) -> anyhow::Result<Vec<fold::Stack>> {
    let base = b.scratch.join(format!("accuracy-{}", tool.key()));
    let data = tool.output(&base);
    let secs = b.plan.accuracy_secs;
    let mut record = tool.perf_record(HZ, &data);
    record
        .args(["-D", "200", "--"])
        .arg(program)
        .arg(format!("{:.1}", secs + 0.2));
    let (reaped, stderr) =
        Spawned::start(&mut record, &base.with_extension("record"))?.reap(Duration::from_secs_f64(secs + 60.0))?;
    anyhow::ensure!(reaped.success, "perf record failed:\n{stderr}");
    let script = base.with_extension("script");
    let mut cmd = Command::new("perf");
    cmd.args(["script", "-F", "comm,ip,sym,dso", "--max-stack", "1024", "-i"])
        .arg(&data);
    let (reaped, stderr) = Spawned::start(&mut cmd, &script)?.reap(Duration::from_secs(600))?;
    anyhow::ensure!(reaped.success, "perf script failed:\n{stderr}");
    let text = std::fs::read_to_string(&script).with_context(|| format!("reading {}", script.display()))?;
    let _ = std::fs::remove_file(&data);
    Ok(fold::perf_script(&text))
}

/// `99.8% (998/1000)`.
fn cell(j: &Judged) -> String {
    if j.samples == 0 {
        return "no samples".to_owned();
    }
    format!(
        "{:.1}% ({}/{})",
        100.0 * j.exact as f64 / j.samples as f64,
        j.exact,
        j.samples
    )
}

/// One tracer's runs together: each run (workload and set) weighs the same, however many
/// samples it got (a loaded machine gives a launched workload fewer).
struct Overall {
    /// Mean over the runs of the exact share.
    mean: f64,
    runs: usize,
    /// Runs at or above [`MIN_EXACT`].
    at_bar: usize,
    samples: u64,
    exact: u64,
}

impl Overall {
    fn of(judged: &[Judged], tool: Tool) -> Overall {
        let runs: Vec<&Judged> = judged.iter().filter(|j| j.tool == tool).collect();
        Overall {
            mean: runs.iter().map(|j| j.share()).sum::<f64>() / runs.len().max(1) as f64,
            runs: runs.len(),
            at_bar: runs.iter().filter(|j| j.share() >= MIN_EXACT).count(),
            samples: runs.iter().map(|j| j.samples).sum(),
            exact: runs.iter().map(|j| j.exact).sum(),
        }
    }
}

impl std::fmt::Display for Overall {
    /// `79.9% mean of 5 workloads, 4 at >= 99%`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.1}% mean of {} workloads, {} at >= {:.0}%",
            100.0 * self.mean,
            self.runs,
            self.at_bar,
            100.0 * MIN_EXACT
        )
    }
}

fn phase(b: &Bench, judged: &[Judged]) -> Phase {
    let mut rows = Vec::new();
    for &set in b.plan.sets {
        for w in workloads() {
            let mut row = vec![set.to_owned(), format!("`{}` ({} frames)", w.name, w.chain.len())];
            for tool in TOOLS {
                let found = judged
                    .iter()
                    .find(|j| j.set == set && j.workload == w.name && j.tool == tool);
                row.push(found.map_or("—".to_owned(), cell));
            }
            rows.push(row);
        }
    }
    let mut header = vec!["set", "workload"];
    header.extend(TOOLS.map(Tool::name));
    let text = format!(
        "Samples whose user stack is exactly the workload's known chain, down to `_start`, \
         each tracer symbolizing its own frames; {HZ} Hz, {} s per run. sframe-trace attaches with \
         `--pid`, bpftrace with `-p` (default `ustack` depth, 127); perf launches the workload and \
         samples from 200 ms after its start (`-D 200`; `perf script --max-stack 1024`).\n\n{}",
        b.plan.accuracy_secs,
        table(&header, &rows)
    );

    let ours: Vec<&Judged> = judged.iter().filter(|j| j.tool == Tool::Ours).collect();
    let worst = ours.iter().min_by(|a, b| a.share().total_cmp(&b.share()));
    let mut figures = vec![Figure::new(
        format!("Exact stacks, sframe-trace ({} workloads)", b.plan.sets.join(", ")),
        match worst {
            Some(w) => format!(
                "{}; lowest {} on {}/{}",
                Overall::of(judged, Tool::Ours),
                cell(w),
                w.set,
                w.workload
            ),
            None => "no runs".to_owned(),
        },
        format!(">= {:.0}% on each", MIN_EXACT * 100.0),
        Verdict::of(!ours.is_empty() && ours.iter().all(|j| j.share() >= MIN_EXACT)),
    )];
    for tool in [Tool::PerfDwarf, Tool::PerfFp, Tool::Bpftrace] {
        figures.push(Figure::new(
            format!("Exact stacks, {} ({} workloads)", tool.name(), b.plan.peer_set()),
            Overall::of(judged, tool).to_string(),
            "— (peer)",
            Verdict::Peer,
        ));
    }
    let json = json!({
        "hz": HZ,
        "secs": b.plan.accuracy_secs,
        "runs": judged.iter().map(|j| json!({
            "set": j.set, "workload": j.workload, "tool": j.tool.key(),
            "samples": j.samples, "exact": j.exact,
        })).collect::<Vec<_>>(),
        "overall": TOOLS.map(|t| {
            let o = Overall::of(judged, t);
            json!({"tool": t.key(), "name": t.name(), "samples": o.samples, "exact": o.exact,
                   "mean_share": o.mean, "runs": o.runs, "runs_at_bar": o.at_bar})
        }),
    });
    Phase {
        key: "accuracy",
        title: "1. Stack accuracy",
        text,
        json,
        figures,
    }
}
