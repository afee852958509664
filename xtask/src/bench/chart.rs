//! `report.svg`: horizontal bar charts drawn from report.json: overhead per tracer and
//! frequency, BPF time per walk, and exact stacks per tracer. Medians as bars, ranges as
//! whiskers, targets as dashed lines. Plain SVG text; no plotting library.

use std::fmt::Write as _;

use serde_json::Value;

const WIDTH: f64 = 780.0;
const LABEL: f64 = 250.0;
const PLOT: f64 = 420.0;
const BAR: f64 = 18.0;
const GAP: f64 = 8.0;

/// One bar: median, range, and the text printed after it.
struct Bar {
    label: String,
    value: f64,
    range: Option<(f64, f64)>,
    text: String,
}

/// A panel's bars and optional target line `(value, label)`.
struct Panel {
    title: String,
    bars: Vec<Bar>,
    target: Option<(f64, String)>,
}

/// The chart of `report` (report.json's value).
pub fn svg(report: &Value) -> String {
    let panels = [overhead(report), cost(report), accuracy(report)];
    let mut body = String::new();
    let mut y = 10.0;
    for p in panels.iter().filter(|p| !p.bars.is_empty()) {
        y = draw(&mut body, p, y) + 24.0;
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{y}\" viewBox=\"0 0 {WIDTH} {y}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n{body}</svg>\n"
    )
}

fn spread(v: &Value) -> Option<(f64, Option<(f64, f64)>)> {
    let median = v["median"].as_f64()?;
    Some((median, v["min"].as_f64().zip(v["max"].as_f64())))
}

fn overhead(report: &Value) -> Panel {
    let mut bars = Vec::new();
    for c in report["overhead"]["configs"].as_array().into_iter().flatten() {
        let Some((value, range)) = spread(&c["overhead_pct"]) else {
            continue;
        };
        bars.push(Bar {
            label: format!(
                "{} @ {} Hz",
                c["config"].as_str().unwrap_or("?"),
                c["hz"].as_str().unwrap_or("?")
            ),
            value,
            range,
            text: format!("{value:.2}%"),
        });
    }
    Panel {
        title: "Overhead: CPU time over the untraced run, % (median, min–max)".to_owned(),
        bars,
        target: report["overhead"]["target_pct_at_999_hz"]
            .as_f64()
            .map(|t| (t, format!("target {t}% at 999 Hz"))),
    }
}

fn cost(report: &Value) -> Panel {
    let mut bars = Vec::new();
    let mut fp = None;
    for r in report["cost"]["rows"].as_array().into_iter().flatten() {
        if r["hz"].as_u64() != Some(999) {
            continue;
        }
        let Some((ns, range)) = spread(&r["ns_per_walk"]) else {
            continue;
        };
        let tool = r["tool"].as_str().unwrap_or("?");
        if tool == "bpftrace" {
            fp = Some(ns / 1000.0);
        }
        bars.push(Bar {
            label: if tool == "bpftrace" {
                "bpftrace ustack (fp walk)".to_owned()
            } else {
                "sframe-trace".to_owned()
            },
            value: ns / 1000.0,
            range: range.map(|(a, b)| (a / 1000.0, b / 1000.0)),
            text: format!("{:.2} µs", ns / 1000.0),
        });
    }
    let ratio = report["cost"]["target_ratio"].as_f64().unwrap_or(3.0);
    Panel {
        title: "BPF time per walk of the same stack at 999 Hz, µs (median, min–max)".to_owned(),
        bars,
        target: fp.map(|f| (f * ratio, format!("{ratio}× the fp walk"))),
    }
}

fn accuracy(report: &Value) -> Panel {
    let bars = report["accuracy"]["overall"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["samples"].as_u64().unwrap_or(0) > 0)
        .map(|t| {
            let pct = 100.0 * t["mean_share"].as_f64().unwrap_or(0.0);
            Bar {
                label: t["name"].as_str().unwrap_or("?").to_owned(),
                value: pct,
                range: None,
                text: format!("{pct:.1}%"),
            }
        })
        .collect();
    Panel {
        title: "Exact stacks on the frame-pointer-less workloads, % (mean over the workloads)".to_owned(),
        bars,
        target: Some((99.0, "99%".to_owned())),
    }
}

/// Draw `p` from height `y`; the height below it.
fn draw(out: &mut String, p: &Panel, y: f64) -> f64 {
    let values = p.bars.iter().flat_map(|b| {
        [
            b.value,
            b.range.map_or(b.value, |r| r.0),
            b.range.map_or(b.value, |r| r.1),
        ]
    });
    let lo = values.clone().fold(0.0_f64, f64::min);
    let hi = values
        .chain(p.target.as_ref().map(|t| t.0))
        .fold(f64::MIN_POSITIVE, f64::max)
        * 1.05;
    let x = |v: f64| LABEL + (v - lo) / (hi - lo) * PLOT;
    let _ = writeln!(
        out,
        "<text x=\"10\" y=\"{}\" font-weight=\"bold\" font-size=\"14\">{}</text>",
        y + 14.0,
        esc(&p.title)
    );
    let top = y + 24.0;
    let mut row = top;
    for b in &p.bars {
        let (x0, x1) = (x(0.0).min(x(b.value)), x(0.0).max(x(b.value)));
        let mid = row + BAR / 2.0;
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            LABEL - 8.0,
            mid + 4.0,
            esc(&b.label)
        );
        let _ = writeln!(
            out,
            "<rect x=\"{x0:.1}\" y=\"{row:.1}\" width=\"{:.1}\" height=\"{BAR}\" fill=\"{}\"/>",
            (x1 - x0).max(1.0),
            if b.label.starts_with("sframe-trace") {
                "#d9822b"
            } else {
                "#4a78a8"
            }
        );
        if let Some((a, c)) = b.range {
            let _ = writeln!(
                out,
                "<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{mid:.1}\" y2=\"{mid:.1}\" stroke=\"black\"/>",
                x(a),
                x(c)
            );
            for v in [a, c] {
                let _ = writeln!(
                    out,
                    "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{2:.1}\" stroke=\"black\"/>",
                    x(v),
                    mid - 4.0,
                    mid + 4.0
                );
            }
        }
        let right = x(b.range.map_or(b.value, |r| r.1).max(b.value)).max(x(0.0));
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            right + 6.0,
            mid + 4.0,
            esc(&b.text)
        );
        row += BAR + GAP;
    }
    let _ = writeln!(
        out,
        "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{2:.1}\" stroke=\"#888\"/>",
        x(0.0),
        top - 4.0,
        row
    );
    if let Some((t, label)) = &p.target {
        let _ = writeln!(
            out,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{2:.1}\" stroke=\"#c0392b\" stroke-dasharray=\"4 3\"/>\n\
             <text x=\"{0:.1}\" y=\"{3:.1}\" fill=\"#c0392b\" text-anchor=\"middle\" font-size=\"11\">{4}</text>",
            x(*t),
            top - 4.0,
            row,
            row + 12.0,
            esc(label)
        );
        row += 14.0;
    }
    row
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('`', "")
}

#[cfg(test)]
mod tests;
