//! Interactive flame graphs (SVG with its search and zoom script) drawn by inferno from the
//! same lines as the folded format, so both always show the same stacks. (Only when their
//! counts add up past `u64::MAX / 2`, which no real profile does, are the widths divided, the
//! subtitle saying by what.)

use std::io::{self, Write};

use inferno::flamegraph::{self, Options};

use super::{
    folded,
    model::{Resolved, Weights},
};

/// Draw `resolved` as a flame graph. Without any sample the picture says so.
pub fn write(out: &mut impl Write, resolved: &Resolved) -> io::Result<()> {
    let lines = folded::lines(resolved);
    let divisor = divisor(lines.values().copied());
    let lines: Vec<String> = lines
        .into_iter()
        .map(|(line, count)| format!("{line} {}", scaled(count, divisor)))
        .collect();
    let mut options = Options::default();
    options.title = "sframe-trace".to_owned();
    let samples = resolved.stacks.iter().fold(0u64, |sum, s| sum.saturating_add(s.count));
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
    options.subtitle = Some(if divisor > 1 {
        format!("{subtitle}; widths divided by {divisor}")
    } else {
        subtitle
    });
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

/// What the widths are divided by so that their total stays within `u64::MAX / 2` (inferno
/// adds them up in a `u64`): 1 for any real profile, more only for a crafted one.
pub fn divisor(counts: impl Iterator<Item = u64>) -> u64 {
    let total: u128 = counts.map(u128::from).sum();
    let room = u128::from(u64::MAX / 2);
    if total <= room {
        1
    } else {
        u64::try_from(total / room + 1).unwrap_or(u64::MAX)
    }
}

/// `count` divided by `divisor`, a nonzero count staying at least 1 (the stack stays drawn).
fn scaled(count: u64, divisor: u64) -> u64 {
    if count == 0 { 0 } else { (count / divisor).max(1) }
}

#[cfg(test)]
mod tests;
