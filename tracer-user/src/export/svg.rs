//! Interactive flame graphs (SVG with its search and zoom script) drawn by inferno from the
//! same lines as the folded format, so both always show the same stacks. The title says what
//! was traced, where and for how long; a graph taller than the window opens scrolled to its
//! base (the processes), where reading starts, not to its thin tips.

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
    let lines: Vec<String> = folded::lines_styled(resolved, style)
        .into_iter()
        .map(|(line, count)| format!("{line} {count}"))
        .collect();
    let mut options = Options::default();
    let samples = resolved.stacks.iter().map(|s| s.count).sum::<u64>();
    let secs = resolved.duration_ns as f64 / 1e9;
    // inferno escapes the title as XML text.
    options.title = if what.is_empty() {
        "sframe-trace".to_owned()
    } else {
        format!("sframe-trace: {}, {secs:.1} s", crate::names::escaped(what))
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
    options.subtitle = Some(subtitle);
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

#[cfg(test)]
mod tests;
