//! Processes that forge a JVM (fixtures/hotspot: a program named `java` linking a `libjvm.so`
//! that exports HotSpot's tables with hostile contents): a release the walk does not know, a
//! table without an end, a list of a thousand code heaps, a list pointing into unmapped memory.
//! Traced together in one session, each is refused and counted by its reason, the session
//! ends normally, and their own native stacks stay whole and right (`main` on `_start`).

use std::{
    io::BufRead as _,
    path::Path,
    process::{Command, Stdio},
};

use super::user_stacks;
use crate::support::{Running, SFRAME_CFLAGS, SUMMARY_JSON, Summary, Tracer, gcc, run};

/// The forged library and the program linking it, built into `dir`: the program.
pub(crate) fn build(dir: &Path) -> std::path::PathBuf {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/hotspot");
    let lib = dir.join("libjvm.so");
    run(Command::new("gcc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(fixtures.join("libjvm.c")));
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    let link = format!("-L{}", dir.display());
    gcc(
        &fixtures.join("java.c"),
        &dir.join("java"),
        &[&SFRAME_CFLAGS[..], &[&link, "-Wl,--no-as-needed", "-ljvm", &rpath]].concat(),
    )
}

/// Forged `program` started with `FORGE=mode` for 60 s, once it says it is `ready`.
pub(crate) fn start_forged(program: &Path, mode: &str) -> Running {
    let mut child = Command::new(program)
        .arg("60")
        .env("FORGE", mode)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the forged runtime");
    let stdout = child.stdout.take().expect("stdout");
    let running = Running(child);
    let line = std::io::BufReader::new(stdout).lines().next().and_then(Result::ok);
    assert_eq!(line.as_deref(), Some("ready"), "{mode}");
    running
}

#[test]
fn forged_jvms_are_refused_by_reason() {
    privileged_test!();
    let dir = tempfile::tempdir().expect("tempdir");
    let java = build(dir.path());
    let modes = ["version", "endless", "heaps", "wild"];
    let running: Vec<Running> = modes.iter().map(|mode| start_forged(&java, mode)).collect();
    let pids: Vec<String> = running.iter().map(|r| r.pid().to_string()).collect();
    let pids = pids.join(",");
    let out = dir.path().join("forged.json");
    let out_arg = out.to_str().expect("utf-8 path");
    let mut args = vec!["--pid", &pids, "-d", "2", "-f", "json", "-o", out_arg];
    args.extend(SUMMARY_JSON);
    let stderr = Tracer::start(&args).finish();
    let summary = Summary::of(&stderr);
    for (reason, n) in [("unknown_version", 1), ("malformed", 2), ("unreadable", 1)] {
        assert_eq!(
            summary.count(&format!("hotspot.refused_by_reason.{reason}")),
            n,
            "{reason}:\n{stderr}"
        );
    }
    assert_eq!(summary.count("hotspot.processes"), 0, "{stderr}");
    let json = std::fs::read_to_string(&out).expect("read the json output");
    for (mode, process) in modes.iter().zip(&running) {
        let stacks = user_stacks(&json, process.pid());
        assert!(stacks.len() >= 10, "{mode}: only {} samples:\n{stderr}", stacks.len());
        for stack in &stacks {
            let names: Vec<&str> = stack.iter().map(|f| f.0.as_deref().unwrap_or("?")).collect();
            assert_eq!(names.last(), Some(&"_start"), "{mode}: {names:?}");
            assert!(names.contains(&"main"), "{mode}: {names:?}");
            assert!(stack.iter().all(|f| f.2 != "hotspot"), "{mode}: {names:?}");
        }
    }
}
