//! More samples than the tracer is sized for: 10 kHz on every CPU, and a ring buffer and table
//! maps far too small. Losses are expected; they must be counted and reported, and what is
//! kept must still be right.

use std::process::Command;

use super::{Folded, Verdicts, chain_by_comm, chain_programs, read_folded};
use crate::support::{Running, SUMMARY_JSON, Summary, Tracer};

/// One busy `first` (three calls deep) per CPU for the length of a run.
fn busy_on_every_cpu(first: &std::path::Path) -> Vec<Running> {
    let cpus = std::thread::available_parallelism().map_or(2, usize::from);
    (0..cpus)
        .map(|_| Running(Command::new(first).args(["0", "3"]).spawn().expect("start first")))
        .collect()
}

/// A system-wide tracer at 10 kHz for 3 s with `extra` flags, with one busy chain program per
/// CPU: its stderr, summary, and the folded stacks judged by command name.
fn run_at_10_khz(extra: &[&str]) -> (String, Summary, Verdicts) {
    let dir = tempfile::tempdir().expect("tempdir");
    let programs = chain_programs(dir.path());
    let _busy = busy_on_every_cpu(&programs.0);
    let out = dir.path().join("stacks.folded");
    let mut args = vec![
        "-a",
        "-F",
        "10000",
        "-d",
        "3",
        "--no-kernel",
        "-o",
        out.to_str().expect("path"),
    ];
    args.extend(SUMMARY_JSON);
    args.extend(extra);
    let stderr = Tracer::start(&args).finish();
    let stacks: Vec<Folded> = read_folded(&out);
    let verdicts = Verdicts::of(&stacks, chain_by_comm(&programs, 3));
    let summary = Summary::of(&stderr);
    (stderr, summary, verdicts)
}

/// A system-wide tracer at 10 kHz on every CPU for 3 s, with the CPUs busy: it keeps up or
/// counts what it loses, and the stacks it keeps are right.
#[test]
fn ten_khz_on_every_cpu() {
    privileged_test!();
    // The tracer's own samples count too (they are most of a debug build's at 10 kHz, and
    // left out of the outputs by default).
    let (stderr, summary, verdicts) = run_at_10_khz(&["--include-self"]);
    let (samples, lost) = (summary.count("samples"), summary.count("lost"));
    eprintln!("{stderr}\n10 kHz: {samples} samples kept, {lost} lost");
    // 10 kHz on every CPU for 3 s (the busy programs alone are 2 CPUs' worth) is at least
    // 30,000 samples taken, kept or lost; the debug build of the tests keeps fewer.
    assert!(
        samples + lost >= 30_000,
        "10 kHz should take tens of thousands of samples: {stderr}"
    );
    assert!(samples >= 500, "too few samples kept at 10 kHz: {samples}");
    verdicts.assert_sound("busy programs at 10 kHz", 1_000);
}

/// A ring buffer with room for one sample and table maps of 64 KiB, at 10 kHz with the CPUs
/// busy: samples are lost and the summary says how many, objects without room are reported,
/// and what is kept is still right.
#[test]
fn maps_far_too_small_lose_counted_samples() {
    privileged_test!();
    let (stderr, summary, verdicts) = run_at_10_khz(&["--ring-buffer-size", "8K", "--max-table-memory", "64K"]);
    let (samples, lost) = (summary.count("samples"), summary.count("lost"));
    eprintln!("{stderr}\ntiny ring buffer: {samples} samples kept, {lost} lost");
    assert!(
        lost > 0,
        "a one-sample ring buffer at 10 kHz must lose samples: {stderr}"
    );
    assert!(samples > 0, "some samples must get through: {stderr}");
    assert!(summary.count("tables.without_by_reason.no_room") > 0, "{stderr}");
    verdicts.assert_sound("busy programs with tiny maps", 1);
}

/// A process that fails `execve` in a loop (200,000 calls, each returning at once) has its
/// stack walked at an exec's entry at most once a millisecond: the rest are counted
/// (`call_entries.exec_limited`), and the session ends with the process.
#[test]
fn failing_execs_in_a_loop_are_walked_once_a_millisecond() {
    privileged_test!();
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = crate::support::compile_fixture("hardening/execfail", &dir.path().join("execfail"), &[]);
    let exe = exe.to_str().expect("path");
    let mut args = SUMMARY_JSON.to_vec();
    args.extend(["--no-kernel", "--", exe, "200000"]);
    let started = std::time::Instant::now();
    let stderr = Tracer::start(&args).finish();
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let summary = Summary::of(&stderr);
    let (kept, limited) = (
        summary.count("call_entries.kept"),
        summary.count("call_entries.exec_limited"),
    );
    eprintln!("{kept} entry stacks kept, {limited} execs left out, in {elapsed_ms} ms");
    // Its one exit, and at most one exec per millisecond of the session.
    assert!(
        kept >= 2 && kept <= elapsed_ms + 1,
        "{kept} entry stacks kept in {elapsed_ms} ms: {stderr}"
    );
    assert!(
        kept + limited >= 1000 && limited > kept,
        "{limited} execs counted as left out, {kept} kept: {stderr}"
    );
}
