//! `-f otlp` says what ran and where: a CPython process's resource carries
//! `process.runtime.name` `cpython` and `process.runtime.version` equal to the interpreter's own
//! `sys.version_info`, and every sample carries `cpu.logical_number`, the CPU it was taken on.
//! Two busy threads of the workload pin themselves to two different CPUs
//! (`os.sched_setaffinity` on the calling thread, what `taskset -p` does to a thread id), so
//! each thread's samples must name its own CPU, and the two CPUs must both appear. Uses Debian's
//! `/usr/bin/python3` (as the Python tests do) and the receiver of `otlp.rs`. Privileged.

use std::{collections::BTreeSet, time::Duration};

use serde_json::Value;

use crate::otlp::{Receiver, otlp_args, sframe_trace};

/// Seconds each thread spins.
const BUSY_SECS: u32 = 3;
/// Share of a pinned thread's samples that must name its CPU (a sample may precede the pin).
const MIN_ON_ITS_CPU: f64 = 0.95;
/// Samples each thread must have at least (a busy machine gives the workload little CPU).
const MIN_SAMPLES: u64 = 20;

/// The workload: writes `VERSION` then `TID CPU` per thread to the file `argv[1]` once pinned,
/// both threads spinning for `argv[2]` seconds on CPUs `argv[3]` and `argv[4]`.
const SCRIPT: &str = r#"
import os, sys, threading, time
out, secs, cpus = sys.argv[1], float(sys.argv[2]), [int(c) for c in sys.argv[3:5]]
lines = ["%d.%d.%d" % sys.version_info[:3]]
lock = threading.Lock()
def spin(cpu):
    os.sched_setaffinity(0, {cpu})
    with lock:
        lines.append("%d %d" % (threading.get_native_id(), cpu))
    end = time.monotonic() + secs
    n = 0
    while time.monotonic() < end:
        n += 1
threads = [threading.Thread(target=spin, args=(c,)) for c in cpus]
for t in threads: t.start()
for t in threads: t.join()
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
"#;

/// The CPUs in a list like `0-3,8,10-11` (`/proc/self/status`'s `Cpus_allowed_list`,
/// `/sys/devices/system/cpu/online`).
fn cpu_list(text: &str) -> BTreeSet<u32> {
    let mut cpus = BTreeSet::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (first, last) = part.split_once('-').unwrap_or((part, part));
        let (first, last): (u32, u32) = (
            first.parse().expect("a CPU number"),
            last.parse().expect("a CPU number"),
        );
        cpus.extend(first..=last);
    }
    cpus
}

/// A CPython process exported over OTLP: its resource names the runtime and the interpreter's
/// exact version, and each sample the CPU it was taken on, which is the CPU its thread is
/// pinned to.
#[test]
fn python_runtime_and_sample_cpus_are_exported() {
    privileged_test!(shared);
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let allowed = cpu_list(
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list"),
    );
    let online = cpu_list(&std::fs::read_to_string("/sys/devices/system/cpu/online").expect("online CPUs"));
    // Two CPUs this test may run on (one twice on a single-CPU machine).
    let first = *allowed.first().expect("a CPU");
    let second = *allowed.iter().nth(1).unwrap_or(&first);
    let scratch = tempfile::tempdir().expect("tempdir");
    let out = scratch.path().join("workload.txt");
    let receiver = Receiver::start("grpc", false);
    let args = otlp_args(
        &format!("http://127.0.0.1:{}", receiver.port),
        "1",
        &[
            "--no-kernel",
            "--",
            "/usr/bin/python3",
            "-c",
            SCRIPT,
            &out.display().to_string(),
            &BUSY_SECS.to_string(),
            &first.to_string(),
            &second.to_string(),
        ],
    );
    let traced = sframe_trace(&args, &[], Duration::from_secs(u64::from(BUSY_SECS) + 30));
    let context = || format!("{}\n{}", traced.command, traced.stderr);
    assert!(traced.status.success(), "{}", context());
    let written = std::fs::read_to_string(&out).unwrap_or_else(|e| panic!("the workload's file: {e}\n{}", context()));
    let mut lines = written.lines();
    let version = lines.next().expect("the interpreter's version").to_owned();
    let pinned: Vec<(i64, i64)> = lines
        .map(|l| {
            let (tid, cpu) = l.split_once(' ').expect("TID CPU");
            (tid.parse().expect("a tid"), cpu.parse().expect("a CPU"))
        })
        .collect();
    assert_eq!(pinned.len(), 2, "{written}");

    let mut runtimes: Vec<(Value, Value)> = Vec::new();
    // Per pinned thread: its samples, and those on its CPU.
    let mut counts = [(0u64, 0u64); 2];
    let mut cpus_seen = BTreeSet::new();
    for request in receiver.requests() {
        for resource in request["resources"].as_array().expect("resources") {
            let attributes = &resource["attributes"];
            if !attributes["process.executable.name"]
                .as_str()
                .is_some_and(|n| n.starts_with("python3"))
            {
                continue;
            }
            let runtime = (
                attributes["process.runtime.name"].clone(),
                attributes["process.runtime.version"].clone(),
            );
            if !runtimes.contains(&runtime) {
                runtimes.push(runtime);
            }
            for profile in resource["profiles"].as_array().expect("profiles") {
                for sample in profile["samples"].as_array().expect("samples") {
                    let cpu = sample["attributes"]["cpu.logical_number"]
                        .as_i64()
                        .unwrap_or_else(|| panic!("a sample without its CPU: {sample}"));
                    assert!(
                        u32::try_from(cpu).is_ok_and(|c| online.contains(&c)),
                        "CPU {cpu} is not online ({online:?})"
                    );
                    cpus_seen.insert(cpu);
                    let tid = sample["attributes"]["thread.id"].as_i64().expect("thread.id");
                    let count = sample["values"][0].as_u64().expect("a count");
                    if let Some(i) = pinned.iter().position(|&(t, _)| t == tid) {
                        counts[i].0 += count;
                        if cpu == pinned[i].1 {
                            counts[i].1 += count;
                        }
                    }
                }
            }
        }
    }
    let expected = [(Value::from("cpython"), Value::from(version.as_str()))];
    assert_eq!(
        runtimes,
        expected,
        "the runtime of every python3 resource: {}",
        context()
    );
    for (i, &(total, on_cpu)) in counts.iter().enumerate() {
        let (tid, cpu) = pinned[i];
        assert!(
            total >= MIN_SAMPLES,
            "thread {tid} has {total} samples (at least {MIN_SAMPLES}): {}",
            context()
        );
        assert!(
            on_cpu as f64 >= MIN_ON_ITS_CPU * total as f64,
            "thread {tid}, pinned to CPU {cpu}: {on_cpu} of its {total} samples were taken there: {}",
            context()
        );
    }
    if first != second {
        assert!(
            cpus_seen.contains(&i64::from(first)) && cpus_seen.contains(&i64::from(second)),
            "samples on both CPUs {first} and {second}: {cpus_seen:?}"
        );
    }
}
