//! Processes that forge a V8 (fixtures/v8/node.c: V8's exported constants, and a frame found
//! by its frame pointer that keeps a context and a function where V8's frames do, pointing
//! into a heap made by the program): a name made of itself, a name running into unmapped
//! memory, a function's shared part in unmapped memory or of another type, a scope
//! description of absurd size, a bytecode position table of absurd size (the function named,
//! without a line); and one well-formed function. Traced in one session with a
//! plain `node`: each forged frame is left native and counted by its reason, the well-formed
//! one is named as forged, the session ends normally, and node's frames are named right.

use std::{path::Path, process::Command};

use super::{forged_jvm::start_forged, have, plain_node};
use crate::support::{Running, SUMMARY_JSON, Summary, Tracer, json_frames, json_samples, run};

/// The forged program built into `dir`: without unwind tables, so that its frames are found
/// by frame pointer, as V8's are.
fn build(dir: &Path) -> std::path::PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/v8/node.c");
    let program = dir.join("node-forged");
    run(Command::new("gcc")
        .args([
            "-O0",
            "-fno-stack-protector",
            "-fno-asynchronous-unwind-tables",
            "-fno-unwind-tables",
            "-fno-omit-frame-pointer",
            // Its constants exported, as node's are.
            "-rdynamic",
            "-o",
        ])
        .arg(&program)
        .arg(source));
    program
}

#[test]
fn forged_v8s_are_refused_by_reason() {
    privileged_test!(test);
    if !have(test, "node") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let program = build(dir.path());
    let modes = ["named", "cycle", "liar", "unmapped", "other", "scope", "table"];
    let forged: Vec<Running> = modes.iter().map(|mode| start_forged(&program, mode)).collect();
    let (node, script) = plain_node::warm_node(dir.path());
    let pids: Vec<String> = forged.iter().chain([&node]).map(|r| r.pid().to_string()).collect();
    let pids = pids.join(",");
    let out = dir.path().join("forged.json");
    let out_arg = out.to_str().expect("utf-8 path");
    let mut args = vec!["--pid", &pids, "-F", "499", "-f", "json", "-o", out_arg];
    args.extend(SUMMARY_JSON);
    let tracer = Tracer::start(&args);
    let stderr = tracer.interrupt_after_cpu(node.pid(), 300);
    let summary = Summary::of(&stderr);
    assert_eq!(summary.count("v8.processes"), 8, "{stderr}");
    // The forged position table: named, without a line.
    assert!(summary.count("v8.unlined_by_reason.position_table") >= 1, "{stderr}");
    for reason in ["not_a_string", "unreadable", "not_shared_info", "scope_info"] {
        assert!(
            summary.count(&format!("v8.unnamed_by_reason.{reason}")) >= 1,
            "{reason}:\n{stderr}"
        );
    }
    assert_eq!(summary.count("v8.replaced"), 0, "{stderr}");
    let json = std::fs::read_to_string(&out).expect("read the json output");
    for (mode, process) in modes.iter().zip(&forged) {
        let samples = json_samples(&json, process.pid());
        assert!(samples.len() >= 10, "{mode}: only {} samples:\n{stderr}", samples.len());
        let mut named = 0;
        for sample in &samples {
            let frames: Vec<&serde_json::Value> =
                json_frames(sample).iter().filter(|f| f["source"] != "kernel").collect();
            let names: Vec<&str> = frames.iter().map(|f| f["symbol"].as_str().unwrap_or("?")).collect();
            assert_eq!(names.last(), Some(&"main"), "{mode}: {names:?}");
            for f in frames.iter().filter(|f| f["source"] == "v8") {
                assert!(["named", "table"].contains(mode), "{mode}: a forged frame named: {f}");
                assert_eq!(f["symbol"], "forged_function", "{f}");
                assert_eq!(f["file"], "forged.js", "{f}");
                assert!(f["line"].is_null(), "{mode}: a forged function has no line: {f}");
                named += 1;
            }
        }
        if ["named", "table"].contains(mode) {
            assert!(
                named * 10 >= samples.len() * 9,
                "{mode}: {named} of {} named",
                samples.len()
            );
        }
    }
    plain_node::judge("beside forged V8s", &json, node.pid(), &script, 0.0, &stderr);
}
