//! Data volume per second (section 6 of the report), from the overhead runs: what each tracer
//! writes (our folded stacks, perf.data, bpftrace's printed map; `perf script`'s text apart)
//! and, for sframe-trace, what crosses the ring buffer (samples × the fixed record size), per
//! second of the workload's CPU time: cpu-clock samples a process only while it runs, so this
//! is what a busy process costs, whatever else the machine runs.

use serde_json::json;

use super::{
    memory::Memory,
    report::{Figure, Phase, Spread, Verdict, spread_json, table},
    runs::{Config, FREQUENCIES, Runs},
    tool::{TOOLS, Tool},
};

/// `12.3 KB/s`, `4.56 MB/s`.
fn rate(bytes_per_sec: f64) -> String {
    if bytes_per_sec >= 1e6 {
        format!("{:.2} MB/s", bytes_per_sec / 1e6)
    } else {
        format!("{:.1} KB/s", bytes_per_sec / 1e3)
    }
}

pub fn phase(runs: &Runs, memory: &Memory) -> Phase {
    let record = memory.sample_record_bytes();
    let record_header = memory.sample_record_header_bytes();
    let mut rows = Vec::new();
    let mut json_rows = Vec::new();
    let mut at_999 = Vec::new();
    for hz in FREQUENCIES {
        for tool in TOOLS {
            let rs = runs.of(Config::Traced { tool, hz });
            let output = Spread::of(rs.iter().map(|r| r.output_bytes as f64 / r.workload_cpu));
            // Each record: its header and its frames (cpubench makes no system calls, so its
            // samples carry user frames only): the sampled PC and the callers the summary
            // counts.
            let ring = match tool {
                Tool::Ours => record_header.and_then(|header| {
                    Spread::of(
                        rs.iter()
                            .filter_map(|r| Some((r.samples? * (header + 8) + 8 * r.frames?) as f64 / r.workload_cpu)),
                    )
                }),
                _ => None,
            };
            let post = rs
                .iter()
                .find_map(|r| r.post.map(|(_, bytes)| bytes as f64 / r.workload_cpu));
            let what = match tool {
                Tool::Ours => "folded stacks",
                Tool::PerfDwarf | Tool::PerfFp | Tool::PerfBare => "perf.data",
                Tool::Bpftrace => "printed `ustack` map",
            };
            let show = |s: Option<Spread>| s.map_or("—".to_owned(), |s| s.show(rate));
            rows.push(vec![
                tool.name().to_owned(),
                hz.to_string(),
                what.to_owned(),
                show(output),
                match tool {
                    Tool::Ours => format!("ring buffer: {}", show(ring)),
                    Tool::PerfDwarf | Tool::PerfFp | Tool::PerfBare => {
                        format!("`perf script` text: {}", post.map_or("—".to_owned(), rate))
                    }
                    Tool::Bpftrace => "—".to_owned(),
                },
            ]);
            json_rows.push(json!({
                "tool": tool.key(), "hz": hz, "output": what,
                "output_bytes_per_sec": spread_json(output),
                "ring_buffer_bytes_per_sec": spread_json(ring),
                "perf_script_bytes_per_sec": post,
            }));
            if hz == 999 {
                at_999.push(format!(
                    "{} {}",
                    tool.name(),
                    output.map_or("—".to_owned(), |s| rate(s.median))
                ));
            }
        }
    }
    let text = format!(
        "Bytes written by each tracer on `cpubench` per second of the workload's CPU time (cpu-clock \
         samples it only while it runs; medians [min, max] over the overhead runs). sframe-trace also moves one record per sample through its ring \
         buffer: {} bytes of header and 8 per frame, at most {} bytes ({} user and {} kernel frames); \
         its rate below counts the samples' user frames.\n\n{}",
        record_header.map_or("?".to_owned(), |r| r.to_string()),
        record.map_or("?".to_owned(), |r| r.to_string()),
        memory.build["sample_max_user_frames"],
        memory.build["sample_max_kernel_frames"],
        table(&["tracer", "Hz", "output", "output per second", "also"], &rows)
    );
    let figures = vec![Figure::new(
        "Output per second at 999 Hz",
        at_999.join("; "),
        "— (context)",
        Verdict::Peer,
    )];
    Phase {
        key: "volume",
        title: "6. Data volume",
        text,
        json: json!({"sample_record_bytes": record, "sample_record_header_bytes": record_header, "rows": json_rows}),
        figures,
    }
}
