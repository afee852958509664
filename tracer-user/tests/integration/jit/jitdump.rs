//! A jitdump makes JIT code without frame pointers unwind exactly: fixtures/jit/jit.c copies a
//! function that pushes and moves the stack pointer but keeps no frame pointer into anonymous
//! memory and calls C through it (`main -> run -> jit_outer -> spin`), writing a jitdump with
//! the function's code-load and unwinding-info records. Every stack through `jit_outer` must be
//! the real chain, `jit_outer` named from the dump (`source` `jitdump`). The same program
//! without its jitdump is the control: its stacks through that code cannot be walked (no
//! frame pointer to follow), which is what the dump's unwind information fixes. And code the
//! program compiles later into the same region (`jit_later`, its records appended to the
//! dump) gets its name and rows from the dump while the program runs: nothing else makes the
//! tracer read the mappings again.

use super::{
    hostile::{build_jit, start_jit},
    user_stacks,
};
use crate::support::{SUMMARY_JSON, Summary, Tracer, tracer_binary};

/// How many of `stacks` go through the JIT function `name` and are exact (named from the
/// dump, `spin` or nothing above it, `run`, `main`, two libc frames and `_start` below), and
/// how many end early. Each is checked: a stack may be short (code compiled since the dump
/// was read, until it is read again), never wrong.
pub(crate) fn exact_through(stacks: &[super::Frames], name: &str) -> (usize, usize) {
    let (mut exact, mut short) = (0, 0);
    for stack in stacks {
        let names: Vec<&str> = stack.iter().map(|f| f.0.as_deref().unwrap_or("?")).collect();
        let Some(at) = names.iter().position(|&n| n == name) else {
            continue;
        };
        assert_eq!(stack[at].1.as_deref(), Some("[jitdump]"), "{names:?}");
        assert_eq!(stack[at].2, "jitdump", "{names:?}");
        assert!(at == 0 || (at == 1 && names[0] == "spin"), "above {name}: {names:?}");
        // Below it: `run`, `main`, two libc frames (any names), `_start`; or the first of them.
        let below = &names[at + 1..];
        assert!(
            below.len() <= 5,
            "{name}, run, main, two libc frames, _start: {names:?}"
        );
        for (i, want) in ["run", "main"].iter().enumerate() {
            assert!(below.get(i).is_none_or(|n| n == want), "below {name}: {names:?}");
        }
        if below.len() == 5 {
            assert_eq!(below[4], "_start", "{names:?}");
            exact += 1;
        } else {
            short += 1;
        }
    }
    (exact, short)
}

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
    privileged_test!(paired);
    let dir = tempfile::tempdir().expect("tempdir");
    let program = build_jit(dir.path());

    let (process, _) = start_jit(&program, dir.path(), "30", true);
    let pid = process.pid();
    let (json, summary, stderr) = trace(dir.path(), pid, "dump.json");
    drop(process);
    assert_eq!(summary.count("jitdump.read"), 1, "{stderr}");
    assert_eq!(summary.count("jitdump.regions"), 1, "{stderr}");
    let stacks = user_stacks(&json, pid);
    let (through, short) = exact_through(&stacks, "jit_outer");
    eprintln!(
        "jitdump: {through} of {} samples through jit_outer exact, none wrong",
        stacks.len()
    );
    assert!(through >= 50, "only {through} samples through the JIT code");
    assert_eq!(
        short, 0,
        "the dump was read before sampling: every stack through it is whole"
    );

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

#[test]
fn code_compiled_later_into_a_known_region_is_named_and_unwound() {
    privileged_test!(paired);
    let dir = tempfile::tempdir().expect("tempdir");
    let program = build_jit(dir.path());
    let out = dir.path().join("later.json");
    let traced = std::process::Command::new(tracer_binary())
        .args(["-F", "499", "-f", "json", "-o", out.to_str().expect("utf-8")])
        .args(SUMMARY_JSON)
        .arg("--")
        .arg(&program)
        .args(["4", "dump", "later"])
        .current_dir(dir.path())
        .output()
        .expect("run sframe-trace");
    let stderr = String::from_utf8_lossy(&traced.stderr).into_owned();
    assert!(traced.status.success(), "sframe-trace failed: {stderr}");
    let stdout = String::from_utf8_lossy(&traced.stdout);
    assert!(stdout.starts_with("ready "), "the JIT program said {stdout:?}");
    let pid = super::launched_pid(&stderr);
    let summary = Summary::of(&stderr);
    assert!(summary.count("jitdump.rereads") >= 1, "{stderr}");
    let json = std::fs::read_to_string(&out).expect("read the json output");
    let stacks = user_stacks(&json, pid);
    let (first, _) = exact_through(&stacks, "jit_outer");
    let (later, short) = exact_through(&stacks, "jit_later");
    eprintln!(
        "jitdump: {first} samples through jit_outer, {later} through jit_later exact ({short} short), none wrong"
    );
    assert!(first >= 30, "only {first} samples through jit_outer\n{stderr}");
    assert!(later >= 30, "only {later} samples through jit_later\n{stderr}");
}
