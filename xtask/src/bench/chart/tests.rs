//! Unit tests of `bench::chart`; each test says what it proves.

use serde_json::json;

use super::*;

/// A report with figures gives an SVG with one bar each and the target lines.
#[test]
fn bars_and_targets() {
    let report = json!({
        "overhead": {"target_pct_at_999_hz": 1.0, "configs": [
            {"config": "sframe-trace", "hz": "999", "overhead_pct": {"median": 0.5, "min": -0.2, "max": 0.9}},
            {"config": "untraced", "hz": "—", "overhead_pct": null}]},
        "cost": {"target_ratio": 3.0, "rows": [
            {"tool": "sframe_trace", "hz": 999, "ns_per_walk": {"median": 3000.0, "min": 2900.0, "max": 3100.0}},
            {"tool": "bpftrace", "hz": 999, "ns_per_walk": {"median": 1500.0, "min": 1400.0, "max": 1600.0}}]},
        "accuracy": {"overall": [{"name": "perf <fp>", "samples": 10, "mean_share": 0.1}]},
    });
    let svg = svg(&report);
    assert_eq!(svg.matches("<rect x=").count(), 4, "{svg}");
    assert!(svg.contains("target 1% at 999 Hz") && svg.contains("3× the fp walk") && svg.contains("perf &lt;fp&gt;"));
}
