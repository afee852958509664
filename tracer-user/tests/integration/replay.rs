//! `--record-snapshots`: the recordings a session writes replay (`snapshots::replay`, the
//! workload's rules rebuilt from its binaries) to exactly the stacks the tracer printed.

use std::{os::unix::fs::PermissionsExt as _, path::Path, process::Command};

use sframe_trace::snapshots::{recording::Recording, replay::replay};

use crate::support::{build_workloads, tracer_binary};

/// A stack as printed: each frame's address, return addresses minus one (as the json output
/// writes them).
type Stack = Vec<u64>;

fn hex(text: &str) -> u64 {
    u64::from_str_radix(text.trim_start_matches("0x"), 16).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

/// Every sample of a traced PLT workload is recorded (a 0700 directory), each recording
/// replays with the rules rebuilt from the workload's own files, and the recordings' stacks
/// are the stacks the tracer printed, sample for sample.
#[test]
fn recorded_snapshots_replay_to_the_printed_stacks() {
    privileged_test!();
    let workloads = build_workloads(&["v1"]);
    let tmp = tempfile::tempdir().unwrap();
    let (rec, out) = (tmp.path().join("rec"), tmp.path().join("out.json"));
    let status = Command::new(tracer_binary())
        .args(["-F", "97", "--no-kernel", "--record-snapshots"])
        .arg(&rec)
        .args(["-f", "json", "-o"])
        .arg(&out)
        .arg("--")
        .arg(workloads.path().join("v1/plt"))
        .arg("cpu:0.5")
        .status()
        .expect("run the tracer");
    assert!(status.success(), "{status}");
    assert_eq!(std::fs::metadata(&rec).unwrap().permissions().mode() & 0o777, 0o700);

    let mut printed: Vec<Stack> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|s| s["comm"] == "plt")
        .map(|s| {
            let frames = s["frames"].as_array().unwrap();
            frames
                .iter()
                .filter(|f| f["inlined"] != true)
                .map(|f| hex(f["addr"].as_str().unwrap()))
                .collect()
        })
        .collect();
    let own = |m: &sframe_trace::snapshots::recording::RecordedMapping| {
        let path = Path::new(&m.path);
        path.starts_with(workloads.path())
            .then(|| std::fs::read(path).ok().map(std::borrow::Cow::Owned))
            .flatten()
    };
    let mut recorded: Vec<Stack> = Vec::new();
    let mut from_fixture = 0;
    for entry in std::fs::read_dir(&rec).unwrap() {
        let path = entry.unwrap().path();
        let recording: Recording = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        if recording.comm != "plt" {
            continue;
        }
        let walked = replay(&recording, own).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        from_fixture += usize::from(recording.frames.len() == 5);
        recorded.push(
            walked
                .frames
                .iter()
                .enumerate()
                .map(|(i, &(pc, _))| pc - u64::from(i > 0))
                .collect(),
        );
    }
    printed.sort();
    recorded.sort();
    assert!(from_fixture >= 10, "{from_fixture} recordings of the whole chain");
    assert_eq!(recorded, printed);
}
