//! A process's footprint as `/proc` shows it: a field of its status in KiB, its open files,
//! and the median of readings taken over time. One source file for the hardening tests and
//! the bench (`xtask/src/bench`, which includes it by path), so that the soak's test and its
//! bench figure read the tracer the same way.

use std::time::Instant;

/// A field of `/proc/PID/status` in KiB (`VmRSS`, `VmHWM`, `RssAnon`).
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()
}

/// The process's open file descriptors (0 once it is gone).
pub fn open_files(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |dir| dir.count() as u64)
}

/// The median of the `readings` (time, KiB) taken in `[from, to]`, 0 without any: one reading
/// can catch a table being built, a median over seconds the standing size.
pub fn median_between(readings: &[(Instant, u64)], from: Instant, to: Instant) -> u64 {
    let mut kib: Vec<u64> = readings
        .iter()
        .filter(|&&(t, _)| from <= t && t <= to)
        .map(|&(_, kib)| kib)
        .collect();
    kib.sort_unstable();
    kib.get(kib.len() / 2).copied().unwrap_or(0)
}
