//! Table-build benchmark driven by `cargo xtask bench`: builds the kernel tables of the given ELF
//! files (`table::build_object`: `.sframe`, else call-frame information) over and over for about
//! `SECS` seconds and writes, as JSON, the build rate in unwind rows per second and, per file, its
//! unwind sections' sizes and its table's rows and kernel bytes. Also the size of one ring-buffer
//! sample record and the frames it holds. Usage: `build_bench OUT.json SECS ELF_FILE...`.
//!
//! Each pass is timed by the wall clock and by this thread's CPU clock: on a machine busy with
//! other work the wall-clock rate says more about the neighbours than about the builder.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use tracer_common::trace::{MAX_KERNEL_FRAMES, MAX_USER_FRAMES, RECORD_HEADER_BYTES, SampleRecord};
use tracer_unwind::elf;
use tracer_unwind::table;

/// Bytes the BPF ring buffer adds in front of each record (`BPF_RINGBUF_HDR_SZ`).
const RINGBUF_HEADER: usize = 8;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let usage = "usage: build_bench OUT.json SECS ELF_FILE...";
    let out = args.next().context(usage)?;
    let secs: f64 = args.next().context(usage)?.to_string_lossy().parse().context(usage)?;
    let files: Vec<(String, Vec<u8>)> = args
        .map(|f| Ok((f.to_string_lossy().into_owned(), std::fs::read(&f)?)))
        .collect::<std::io::Result<_>>()?;
    anyhow::ensure!(!files.is_empty(), "{usage}");

    let mut objects = Vec::new();
    let mut rows = 0;
    for (path, bytes) in &files {
        let size =
            |name| -> anyhow::Result<usize> { Ok(elf::find_section(bytes, name)?.map_or(0, |(data, _)| data.len())) };
        let built = table::build_object(bytes).with_context(|| format!("building the table of {path}"))?;
        let stats = built.as_ref().map(|(t, _)| t.stats().clone()).unwrap_or_default();
        rows += stats.sframe_rows;
        objects.push(serde_json::json!({
            "path": path,
            "sframe_bytes": size(".sframe")?,
            "eh_frame_bytes": size(".eh_frame")?,
            "eh_frame_hdr_bytes": size(".eh_frame_hdr")?,
            "from_sframe": built.as_ref().is_some_and(|(_, from)| from.sframe),
            "from_cfi": built.as_ref().is_some_and(|(_, from)| from.cfi),
            "functions": stats.functions,
            "unwind_rows": stats.sframe_rows,
            "kernel_rows": stats.rows,
            "pages": stats.pages,
            "rules": stats.rules,
            "map_bytes": stats.map_bytes(),
        }));
    }

    // Whole passes over every file, timed one by one.
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    while Instant::now() < deadline || wall.len() < 3 {
        let (start, start_cpu) = (Instant::now(), thread_cpu_secs());
        for (_, bytes) in &files {
            std::hint::black_box(table::build_object(std::hint::black_box(bytes))?);
        }
        cpu.push(thread_cpu_secs() - start_cpu);
        wall.push(start.elapsed().as_secs_f64());
    }
    let result = serde_json::json!({
        "objects": objects,
        "unwind_rows": rows,
        "passes": wall.len(),
        "wall_rows_per_sec": rates(rows, wall),
        "cpu_rows_per_sec": rates(rows, cpu),
        "sample_record_bytes": size_of::<SampleRecord>() + RINGBUF_HEADER,
        "sample_record_header_bytes": RECORD_HEADER_BYTES + RINGBUF_HEADER,
        "sample_max_user_frames": MAX_USER_FRAMES,
        "sample_max_kernel_frames": MAX_KERNEL_FRAMES,
    });
    std::fs::write(out, serde_json::to_vec_pretty(&result)?)?;
    Ok(())
}

/// `{best, median, worst}` rows per second over the passes' durations.
fn rates(rows: u64, mut secs: Vec<f64>) -> serde_json::Value {
    secs.sort_by(f64::total_cmp);
    let rate = |s: f64| rows as f64 / s.max(1e-9);
    serde_json::json!({
        "best": rate(secs[0]),
        "median": rate(secs[secs.len() / 2]),
        "worst": rate(secs[secs.len() - 1]),
    })
}

/// CPU time of the calling thread, in seconds.
fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID always exists on Linux.
    let ret = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(ret, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
