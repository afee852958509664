//! Interactive flame graphs (SVG with its search and zoom script) drawn by inferno from the
//! same lines as the folded format, so both always show the same stacks. The title says what
//! was traced, where and for how long; a graph taller than the window opens scrolled to its
//! base (the processes), where reading starts, not to its thin tips. (Only when their counts
//! add up past `u64::MAX / 2`, which no real profile does, are the widths divided, the
//! subtitle saying by what.)

use std::io::{self, Write};

use inferno::flamegraph::{self, Options};

use super::{
    folded,
    model::{Resolved, Weights},
};

/// The script that opens a graph taller than the window scrolled to its base (the SVG's
/// bottom: the root frames), added after inferno's own.
const SCROLL_TO_BASE: &str = "<script type=\"text/ecmascript\"><![CDATA[\
window.addEventListener(\"load\", function () { \
if (document.documentElement.getBoundingClientRect().height > window.innerHeight) \
window.scrollTo(0, document.documentElement.getBoundingClientRect().height); });\
]]></script>\n";

/// Draw `resolved` as a flame graph titled `sframe-trace` (see [`write_titled`]).
pub fn write(out: &mut impl Write, resolved: &Resolved) -> io::Result<()> {
    write_titled(out, resolved, "", &folded::Style::default())
}

/// Draw `resolved` as a flame graph whose title names `what` was traced and where (`pid 12
/// (app) on HOST`; empty: `sframe-trace` alone) and the duration, its lines drawn in `style`
/// (see [`folded::Style`]). Without any sample the picture says so.
pub fn write_titled(
    out: &mut impl Write,
    resolved: &Resolved,
    what: &str,
    style: &folded::Style<'_>,
) -> io::Result<()> {
    let lines = folded::lines_styled(resolved, style);
    let divisor = divisor(lines.values().copied());
    let lines: Vec<String> = lines
        .into_iter()
        .map(|(line, count)| format!("{line} {}", scaled(count, divisor)))
        .collect();
    let mut options = Options::default();
    let samples = resolved.stacks.iter().fold(0u64, |sum, s| sum.saturating_add(s.count));
    let secs = resolved.duration_ns as f64 / 1e9;
    // inferno escapes the title as XML text.
    options.title = if what.is_empty() {
        "sframe-trace".to_owned()
    } else {
        format!("sframe-trace: {}, {secs:.1} s", tracer_unwind::names::escaped(what))
    };
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
    let mut svg = Vec::new();
    let drawn = flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut svg);
    match drawn {
        // inferno has written a picture saying there is nothing to draw.
        Err(e) if lines.is_empty() && e.kind() == io::ErrorKind::InvalidData => {}
        other => other?,
    }
    match svg.windows(6).rposition(|w| w == b"</svg>") {
        Some(end) => {
            out.write_all(&svg[..end])?;
            out.write_all(SCROLL_TO_BASE.as_bytes())?;
            out.write_all(&svg[end..])?;
        }
        None => out.write_all(&svg)?,
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
