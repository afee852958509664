//! Perf-map symbolization (`tracer-user/examples/perfmap_bench.rs`): the cost of naming JIT
//! code for a process whose perf map has 100 k functions: the first read of the map (opened in
//! the process's root, checked, parsed, indexed), a read again when nothing was added (the
//! housekeeping tick's cost per JIT process), and naming one address.

use anyhow::Context as _;
use serde_json::json;

use super::{
    Bench, example,
    report::{Figure, Phase, Verdict},
};
use crate::cmd::sh;

/// Functions in the map.
const ENTRIES: u64 = 100_000;
/// The first read runs on the session's thread: samples wait meanwhile (in an 8 MiB ring
/// buffer, about a second of a busy host's samples).
const TARGET_FIRST_READ_MS: f64 = 250.0;
/// Naming one frame, at most.
const TARGET_LOOKUP_NS: f64 = 2000.0;

pub fn run(b: &Bench) -> anyhow::Result<Phase> {
    let json_path = b.scratch.join("perfmap.json");
    sh(example(b, "perfmap_bench").arg(&json_path).arg(ENTRIES.to_string()))?;
    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json_path)?).context("reading the perf map benchmark's result")?;
    let number = |key: &str| result[key].as_f64().with_context(|| format!("{key} missing"));
    let (first, reread, lookup) = (
        number("first_read_ms")?,
        number("reread_unchanged_us")?,
        number("lookup_ns")?,
    );
    let mib = number("bytes")? / (1 << 20) as f64;
    let figures = vec![
        Figure::new(
            format!("perf map of {} k functions ({mib:.1} MiB): first read", ENTRIES / 1000),
            format!("{first:.0} ms"),
            format!("<= {TARGET_FIRST_READ_MS:.0} ms"),
            Verdict::of(first <= TARGET_FIRST_READ_MS),
        ),
        Figure::new(
            "perf map: naming one JIT frame",
            format!("{lookup:.0} ns"),
            format!("<= {TARGET_LOOKUP_NS:.0} ns"),
            Verdict::of(lookup <= TARGET_LOOKUP_NS),
        ),
    ];
    Ok(Phase {
        key: "perfmap",
        title: "Perf-map symbolization",
        text: format!(
            "A process's perf map of {} k functions, read as the tracer reads it (best of {} runs): \
             first read {first:.1} ms, read again unchanged {reread:.1} µs, {lookup:.0} ns per frame named \
             (1 M random addresses, {:.0} % of them in a function).\n",
            ENTRIES / 1000,
            result["runs"],
            number("named_share")? * 100.0
        ),
        json: json!({"result": result, "target_first_read_ms": TARGET_FIRST_READ_MS, "target_lookup_ns": TARGET_LOOKUP_NS}),
        figures,
    })
}
