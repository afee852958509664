//! `cargo xtask bench`: measure, never assert. Today: SFrame decode throughput (rows per second)
//! on the largest section of the corpus, against the 50 M rows/s target. Writes `target/bench/report.md` and
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
    // The checked-in corpus, plus the conformance build of real code when it is present.
    let mut files = elf_files(&root.join("fixtures/bin"))?;
    files.extend(elf_files(&root.join("target/conformance")).unwrap_or_default());
    let out_dir = root.join("target/bench");
    std::fs::create_dir_all(&out_dir)?;
    let json_path = out_dir.join("decode.json");
    sh(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
            .args([
                "run",
                "--quiet",
                "--release",
                "--package",
                "tracer-user",
                "--no-default-features",
            ])
            .args(["--example", "decode_bench", "--"])
            .arg(&json_path)
            .args(&files),
    )?;
    let decode: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json_path)?).context("reading the decode benchmark's result")?;
    let rate = decode["rows_per_sec"].as_f64().context("rows_per_sec missing")?;
    let verdict = if rate >= TARGET_ROWS_PER_SEC { "meets" } else { "misses" };
    let report = format!(
        "# sframe-trace benchmarks\n\n\
         | what | measured | target | verdict |\n|---|---|---|---|\n\
         | SFrame decode, `{}` ({} functions, {} rows, best of {} runs) | {:.1} M rows/s | {:.0} M rows/s | {verdict} |\n",
        decode["file"]
            .as_str()
            .map_or("?", |f| f.strip_prefix(&format!("{}/", root.display())).unwrap_or(f)),
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

/// Every ELF file under `dir`.
fn elf_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if std::fs::read(&path).is_ok_and(|b| b.starts_with(b"\x7fELF")) {
                files.push(path);
            }
        }
    }
    anyhow::ensure!(!files.is_empty(), "no ELF file under {}", dir.display());
    Ok(files)
}
