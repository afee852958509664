//! Fuzzing as part of the test run: every cargo-fuzz target of `fuzz/` for a bounded time,
//! starting from its corpus in `fuzz/corpus/TARGET` (git-ignored, so it grows from run to run
//! on one machine), the checked-in fixtures and the target's own checked-in seeds
//! (`fuzz/seeds/TARGET`, when there are), under a memory limit ([`RSS_LIMIT_MB`]). Needs the nightly toolchain and
//! cargo-fuzz, which `cargo xtask setup` installs; without them the run says so loudly and
//! skips fuzzing, or fails under `CI=true`.

use std::{path::Path, process::Command};

use anyhow::{Context as _, bail};

use crate::cmd::{output, sh};

/// Seconds each target runs for in `cargo xtask test`.
pub const SECONDS: u64 = 20;

/// The most memory (MiB) a target may hold: libFuzzer fails the run past it, and on a single
/// allocation larger than it (a decompression bomb, a length taken from the input). libFuzzer's
/// default, stated: a compressed section may decompress to 512 MiB, its buffer twice that.
pub const RSS_LIMIT_MB: u64 = 2048;

/// Whether nightly and cargo-fuzz are there to fuzz with.
pub fn available() -> bool {
    output(Command::new("rustup").args(["run", "nightly", "rustc", "--version"])).is_some()
        && output(Command::new("cargo").args(["+nightly", "fuzz", "--version"])).is_some()
}

/// The targets: the files of `fuzz/fuzz_targets`, by name.
fn targets(root: &Path) -> anyhow::Result<Vec<String>> {
    let dir = root.join("fuzz/fuzz_targets");
    let mut targets: Vec<String> = std::fs::read_dir(&dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".rs").map(str::to_owned))
        .collect();
    targets.sort();
    Ok(targets)
}

/// Targets fuzzed at once: libFuzzer runs one process per target, on one CPU, so on the two
/// CPUs of the machines the suite runs on two targets take the wall time of one, each still
/// for its full `seconds` on a CPU of its own.
pub const AT_ONCE: usize = 2;

/// The build of every target (also started by the background builds of `cargo xtask test`).
pub fn build(root: &Path) -> Command {
    let mut command = Command::new("cargo");
    command
        .current_dir(root.join("fuzz"))
        .args(["+nightly", "fuzz", "build"]);
    command
}

/// Run every target for `seconds`, [`AT_ONCE`] at a time after one build of them all; a crash
/// (libFuzzer's non-zero exit, with the input saved in `fuzz/artifacts/TARGET`) fails the run,
/// after the other targets have run.
pub fn fuzz(root: &Path, seconds: u64) -> anyhow::Result<()> {
    if !available() {
        if std::env::var("CI").as_deref() == Ok("true") {
            bail!("fuzzing needs the nightly toolchain and cargo-fuzz (`cargo xtask setup` installs them)");
        }
        eprintln!(
            "\n!!!!! SKIPPED fuzzing: no nightly toolchain or no cargo-fuzz (`cargo xtask setup` installs them) !!!!!\n"
        );
        return Ok(());
    }
    // Built once, before the runs: two builds at once would only wait on each other's lock.
    sh(&mut build(root))?;
    let targets = targets(root)?;
    let mut failed = Vec::new();
    for batch in targets.chunks(AT_ONCE) {
        let results: Vec<(String, anyhow::Result<()>)> = std::thread::scope(|scope| {
            let runs: Vec<_> = batch
                .iter()
                .map(|target| (target, scope.spawn(|| run_target(root, target, seconds))))
                .collect();
            runs.into_iter()
                .map(|(target, run)| {
                    let result = run
                        .join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("its thread panicked")));
                    (target.clone(), result)
                })
                .collect()
        });
        for (target, result) in results {
            if let Err(err) = result {
                failed.push(format!("{target}: {err:#}"));
            }
        }
    }
    if !failed.is_empty() {
        bail!("fuzzing failed:\n  {}", failed.join("\n  "));
    }
    Ok(())
}

/// `cargo fuzz run TARGET` for `seconds` from its corpus, the fixtures and its own seeds.
fn run_target(root: &Path, target: &str, seconds: u64) -> anyhow::Result<()> {
    let seeds = root.join("fixtures/bin");
    let corpus = root.join("fuzz/corpus").join(target);
    std::fs::create_dir_all(&corpus).with_context(|| format!("creating {}", corpus.display()))?;
    let own_seeds = root.join("fuzz/seeds").join(target);
    // `cargo` from PATH (rustup's proxy), which understands `+nightly`.
    let mut command = Command::new("cargo");
    command
        .current_dir(root.join("fuzz"))
        .args(["+nightly", "fuzz", "run", target])
        .arg(&corpus)
        .arg(&seeds);
    if own_seeds.is_dir() {
        command.arg(&own_seeds);
    }
    sh(command
        .arg("--")
        .arg(format!("-max_total_time={seconds}"))
        .arg(format!("-rss_limit_mb={RSS_LIMIT_MB}"))
        .arg(format!("-malloc_limit_mb={RSS_LIMIT_MB}")))
}
