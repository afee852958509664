//! Section 7 of the report: host scale. A system-wide tracer attached while large real objects
//! are mapped (the toolchain's own `librustc_driver`, about a million unwind rows; node and a
//! JVM when installed): time from start to sampling (every table of the host built and loaded)
//! and from Ctrl-C to exit (the whole host's profile named and written),
//! the table build of `librustc_driver` alone (`build_bench`), kernel bytes per unwind row, the
//! tracer's resident memory. Then, under that tracer, short-lived programs of three executable
//! sizes (filler functions generated around fixtures/first/brief.c) started over and over: how
//! many of their samples came complete (down to `_start`) as the size of the table to build
//! for each new executable grows. Completeness is measured here; exactness is what the test
//! `first_sample` judges against the machine code.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use serde_json::{Value, json};

use super::{
    Bench, example,
    footprint::status_kib,
    report::{Figure, Phase, Verdict, table},
    sys,
    tool::Spawned,
};
use crate::cmd::{output, sh};

/// Filler functions of the generated programs: three executable sizes.
const FILLERS: [usize; 3] = [0, 4_000, 40_000];
/// Runs of each generated program.
const RUNS: usize = 100;

/// A background process killed when dropped.
struct Held(Child);

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn run(b: &Bench) -> anyhow::Result<Phase> {
    let driver = rustc_driver()?;
    let build_json = b.scratch.join("hostscale-build.json");
    sh(example(b, "build_bench").arg(&build_json).arg("0").arg(&driver))?;
    let build: Value = serde_json::from_slice(&std::fs::read(&build_json)?).context("reading build_bench's result")?;
    let big = big_processes(&driver, &b.scratch)?;
    let programs = generate(b)?;
    let out = b.scratch.join("hostscale.folded");
    let mut cmd = Command::new(&b.tracer);
    cmd.args(["-a", "-F", "999", "--no-kernel", "--summary-format", "json", "-o"])
        .arg(&out);
    let start = Instant::now();
    let tracer = Spawned::start(&mut cmd, &b.scratch.join("hostscale.stdout"))?;
    let attached = tracer.wait_line(": sampling ", Duration::from_secs(600))?;
    let attach_secs = attached.duration_since(start).as_secs_f64();
    let rss_kib = status_kib(tracer.pid(), "VmRSS");
    for (_, exe) in &programs {
        for _ in 0..RUNS {
            let _ = Command::new(exe).arg("5").status();
        }
    }
    // Copies wait up to a second for their process; then the tracer ends with them walked.
    sleep(Duration::from_secs(2));
    let hwm_kib = status_kib(tracer.pid(), "VmHWM");
    // The end of a whole-host session, as users see it: from Ctrl-C to the outputs written
    // and the process gone (the drain, the JIT runtimes' last reads, naming the host's
    // profile, writing it).
    let stopping = Instant::now();
    sys::signal(tracer.pid(), libc::SIGINT);
    let (_, stderr) = tracer.reap(Duration::from_secs(120))?;
    let end_secs = stopping.elapsed().as_secs_f64();
    drop(big);
    let summary: Value = stderr
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
        .context("no JSON summary from the system-wide tracer")?;
    let folded = std::fs::read_to_string(&out).unwrap_or_default();
    let sizes: Vec<Value> = programs
        .iter()
        .map(|(fillers, exe)| {
            let comm = comm(exe);
            let (total, complete) = completeness(&folded, &comm);
            json!({"fillers": fillers, "bytes": sys::file_size(exe), "samples": total, "complete": complete})
        })
        .collect();
    let times = Times {
        attach: attach_secs,
        end: end_secs,
    };
    Ok(phase(times, rss_kib, hwm_kib, &build, &summary, &sizes))
}

/// The toolchain's `librustc_driver-*.so`.
fn rustc_driver() -> anyhow::Result<PathBuf> {
    let sysroot = output(Command::new("rustc").args(["--print", "sysroot"])).context("rustc --print sysroot")?;
    let lib = Path::new(sysroot.trim()).join("lib");
    std::fs::read_dir(&lib)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("librustc_driver-"))
        })
        .with_context(|| format!("no librustc_driver in {}", lib.display()))
}

/// Processes that map large objects while the tracer attaches: `rustc -` waiting for its
/// source on a pipe (librustc_driver mapped), and node and a JVM when installed.
fn big_processes(driver: &Path, scratch: &Path) -> anyhow::Result<Vec<Held>> {
    let mut held = vec![Held(
        Command::new("rustc")
            .args(["-", "-o", "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("rustc -")?,
    )];
    if let Ok(child) = Command::new("node")
        .args(["-e", "setInterval(() => {}, 1000)"])
        .stdout(Stdio::null())
        .spawn()
    {
        held.push(Held(child));
    }
    // A JVM that stays: a single-file program that sleeps (Java 11's source launcher).
    let source = scratch.join("Sleep.java");
    std::fs::write(
        &source,
        "public class Sleep { public static void main(String[] a) throws Exception { Thread.sleep(600000); } }\n",
    )?;
    if let Ok(child) = Command::new("java").arg(&source).stdout(Stdio::null()).spawn() {
        held.push(Held(child));
    }
    // Wait until rustc has mapped the driver.
    let pid = held[0].0.id();
    for _ in 0..100 {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        if maps.contains(&*driver.to_string_lossy()) {
            return Ok(held);
        }
        sleep(Duration::from_millis(100));
    }
    anyhow::bail!("rustc never mapped {}", driver.display())
}

/// The generated programs (fillers, path): fixtures/first/brief.c with `fillers` extra
/// functions, each a few instructions with its own SFrame FDE, compiled without frame pointers.
fn generate(b: &Bench) -> anyhow::Result<Vec<(usize, PathBuf)>> {
    let brief = std::fs::read_to_string(b.root.join("fixtures/first/brief.c"))?;
    let mut programs = Vec::new();
    for fillers in FILLERS {
        let mut source = brief.clone();
        for i in 0..fillers {
            writeln!(
                source,
                "__attribute__((noinline, used)) unsigned long filler_{i}(unsigned long x) {{ return x * {i} + {}; }}",
                i + 1
            )?;
        }
        let src = b.scratch.join(format!("scale{fillers}.c"));
        std::fs::write(&src, source)?;
        let exe = b.scratch.join(format!("scale{fillers}"));
        sh(Command::new("gcc")
            .args([
                "-O2",
                "-fomit-frame-pointer",
                "-fno-optimize-sibling-calls",
                "-Wa,--gsframe",
                "-o",
            ])
            .arg(&exe)
            .arg(&src))?;
        programs.push((fillers, exe));
    }
    Ok(programs)
}

/// The command name of a program started from `path`.
fn comm(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().chars().take(15).collect())
        .unwrap_or_default()
}

/// (samples, complete samples) of `comm` in folded output: complete when its first frame is
/// `_start` (the loader's or the program's).
fn completeness(folded: &str, comm: &str) -> (u64, u64) {
    let (mut total, mut complete) = (0, 0);
    for line in folded.lines() {
        let Some((stack, count)) = line.rsplit_once(' ') else {
            continue;
        };
        let count: u64 = count.parse().unwrap_or(0);
        let mut frames = stack.split(';');
        if frames.next() != Some(comm) {
            continue;
        }
        total += count;
        if frames.next() == Some("_start") {
            complete += count;
        }
    }
    (total, complete)
}

/// The end of a whole-host session (Ctrl-C to exit), at most, in seconds.
const TARGET_END_SECS: f64 = 1.0;

/// The session's start (to sampling) and end (Ctrl-C to exit), in seconds.
struct Times {
    attach: f64,
    end: f64,
}

fn phase(times: Times, rss: Option<u64>, hwm: Option<u64>, build: &Value, summary: &Value, sizes: &[Value]) -> Phase {
    let Times { attach, end } = times;
    let driver = &build["objects"][0];
    let rows = driver["unwind_rows"].as_u64().unwrap_or(0);
    let build_secs = rows as f64 / build["cpu_rows_per_sec"]["median"].as_f64().unwrap_or(f64::INFINITY);
    let loaded_rows = summary["tables"]["rows"].as_u64().unwrap_or(0);
    let kernel_bytes = summary["tables"]["kernel_bytes"].as_u64().unwrap_or(0);
    let per_row = kernel_bytes as f64 / loaded_rows.max(1) as f64;
    let kib = |k: Option<u64>| k.map_or("?".to_owned(), |k| format!("{:.0} MiB", k as f64 / 1024.0));
    let figures = vec![
        Figure::new(
            "System-wide attach with librustc_driver, node and a JVM mapped (start to sampling)",
            format!("{:.1} s", attach),
            "measured",
            Verdict::Peer,
        ),
        Figure::new(
            "End of that whole-host session: Ctrl-C to the profile written and the process gone",
            format!("{end:.2} s"),
            format!("<= {TARGET_END_SECS:.0} s"),
            Verdict::of(end <= TARGET_END_SECS),
        ),
        Figure::new(
            format!("Table build of librustc_driver ({rows} unwind rows, one CPU)"),
            format!("{:.2} s", build_secs),
            "measured",
            Verdict::Peer,
        ),
        Figure::new(
            format!("Kernel table memory, host-wide ({loaded_rows} rows)"),
            format!("{per_row:.2} bytes per row"),
            "measured",
            Verdict::Peer,
        ),
        Figure::new(
            "Tracer RSS after attach (peak)",
            format!("{} ({})", kib(rss), kib(hwm)),
            "measured",
            Verdict::Peer,
        ),
    ];
    let mut rows_md: Vec<Vec<String>> = figures
        .iter()
        .map(|f| vec![f.what.clone(), f.measured.clone()])
        .collect();
    for s in sizes {
        let (total, complete) = (s["samples"].as_u64().unwrap_or(0), s["complete"].as_u64().unwrap_or(0));
        rows_md.push(vec![
            format!(
                "New processes of a {} KiB executable ({} runs): complete samples",
                s["bytes"].as_u64().unwrap_or(0) / 1024,
                RUNS
            ),
            format!(
                "{complete} / {total} ({:.1} %)",
                100.0 * complete as f64 / total.max(1) as f64
            ),
        ]);
    }
    let copies = &summary["stack_copies"];
    let text = format!(
        "`sframe-trace -a -F 999` started while `rustc -` (librustc_driver mapped), node and a JVM \
         run; then fixtures/first/brief.c with 0, 4000 and 40000 generated filler functions is \
         started {RUNS} times each. Samples taken before a new process's tables are loaded come \
         as stack copies, walked once the tables are built ({} copies, {} walked, {} never \
         resolved, {} over the queue).\n\n{}",
        copies["copies"],
        copies["walked"],
        copies["unresolved"],
        copies["overflowed"],
        table(&["figure", "measured"], &rows_md)
    );
    Phase {
        key: "host_scale",
        title: "7. Host scale",
        text,
        json: json!({
            "attach_secs": attach, "end_secs": end, "rss_kib": rss, "peak_rss_kib": hwm,
            "rustc_driver": {"unwind_rows": rows, "build_cpu_secs": build_secs, "map_bytes": driver["map_bytes"]},
            "host_rows": loaded_rows, "host_kernel_bytes": kernel_bytes, "bytes_per_row": per_row,
            "stack_copies": copies, "new_processes": sizes,
        }),
        figures,
    }
}
