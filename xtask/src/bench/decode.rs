//! SFrame decode throughput (rows per second) on the largest `.sframe` of the corpus
//! (`tracer-user/examples/decode_bench.rs`), against the reader's 50 M rows/s aim.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::json;

use super::{
    Bench, example,
    report::{Figure, Phase, Verdict},
};
use crate::cmd::sh;

/// Decode throughput the reader aims for, in rows (FREs) per second.
const TARGET_ROWS_PER_SEC: f64 = 50e6;

pub fn run(b: &Bench) -> anyhow::Result<Phase> {
    // The checked-in corpus, plus the conformance build of real code when it is present.
    let mut files = elf_files(&b.root.join("fixtures/bin"))?;
    files.extend(elf_files(&b.root.join("target/conformance")).unwrap_or_default());
    let json_path = b.scratch.join("decode.json");
    sh(example(b, "decode_bench").arg(&json_path).args(&files))?;
    let decode: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json_path)?).context("reading the decode benchmark's result")?;
    let rate = decode["rows_per_sec"].as_f64().context("rows_per_sec missing")?;
    let file = decode["file"].as_str().map_or("?".to_owned(), |f| {
        f.strip_prefix(&format!("{}/", b.root.display()))
            .unwrap_or(f)
            .to_owned()
    });
    let figure = Figure::new(
        format!(
            "SFrame decode, `{file}` ({} functions, {} rows, best of {} runs)",
            decode["functions"], decode["rows"], decode["runs"]
        ),
        format!("{:.1} M rows/s", rate / 1e6),
        format!(">= {:.0} M rows/s", TARGET_ROWS_PER_SEC / 1e6),
        Verdict::of(rate >= TARGET_ROWS_PER_SEC),
    );
    Ok(Phase {
        key: "decode",
        title: "SFrame decode",
        text: format!(
            "The reader alone: every row of the largest `.sframe` of the corpus decoded over and over \
             for about a second; the best run (wall clock).\n\n{}: {}\n",
            figure.what, figure.measured
        ),
        json: json!({"result": decode, "target_rows_per_sec": TARGET_ROWS_PER_SEC}),
        figures: vec![figure],
    })
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
            } else if std::fs::read(&path).is_ok_and(|bytes| bytes.starts_with(b"\x7fELF")) {
                files.push(path);
            }
        }
    }
    anyhow::ensure!(!files.is_empty(), "no ELF file under {}", dir.display());
    Ok(files)
}
