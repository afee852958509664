//! What naming JavaScript frames from V8's memory costs (the V8 runtime,
//! `tracer-user/src/v8`): Debian's Node.js 20 recursing in `fib`, traced with `--pid` at
//! 999 Hz, plain (its JavaScript frames marked for the walk, which reads each one's function,
//! and named by the session) and with `--no-javascript` (the same process left to the frame
//! pointers alone). The kernel's added cost per sample is the difference of the BPF program
//! times per sample (as in `depth`); the session's is the time it waited for its reads of the
//! functions (the summary's `v8.read_us`), in all and per sample.

use std::process::Command;

use serde_json::json;

use super::{
    Bench,
    depth::traced_walk_ns,
    report::{Figure, Phase, Spread, spread_json, table, with_and_without, with_only},
    sys::Sysctl,
};

/// The workload: `fib(24)` again and again for the seconds its argument says.
const FIB_JS: &str = "function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\n\
    const end = Date.now() + Number(process.argv[2]) * 1000; let s = 0;\n\
    while (Date.now() < end) s += fib(24);\n\
    console.log(s);\n";

pub fn run(b: &Bench) -> anyhow::Result<Phase> {
    let _stats = Sysctl::set("kernel.bpf_stats_enabled", "1")?;
    let (reps, secs) = if b.plan.quick { (1, 3) } else { (3, 5) };
    let script = b.scratch.join("fib.js");
    std::fs::write(&script, FIB_JS)?;
    let start = || {
        let mut command = Command::new("node");
        command.arg(&script).arg("600");
        command
    };
    let (mut plain, mut off) = (Vec::new(), Vec::new());
    let (mut read_ms, mut read_per_sample_us, mut frames) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..reps {
        let (ns, summary) = traced_walk_ns(b, &mut start(), &format!("node-plain-{rep}"), &[], secs, 0.0)?;
        let v8 = &summary["v8"];
        anyhow::ensure!(v8["processes"].as_u64() == Some(1), "node's V8 was not read: {summary}");
        let samples = summary["samples"].as_f64().unwrap_or(1.0).max(1.0);
        let read_us = v8["read_us"].as_f64().unwrap_or(0.0);
        plain.push(ns);
        read_ms.push(read_us / 1000.0);
        read_per_sample_us.push(read_us / samples);
        frames.push(v8["frames"].as_f64().unwrap_or(0.0) / samples);
        let (ns, _) = traced_walk_ns(
            b,
            &mut start(),
            &format!("node-off-{rep}"),
            &["--no-javascript"],
            secs,
            0.0,
        )?;
        off.push(ns);
    }
    let (plain, off) = (Spread::of(plain), Spread::of(off));
    let (read_ms, read_per_sample_us, frames) =
        (Spread::of(read_ms), Spread::of(read_per_sample_us), Spread::of(frames));
    let (added, bpf) = with_and_without(&plain, &off);
    let rows = vec![
        bpf,
        with_only(
            "JavaScript frames named per sample",
            &frames,
            &|n| format!("{n:.1}"),
            "— (not named)",
        ),
        with_only(
            "reads of functions, their time in all",
            &read_ms,
            &|ms| format!("{ms:.1} ms"),
            "—",
        ),
        with_only(
            "their time per sample",
            &read_per_sample_us,
            &|us| format!("{us:.2} µs"),
            "—",
        ),
    ];
    Ok(Phase {
        key: "node",
        title: "Cost of naming JavaScript frames from V8's memory",
        text: format!(
            "Node.js 20 recursing in `fib(24)`, traced with `--pid` at 999 Hz for {secs} s ({reps} \
             runs each; median [min, max]). Plain, the walk reads the function of each JavaScript \
             frame it finds and the session names it; with `--no-javascript` the same program is \
             walked by its frame pointers alone. The kernel's added cost per sample is the \
             difference of the BPF times (medians): {}.\n\n{}\n",
            added.map_or("not measured".to_owned(), |ns| format!("{:.1} µs", ns / 1000.0)),
            table(&["", "plain `node`", "`--no-javascript`"], &rows)
        ),
        json: json!({
            "plain_ns_per_sample": spread_json(plain),
            "no_javascript_ns_per_sample": spread_json(off),
            "added_ns_per_sample": added,
            "frames_per_sample": spread_json(frames),
            "read_ms": spread_json(read_ms),
            "read_us_per_sample": spread_json(read_per_sample_us),
        }),
        figures: vec![
            Figure::context_ns(
                "BPF time per sample added by naming JavaScript frames (Node.js 20, 999 Hz)",
                added,
            ),
            Figure::context_ns(
                "session time per sample reading JavaScript functions (Node.js 20, 999 Hz)",
                read_per_sample_us.map(|s| s.median * 1000.0),
            ),
        ],
    })
}
