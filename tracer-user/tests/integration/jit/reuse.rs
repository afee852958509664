//! Perf maps written at exit, and a pid used by two processes: fixtures/jit/jit.c in `reuse`
//! mode runs its JIT code in `jitfirst`, which writes `/tmp/perf-PID.map` only as it exits
//! (as Java's `-XX:+DumpPerfMapAtExit` does), then in `jitsecond`, made with the same pid,
//! which writes its own map (another name for the same address) as it exits. Traced
//! system-wide, each process's samples in the JIT code must carry its own name and never the
//! other's, in the pprof written at the end and in the streamed json: the first's map is read
//! after it exited, the second's samples are not named from the map the first left behind
//! (refused as `stale` if read while the second runs), and the first's samples are not named
//! from the map that replaced it.
//!
//! Under load, as when it failed (4,131 samples of `jitsecond` named `first_incarnation`: the
//! first process, found gone at a housekeeping tick while its exit notice still waited behind
//! a busy tracer, was dated as ended then, after the second had started): a CPU-burning
//! neighbour and a neighbour whose jitdump never stops growing run beside it all along.
//!
//! Each process runs its code until the tracer has looked at it (its `sframe_trace::jit_watch`
//! debug log), and only then the measured second (`reuse hold`): a system-wide tracer learns
//! of a process from its samples, on a busy host seconds late, and samples taken before the
//! process is loaded are stack copies, some never resolved.

use std::{
    collections::BTreeMap,
    io::{BufRead as _, BufReader, Write as _},
    path::PathBuf,
    process::{Command, Stdio},
};

use super::hostile::{Placed, build_jit};
use crate::support::{SUMMARY_JSON, Tracer, read_pprof};

/// The JIT frame names of the samples of `pid` in a pprof, per command, with their counts.
fn pprof_names(path: &std::path::Path, pid: u32) -> BTreeMap<(String, String), i64> {
    let p = read_pprof(path);
    let s = |i: i64| p.string_table[i as usize].as_str();
    let mut names = BTreeMap::new();
    for sample in &p.sample {
        let label = |key: &str| sample.label.iter().find(|l| s(l.key) == key);
        if label("pid").map(|l| l.num) != Some(i64::from(pid)) {
            continue;
        }
        let comm = label("comm").map_or("", |l| s(l.str)).to_owned();
        for id in &sample.location_id {
            let l = p.location.iter().find(|l| l.id == *id).expect("location");
            let Some(m) = p.mapping.iter().find(|m| m.id == l.mapping_id) else {
                continue;
            };
            if s(m.filename) != "[jit]" {
                continue;
            }
            for line in &l.line {
                let f = p.function.iter().find(|f| f.id == line.function_id).expect("function");
                *names.entry((comm.clone(), s(f.name).to_owned())).or_default() += sample.value[0];
            }
        }
    }
    names
}

#[test]
fn maps_written_at_exit_name_each_process_of_a_reused_pid() {
    privileged_test!();
    let dir = tempfile::tempdir().expect("tempdir");
    let program = build_jit(dir.path());
    let pprof = dir.path().join("out.pb.gz");
    let json = dir.path().join("out.json");
    let mut args = vec![
        "--no-kernel",
        "-F",
        "499",
        "-f",
        "pprof",
        "-o",
        pprof.to_str().expect("utf-8"),
        "-f",
        "json",
        "-o",
        json.to_str().expect("utf-8"),
    ];
    args.extend(SUMMARY_JSON);
    let neighbours = crate::support::neighbours::start();
    let mut tracer = Tracer::start_logging(&args, sframe_trace::jit::WATCH_LOG);
    let mut jit = Command::new(&program)
        .args(["1", "reuse", "hold"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run the JIT program");
    let mut release = jit.stdin.take().expect("stdin");
    let mut said = Vec::new();
    let mut pid = None;
    for line in BufReader::new(jit.stdout.take().expect("stdout"))
        .lines()
        .map_while(Result::ok)
    {
        said.push(line.clone());
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[..] {
            ["running", comm, running] => {
                let looked_at = format!("pid {running} looked at");
                tracer.wait_for(&format!("looked at {comm}"), |l| l.ends_with(&looked_at));
                release.write_all(b"x").expect("release the JIT process");
            }
            ["reused", reused] => pid = reused.parse().ok(),
            _ => {}
        }
    }
    let status = jit.wait().expect("wait for the JIT program");
    let pid: u32 = pid.unwrap_or_else(|| panic!("the JIT program ({status}) said {said:?}"));
    let _map = Placed(PathBuf::from(format!("/tmp/perf-{pid}.map")));
    let stderr = tracer.interrupt();
    drop(neighbours);

    let names = pprof_names(&pprof, pid);
    let count = |comm: &str, name: &str| names.get(&(comm.to_owned(), name.to_owned())).copied().unwrap_or(0);
    assert!(count("jitfirst", "first_incarnation") >= 20, "{names:?}\n{stderr}");
    assert!(count("jitsecond", "second_incarnation") >= 20, "{names:?}\n{stderr}");
    assert_eq!(
        names
            .keys()
            .filter(|(comm, _)| comm == "jitfirst" || comm == "jitsecond")
            .count(),
        2,
        "a process named with the other's map: {names:?}"
    );
    // (Whether the second read the first's map while running, and refused it as `stale`,
    // depends on how soon its samples are resolved: the rule itself is a unit test.)

    // The streamed records, named from what was read when each was resolved: maybe nothing
    // yet (the first's map is written at exit, the second's is stale while it runs), but
    // never the other process's name.
    let text = std::fs::read_to_string(&json).expect("read the json output");
    let mut streamed = 0;
    for record in text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON line"))
    {
        if record["pid"].as_u64() != Some(u64::from(pid)) {
            continue;
        }
        streamed += 1;
        let other = match record["comm"].as_str() {
            Some("jitfirst") => "second_incarnation",
            Some("jitsecond") => "first_incarnation",
            _ => continue,
        };
        let wrong = record["frames"]
            .as_array()
            .expect("frames")
            .iter()
            .any(|f| f["symbol"] == other);
        assert!(!wrong, "named from the other process's map: {record}");
    }
    assert!(streamed >= 40, "only {streamed} records of pid {pid}");
}
