//! The static executable (`cargo xtask dist`: musl, zstd and xz compiled in) beside the
//! dynamically linked release build (glibc), in the same run, interleaved run by run, on the
//! three costs a change of C library and allocator could move: the tracer's own CPU time in a
//! 999 Hz `--pid` session of a busy program (sampling cost), the time to convert a large
//! object's `.eh_frame` into kernel rows (table build), and the time to name a profile's
//! frames offline (`symbolize`, which also decompresses the zstd-compressed DWARF it reads).

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::Context as _;
use serde_json::json;

use super::{
    Bench,
    report::{Figure, Phase, Spread, Verdict, spread_json, table},
};
use crate::cmd::sh;

/// How far above the dynamic build's median the static build's may be and still count as
/// "no regression beyond noise".
const NOISE: f64 = 1.10;

/// The two builds, in the order each round runs them.
fn builds(b: &Bench) -> anyhow::Result<[(&'static str, PathBuf); 2]> {
    let version = crate::dist::version(&b.root)?;
    let dist = crate::dist::dir(&b.root).join(format!("sframe-trace-{version}-x86_64/sframe-trace"));
    anyhow::ensure!(
        dist.exists(),
        "{} is missing (cargo xtask dist --arch x86_64)",
        dist.display()
    );
    Ok([("dynamic (glibc)", b.tracer.clone()), ("static (musl)", dist)])
}

pub fn run(b: &Bench) -> anyhow::Result<Phase> {
    let builds = builds(b)?;
    // Cheap (a few seconds a round), and the short commands need many to see past noise.
    let rounds = 9;
    let work = b.scratch.join("static");
    std::fs::create_dir_all(&work)?;
    let demo = work.join("demo");
    sh(Command::new("gcc")
        .args([
            "-O2",
            "-g",
            "-fomit-frame-pointer",
            "-fno-optimize-sibling-calls",
            "-Wa,--gsframe",
            "-o",
        ])
        .arg(&demo)
        .arg(b.root.join("demo/demo.c")))?;
    // DWARF compressed with zstd: symbolize decompresses it.
    sh(Command::new("objcopy").arg("--compress-debug-sections=zstd").arg(&demo))?;
    let libc = PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6");
    let profile = record_profile(&builds[0].1, &demo, &work)?;
    let mut sampling: [Vec<f64>; 2] = Default::default();
    let mut tables: [Vec<f64>; 2] = Default::default();
    let mut naming: [Vec<f64>; 2] = Default::default();
    for _ in 0..rounds {
        for (i, (_, tracer)) in builds.iter().enumerate() {
            sampling[i].push(sampling_cpu(tracer, &demo)?);
            tables[i].push(timed(
                Command::new(tracer).args(["dump", "--source", "eh_frame"]).arg(&libc),
            )?);
            naming[i].push(timed(
                Command::new(tracer)
                    .arg("symbolize")
                    .arg(&profile)
                    .args(["-f", "folded", "-o"])
                    .arg(work.join("named.folded")),
            )?);
        }
    }
    let spreads = |v: &[Vec<f64>; 2]| [Spread::of(v[0].iter().copied()), Spread::of(v[1].iter().copied())];
    let rows_of = [
        ("sampling: tracer CPU, 3 s `--pid` at 999 Hz", spreads(&sampling), "ms"),
        ("table build: `dump --source eh_frame` of libc", spreads(&tables), "ms"),
        ("symbolize: a profile of the demo, zstd DWARF", spreads(&naming), "ms"),
    ];
    let mut rows = Vec::new();
    let mut figures = Vec::new();
    let mut json_rows = Vec::new();
    for (what, [dynamic, static_], unit) in rows_of {
        let show = |s: Option<Spread>| {
            s.map_or("not measured".to_owned(), |s| {
                s.show(|v| format!("{:.0} {unit}", v * 1e3))
            })
        };
        let ratio = match (dynamic, static_) {
            (Some(d), Some(s)) if d.median > 0.0 => Some(s.median / d.median),
            _ => None,
        };
        rows.push(vec![
            what.to_owned(),
            show(dynamic),
            show(static_),
            ratio.map_or("-".to_owned(), |r| format!("{r:.2}x")),
        ]);
        figures.push(Figure::new(
            format!("static build, {what} (static / dynamic)"),
            ratio.map_or("not measured".to_owned(), |r| format!("{r:.2}x")),
            format!("<= {NOISE:.2}x"),
            ratio.map_or(Verdict::NotMeasured, |r| Verdict::of(r <= NOISE)),
        ));
        json_rows.push(
            json!({"what": what, "dynamic": spread_json(dynamic), "static": spread_json(static_), "ratio": ratio}),
        );
    }
    let text = format!(
        "{} ({} and {}), {rounds} interleaved rounds, seconds as median [min, max]:\n\n{}",
        "The static executable beside the dynamically linked release build",
        builds[0].1.display(),
        builds[1].1.display(),
        table(&["cost", builds[0].0, builds[1].0, "static / dynamic"], &rows)
    );
    Ok(Phase {
        key: "static_build",
        title: "Static executable beside the dynamic build",
        text,
        json: json!({"rounds": rounds, "rows": json_rows}),
        figures,
    })
}

/// Wall time of a command that must succeed, its output discarded.
fn timed(command: &mut Command) -> anyhow::Result<f64> {
    let started = Instant::now();
    let status = command.stdout(Stdio::null()).stderr(Stdio::null()).status()?;
    anyhow::ensure!(status.success(), "{command:?} failed: {status}");
    Ok(started.elapsed().as_secs_f64())
}

/// The tracer's own CPU time (user + system, from wait4) in a 3-second 999 Hz `--pid`
/// session of the demo.
fn sampling_cpu(tracer: &Path, demo: &Path) -> anyhow::Result<f64> {
    let mut target = Command::new(demo).arg("30").spawn().context("starting the demo")?;
    std::thread::sleep(std::time::Duration::from_millis(200));
    let child = Command::new(tracer)
        .args(["-F", "999", "-d", "3", "-o", "/dev/null", "--pid"])
        .arg(target.id().to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the tracer")?;
    let cpu = wait_cpu(child.id());
    let _ = target.kill();
    let _ = target.wait();
    cpu
}

/// Reap `pid` and return its user + system CPU seconds.
fn wait_cpu(pid: u32) -> anyhow::Result<f64> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child `pid`.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet reaped; status and usage are valid pointers.
    let got = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
    anyhow::ensure!(got == pid as libc::pid_t, "wait4: {}", std::io::Error::last_os_error());
    anyhow::ensure!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the tracer failed ({status})"
    );
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(secs(usage.ru_utime) + secs(usage.ru_stime))
}

/// A pprof of the demo written with `--symbolize none`, for `symbolize` to name.
fn record_profile(tracer: &Path, demo: &Path, work: &Path) -> anyhow::Result<PathBuf> {
    let profile = work.join("demo.pb.gz");
    sh(Command::new(tracer)
        .args(["-F", "999", "--symbolize", "none", "-f", "pprof", "-o"])
        .arg(&profile)
        .arg("--")
        .arg(demo)
        .arg("2"))?;
    Ok(profile)
}
