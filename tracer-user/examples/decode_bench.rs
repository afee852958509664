//! Decode-throughput benchmark driven by `cargo xtask bench`: decodes every row of a file's
//! `.sframe` repeatedly for about a second and writes the best rate as JSON.
//! Usage: `decode_bench ELF_FILE OUT.json`.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use sframe_trace::{elf, sframe};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let (Some(file), Some(out)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: decode_bench ELF_FILE OUT.json");
    };
    let bytes = std::fs::read(&file)?;
    let found = elf::find_sframe(&bytes)?.context("no .sframe")?;
    let section = sframe::Section::parse(&found.data, found.vaddr)?;
    let rows = sframe::decode_all(&section)?;
    anyhow::ensure!(rows > 0, "the section has no rows to decode");
    let mut best = f64::INFINITY;
    let mut runs = 0u64;
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline || runs < 10 {
        let start = Instant::now();
        let mut total = 0;
        // Enough passes per timing that the clock's resolution does not matter.
        for _ in 0..1000 {
            let section = sframe::Section::parse(std::hint::black_box(&found.data), found.vaddr)?;
            total += sframe::decode_all(&section)?;
        }
        best = best.min(start.elapsed().as_secs_f64() / total as f64);
        runs += 1;
    }
    let result = serde_json::json!({
        "file": file.to_string_lossy(),
        "functions": section.functions().len(),
        "rows": rows,
        "runs": runs,
        "rows_per_sec": 1.0 / best,
    });
    std::fs::write(out, serde_json::to_vec_pretty(&result)?)?;
    Ok(())
}
