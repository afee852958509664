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

/// The corpus directory the recorder writes ([`record_the_replay_corpus`]), and its variable.
const CORPUS_VAR: &str = "SFRAME_TRACE_REPLAY_CORPUS";

/// What the corpus holds of one workload: `count` recordings of `set/name` that `wanted`
/// accepts, spread over the run.
struct Kind {
    set: &'static str,
    name: &'static str,
    count: usize,
    wanted: fn(&Recording) -> bool,
}

fn outermost_with(recording: &Recording, frames: usize) -> bool {
    recording.stop == "outermost" && recording.frames.len() == frames
}

/// The whole deep chain (`leaf;recurse`×100`;run;main;_start`) of set `set`.
const fn deep(set: &'static str) -> Kind {
    Kind {
        set,
        name: "deep",
        count: 3,
        wanted: |r| outermost_with(r, 104),
    }
}

/// The kinds of samples the corpus keeps (fixtures/replay/README.md): the deep chain of each
/// SFrame version and of `.eh_frame`, a stack deeper than the copy, a call through the PLT
/// into a library, a signal handler, and a PC in the vDSO.
const KINDS: &[Kind] = &[
    deep("v1"),
    deep("v2"),
    deep("v3"),
    deep("ehframe"),
    Kind {
        set: "v3",
        name: "deepest",
        count: 2,
        wanted: |r| r.stop == "snapshot_end",
    },
    Kind {
        set: "v3",
        name: "plt",
        count: 3,
        wanted: |r| outermost_with(r, 5),
    },
    Kind {
        set: "v3",
        name: "signal",
        count: 3,
        wanted: |r| r.stop == "signal" && r.frames.len() == 3,
    },
    Kind {
        set: "v3",
        name: "vdso",
        count: 3,
        wanted: |r| {
            let pc = r.frames[0].pc.0;
            outermost_with(r, 6)
                && r.mappings
                    .iter()
                    .any(|m| m.path == "[vdso]" && (m.start.0..m.end.0).contains(&pc))
        },
    },
];

/// The prefix of this architecture's files in the corpus: none on x86-64 (the first corpus),
/// `aarch64-` on arm64 (`bin/aarch64-SET/`, `recordings/aarch64-SET-NAME-N.json`).
fn corpus_prefix() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "",
        "aarch64" => "aarch64-",
        other => panic!("no replay corpus for {other}"),
    }
}

/// Writes this architecture's part of the replay corpus into `$SFRAME_TRACE_REPLAY_CORPUS`
/// (fixtures/replay): the workloads' binaries under `bin/`, and for each of [`KINDS`] the
/// recordings of a session traced with `--record-snapshots` that show the kind, under
/// `recordings/`; the other architecture's files are left alone. Not a check: the unit tests
/// (`snapshots::replay`) judge what it writes. On x86-64 as root here; on arm64 in a guest
/// (`cargo xtask vm-test --arch aarch64 --kernels bookworm --tests replay::record_the_replay_corpus`).
#[test]
#[ignore = "writes the replay corpus; run by name with SFRAME_TRACE_REPLAY_CORPUS (fixtures/replay/README.md)"]
fn record_the_replay_corpus() {
    privileged_test!();
    let corpus = std::path::PathBuf::from(
        std::env::var_os(CORPUS_VAR).unwrap_or_else(|| panic!("{CORPUS_VAR} names the corpus to write")),
    );
    let prefix = corpus_prefix();
    let workloads = build_workloads(&["v1", "v2", "v3", "ehframe"]);
    let (bin, recordings) = (corpus.join("bin"), corpus.join("recordings"));
    let ours = |name: &str| {
        if prefix.is_empty() {
            !name.starts_with("aarch64-")
        } else {
            name.starts_with(prefix)
        }
    };
    for dir in [&bin, &recordings] {
        std::fs::create_dir_all(dir).unwrap();
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            if ours(&entry.file_name().to_string_lossy()) {
                let path = entry.path();
                let removed = if path.is_dir() {
                    std::fs::remove_dir_all(&path)
                } else {
                    std::fs::remove_file(&path)
                };
                removed.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            }
        }
    }
    // The binaries, checked in, and run from a temporary directory: the recordings keep the
    // paths they were mapped from, which must not be this machine's working directories.
    let tmp = tempfile::tempdir().unwrap();
    let run_from = tmp.path().join("wl");
    let mut binaries: Vec<(&str, &str)> = KINDS.iter().map(|k| (k.set, k.name)).collect();
    binaries.push(("v3", "libwork.so"));
    for (set, name) in binaries {
        for dir in [bin.join(format!("{prefix}{set}")), run_from.join(set)] {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::copy(workloads.path().join(set).join(name), dir.join(name)).unwrap();
        }
    }
    for kind in KINDS {
        let rec = tmp.path().join(format!("{}-{}", kind.set, kind.name));
        let status = Command::new(tracer_binary())
            .args(["-F", "97", "--no-kernel", "--record-snapshots"])
            .arg(&rec)
            .args(["-o", "/dev/null", "--"])
            .arg(run_from.join(kind.set).join(kind.name))
            .arg("cpu:1")
            .status()
            .expect("run the tracer");
        assert!(status.success(), "{}/{}: {status}", kind.set, kind.name);
        let mut files: Vec<_> = std::fs::read_dir(&rec).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        // What the recordings show (stop reason and depth), for the message when too few
        // are of the kind.
        let mut shown = std::collections::BTreeMap::<(String, usize), usize>::new();
        let matching: Vec<_> = files
            .iter()
            .filter(|path| {
                let recording: Recording = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
                *shown
                    .entry((recording.stop.clone(), recording.frames.len()))
                    .or_default() += 1;
                recording.comm == kind.name && (kind.wanted)(&recording)
            })
            .collect();
        assert!(
            matching.len() >= kind.count,
            "{}/{}: {} of {} recordings show the kind, {} wanted; (stop, frames): count = {shown:?}",
            kind.set,
            kind.name,
            matching.len(),
            files.len(),
            kind.count
        );
        for i in 0..kind.count {
            let chosen = matching[i * matching.len() / kind.count];
            let name = format!("{prefix}{}-{}-{}.json", kind.set, kind.name, i + 1);
            std::fs::copy(chosen, recordings.join(name)).unwrap();
        }
        eprintln!(
            "{}/{}: {} of {} matching recordings kept",
            kind.set,
            kind.name,
            kind.count,
            matching.len()
        );
    }
}
