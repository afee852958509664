//! `cargo xtask bench`: measure, never assert. Today: SFrame decode throughput (rows per second)
//! on the largest fixture, against the 50 M rows/s target. Writes `target/bench/report.md` and
//! `target/bench/report.json` and prints the table.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::Context as _;

use crate::run::sh;

/// Decode throughput the reader aims for, in rows (FREs) per second.
const TARGET_ROWS_PER_SEC: f64 = 50e6;

pub fn bench(root: &Path) -> anyhow::Result<()> {
    let fixture = largest_fixture(&root.join("fixtures/bin"))?;
    let out_dir = root.join("target/bench");
    std::fs::create_dir_all(&out_dir)?;
    let json_path = out_dir.join("decode.json");
    sh(Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
        .args(["run", "--quiet", "--release", "--package", "tracer-user", "--no-default-features"])
        .args(["--example", "decode_bench", "--"])
        .arg(&fixture)
        .arg(&json_path))?;
    let decode: serde_json::Value = serde_json::from_slice(&std::fs::read(&json_path)?)
        .context("reading the decode benchmark's result")?;
    let rate = decode["rows_per_sec"].as_f64().context("rows_per_sec missing")?;
    let verdict = if rate >= TARGET_ROWS_PER_SEC { "meets" } else { "misses" };
    let report = format!(
        "# sframe-trace benchmarks\n\n\
         | what | measured | target | verdict |\n|---|---|---|---|\n\
         | SFrame decode, `{}` ({} functions, {} rows, best of {} runs) | {:.1} M rows/s | {:.0} M rows/s | {verdict} |\n",
        fixture.strip_prefix(root).unwrap_or(&fixture).display(),
        decode["functions"],
        decode["rows"],
        decode["runs"],
        rate / 1e6,
        TARGET_ROWS_PER_SEC / 1e6,
    );
    std::fs::write(out_dir.join("report.md"), &report)?;
    let summary = serde_json::json!({ "decode": decode, "targets": { "decode_rows_per_sec": TARGET_ROWS_PER_SEC } });
    std::fs::write(out_dir.join("report.json"), serde_json::to_vec_pretty(&summary)?)?;
    print!("{report}");
    eprintln!("bench: wrote {}", out_dir.join("report.md").display());
    Ok(())
}

/// The biggest ELF file of the fixture corpus (by size).
fn largest_fixture(dir: &Path) -> anyhow::Result<PathBuf> {
    let mut best: Option<(u64, PathBuf)> = None;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let is_elf = std::fs::read(&path).is_ok_and(|b| b.starts_with(b"\x7fELF"));
            let size = path.metadata()?.len();
            if is_elf && best.as_ref().is_none_or(|(s, _)| size > *s) {
                best = Some((size, path));
            }
        }
    }
    best.map(|(_, p)| p).with_context(|| format!("no ELF fixture under {}", dir.display()))
}
