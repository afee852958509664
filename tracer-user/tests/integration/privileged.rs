//! Privileged tests: load the real eBPF program and sample real processes. They need root;
//! under `CI=true` they fail instead of skipping, elsewhere they skip with a loud message.

use std::process::{Command, Stdio};

use crate::support::{Running, privileged};

fn sframe_trace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sframe-trace"))
}

/// A busy shell loop, killed when the test ends.
fn busy_loop() -> Running {
    let child = Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn a busy shell");
    Running(child)
}

fn counter(output: &str, name: &str) -> u64 {
    output
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `{name}` counter in:\n{output}"))
}

/// The embedded program loads, attaches to cpu-clock and counts samples of exactly the target pid.
#[test]
fn doctor_samples_only_the_target_process() {
    let Some(_serial) = privileged("doctor_samples_only_the_target_process") else {
        return;
    };
    let busy = busy_loop();
    let _other = busy_loop();
    let out = sframe_trace()
        .args([
            "doctor",
            "--pid",
            &busy.pid().to_string(),
            "-F",
            "499",
            "--duration",
            "1",
        ])
        .output()
        .expect("run sframe-trace doctor");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "doctor failed: {}{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sampled = counter(&stdout, "sampled");
    let not_traced = counter(&stdout, "not_traced");
    // One busy thread at 499 Hz for 1 s is ~499 samples when it has a CPU to itself; the other
    // tests of the suite may take some of its time, hence the low floor. Never more than the
    // CPU time it can have had, and the other busy process is filtered out.
    assert!(
        (50..=700).contains(&sampled),
        "sampled {sampled} of the target, expected about 499"
    );
    assert!(
        not_traced >= 50,
        "the other busy process should be counted as not traced: {not_traced}"
    );
}

/// Without root, tracing and the doctor say in one sentence what is missing, with status 2.
#[test]
fn refuses_clearly_without_root() {
    let Some(_serial) = privileged("refuses_clearly_without_root") else {
        return;
    };
    for args in [&["doctor"][..], &["--pid", "1"][..]] {
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_sframe-trace"))
            .args(args)
            .output()
            .expect("run setpriv");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("needs root"), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one sentence expected: {stderr}");
    }
}
