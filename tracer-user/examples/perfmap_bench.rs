//! Perf-map symbolization benchmark driven by `cargo xtask bench`: writes this process's own
//! perf map (`/tmp/perf-PID.map`, created new, removed at the end) with ENTRIES functions named
//! as Node.js names them, then times what the tracer does for a process with such a map: the
//! first read (open inside the process's root, checks, parse, index), a read again when
//! nothing was added, and naming addresses (random ones in the mapped range). Best of several
//! runs; the result as JSON. Usage: `perfmap_bench OUT.json [ENTRIES]`.

use std::{
    io::Write as _,
    os::unix::fs::OpenOptionsExt as _,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use sframe_trace::jit::JitNames;
use tracer_unwind::testing::Rng;

/// Where the functions start, spaced as a JIT's code cache places them.
const BASE: u64 = 0x7f00_0000_0000;

/// The best time of `f` over about a second (at least 5 runs).
fn best(mut f: impl FnMut()) -> (f64, u64) {
    let (mut best, mut runs) = (f64::INFINITY, 0);
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline || runs < 5 {
        let start = Instant::now();
        f();
        best = best.min(start.elapsed().as_secs_f64());
        runs += 1;
    }
    (best, runs)
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let out = args.next().context("usage: perfmap_bench OUT.json [ENTRIES]")?;
    let entries: u64 = match args.next() {
        Some(n) => n.to_str().context("ENTRIES")?.parse()?,
        None => 100_000,
    };
    let pid = std::process::id();
    let path = format!("/tmp/perf-{pid}.map");
    let mut text = String::new();
    let mut rng = Rng::new(16);
    let mut addr = BASE;
    for i in 0..entries {
        let size = 0x40 + rng.below(0x400) as u64;
        text.push_str(&format!(
            "{addr:x} {size:x} JS:*handler{i} /srv/app/lib/module{}.js:{}:{}\n",
            i % 997,
            1 + rng.below(2000),
            1 + rng.below(80)
        ));
        addr += size + 0x10;
    }
    let end = addr;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("creating {path}"))?;
    file.write_all(text.as_bytes())?;
    drop(file);

    // The process's incarnation, which names are looked up in.
    // Samples are taken now: one taken before the process started would be another's.
    let read = |jit: &mut JitNames| {
        let process = jit.want(pid, BASE, sframe_trace::sys::monotonic_ns());
        jit.refresh_wanted();
        process
    };
    let (first_read, read_runs) = best(|| {
        let mut jit = JitNames::default();
        let process = read(&mut jit);
        assert!(jit.name(process, BASE).is_some());
    });
    let mut jit = JitNames::default();
    let process = read(&mut jit);
    let (reread, _) = best(|| jit.refresh(false, 0));
    let addrs: Vec<u64> = (0..1_000_000).map(|_| BASE + rng.next_u64() % (end - BASE)).collect();
    let mut named = 0;
    let (lookups, _) = best(|| {
        named = addrs.iter().filter(|&&a| jit.name(process, a).is_some()).count();
    });
    let _ = std::fs::remove_file(&path);
    let result = serde_json::json!({
        "entries": jit.stats().entries,
        "bytes": text.len(),
        "first_read_ms": first_read * 1e3,
        "reread_unchanged_us": reread * 1e6,
        "lookup_ns": lookups * 1e9 / addrs.len() as f64,
        "named_share": named as f64 / addrs.len() as f64,
        "runs": read_runs,
    });
    std::fs::write(&out, serde_json::to_string_pretty(&result)?)?;
    println!("{result}");
    Ok(())
}
