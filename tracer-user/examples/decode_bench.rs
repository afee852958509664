//! Decode-throughput benchmark driven by `cargo xtask bench`: among the given ELF files, takes
//! the `.sframe` with the most rows, decodes all of it repeatedly for about a second and writes
//! the best rate as JSON. Usage: `decode_bench OUT.json ELF_FILE...`.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use tracer_unwind::{elf, sframe};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let out = args.next().context("usage: decode_bench OUT.json ELF_FILE...")?;
    let mut largest: Option<(u64, std::ffi::OsString, Vec<u8>)> = None;
    for file in args {
        let bytes = std::fs::read(&file)?;
        let Some(found) = elf::find_sframe(&bytes)? else {
            continue;
        };
        let rows = sframe::decode_all(&sframe::Section::parse(&found.data, found.vaddr)?)?;
        if largest.as_ref().is_none_or(|(most, ..)| rows > *most) {
            largest = Some((rows, file, found.data.into_owned()));
        }
    }
    let (rows, file, data) = largest.context("no file with .sframe rows given")?;
    let section = sframe::Section::parse(&data, 0)?;
    let mut best = f64::INFINITY;
    let mut runs = 0u64;
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline || runs < 10 {
        let start = Instant::now();
        let mut total = 0;
        // Enough passes per timing that the clock's resolution does not matter.
        for _ in 0..1000 {
            let section = sframe::Section::parse(std::hint::black_box(&data), 0)?;
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
