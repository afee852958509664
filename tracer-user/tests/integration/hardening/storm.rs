//! Processes that come and go faster than the tracer can read them: a fork/exec storm of
//! short-lived programs under a system-wide tracer, and a deep program killed again and again
//! while it is sampled at high frequency (walks of a process that is exiting).

use std::{
    process::Command,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use super::{
    Verdict, Verdicts, chain_by_comm, chain_programs, compile, followed, processes_at_start, read_folded,
    samples_and_lost, status_kib, storm_duration,
};
use crate::support::{Rng, Running, Tracer, privileged};

/// The tracer's resident memory, read every 200 ms until dropped: the most seen.
struct RssWatch {
    stop: Arc<AtomicBool>,
    peak_kib: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssWatch {
    fn start(pid: u32) -> RssWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let peak_kib = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, peak_kib) = (stop.clone(), peak_kib.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(rss) = status_kib(pid, "VmRSS") {
                        peak_kib.fetch_max(rss, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
        };
        RssWatch {
            stop,
            peak_kib,
            thread: Some(thread),
        }
    }

    fn peak_kib(&self) -> u64 {
        self.peak_kib.load(Ordering::Relaxed)
    }
}

impl Drop for RssWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Resident memory the tracer may gain during a storm: the storm's processes are forgotten
/// after they exit, so what stays is their stacks in the profile (a few hundred bytes each)
/// and the symbol cache; tables of programs other tests start meanwhile come on top.
const RSS_GROWTH_KIB: u64 = 192 << 10;

/// Hundreds of short-lived processes a second (fixtures/hardening/storm.c starting `first`,
/// 2 ms of work each) for 5 s (30 s long) under a system-wide tracer: it survives, none of
/// their stacks is wrong, its resident memory stays bounded, and the processes it keeps at the
/// end are no more than at the start.
#[test]
fn fork_exec_storm_is_bounded() {
    let Some(_serial) = privileged("hardening::storm::fork_exec_storm_is_bounded") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, _) = chain_programs(dir.path());
    let storm = compile(dir.path(), "storm", "storm", &[]);
    let out = dir.path().join("stacks.folded");
    let tracer = Tracer::start(&["-a", "-F", "999", "--no-kernel", "-o", out.to_str().expect("path")]);
    let at_start = processes_at_start(&tracer.stderr);
    let rss_at_start = status_kib(tracer.pid(), "VmRSS").expect("the tracer's VmRSS");
    let watch = RssWatch::start(tracer.pid());
    let seconds = storm_duration().as_secs();
    let started = Instant::now();
    let storm = Command::new(&storm)
        .args([&seconds.to_string(), "300"])
        .arg(&first)
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
    // Exit notices drop processes after a 2 s grace period.
    std::thread::sleep(Duration::from_secs(3));
    let peak = watch.peak_kib().max(status_kib(tracer.pid(), "VmHWM").unwrap_or(0));
    drop(watch);
    let stderr = tracer.interrupt();
    let (samples, lost) = samples_and_lost(&stderr);
    eprintln!(
        "{stderr}\n{report}storm of {seconds} s took {:.1} s; tracer RSS {rss_at_start} KiB at the start, \
         {rss_after_storm} KiB after the storm, peak {peak} KiB; {samples} samples, {lost} lost",
        started.elapsed().as_secs_f64()
    );
    let started: u64 = report
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.trim_end_matches(',').parse().ok())
        .expect("processes started");
    assert!(
        started >= seconds * 100,
        "the storm should start hundreds of processes a second: {report}"
    );
    let verdicts = Verdicts::of(&read_folded(&out), chain_by_comm(1));
    verdicts.assert_sound("storm processes", 20);
    let seen = followed(&stderr, "loaded while tracing") + followed(&stderr, "gone before loading");
    assert!(seen >= 100, "the storm's processes should be noticed: {stderr}");
    assert!(followed(&stderr, "exited") >= 50, "{stderr}");
    assert!(
        followed(&stderr, "traced at the end") <= at_start + 30,
        "{at_start} processes at the start: {stderr}"
    );
    assert!(
        peak <= rss_at_start + RSS_GROWTH_KIB,
        "resident memory grew from {rss_at_start} KiB to a peak of {peak} KiB"
    );
}

/// A program 100 calls deep, started and killed with SIGKILL again and again (after 5 to 60
/// ms) while every CPU is sampled at 4999 Hz: samples land in walks of a process that is being
/// torn down (its memory going away under the walker). The tracer survives, and every stack it
/// keeps is exact or truncated.
#[test]
fn processes_killed_mid_walk() {
    let Some(_serial) = privileged("hardening::storm::processes_killed_mid_walk") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, _) = chain_programs(dir.path());
    let out = dir.path().join("stacks.folded");
    let tracer = Tracer::start(&["-a", "-F", "4999", "--no-kernel", "-o", out.to_str().expect("path")]);
    let mut rng = Rng(0x6b69_6c6c);
    let until = Instant::now() + storm_duration();
    let mut kills = 0;
    while Instant::now() < until {
        let victim = Running(Command::new(&first).args(["0", "100"]).spawn().expect("start first"));
        std::thread::sleep(Duration::from_millis(5 + rng.below(56) as u64));
        drop(victim);
        kills += 1;
    }
    let stderr = tracer.interrupt();
    let (samples, lost) = samples_and_lost(&stderr);
    eprintln!("{stderr}\n{kills} processes killed; {samples} samples, {lost} lost");
    let verdicts = Verdicts::of(&read_folded(&out), chain_by_comm(100));
    verdicts.assert_sound("killed processes", 100);
    assert!(verdicts.get(Verdict::Exact) > 0, "no exact stack at all");
    assert!(kills >= 50, "only {kills} kills");
}
