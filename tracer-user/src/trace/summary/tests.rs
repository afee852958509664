//! Unit tests of the summary: the text's lines, the JSON object's fields, and that both carry
//! the same figures; the summary file's safe creation.

use std::os::unix::fs::PermissionsExt as _;

use tracer_common::{
    Counter,
    trace::{SOURCE_FP, SOURCE_TABLE},
    walk::StopReason,
};

use super::{Summary, file};
use crate::export::otlp::{Destination, ExportReport};
use crate::manager::FollowStats;
use crate::registry::{Catalog, NoTable};
use crate::trace::tests::{catalog, object, sample};
use crate::{profile::Profile, snapshots::SnapshotStats};

/// The session of these tests: the shared catalog with one more object (unreadable), and one
/// sample of three frames (two from tables, one from frame pointers).
fn session() -> (Catalog, Profile) {
    let mut catalog = catalog();
    catalog.objects.push(object(
        "/bad.so",
        Err(NoTable::Unreadable("/bad.so: truncated \"quoted\" header".into())),
    ));
    let mut profile = Profile::new(Default::default());
    profile.add(
        &sample(&[0x1100, 0x1201, 0x1301], &[SOURCE_TABLE, SOURCE_TABLE, SOURCE_FP], &[]),
        &catalog,
    );
    (catalog, profile)
}

fn summary<'a>(catalog: &'a Catalog, profile: &'a Profile) -> Summary<'a> {
    Summary {
        elapsed: std::time::Duration::from_millis(1500),
        why: "the duration ended",
        profile,
        catalog,
        counters: vec![
            (Counter::Sampled, 1),
            (Counter::EventsLost, 3),
            (Counter::NoticesLost, 4),
        ],
        stops: vec![
            (StopReason::Outermost, 5),
            (StopReason::NoMapping, 2),
            (StopReason::ZeroRa, 1),
            (StopReason::Signal, 0),
        ],
        table_bytes: 2048,
        table_capacity_bytes: 8192,
        follow: FollowStats {
            loaded: 2,
            exited: 1,
            ..Default::default()
        },
        copies: SnapshotStats {
            copies: 6,
            walked: 4,
            unresolved: 1,
            overflowed: 1,
            ..Default::default()
        },
        call_entries: crate::trace::entries::EntryStats {
            kept: 7,
            given: 3,
            dropped: 1,
            exec_limited: 0,
        },
        failed_outputs: &[],
        otlp: None,
        python: Default::default(),
        diagnosis: Vec::new(),
    }
}

/// The summary counts complete and truncated stacks by reason, frames and tables by source.
#[test]
fn summary_reports_stops_sources_and_tables() {
    let (catalog, profile) = session();
    let text = summary(&catalog, &profile).to_string();
    assert!(
        text.contains("processes: 2 loaded while tracing, 0 refreshed"),
        "{text}"
    );
    assert!(
        text.contains("1 samples in 1.5 s (the duration ended), 3 lost"),
        "{text}"
    );
    assert!(
        text.contains("stacks: 5 complete, 3 truncated (zero_ra 1, no_mapping 2)")
            || text.contains("stacks: 5 complete, 3 truncated (no_mapping 2, zero_ra 1)"),
        "{text}"
    );
    assert!(
        text.contains("user frames: 1 from SFrame, 0 from .eh_frame, 1 from frame pointers"),
        "{text}"
    );
    assert!(
        text.contains(
            "tables: 1 with SFrame, 1 with .eh_frame (15 rows, 2 KiB of 8 KiB of table maps in use), 2 without (1 no unwind information, 1 unreadable)"
        ),
        "{text}"
    );
}

/// `--summary-format json`: one line, one object, with every documented field and the same
/// figures as the text (samples, losses, stop reasons, frames, tables, processes, notes).
#[test]
fn json_has_the_figures_of_the_text() {
    let (catalog, mut profile) = session();
    profile.vma_samples = 2;
    let summary = summary(&catalog, &profile);
    let json = summary.json();
    assert_eq!(json.lines().count(), 1, "{json}");
    let v: serde_json::Value = serde_json::from_str(&json).expect("the summary is JSON");
    let expected = serde_json::json!({
        "samples": 1,
        "seconds": 1.5,
        "ended": "the duration ended",
        "lost": 3,
        "stacks": {"complete": 5, "truncated": 3, "truncated_by_reason": {"no_mapping": 2, "zero_ra": 1}, "through_vmas": 2},
        "user_frames": {"sframe": 1, "eh_frame": 0, "frame_pointers": 1},
        "tables": {
            "sframe": 1, "eh_frame": 1, "rows": 15, "kernel_bytes": 2048, "capacity_bytes": 8192,
            "without": 2, "without_by_reason": {"no_unwind_info": 1, "unreadable": 1},
        },
        "notices_lost": 4,
        "processes": {
            "loaded": 2, "refreshed": 0, "exited": 1, "vanished": 0, "no_room": 0, "unloaded": 0,
            "traced_at_end": 0,
        },
        "stack_copies": {"copies": 6, "walked": 4, "unresolved": 1, "overflowed": 1},
        "call_entries": {"kept": 7, "given": 3, "dropped": 1, "exec_limited": 0},
        "notes": ["/bad.so: truncated \"quoted\" header"],
        "notes_left_out": 0,
        // The process's figures (tests naming files run at the same time): their fields.
        "symbols": v["symbols"],
        "failed_outputs": [],
        "otlp": null,
        "jit": {
            "processes": 0, "perf_maps": 0, "entries": 0, "malformed_lines": 0, "over_limit": 0,
            "refused_by_reason": {},
            "budget": {"limit_bytes": 268435456, "peak_bytes": 0, "perf_map_lines_over_budget": 0,
                "jitdump_records_over_budget": 0, "jitdump_images_over_budget": 0, "reads_behind": 0},
        },
        "jitdump": {
            "read": 0, "refused_by_reason": {}, "malformed_records": 0, "unusable_unwind": 0, "regions": 0,
            "image_bytes": 0, "over_limit": 0, "rereads": 0,
        },
        "hotspot": {
            "processes": 0, "scans": 0, "read_us": 0, "compiled_methods": 0, "unnamed_methods": 0, "unscoped_methods": 0, "malformed_blobs": 0,
            "over_limit": 0, "refused_by_reason": {}, "interpreted": {"named": 0, "unnamed_by_reason": {}},
        },
        "python": {"walks": 0, "frames": 0, "cut_short": 0, "cut_short_by_reason": {},
            "stacks": {"frames": 0, "unnamed": 0, "replaced": 0, "too_many_functions": 0, "over_user_budget": 0,
                "over_budget": 0, "elided": 0, "caches_emptied": 0, "eval_frames_without_run": 0,
                "runs_dropped": 0, "reads_stuck": 0, "reads_late": 0},
            "map": {"added": 0, "evicted": 0, "refused_full": 0, "refused_error": 0}, "refused": {}},
        "v8": {"processes": 0, "frames": 0, "unnamed_by_reason": {}, "functions": 0, "lined": 0, "inlined": 0,
               "unlined_by_reason": {}, "replaced": 0, "reads": 0, "read_us": 0,
            "refused_by_reason": {}},
        "diagnosis": [],
    });
    let fields: Vec<&String> = v["symbols"].as_object().expect("symbols").keys().collect();
    assert_eq!(
        fields,
        [
            "cached",
            "fetched",
            "not_fetched_by_reason",
            "refused_by_reason",
            "sealed_copies",
            "symbol_table_only_by_reason"
        ]
    );
    assert_eq!(v, expected);
    // The text says the same.
    let text = summary.to_string();
    for line in [
        "1 samples in 1.5 s (the duration ended), 3 lost",
        "stacks: 5 complete, 3 truncated (no_mapping 2, zero_ra 1); 2 walked through code found in the kernel",
        "process notices lost: 4",
        "stack copies (no table yet when sampled): 6, 4 walked once loaded, 1 never resolved, 1 over the queue",
        "stacks kept at exit and exec: 7, given to 3 samples taken inside those calls",
        "note: /bad.so: truncated \"quoted\" header",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
}

/// With `--record-snapshots` every sample is a copy: the text says so instead of calling them
/// samples without a table; the JSON counts them the same.
#[test]
fn recorded_copies_are_not_called_missing_tables() {
    let (catalog, profile) = session();
    let mut recorded = summary(&catalog, &profile);
    recorded.copies.every_sample = true;
    let text = recorded.to_string();
    assert!(
        text.contains("stack copies (every sample, recorded): 6, 4 walked once loaded"),
        "{text}"
    );
    assert!(!text.contains("no table yet"), "{text}");
    let v: serde_json::Value = serde_json::from_str(&recorded.json()).unwrap();
    assert_eq!(v["stack_copies"]["copies"], 6);
}

/// What jitdumps gave is a line of the text only when there was one, with the refusals by name.
#[test]
fn jitdumps_are_a_line_when_there_were_some() {
    let (mut catalog, profile) = session();
    assert!(!summary(&catalog, &profile).to_string().contains("jitdump"));
    catalog.runtimes.jit.dumps.stats.read = 2;
    catalog.runtimes.jit.dumps.stats.regions = 1;
    catalog.runtimes.jit.dumps.stats.malformed_records = 3;
    catalog
        .runtimes
        .jit
        .dumps
        .stats
        .refused_by_reason
        .insert("other_owner", 1);
    let summary = summary(&catalog, &profile);
    let text = summary.to_string();
    assert!(
        text.contains(
            "jitdump: 2 read, 1 regions of JIT code with tables (3 malformed records, 0 unwind entries unusable), refused: other_owner 1"
        ),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&summary.json()).unwrap();
    assert_eq!(v["jitdump"]["refused_by_reason"]["other_owner"], 1);
}

/// What the JVMs' code heaps gave is a line of the text only when a JVM was met, with the
/// refusals by name.
#[test]
fn jvms_are_a_line_when_there_were_some() {
    let (mut catalog, profile) = session();
    assert!(!summary(&catalog, &profile).to_string().contains("hotspot"));
    let stats = &mut catalog.runtimes.jit.hotspot.stats;
    stats.processes = 1;
    stats.scans = 3;
    stats.compiled_methods = 40;
    stats.refused_by_reason.insert("unknown_version", 2);
    let summary = summary(&catalog, &profile);
    let text = summary.to_string();
    assert!(
        text.contains(
            "hotspot: 1 JVMs read (3 reads, 0.0 ms), 40 compiled methods (0 unnamed, 0 without lines), 0 malformed blobs, refused: unknown_version 2"
        ),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&summary.json()).unwrap();
    assert_eq!(v["hotspot"]["refused_by_reason"]["unknown_version"], 2);
}

/// Node.js's line says what became of JavaScript frames and V8s, only once there was one.
#[test]
fn v8s_are_a_line_when_there_were_some() {
    let (mut catalog, profile) = session();
    assert!(!summary(&catalog, &profile).to_string().contains("v8:"));
    let stats = catalog.runtimes.v8.stats_mut();
    stats.processes = 2;
    stats.frames = 900;
    stats.functions = 12;
    stats.unnamed_by_reason.insert("scope_info", 3);
    stats.refused_by_reason.insert("unknown_version", 1);
    stats.lined = 880;
    stats.inlined = 40;
    stats.unlined_by_reason.insert("baseline", 20);
    let summary = summary(&catalog, &profile);
    let text = summary.to_string();
    assert!(
        text.contains(
            "v8: 2 processes, 900 JavaScript frames named (12 functions), 3 left native (scope_info 3); \
             880 at their running line (without: baseline 20), 40 inlined, refused: unknown_version 1"
        ),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&summary.json()).unwrap();
    assert_eq!(v["v8"]["unnamed_by_reason"]["scope_info"], 3);
    assert_eq!(v["v8"]["unlined_by_reason"]["baseline"], 20);
    assert_eq!(v["v8"]["lined"], 880);
}

/// Every object without a table is a note in the JSON, while the text names the first eight.
#[test]
fn json_has_every_note_the_text_shortens() {
    let (mut catalog, profile) = session();
    for i in 0..10 {
        catalog.objects.push(object(
            &format!("/bad{i}.so"),
            Err(NoTable::NoRoom(format!("/bad{i}.so: no room"))),
        ));
    }
    let summary = summary(&catalog, &profile);
    let v: serde_json::Value = serde_json::from_str(&summary.json()).expect("json");
    assert_eq!(v["notes"].as_array().map(Vec::len), Some(11));
    assert_eq!(v["tables"]["without_by_reason"]["no_room"], 10);
    assert!(summary.to_string().contains("note: and 3 more objects without a table"));
}

/// The summary file is created with mode 0600 and replaces an old one only once written; a
/// symbolic link or a FIFO planted at the path is refused without being written through or
/// blocking, and a hard link to another file is replaced, not written through.
#[test]
fn summary_file_is_created_safely() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("summary.json");
    std::fs::write(&path, "old figures").expect("write");
    let created = file::SummaryFile::create(&path, &crate::outfile::Access::default()).expect("create");
    assert_eq!(
        std::fs::read(&path).expect("read"),
        b"old figures",
        "kept until written"
    );
    created.write("new figures").expect("write");
    assert_eq!(std::fs::read(&path).expect("read"), b"new figures");
    assert_eq!(
        std::fs::metadata(&path).expect("stat").permissions().mode() & 0o777,
        0o600
    );

    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious").expect("write the victim");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&victim, &link).expect("symlink");
    let err = file::SummaryFile::create(&link, &crate::outfile::Access::default())
        .err()
        .expect("a symbolic link is refused");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    let hard = dir.path().join("hard");
    std::fs::hard_link(&victim, &hard).expect("hard link");
    file::SummaryFile::create(&hard, &crate::outfile::Access::default())
        .expect("create")
        .write("figures")
        .expect("write");
    assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious");
    assert_eq!(std::fs::read_to_string(&hard).expect("read"), "figures");

    let fifo = dir.path().join("fifo");
    let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
    crate::sys::fs::mkfifo(&name, 0o600).expect("mkfifo");
    assert!(
        file::SummaryFile::create(&fifo, &crate::outfile::Access::default()).is_err(),
        "a FIFO is refused, without blocking"
    );
}

/// A failed output is named on a line of its own in the text, its name escaped, and listed in
/// the JSON.
#[test]
fn failed_outputs_are_named() {
    let (catalog, profile) = session();
    let failed = ["/tmp/x\x1b]0;y: No space left on device (os error 28)".to_owned()];
    let summary = Summary {
        failed_outputs: &failed,
        ..summary(&catalog, &profile)
    };
    let text = summary.to_string();
    assert!(
        text.contains("\n  output failed: /tmp/x\\x1b]0;y: No space left on device (os error 28)\n"),
        "a failed output is one line, its name escaped: {text}"
    );
    let v: serde_json::Value = serde_json::from_str(&summary.json()).expect("json");
    assert_eq!(v["failed_outputs"][0], failed[0].as_str());
}

/// With `-f otlp` the text's `otlp:` line and the JSON's `otlp` object carry the same export
/// figures (sent, dropped by why, failures by reason, with their samples); without it the
/// JSON's `otlp` is null.
#[test]
fn exports_are_in_both_forms() {
    let (catalog, profile) = session();
    let v: serde_json::Value = serde_json::from_str(&summary(&catalog, &profile).json()).expect("json");
    assert!(v["otlp"].is_null(), "{v}");
    let report = ExportReport {
        destination: Destination::parse("http://127.0.0.1:4318", None).expect("an endpoint"),
        sent: 4,
        sent_samples: 900,
        queue_full: 1,
        failed: 2,
        unsent: 3,
        lost_samples: 77,
        retries: 5,
        rejected_profiles: 6,
        failed_by_reason: [("tls-certificate-expired", 1), ("unauthenticated", 1)].into(),
    };
    let summary = Summary {
        otlp: Some(&report),
        ..summary(&catalog, &profile)
    };
    let text = summary.to_string();
    assert!(
        text.contains(
            "  otlp: 4 exports sent to http://127.0.0.1:4318/v1development/profiles (HTTP), 900 samples; 6 dropped, \
             77 samples (1 queue full, 2 failed: 1 tls-certificate-expired, 1 unauthenticated, 3 unsent at exit); 5 retries; 6 profiles rejected by the collector\n"
        ),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&summary.json()).expect("json");
    let otlp = &v["otlp"];
    assert_eq!(otlp["endpoint"], "http://127.0.0.1:4318/v1development/profiles");
    assert_eq!(otlp["protocol"], "http");
    for (field, want) in [
        ("sent", 4),
        ("sent_samples", 900),
        ("dropped", 6),
        ("dropped_samples", 77),
        ("queue_full", 1),
        ("failed", 2),
        ("unsent", 3),
        ("retries", 5),
        ("rejected_profiles", 6),
    ] {
        assert_eq!(otlp[field], want, "{field}: {otlp}");
    }
    assert_eq!(
        otlp["failed_by_reason"],
        serde_json::json!({"tls-certificate-expired": 1, "unauthenticated": 1})
    );
}

/// Objects forgotten during a long session are counted, not kept: the summary still counts
/// them by reason, and keeps the first thousand notes, counting the others.
#[test]
fn forgotten_objects_stay_counted_and_notes_are_bounded() {
    let (mut catalog, profile) = session();
    let first = catalog.objects.len();
    for i in 0..1200 {
        catalog.objects.push(object(
            &format!("/gone{i}.so"),
            Err(NoTable::NoRoom(format!("/gone{i}.so: no room"))),
        ));
    }
    let gone: Vec<usize> = (first..catalog.objects.len()).collect();
    catalog.forget(&gone);
    let summary = summary(&catalog, &profile);
    let v: serde_json::Value = serde_json::from_str(&summary.json()).expect("json");
    assert_eq!(v["tables"]["without_by_reason"]["no_room"], 1200);
    assert_eq!(v["tables"]["without_by_reason"]["unreadable"], 1, "the live one");
    assert_eq!(v["notes"].as_array().map(Vec::len), Some(1000));
    assert_eq!(v["notes_left_out"], 201, "1201 notes, the first thousand kept");
    assert!(
        summary
            .to_string()
            .contains("note: and 1193 more objects without a table"),
        "{summary}"
    );
}

/// The kernel's Python walks are a line of the text only when there were some, and the JSON
/// names the walks cut short by reason (those that happened only).
#[test]
fn python_walks_in_both_forms() {
    use tracer_common::python::PyStop;

    let (catalog, profile) = session();
    assert!(!summary(&catalog, &profile).to_string().contains("python:"));
    let counts = crate::bpf::PythonCounts {
        walks: 40,
        frames: 700,
        stops: vec![(PyStop::NoThreadState, 0), (PyStop::ReadFailed, 3)],
    };
    let stacks = crate::python::PyFrameStats {
        frames: 690,
        unnamed: 4,
        replaced: 3,
        too_many_functions: 1,
        eval_frames_without_run: 2,
        runs_dropped: 0,
        reads_stuck: 0,
        reads_late: 0,
        ..Default::default()
    };
    let summary = Summary {
        python: super::python::PythonFigures::new(&counts, stacks, Default::default()),
        ..summary(&catalog, &profile)
    };
    let text = summary.to_string();
    assert!(
        text.contains(
            "\n  python: 40 walks, 700 frames, 3 walks cut short (read_failed 3); 690 Python frames in stacks, \
             8 unnamed (3 with their code object replaced before they were named), 2 evaluation-loop frames without Python frames, 0 runs dropped\n"
        ),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&summary.json()).expect("json");
    assert_eq!(
        v["python"],
        serde_json::json!({"walks": 40, "frames": 700, "cut_short": 3, "cut_short_by_reason": {"read_failed": 3},
            "stacks": {"frames": 690, "unnamed": 4, "replaced": 3, "too_many_functions": 1, "over_user_budget": 0,
                "over_budget": 0, "elided": 0, "caches_emptied": 0, "eval_frames_without_run": 2,
                "runs_dropped": 0, "reads_stuck": 0, "reads_late": 0},
            "map": {"added": 0, "evicted": 0, "refused_full": 0, "refused_error": 0}, "refused": {}})
    );
}

/// Interpreters not walked are a line of the text, by reason, even when nothing was walked;
/// the JSON counts them by reason.
#[test]
fn refused_interpreters_in_both_forms() {
    let (catalog, profile) = session();
    assert!(!summary(&catalog, &profile).to_string().contains("not walked"));
    let reason = crate::python::PythonError::Unsupported { major: 3, minor: 16 }.to_string();
    let summary = Summary {
        python: super::python::PythonFigures {
            refused: [(reason.clone(), 2)].into(),
            ..Default::default()
        },
        ..summary(&catalog, &profile)
    };
    let text = summary.to_string();
    assert!(
        text.contains("\n  python interpreters not walked: CPython 3.16: not supported (3.6 to 3.15 are) (2)\n"),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&summary.json()).expect("json");
    assert_eq!(v["python"]["refused"], serde_json::json!({reason: 2}));
}

/// Issue 31: the diagnosis is the text's last lines, one per sentence (escaped), and the
/// JSON's `diagnosis` list; without any, the JSON has an empty list and the text no line.
#[test]
fn diagnosis_is_in_both_forms() {
    let (catalog, profile) = session();
    let quiet = summary(&catalog, &profile);
    assert!(!quiet.to_string().contains("diagnosis"));
    let v: serde_json::Value = serde_json::from_str(&quiet.json()).expect("json");
    assert_eq!(v["diagnosis"], serde_json::json!([]));
    let said = "no samples: pid 4 used no CPU time while traced: trace it with -e offcpu\x1b".to_owned();
    let summary = Summary {
        diagnosis: vec![said.clone()],
        ..summary(&catalog, &profile)
    };
    let text = summary.to_string();
    assert!(
        text.ends_with("  diagnosis: no samples: pid 4 used no CPU time while traced: trace it with -e offcpu\\x1b\n"),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&summary.json()).expect("json");
    assert_eq!(v["diagnosis"][0], said.as_str());
}

/// Walks stopped at a Go stack base move from their reason (`zero_ra`, `topmost_only_rule`) to
/// the complete count, never more than the reason counted; other reasons stay.
#[test]
fn go_bases_are_counted_complete_by_reason() {
    let mut stops = vec![
        (StopReason::Outermost, 10),
        (StopReason::ZeroRa, 3),
        (StopReason::TopmostOnlyRule, 2),
        (StopReason::NoMapping, 4),
    ];
    let bases = [("zero_ra", 2), ("topmost_only_rule", 5)].into_iter().collect();
    super::count_go_bases_complete(&mut stops, &bases);
    assert_eq!(
        stops,
        [
            (StopReason::Outermost, 14),
            (StopReason::ZeroRa, 1),
            (StopReason::TopmostOnlyRule, 0),
            (StopReason::NoMapping, 4),
        ]
    );
}
