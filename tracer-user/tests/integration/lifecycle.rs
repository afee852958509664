//! The tracing session's life cycle as a user meets it: Ctrl-C and SIGTERM flush everything
//! collected, the session ends by itself when the traced processes exit, and bad targets or a
//! missing privilege get one clear sentence and status 2.

use std::{
    process::{Command, Output, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

use crate::support::{Running, build_workloads, privileged};

fn sframe_trace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sframe-trace"))
}

/// Start a tracer, wait until it samples, send it `signal`, and return what it printed.
fn interrupted(args: &[&str], signal: libc::c_int) -> Output {
    let child = sframe_trace()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    sleep(Duration::from_millis(2500));
    // SAFETY: kill(2) on our own, not yet reaped child.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    child.wait_with_output().expect("wait for the tracer")
}

/// Every folded line, as (stack, count).
fn stacks(out: &Output) -> Vec<(String, u64)> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            l.rsplit_once(' ')
                .and_then(|(s, n)| Some((s.to_owned(), n.parse().ok()?)))
        })
        .collect()
}

fn assert_flushed(out: &Output, why: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    assert!(stderr.contains(why), "the summary should say `{why}`: {stderr}");
    let stacks = stacks(out);
    let deep: u64 = stacks
        .iter()
        .filter(|(s, _)| s.contains(";recurse;recurse;"))
        .map(|(_, n)| n)
        .sum();
    assert!(
        deep >= 50,
        "expected the samples taken before the signal, got {deep}: {stacks:?}"
    );
}

/// SIGINT (Ctrl-C) stops a launched trace and still writes all stacks and the summary.
#[test]
fn sigint_flushes_the_stacks() {
    let Some(_serial) = privileged("sigint_flushes_the_stacks") else {
        return;
    };
    let dir = build_workloads(&["v1"]);
    let deep = dir.path().join("v1/deep");
    let out = interrupted(&["-F", "199", "--", deep.to_str().expect("path"), "20"], libc::SIGINT);
    assert_flushed(&out, "interrupted");
}

/// SIGTERM stops a `--pid` trace and still writes all stacks; the traced process keeps running.
#[test]
fn sigterm_flushes_the_stacks_and_spares_the_target() {
    let Some(_serial) = privileged("sigterm_flushes_the_stacks_and_spares_the_target") else {
        return;
    };
    let dir = build_workloads(&["v1"]);
    let target = Running(
        Command::new(dir.path().join("v1/deep"))
            .arg("20")
            .spawn()
            .expect("spawn"),
    );
    let pid = target.pid().to_string();
    let out = interrupted(&["-F", "199", "--pid", &pid], libc::SIGTERM);
    assert_flushed(&out, "terminated");
    assert!(
        std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "a --pid target must survive the tracer"
    );
}

/// A trace without --duration ends when the traced process exits.
#[test]
fn the_session_ends_when_the_target_exits() {
    let Some(_serial) = privileged("the_session_ends_when_the_target_exits") else {
        return;
    };
    let dir = build_workloads(&["v1"]);
    let started = Instant::now();
    let out = sframe_trace()
        .args([
            "-F",
            "199",
            "--",
            dir.path().join("v1/deep").to_str().expect("path"),
            "1",
        ])
        .output()
        .expect("run");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the tracer outlived its target"
    );
    assert_flushed(&out, "the traced processes exited");
}

/// Bad targets and bad flags are one sentence with status 2.
#[test]
fn bad_targets_are_one_clear_sentence() {
    let Some(_serial) = privileged("bad_targets_are_one_clear_sentence") else {
        return;
    };
    for (args, says) in [
        (&["--pid", "999999999"][..], "no process with pid 999999999"),
        (
            &["--all", "--", "true"][..],
            "give either --all or a command after --, not both",
        ),
        (
            &["--max-depth", "9999", "--pid", "1"][..],
            "--max-depth must be between 1 and 512",
        ),
        (
            &["--", "/nonexistent/program"][..],
            "cannot launch `/nonexistent/program`",
        ),
    ] {
        let out = sframe_trace().args(args).output().expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line expected: {stderr}");
    }
}
