//! A plain `node` (no flag at all), traced with `--pid` and with `-a`: its JavaScript frames
//! are named from V8's memory (`v8/`), interpreted and compiled alike, with their script and
//! running line (each call on its own line), functions inlined into compiled code as frames
//! of their own. Judged on the samples whose innermost frame is JavaScript (a named frame, or code
//! without an object): at least 90 % named with the program's functions; every stack in the
//! one order the program has (`leaf`, `descend` frames, `main`, then node's module loader),
//! none other; at least 95 % whole down to `_start`.

use std::{
    io::BufRead as _,
    path::Path,
    process::{Command, Stdio},
};

use super::{ENOUGH, NAMED, WHOLE, have, loaded_then_sampled};
use crate::support::{Running, SUMMARY_JSON, Summary, json_frames, json_samples};

/// The program: `main` calls `descend` 12 deep, whose last calls `leaf`, until it is killed;
/// `warm` once its first second of CPU time is over. Each function on a line of its own.
const PROGRAM: &str = "function leaf(n) { let s = 0; for (let i = 0; i < n; i++) s += i % 7; return s; }\n\
function descend(depth) { return depth === 0 ? leaf(20000) : descend(depth - 1) + 1; }\n\
function main() {\n\
  let t = 0, said = false;\n\
  for (;;) {\n\
    t += descend(12);\n\
    if (!said && process.cpuUsage().user > 1e6) { console.log('warm'); said = true; }\n\
  }\n\
  return t;\n\
}\n\
main();\n";

/// The lines each function runs on: `leaf` and `descend` are a line each; `main` loops on
/// 5, calls `descend` on 6 and the clock on 7; the script's own function, `(anonymous)`, is
/// node's module wrapper around it, which calls `main` on 11.
const LINES: [(&str, &[u64]); 4] = [
    ("leaf", &[1]),
    ("descend", &[2]),
    ("main", &[5, 6, 7]),
    ("(anonymous)", &[11]),
];

/// The line a function calls the next one on (innermost first: the callee before its caller).
const CALLS: [(&str, &str, u64); 2] = [("descend", "main", 6), ("main", "(anonymous)", 11)];

/// Of the program's frames, at least this share have their running line.
const LINED: f64 = 0.9;

#[test]
fn plain_node_is_named_from_v8s_memory() {
    privileged_test!(paired, test);
    if !have(test, "node") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (node, script) = warm_node(dir.path());
    for what in ["--pid", "-a"] {
        trace_node(what, &node, &script, dir.path());
    }
}

/// Node.js 20, then 24, running their functions in baseline code only (V8's flags to the
/// program pin its tier: compiled by Sparkplug at once, never optimized; the tracer needs
/// none): each frame at the line of the bytecode its instructions are for, judged the same
/// way (`--pid`).
#[test]
fn plain_node_baseline_frames_are_at_their_lines() {
    privileged_test!(paired, test);
    if !have(test, "node") {
        return;
    }
    const BASELINE: [&str; 3] = ["--always-sparkplug", "--no-opt", "--no-maglev"];
    let dir = tempfile::tempdir().expect("tempdir");
    let mut command = Command::new("node");
    command.args(BASELINE);
    let (node, script) = warm_node_with(command, dir.path(), dir.path());
    trace_node("baseline --pid", &node, &script, dir.path());
    drop(node);
    // Node.js 24, whose libnode does not export its bytecodes' sizes (`v8/bytecodes.rs`).
    let Some(root) = crate::support::required(test, crate::support::sid_node(), crate::support::NO_NODE_ROOT) else {
        return;
    };
    let dir = tempfile::tempdir_in(root.join("tmp")).expect("tempdir in the root");
    let inside = Path::new("/tmp").join(dir.path().file_name().expect("name"));
    let mut command = Command::new("chroot");
    command.arg(&root).arg("/usr/bin/node").args(BASELINE);
    let (node, script) = warm_node_with(command, dir.path(), &inside);
    trace_node("node 24 baseline --pid", &node, &script, dir.path());
}

/// Unstable's Node.js 24 (V8 13), run in its private root as a container's: named the same
/// way, judged the same way (`--pid`).
#[test]
fn plain_node_24_is_named_from_v8s_memory() {
    privileged_test!(paired, test);
    let Some(root) = crate::support::required(test, crate::support::sid_node(), crate::support::NO_NODE_ROOT) else {
        return;
    };
    let dir = tempfile::tempdir_in(root.join("tmp")).expect("tempdir in the root");
    let inside = Path::new("/tmp").join(dir.path().file_name().expect("name"));
    let mut command = Command::new("chroot");
    command.arg(&root).arg("/usr/bin/node");
    let (node, script) = warm_node_with(command, dir.path(), &inside);
    trace_node("node 24 --pid", &node, &script, dir.path());
}

/// Trace `node` (`what` says how: `--pid`, `-a`) once loaded, and judge its samples.
fn trace_node(what: &str, node: &Running, script: &str, dir: &Path) {
    let pid = node.pid().to_string();
    let scope = if what.ends_with("-a") {
        vec!["-a"]
    } else {
        vec!["--pid", pid.as_str()]
    };
    let out = dir.join("node.json");
    let out_arg = out.to_str().expect("utf-8 path");
    let mut args = scope;
    args.extend(["-F", "499", "-f", "json", "-o", out_arg]);
    args.extend(SUMMARY_JSON);
    let (stderr, loaded) = loaded_then_sampled(&args, node.pid(), "node loaded");
    let summary = Summary::of(&stderr);
    assert!(summary.count("v8.processes") >= 1, "{what}: no V8 was read:\n{stderr}");
    // Its own pid only: with -a, other programs on the host (other tests' nodes among them)
    // may well run Node.js without the flag.
    assert!(
        !stderr.contains(&format!("pid {pid} runs Node.js without")),
        "{what}: no advice to restart a node whose frames are named:\n{stderr}"
    );
    let json = std::fs::read_to_string(&out).expect("read the json output");
    judge(what, &json, node.pid(), script, loaded, &stderr);
}

/// The program written into `dir` and run by the host's plain `node`, once warm; and its path.
pub(super) fn warm_node(dir: &Path) -> (Running, String) {
    warm_node_with(Command::new("node"), dir, dir)
}

/// The program written into `dir` and run by `node` (a command to add the script to), which
/// sees `dir` as `inside`, once warm; and its path as node sees it.
fn warm_node_with(mut node: Command, dir: &Path, inside: &Path) -> (Running, String) {
    std::fs::write(dir.join("descend.js"), PROGRAM).expect("write descend.js");
    let script = inside.join("descend.js");
    let mut child = node.arg(&script).stdout(Stdio::piped()).spawn().expect("start node");
    let stdout = child.stdout.take().expect("stdout");
    let node = Running(child);
    let mut lines = std::io::BufReader::new(stdout).lines();
    assert_eq!(lines.next().and_then(Result::ok).as_deref(), Some("warm"));
    (node, script.to_str().expect("utf-8 path").to_owned())
}

/// The judgement of [`plain_node_is_named_from_v8s_memory`], on the samples taken once the
/// tracer had loaded node (`loaded`, seconds since the epoch): before, they are stack copies,
/// walked once it is, and the JavaScript frames of a copy are not named (their functions
/// are read by the kernel at the sample, and a function read later may have moved). Every
/// sample is held to the order of the program's frames.
pub(super) fn judge(what: &str, json: &str, pid: u32, script: &str, loaded: f64, stderr: &str) {
    let (mut in_js, mut named, mut whole, mut before) = (0usize, 0usize, 0usize, 0usize);
    let (mut program_frames, mut lined) = (0usize, 0usize);
    for sample in json_samples(json, pid) {
        let frames: Vec<serde_json::Value> = json_frames(&sample)
            .iter()
            .filter(|f| f["source"] != "kernel")
            .cloned()
            .collect();
        let js = |f: &serde_json::Value| f["object"] == "[javascript]";
        let Some(first) = frames.first() else { continue };
        if !(js(first) || first["object"].is_null()) {
            continue;
        }
        let counted = sample["time"].as_f64().is_some_and(|t| t > loaded);
        before += usize::from(!counted);
        in_js += usize::from(counted);
        // Every JavaScript frame of the program: its name, script and running line (if it
        // has one), and the line of each call.
        let mine_only: Vec<&serde_json::Value> = frames.iter().filter(|f| js(f) && f["file"] == script).collect();
        for (k, f) in mine_only.iter().enumerate() {
            let name = f["symbol"].as_str().unwrap_or_default();
            let lines = LINES.iter().find(|(n, _)| *n == name).map(|(_, l)| *l);
            let lines = lines.unwrap_or_else(|| panic!("{what}: a function the program has not: {f}"));
            assert_eq!(f["source"], "v8", "{what}: {f}");
            program_frames += 1;
            let Some(line) = f["line"].as_u64() else { continue };
            lined += 1;
            assert!(lines.contains(&line), "{what}: {name} at the wrong line: {f}");
            let callee = k.checked_sub(1).and_then(|i| mine_only[i]["symbol"].as_str());
            for (called, caller, at) in CALLS {
                if callee == Some(called) && name == caller {
                    assert_eq!(line, at, "{what}: {name} calls {called} on line {at}: {f}");
                }
            }
        }
        let names: Vec<&str> = frames
            .iter()
            .filter(|f| js(f))
            .map(|f| f["symbol"].as_str().unwrap_or_default())
            .collect();
        let mine = |n: &&str| LINES[..3].iter().any(|(l, _)| l == n);
        if counted && first["symbol"].as_str().is_some_and(|n| mine(&n)) && js(first) {
            named += 1;
        }
        // leaf (innermost only), then descend frames, then main, then none of the program's.
        let leaf = usize::from(names.first() == Some(&"leaf"));
        let descends = names[leaf..].iter().take_while(|n| **n == "descend").count();
        assert!(descends <= 13, "{what}: {descends} descend frames: {names:?}");
        let rest = &names[leaf + descends..];
        if leaf + descends > 0 || rest.first() == Some(&"main") {
            assert_eq!(rest.first(), Some(&"main"), "{what}: a wrong stack: {names:?}");
            assert!(!rest[1..].iter().any(mine), "{what}: a wrong stack: {names:?}");
        }
        if counted && sample["truncated"].is_null() && frames.last().is_some_and(|f| f["symbol"] == "_start") {
            whole += 1;
        }
    }
    eprintln!(
        "plain node ({what}): {in_js} samples in JavaScript once loaded ({before} before), {named} named, {whole} whole; \
         {lined} of {program_frames} frames of the program at their running line"
    );
    assert!(
        lined as f64 >= LINED * program_frames as f64,
        "{what}: {lined} of {program_frames} frames of the program have their line:\n{stderr}"
    );
    assert!(in_js >= ENOUGH, "{what}: only {in_js} samples in JavaScript:\n{stderr}");
    assert!(
        named as f64 >= NAMED * in_js as f64,
        "{what}: {named} of {in_js} named:\n{stderr}"
    );
    assert!(
        whole as f64 >= WHOLE * in_js as f64,
        "{what}: {whole} of {in_js} whole:\n{stderr}"
    );
}
