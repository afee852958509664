//! The soak figure (section "Soak"): the release tracer system-wide, exporting OTLP every 5 s,
//! while a fork storm starts 100 processes a second and a fresh copy of a program (a new file
//! each time) runs again and again. Its memory (`RssAnon`: what it allocated, without the
//! pages of the files it maps) is taken as a median over 10 s after the warm-up and at the
//! end, its open files at the start and once the churn stopped and its objects were forgotten.
//! The collector is a port nobody listens on: encoding and queueing run, sending fails fast
//! (the export's own memory is bounded by its queue of 4 windows).

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
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

/// Growth of the tracer's memory from the end of the warm-up to the end, at most, in percent.
const TARGET_GROWTH_PERCENT: f64 = 10.0;
/// The share of the copies traced that may still hold a file once the churn stopped.
const FILES_PER_COPIES: u64 = 4;
/// Memory is the median of the readings over this long before each point.
const MEDIAN_OVER: Duration = Duration::from_secs(10);
/// Time for the churn's objects to be unloaded (10 s) and forgotten at the next export.
const FORGOTTEN_WITHIN: Duration = Duration::from_secs(25);

pub fn run(b: &Bench) -> anyhow::Result<Phase> {
    let (warm_up, after) = if b.plan.quick {
        (Duration::from_secs(20), Duration::from_secs(20))
    } else {
        (Duration::from_secs(60), Duration::from_secs(240))
    };
    let dir = b.scratch.join("soak");
    std::fs::create_dir_all(&dir)?;
    let chain = compile(b, &dir, "chain")?;
    let storm = compile(b, &dir, "storm")?;
    let mut tracer = Command::new(&b.tracer)
        .args(["-a", "-F", "99", "--summary-format", "json", "-f", "otlp"])
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
    let mut readings: Vec<(Instant, u64)> = Vec::new();
    while started.elapsed() < warm_up + after {
        if let Some(kib) = status_kib(pid, "RssAnon") {
            readings.push((Instant::now(), kib));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::Relaxed);
    let copier_result = copier.join();
    let _ = storm.wait();
    std::thread::sleep(FORGOTTEN_WITHIN);
    let files_after = open_files(pid);
    sys::signal(pid, libc::SIGINT);
    let _ = tracer.wait();
    anyhow::ensure!(copier_result.is_ok(), "the copies failed");
    let median = |at: Instant| median_between(&readings, at - MEDIAN_OVER, at);
    let warm = median(started + warm_up);
    let end = median(started + warm_up + after);
    let growth = (end as f64 - warm as f64) / (warm.max(1) as f64) * 100.0;
    let copies = copies.load(Ordering::Relaxed);
    let memory = Figure::new(
        format!(
            "Tracer memory (RssAnon) under churn, system-wide with OTLP every 5 s: after {:.0} s of warm-up, \
             then {:.0} s later",
            warm_up.as_secs_f64(),
            after.as_secs_f64()
        ),
        format!(
            "{:.1} MiB -> {:.1} MiB ({growth:+.1} %)",
            warm as f64 / 1024.0,
            end as f64 / 1024.0
        ),
        format!("<= +{TARGET_GROWTH_PERCENT:.0} %"),
        Verdict::of(growth <= TARGET_GROWTH_PERCENT),
    );
    let files = Figure::new(
        format!("Tracer open files: at the start, and once the churn ({copies} fresh copies traced) stopped"),
        format!("{files_at_start} -> {files_after}"),
        format!("<= start + copies / {FILES_PER_COPIES}"),
        Verdict::of(files_after <= files_at_start + copies / FILES_PER_COPIES),
    );
    Ok(Phase {
        key: "soak",
        title: "Soak",
        text: format!(
            "The release tracer system-wide (99 Hz, OTLP every 5 s to a port nobody listens on) while a fork \
             storm starts 100 processes a second and a fresh copy of a program runs again and again: \
             {copies} copies. Memory is `RssAnon` (a median over 10 s); file pages of the objects it \
             symbolizes are left out, as other programs on the host decide them.\n\n{}: {}\n\n{}: {}\n",
            memory.what, memory.measured, files.what, files.measured
        ),
        json: json!({
            "warm_up_secs": warm_up.as_secs(), "after_secs": after.as_secs(),
            "rss_anon_kib": {"after_warm_up": warm, "end": end}, "growth_percent": growth,
            "open_files": {"start": files_at_start, "after": files_after}, "copies": copies,
        }),
        figures: vec![memory, files],
    })
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
