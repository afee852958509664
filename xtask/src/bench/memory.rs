//! Map memory (section 4 of the report), and the table build rate reported with the attach time
//! (section 5): the objects cpubench maps (itself, libc, ld.so) are built into tables by
//! `tracer-user/examples/build_bench.rs` (rows, kernel bytes, the objects' own `.sframe` /
//! `.eh_frame` sizes, rows per second), and sframe-trace's own summary says what it loaded into the
//! kernel maps for a real run.

use std::{process::Command, time::Duration};

use anyhow::Context as _;
use serde_json::{Value, json};

use super::{
    Bench, example,
    measure::number_before,
    report::{Figure, Phase, Verdict, table},
    runs::{Config, Runs},
    sys,
    tool::{Spawned, Tool},
};
use crate::cmd::sh;

/// Kernel bytes per unwind row, at most.
pub const TARGET_BYTES_PER_ROW: f64 = 4.0;

/// What sframe-trace loaded for one benchmark run, from its summary.
struct Loaded {
    rows: u64,
    bytes: u64,
    /// The summary gave bytes (else KiB, rounded up).
    exact: bool,
}

pub struct Memory {
    /// build_bench's JSON.
    pub build: Value,
    loaded: Option<Loaded>,
}

pub fn run(b: &Bench, runs: &Runs) -> anyhow::Result<Memory> {
    let files = mapped_objects(b)?;
    let json_path = b.scratch.join("build.json");
    sh(example(b, "build_bench")
        .arg(&json_path)
        .arg(b.plan.build_secs.to_string())
        .args(&files))?;
    let build = serde_json::from_slice(&std::fs::read(&json_path)?).context("reading build_bench's result")?;
    let loaded = runs
        .of(Config::Traced {
            tool: Tool::Ours,
            hz: 999,
        })
        .first()
        .and_then(|r| loaded(&r.stderr));
    Ok(Memory { build, loaded })
}

/// The files cpubench maps executable: stop it once loaded, read its maps, let it finish.
fn mapped_objects(b: &Bench) -> anyhow::Result<Vec<String>> {
    let mut cmd = Command::new(b.cpubench(false));
    cmd.args(["-s", "1"]);
    let spawned = Spawned::start(&mut cmd, &b.scratch.join("objects.stdout"))?;
    sys::wait_stopped(spawned.pid(), Duration::from_secs(30))?;
    let files = sys::executable_files(spawned.pid())?;
    sys::signal(spawned.pid(), libc::SIGCONT);
    sys::wait_stopped(spawned.pid(), Duration::from_secs(30))?;
    sys::signal(spawned.pid(), libc::SIGCONT);
    spawned.reap(Duration::from_secs(30))?;
    Ok(files)
}

/// sframe-trace's `table memory: N bytes in kernel maps for R rows` line, else the KiB of its
/// `tables: ... (R rows, K KiB ...)`.
fn loaded(stderr: &str) -> Option<Loaded> {
    if let (Some(bytes), Some(rows)) = (
        number_before(stderr, " bytes in kernel maps for "),
        number_before(stderr, " rows, "),
    ) {
        return Some(Loaded {
            rows,
            bytes,
            exact: true,
        });
    }
    Some(Loaded {
        rows: number_before(stderr, " rows, ")?,
        bytes: number_before(stderr, " KiB ")? * 1024,
        exact: false,
    })
}

impl Memory {
    /// Bytes of one ring-buffer sample record (header included).
    pub fn sample_record_bytes(&self) -> Option<u64> {
        self.build["sample_record_bytes"].as_u64()
    }

    /// Bytes of a sample record before its frames (8 bytes each), ring buffer header included.
    pub fn sample_record_header_bytes(&self) -> Option<u64> {
        self.build["sample_record_header_bytes"].as_u64()
    }

    /// `root`: the workspace, left out of the objects' paths.
    pub fn phase(&self, root: &std::path::Path) -> Phase {
        let objects = self.build["objects"].as_array().cloned().unwrap_or_default();
        let n = |o: &Value, k: &str| o[k].as_u64().unwrap_or(0);
        let per_row = |bytes: u64, rows: u64| {
            if rows == 0 {
                f64::NAN
            } else {
                bytes as f64 / rows as f64
            }
        };
        let mut rows: Vec<Vec<String>> = objects
            .iter()
            .map(|o| {
                vec![
                    format!("`{}`", display_path(o["path"].as_str().unwrap_or("?"), root)),
                    if o["from_sframe"].as_bool() == Some(true) {
                        "SFrame + .eh_frame"
                    } else {
                        ".eh_frame"
                    }
                    .to_owned(),
                    n(o, "unwind_rows").to_string(),
                    n(o, "map_bytes").to_string(),
                    format!("{:.2}", per_row(n(o, "map_bytes"), n(o, "unwind_rows"))),
                    n(o, "sframe_bytes").to_string(),
                    (n(o, "eh_frame_bytes") + n(o, "eh_frame_hdr_bytes")).to_string(),
                ]
            })
            .collect();
        let sum = |k: &str| objects.iter().map(|o| n(o, k)).sum::<u64>();
        let (unwind_rows, map_bytes) = (sum("unwind_rows"), sum("map_bytes"));
        let own = sum("sframe_bytes") + sum("eh_frame_bytes") + sum("eh_frame_hdr_bytes");
        rows.push(vec![
            "all".to_owned(),
            String::new(),
            unwind_rows.to_string(),
            map_bytes.to_string(),
            format!("{:.2}", per_row(map_bytes, unwind_rows)),
            sum("sframe_bytes").to_string(),
            (sum("eh_frame_bytes") + sum("eh_frame_hdr_bytes")).to_string(),
        ]);
        let loaded_text = match &self.loaded {
            Some(l) => format!(
                "As loaded by sframe-trace for a 999 Hz run of `cpubench` (these objects and the vDSO; \
                 the row map in whole 1024-row chunks, rules shared): {} rows, {} bytes{}, {:.2} bytes per row.",
                l.rows,
                l.bytes,
                if l.exact { "" } else { " (from KiB, rounded up)" },
                per_row(l.bytes, l.rows)
            ),
            None => "sframe-trace's summary gave no table memory.".to_owned(),
        };
        let text = format!(
            "Kernel map bytes of each object's table (4-byte rows, 16-byte page entries, 12-byte \
             rules; built alone, so its rules are not shared) per unwind row (SFrame FREs and CFI \
             rows it was built from), next to the object's own unwind sections.\n\n{}\n{loaded_text}\n",
            table(
                &[
                    "object",
                    "from",
                    "unwind rows",
                    "map bytes",
                    "bytes/row",
                    ".sframe",
                    ".eh_frame + hdr"
                ],
                &rows
            )
        );
        let figures = vec![
            match &self.loaded {
                Some(l) => Figure::new(
                    "Kernel map bytes per unwind row (cpubench + libc + ld.so + vDSO, as loaded)",
                    format!(
                        "{:.2} B/row ({} bytes, {} rows)",
                        per_row(l.bytes, l.rows),
                        l.bytes,
                        l.rows
                    ),
                    format!("<= {TARGET_BYTES_PER_ROW} B/row"),
                    Verdict::of(per_row(l.bytes, l.rows) <= TARGET_BYTES_PER_ROW),
                ),
                None => Figure::new(
                    "Kernel map bytes per unwind row",
                    "not in the summary",
                    format!("<= {TARGET_BYTES_PER_ROW} B/row"),
                    Verdict::NotMeasured,
                ),
            },
            Figure::new(
                "Table bytes next to the objects' own .sframe + .eh_frame (+ hdr)",
                format!(
                    "{map_bytes} vs {own} bytes ({:.2}×)",
                    map_bytes as f64 / own.max(1) as f64
                ),
                "— (context)",
                Verdict::Peer,
            ),
        ];
        Phase {
            key: "memory",
            title: "4. Map memory",
            text,
            json: json!({
                "target_bytes_per_row": TARGET_BYTES_PER_ROW,
                "objects": objects,
                "total": {"unwind_rows": unwind_rows, "map_bytes": map_bytes, "own_unwind_section_bytes": own},
                "loaded": self.loaded.as_ref().map(|l| json!({"rows": l.rows, "bytes": l.bytes, "exact": l.exact,
                                                             "bytes_per_row": per_row(l.bytes, l.rows)})),
            }),
            figures,
        }
    }
}

/// `path` without the `root/` prefix.
fn display_path<'a>(path: &'a str, root: &std::path::Path) -> &'a str {
    path.strip_prefix(&format!("{}/", root.display())).unwrap_or(path)
}

#[cfg(test)]
mod tests;
