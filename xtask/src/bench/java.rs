//! What reading a JVM's code heaps costs (the HotSpot runtime, `tracer-user/src/jit/hotspot`):
//! Debian's OpenJDK 17 recursing in `fib` (compiled by C1 and C2), traced with `--pid` at
//! 999 Hz, plain (its compiled frames walked with the tables made from the code heaps) and
//! with `-XX:+PreserveFramePointer` (the JVM left to frame pointers, the code heaps not read:
//! the walk a JVM needed a restart for). The kernel's cost per sample is the BPF program time
//! per sample of each (as in `depth`); the session's is the time its reads of the code heaps
//! took (the summary's `hotspot.read_us`), in all and per sample.

use std::process::Command;

use serde_json::json;

use super::{
    Bench,
    depth::traced_walk_ns,
    report::{Figure, Phase, Spread, spread_json, table, with_and_without, with_only},
    sys::Sysctl,
};
use crate::cmd::sh;

/// The workload: `fib(24)` again and again for the seconds its argument says.
const FIB_JAVA: &str = "public class Fib {\n\
    static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\n\
    public static void main(String[] args) {\n\
        long end = System.currentTimeMillis() + Long.parseLong(args[0]) * 1000; long s = 0;\n\
        while (System.currentTimeMillis() < end) s += fib(24);\n\
        System.out.println(s);\n\
    }\n\
}\n";

pub fn run(b: &Bench) -> anyhow::Result<Phase> {
    let _stats = Sysctl::set("kernel.bpf_stats_enabled", "1")?;
    let (reps, secs) = if b.plan.quick { (1, 3) } else { (3, 5) };
    let classes = b.scratch.join("java");
    std::fs::create_dir_all(&classes)?;
    std::fs::write(classes.join("Fib.java"), FIB_JAVA)?;
    sh(Command::new("javac").arg("Fib.java").current_dir(&classes))?;
    let start = |options: &[&str]| {
        let mut command = Command::new("java");
        command.args(options).arg("-cp").arg(&classes).args(["Fib", "600"]);
        command
    };
    let (mut plain, mut kept) = (Vec::new(), Vec::new());
    let (mut read_ms, mut read_per_sample_us, mut reads) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..reps {
        let (ns, summary) = traced_walk_ns(b, &mut start(&[]), &format!("java-plain-{rep}"), &[], secs, 0.0)?;
        let read_us = summary["hotspot"]["read_us"].as_f64().unwrap_or(0.0);
        let samples = summary["samples"].as_f64().unwrap_or(1.0).max(1.0);
        anyhow::ensure!(
            summary["hotspot"]["processes"].as_u64() == Some(1),
            "the JVM's code heaps were not read: {summary}"
        );
        plain.push(ns);
        read_ms.push(read_us / 1000.0);
        read_per_sample_us.push(read_us / samples);
        reads.push(summary["hotspot"]["scans"].as_f64().unwrap_or(0.0));
        let (ns, _) = traced_walk_ns(
            b,
            &mut start(&["-XX:+PreserveFramePointer"]),
            &format!("java-fp-{rep}"),
            &[],
            secs,
            0.0,
        )?;
        kept.push(ns);
    }
    let (plain, kept) = (Spread::of(plain), Spread::of(kept));
    let (read_ms, read_per_sample_us, reads) = (Spread::of(read_ms), Spread::of(read_per_sample_us), Spread::of(reads));
    let (added, bpf) = with_and_without(&plain, &kept);
    let rows = vec![
        bpf,
        with_only(
            "reads of the code heaps",
            &reads,
            &|n| format!("{n:.0}"),
            "— (not read)",
        ),
        with_only("their time, in all", &read_ms, &|ms| format!("{ms:.1} ms"), "—"),
        with_only(
            "their time per sample",
            &read_per_sample_us,
            &|us| format!("{us:.1} µs"),
            "—",
        ),
    ];
    Ok(Phase {
        key: "java",
        title: "Cost of reading a JVM's code heaps",
        text: format!(
            "OpenJDK 17 recursing in `fib(24)`, traced with `--pid` at 999 Hz for {secs} s ({reps} \
             runs each; median [min, max]); the session starts with the JVM, so its reads follow \
             the compilers' first seconds. Plain, the compiled frames are walked with the tables \
             made from the code heaps; with `-XX:+PreserveFramePointer` the JVM is left to frame \
             pointers and its code heaps are not read. The kernel's added cost per sample is the \
             difference of the BPF times (medians): {}.\n\n{}\n",
            added.map_or("not measured".to_owned(), |ns| format!("{:.1} µs", ns / 1000.0)),
            table(&["", "plain `java`", "`-XX:+PreserveFramePointer`"], &rows)
        ),
        json: json!({
            "plain_ns_per_sample": spread_json(plain),
            "preserve_frame_pointer_ns_per_sample": spread_json(kept),
            "added_ns_per_sample": added,
            "reads": spread_json(reads),
            "read_ms": spread_json(read_ms),
            "read_us_per_sample": spread_json(read_per_sample_us),
        }),
        figures: vec![
            Figure::context_ns(
                "BPF time per sample added by the code-heap tables (OpenJDK 17, 999 Hz)",
                added,
            ),
            Figure::context_ns(
                "session time per sample reading the code heaps (OpenJDK 17, 999 Hz)",
                read_per_sample_us.map(|s| s.median * 1000.0),
            ),
        ],
    })
}
