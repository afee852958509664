//! Unit tests of `bench::measure`; each test says what it proves.

use super::*;

/// Counts are read from the tracers' own lines.
#[test]
fn reads_counts_from_tracer_lines() {
    let ours = "sframe-trace: 2535 samples in 3.0 s (the traced processes exited), 0 lost\n  \
                user frames: 111539 from SFrame, 12 from .eh_frame, 0 from frame pointers\n";
    assert_eq!(number_before(ours, " samples in "), Some(2535));
    assert_eq!(ours_frames(ours), Some(111551));
    let perf = "[ perf record: Captured and wrote 0.105 MB /tmp/c1.data (1689 samples) ]\n";
    assert_eq!(number_before(perf, " samples) ]"), Some(1689));
    assert_eq!(
        workload_cpu("x: 3 units at depth 40: 00ff, cpu_us 1650123\n"),
        Some(1.650123)
    );
}
