//! Interactive flame graphs (SVG with its search and zoom script) drawn by inferno from the
//! same lines as the folded format, so both always show the same stacks.

use std::io::{self, Write};

use inferno::flamegraph::{self, Options};

use super::{
    folded,
    model::{Resolved, Weights},
};

/// Draw `resolved` as a flame graph. Without any sample the picture says so.
pub fn write(out: &mut impl Write, resolved: &Resolved) -> io::Result<()> {
    let lines: Vec<String> = folded::lines(resolved)
        .into_iter()
        .map(|(line, count)| format!("{line} {count}"))
        .collect();
    let mut options = Options::default();
    options.title = "sframe-trace".to_owned();
    let samples = resolved.stacks.iter().map(|s| s.count).sum::<u64>();
    let secs = resolved.duration_ns as f64 / 1e9;
    // The widths are the folded counts: samples, or for offcpu microseconds blocked.
    let (count_name, subtitle) = match resolved.weights() {
        Weights::Cpu => ("samples", format!("{samples} samples in {secs:.1} s")),
        Weights::OffCpu => (
            "us",
            format!("{samples} blocks, widths in microseconds off-CPU, in {secs:.1} s"),
        ),
        Weights::Mixed => (
            "counts",
            format!("{samples} events in {secs:.1} s; under offcpu widths are microseconds off-CPU, elsewhere counts"),
        ),
    };
    options.subtitle = Some(subtitle);
    options.count_name = count_name.to_owned();
    // Colours from the function names: the same function looks the same in every graph.
    options.hash = true;
    let drawn = flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut *out);
    match drawn {
        // inferno has written a picture saying there is nothing to draw.
        Err(e) if lines.is_empty() && e.kind() == io::ErrorKind::InvalidData => {}
        other => other?,
    }
    out.flush()
}

#[cfg(test)]
mod tests;
