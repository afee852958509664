//! The soak figures (section "Soak"): the release tracer system-wide at its default frequency,
//! exporting OTLP every 5 s, while a fork storm starts 100 processes a second and a fresh copy
//! of a program (a new file each time) runs again and again, for 30 minutes (`--quick`: 40 s).
//! Its resident size (`VmRSS`, the file pages it maps included: a cgroup's memory limit counts
//! them) is taken as a median over 10 s at 5 minutes and at the end, `RssAnon` beside it; its
//! open files at the start and once the churn stopped and its objects were forgotten; and its
//! CPU outside churn, over a minute on a host of at least 200 processes once the churn ended.
//! The collector is a port nobody listens on: encoding and queueing run, sending fails fast
//! (the export's own memory is bounded by its queue of 4 windows).

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::json;

use super::{
    Bench,
    footprint::{median_between, open_files, status_kib},
    report::{Figure, Phase, Verdict},
    sys,
};
use crate::cmd::sh;

/// The resident size at the end, at most: the agent's default `--max-memory`.
const TARGET_RSS_MIB: f64 = 150.0;
/// Growth of the resident size from the first figure to the end, at most, in percent.
const TARGET_GROWTH_PERCENT: f64 = 5.0;
/// The tracer's CPU outside churn, at most, in percent of one CPU.
const TARGET_QUIET_CPU_PERCENT: f64 = 1.0;
/// The processes the host runs, at least, while that CPU is measured (idle ones are started
/// up to this count).
const HOST_PROCESSES: usize = 200;
/// The share of the copies traced that may still hold a file once the churn stopped.
const FILES_PER_COPIES: u64 = 4;
/// Memory is the median of the readings over this long before each point.
const MEDIAN_OVER: Duration = Duration::from_secs(10);
/// Time for the churn's objects to be unloaded (10 s) and forgotten at the next export.
const FORGOTTEN_WITHIN: Duration = Duration::from_secs(25);

/// The phase's durations: the first memory figure, the rest of the churn, the quiet CPU.
fn durations(quick: bool) -> (Duration, Duration, Duration) {
    if quick {
        (
            Duration::from_secs(20),
            Duration::from_secs(20),
            Duration::from_secs(15),
        )
    } else {
        (
            Duration::from_secs(300),
            Duration::from_secs(1500),
            Duration::from_secs(60),
        )
    }
}

pub fn run(b: &Bench) -> anyhow::Result<Phase> {
    let (warm_up, after, quiet) = durations(b.plan.quick);
    let dir = b.scratch.join("soak");
    std::fs::create_dir_all(&dir)?;
    let chain = compile(b, &dir, "chain")?;
    let storm = compile(b, &dir, "storm")?;
    let mut tracer = Command::new(&b.tracer)
        .args(["-a", "--summary-format", "json", "-f", "otlp"])
        .args(["--otlp-endpoint", "http://127.0.0.1:9", "--export-interval", "5"])
        .stderr(Stdio::null())
        .spawn()?;
    let pid = tracer.id();
    std::thread::sleep(Duration::from_secs(10));
    let files_at_start = open_files(pid);
    let started = Instant::now();
    let mut storm = Command::new(&storm)
        .args([&(warm_up + after).as_secs().to_string(), "100"])
        .arg(&chain)
        .args(["5", "1"])
        .stdout(Stdio::null())
        .spawn()?;
    let stop = Arc::new(AtomicBool::new(false));
    let copies = Arc::new(AtomicU64::new(0));
    let copier = {
        let (stop, copies, dir) = (stop.clone(), copies.clone(), dir.clone());
        std::thread::spawn(move || run_copies(&chain, &dir, &stop, &copies))
    };
    let mut readings: Vec<(Instant, u64, u64)> = Vec::new();
    while started.elapsed() < warm_up + after {
        if let (Some(rss), Some(anon)) = (status_kib(pid, "VmRSS"), status_kib(pid, "RssAnon")) {
            readings.push((Instant::now(), rss, anon));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::Relaxed);
    let copier_result = copier.join();
    let _ = storm.wait();
    std::thread::sleep(FORGOTTEN_WITHIN);
    let files_after = open_files(pid);
    let (idle, quiet_cpu) = quiet_cpu(pid, quiet);
    sys::signal(pid, libc::SIGINT);
    let _ = tracer.wait();
    anyhow::ensure!(copier_result.is_ok(), "the copies failed");
    let quiet_cpu = quiet_cpu.ok_or_else(|| anyhow::anyhow!("the tracer's CPU time could not be read"))?;
    let median = |at: Instant, pick: fn(&(Instant, u64, u64)) -> u64| {
        let series: Vec<(Instant, u64)> = readings.iter().map(|r| (r.0, pick(r))).collect();
        median_between(&series, at - MEDIAN_OVER, at)
    };
    let (first_at, end_at) = (started + warm_up, started + warm_up + after);
    let rss = (median(first_at, |r| r.1), median(end_at, |r| r.1));
    let anon = (median(first_at, |r| r.2), median(end_at, |r| r.2));
    let mib = |kib: u64| kib as f64 / 1024.0;
    let growth = (rss.1 as f64 - rss.0 as f64) / (rss.0.max(1) as f64) * 100.0;
    let copies = copies.load(Ordering::Relaxed);
    let minutes = |d: Duration| d.as_secs_f64() / 60.0;
    let memory = Figure::new(
        format!(
            "Tracer resident size (VmRSS) under churn, system-wide with OTLP every 5 s: at {:.1} min, then at {:.1} min",
            minutes(warm_up),
            minutes(warm_up + after)
        ),
        format!(
            "{:.1} MiB -> {:.1} MiB ({growth:+.1} %; RssAnon {:.1} -> {:.1} MiB)",
            mib(rss.0),
            mib(rss.1),
            mib(anon.0),
            mib(anon.1)
        ),
        format!("<= {TARGET_RSS_MIB:.0} MiB, <= +{TARGET_GROWTH_PERCENT:.0} %"),
        Verdict::of(mib(rss.1) <= TARGET_RSS_MIB && growth <= TARGET_GROWTH_PERCENT),
    );
    let files = Figure::new(
        format!("Tracer open files: at the start, and once the churn ({copies} fresh copies traced) stopped"),
        format!("{files_at_start} -> {files_after}"),
        format!("<= start + copies / {FILES_PER_COPIES}"),
        Verdict::of(files_after <= files_at_start + copies / FILES_PER_COPIES),
    );
    let cpu = Figure::new(
        format!(
            "Tracer CPU outside churn, at the default frequency, {idle} processes on the host, over {:.0} s",
            quiet.as_secs_f64()
        ),
        format!("{quiet_cpu:.2} % of one CPU"),
        format!("< {TARGET_QUIET_CPU_PERCENT:.0} %"),
        Verdict::of(quiet_cpu < TARGET_QUIET_CPU_PERCENT),
    );
    Ok(Phase {
        key: "soak",
        title: "Soak",
        text: format!(
            "The release tracer system-wide (its default 99 Hz, OTLP every 5 s to a port nobody listens on) \
             while a fork storm starts 100 processes a second and a fresh copy of a program runs again \
             and again: {copies} copies. Memory is `VmRSS`, the file pages the tracer maps included, as a \
             cgroup's limit counts them (`RssAnon` beside it), each a median over 10 s.\n\n{}: {}\n\n{}: {}\n\n{}: {}\n",
            memory.what, memory.measured, files.what, files.measured, cpu.what, cpu.measured
        ),
        json: json!({
            "warm_up_secs": warm_up.as_secs(), "after_secs": after.as_secs(),
            "vm_rss_kib": {"after_warm_up": rss.0, "end": rss.1}, "growth_percent": growth,
            "rss_anon_kib": {"after_warm_up": anon.0, "end": anon.1},
            "open_files": {"start": files_at_start, "after": files_after}, "copies": copies,
            "quiet": {"secs": quiet.as_secs(), "processes": idle, "cpu_percent": quiet_cpu},
        }),
        figures: vec![memory, files, cpu],
    })
}

/// The tracer's CPU over `over`, in percent of one CPU, with idle processes started for the
/// host to run at least [`HOST_PROCESSES`]; and how many it ran.
fn quiet_cpu(pid: u32, over: Duration) -> (usize, Option<f64>) {
    let missing = HOST_PROCESSES.saturating_sub(sys::process_count());
    let idle: Vec<Child> = (0..missing)
        .filter_map(|_| Command::new("sleep").arg("3600").stdin(Stdio::null()).spawn().ok())
        .collect();
    // The tracer meets the new processes first.
    std::thread::sleep(Duration::from_secs(5));
    let processes = sys::process_count();
    let before = sys::process_cpu(pid);
    let measured = Instant::now();
    std::thread::sleep(over);
    let cpu = match (before, sys::process_cpu(pid)) {
        (Some(before), Some(after)) => Some((after - before) / measured.elapsed().as_secs_f64() * 100.0),
        _ => None,
    };
    for mut child in idle {
        let _ = child.kill();
        let _ = child.wait();
    }
    (processes, cpu)
}

/// `fixtures/hardening/NAME.c` built into `dir`.
fn compile(b: &Bench, dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let out = dir.join(name);
    sh(Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&out)
        .arg(b.root.join(format!("fixtures/hardening/{name}.c"))))?;
    Ok(out)
}

/// Run a fresh copy of `program` (a new file each time), 20 ms of work, until `stop`.
fn run_copies(program: &Path, dir: &Path, stop: &AtomicBool, copies: &AtomicU64) {
    while !stop.load(Ordering::Relaxed) {
        let n = copies.fetch_add(1, Ordering::Relaxed);
        let copy = dir.join(format!("copy-{n}"));
        let ran = std::fs::copy(program, &copy)
            .and_then(|_| Command::new(&copy).args(["20", "1"]).status())
            .is_ok_and(|s| s.success());
        let _ = std::fs::remove_file(&copy);
        if !ran {
            return;
        }
    }
}
