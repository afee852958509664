//! Processes that come and go faster than the tracer can read them: a fork/exec storm of
//! short-lived programs under a system-wide tracer, and a deep program killed again and again
//! while it is sampled at high frequency (walks of a process that is exiting).

use std::{
    process::Command,
    time::{Duration, Instant},
};

use super::{
    ROOMY, Verdict, Verdicts, chain_by_comm, chain_programs, compile, processes_at_start, read_folded, status_kib,
    storm_duration,
    watch::{RssWatch, open_files, open_files_in, open_process_files, settled_rss},
};
use crate::support::{Rng, Running, SUMMARY_JSON, Summary, Tracer};

/// Resident memory the tracer may gain during a storm, at most and at the end. The storm's
/// processes are forgotten after they exit (what stays is their stacks, a few hundred bytes
/// each), but a system-wide tracer also loads whatever else starts on the host meanwhile
/// (other test runs' compilers, whose tables take tens of megabytes and more to build), so
/// these bounds are coarse: they catch what grows with the processes, not a few tables.
const PEAK_GROWTH_KIB: u64 = 1 << 20;
const END_GROWTH_KIB: u64 = 256 << 10;
/// Growth allowed over the last two thirds of a long storm.
const LATE_GROWTH_KIB: u64 = 256 << 10;

/// Hundreds of short-lived processes a second (fixtures/hardening/storm.c starting `first`,
/// 2 ms of work each) for 5 s (30 s long) under a system-wide tracer: it survives, none of
/// their stacks is wrong, its resident memory stays bounded, and the processes it keeps at the
/// end are no more than at the start.
#[test]
fn fork_exec_storm_is_bounded() {
    privileged_test!();
    // An unprivileged user's busy and growing-jitdump programs beside it all along (issue 29:
    // they once left the tracer judging none of this test's samples).
    let _neighbours = crate::support::neighbours::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let programs = chain_programs(dir.path());
    let first = &programs.0;
    let storm = compile(dir.path(), "storm", "storm", &[]);
    let out = dir.path().join("stacks.folded");
    let args = ["-a", "-F", "999", "--no-kernel", "-o", out.to_str().expect("path")];
    let mut tracer = Tracer::start_sweeping(&[&ROOMY[..], &SUMMARY_JSON[..], &args[..]].concat());
    let at_start = processes_at_start(&tracer.stderr);
    let rss_at_start = settled_rss(tracer.pid());
    let files_at_start = open_files(tracer.pid());
    let (own_at_start, on_processes_at_start) = (
        open_files_in(tracer.pid(), dir.path()),
        open_process_files(tracer.pid()),
    );
    let watch = RssWatch::start(tracer.pid());
    let seconds = storm_duration().as_secs();
    let started = Instant::now();
    let storm = Command::new(&storm)
        .args([&seconds.to_string(), "300"])
        .arg(first)
        .args(["2", "1"])
        .output()
        .expect("run the storm");
    let report = String::from_utf8_lossy(&storm.stdout);
    assert!(
        storm.status.success(),
        "storm: {report}{}",
        String::from_utf8_lossy(&storm.stderr)
    );
    let rss_after_storm = status_kib(tracer.pid(), "VmRSS").expect("the tracer's VmRSS");
    tracer.wait_forgotten();
    let rss_at_end = status_kib(tracer.pid(), "VmRSS").expect("the tracer's VmRSS");
    let files_at_end = open_files(tracer.pid());
    let (own_at_end, on_processes_at_end) = (
        open_files_in(tracer.pid(), dir.path()),
        open_process_files(tracer.pid()),
    );
    // The peak of the storm and after (not of the start: see `settled_rss`).
    let peak = watch.peak_kib();
    let lifetime_peak = status_kib(tracer.pid(), "VmHWM").unwrap_or(0);
    let rss_in_storm = watch.at(started + storm_duration() / 3);
    drop(watch);
    let stderr = tracer.interrupt();
    let summary = Summary::of(&stderr);
    let (samples, lost) = (summary.count("samples"), summary.count("lost"));
    eprintln!(
        "{stderr}\n{report}storm of {seconds} s took {:.1} s; tracer RSS {rss_at_start} KiB at the start, \
         {rss_in_storm} KiB a third into the storm, {rss_after_storm} KiB after it, {rss_at_end} KiB at the end, \
         peak {peak} KiB ({lifetime_peak} KiB in its life); open files {files_at_start} at the start, {files_at_end} at the end \
         (on the test's files {own_at_start}, {own_at_end}; on processes {on_processes_at_start}, {on_processes_at_end}); \
         {samples} samples, {lost} lost",
        started.elapsed().as_secs_f64()
    );
    let started: u64 = report
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.trim_end_matches(',').parse().ok())
        .expect("processes started");
    // Hundreds a second on an idle host; however busy this one is, hundreds in all.
    assert!(started >= 200, "the storm should start hundreds of processes: {report}");
    let verdicts = Verdicts::of(&read_folded(&out), chain_by_comm(&programs, 1));
    verdicts.assert_sound("storm processes", 20);
    let seen = summary.count("processes.loaded") + summary.count("processes.vanished");
    assert!(seen >= 100, "the storm's processes should be noticed: {stderr}");
    assert!(summary.count("processes.exited") >= 50, "{stderr}");
    assert!(
        summary.count("processes.traced_at_end") <= at_start + 30,
        "{at_start} processes at the start: {stderr}"
    );
    assert!(
        peak <= rss_at_start + PEAK_GROWTH_KIB && rss_at_end <= rss_at_start + END_GROWTH_KIB,
        "resident memory grew from {rss_at_start} KiB to a peak of {peak} KiB, {rss_at_end} KiB at the end"
    );
    if seconds >= 30 {
        assert!(
            rss_after_storm <= rss_in_storm + LATE_GROWTH_KIB,
            "resident memory kept growing with the storm: {rss_in_storm} KiB a third into it, {rss_after_storm} after"
        );
    }
    // What it holds per process or per file of the storm, not what the rest of the host
    // makes it open (a system-wide tracer holds the files of whatever runs there).
    assert!(
        own_at_end <= own_at_start + 10,
        "open files on the test's programs grew from {own_at_start} to {own_at_end}"
    );
    assert!(
        on_processes_at_end <= on_processes_at_start + 30,
        "open files on processes grew from {on_processes_at_start} to {on_processes_at_end}"
    );
}

/// A program 100 calls deep, started and killed with SIGKILL again and again (20 to 200 ms
/// after the tracer loaded it, however long a busy host makes that take; at least 60 times)
/// while every CPU is sampled at 4999 Hz: samples land in walks of a process that is being torn
/// down (its memory going away under the walker). The tracer survives, and every stack it keeps
/// is exact or truncated.
#[test]
fn processes_killed_mid_walk() {
    privileged_test!();
    let dir = tempfile::tempdir().expect("tempdir");
    let programs = chain_programs(dir.path());
    let out = dir.path().join("stacks.folded");
    let args = ["-a", "-F", "4999", "--no-kernel", "-o", out.to_str().expect("path")];
    let mut tracer = Tracer::start_logging(
        &[&ROOMY[..], &SUMMARY_JSON[..], &args[..]].concat(),
        sframe_trace::trace::LOAD_LOG,
    );
    let mut rng = Rng(0x6b69_6c6c);
    let until = Instant::now() + storm_duration();
    let mut kills = 0;
    while Instant::now() < until || kills < 60 {
        let victim = Running(
            Command::new(&programs.0)
                .args(["0", "100"])
                .spawn()
                .expect("start first"),
        );
        tracer.wait_loaded(victim.pid(), "loaded the process to kill");
        std::thread::sleep(Duration::from_millis(20 + rng.below(181) as u64));
        drop(victim);
        kills += 1;
    }
    let stderr = tracer.interrupt();
    let summary = Summary::of(&stderr);
    let (samples, lost) = (summary.count("samples"), summary.count("lost"));
    eprintln!("{stderr}\n{kills} processes killed; {samples} samples, {lost} lost");
    let verdicts = Verdicts::of(&read_folded(&out), chain_by_comm(&programs, 100));
    verdicts.assert_sound("killed processes", 100);
    assert!(verdicts.get(Verdict::Exact) > 0, "no exact stack at all");
}
