//! A jitdump makes JIT code without frame pointers unwind exactly: fixtures/jit/jit.c copies a
//! function that pushes and moves the stack pointer but keeps no frame pointer into anonymous
//! memory and calls C through it (`main -> run -> jit_outer -> spin`), writing a jitdump with
//! the function's code-load and unwinding-info records. Every stack through `jit_outer` must be
//! the real chain, `jit_outer` named from the dump (`source` `jitdump`). The same program
//! without its jitdump is the control: its stacks through that code cannot be walked (no
//! frame pointer to follow), which is what the dump's unwind information fixes.

use super::{
    hostile::{build_jit, start_jit},
    user_stacks,
};
use crate::support::{SUMMARY_JSON, Summary, Tracer, privileged};

/// Trace `pid` for 2 seconds: the json output and the summary.
fn trace(dir: &std::path::Path, pid: u32, name: &str) -> (String, Summary, String) {
    let out = dir.join(name);
    let pid = pid.to_string();
    let mut args = vec![
        "--pid",
        &pid,
        "-d",
        "2",
        "-F",
        "499",
        "-f",
        "json",
        "-o",
        out.to_str().expect("utf-8"),
    ];
    args.extend(SUMMARY_JSON);
    let stderr = Tracer::start(&args).finish();
    let json = std::fs::read_to_string(&out).expect("read the json output");
    (json, Summary::of(&stderr), stderr)
}

#[test]
fn jitdump_unwinds_jit_code_without_frame_pointers_exactly() {
    let Some(_turn) = privileged("jitdump_unwinds_jit_code_without_frame_pointers_exactly") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let program = build_jit(dir.path());

    let (process, _) = start_jit(&program, dir.path(), "30", true);
    let pid = process.pid();
    let (json, summary, stderr) = trace(dir.path(), pid, "dump.json");
    drop(process);
    assert_eq!(summary.count("jitdump.read"), 1, "{stderr}");
    assert_eq!(summary.count("jitdump.regions"), 1, "{stderr}");
    let stacks = user_stacks(&json, pid);
    let mut through = 0;
    for stack in &stacks {
        let names: Vec<&str> = stack.iter().map(|f| f.0.as_deref().unwrap_or("?")).collect();
        let Some(at) = names.iter().position(|&n| n == "jit_outer") else {
            continue;
        };
        through += 1;
        assert_eq!(stack[at].1.as_deref(), Some("[jitdump]"), "{names:?}");
        assert_eq!(stack[at].2, "jitdump", "{names:?}");
        assert!(at == 0 || (at == 1 && names[0] == "spin"), "above jit_outer: {names:?}");
        assert_eq!(&names[at + 1..at + 3], ["run", "main"], "below jit_outer: {names:?}");
        assert_eq!(names.last(), Some(&"_start"), "{names:?}");
        assert_eq!(
            names.len() - at,
            6,
            "jit_outer, run, main, two libc frames, _start: {names:?}"
        );
    }
    eprintln!(
        "jitdump: {through} of {} samples through jit_outer, all exact",
        stacks.len()
    );
    assert!(through >= 50, "only {through} samples through the JIT code");

    // The control: no jitdump, no way through the JIT code.
    let (process, _) = start_jit(&program, dir.path(), "30", false);
    let pid = process.pid();
    let (json, summary, stderr) = trace(dir.path(), pid, "control.json");
    drop(process);
    assert_eq!(summary.count("jitdump.read"), 0, "{stderr}");
    let reached = user_stacks(&json, pid)
        .iter()
        .filter(|s| s.last().and_then(|f| f.0.as_deref()) == Some("_start"))
        .count();
    assert!(
        reached * 10 < user_stacks(&json, pid).len(),
        "without its jitdump the JIT frame was walked through: {reached} stacks reach _start"
    );
}
