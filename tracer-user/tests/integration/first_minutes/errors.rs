//! Small errors of a first trial: each is one sentence, said once, naming what failed.

use std::process::{Command, Stdio};

use crate::support::{Running, SUMMARY_JSON, Summary, tracer_binary};

/// `sframe-trace ARGS`: status and stderr.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(tracer_binary())
        .args(args)
        .output()
        .expect("run sframe-trace");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A `sleep` the test owns, to give --pid.
fn sleeper() -> Running {
    Running(Command::new("sleep").arg("600").spawn().expect("start sleep"))
}

/// Regression (`-o /missing/dir/x` and `-e uprobe:/missing:f` printed the cause twice,
/// `...: No such file or directory (os error 2): No such file or directory (os error 2)`): one
/// line, the cause once, status 2.
#[test]
fn a_missing_file_is_said_once() {
    privileged_test!(shared);
    let target = sleeper();
    let pid = target.pid().to_string();
    for args in [
        vec!["-o", "/missing-dir-of-the-test/x", "--pid", &pid],
        vec!["-e", "uprobe:/missing-file-of-the-test:f", "--pid", &pid],
    ] {
        let (status, stderr) = run(&args);
        assert_eq!(status, Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line expected: {stderr}");
        assert_eq!(
            stderr.matches("No such file or directory").count(),
            1,
            "{args:?}: the cause once: {stderr}"
        );
        assert!(stderr.contains("/missing-"), "{args:?}: the path is named: {stderr}");
    }
}

/// Regression (`-d 1m` and `-d 500ms` were refused): a duration with a unit is accepted and
/// ends the session when it is over.
#[test]
fn durations_take_units() {
    privileged_test!(shared);
    let target = sleeper();
    let pid = target.pid().to_string();
    let (status, stderr) = run(&[
        &["-d", "500ms", "--pid", &pid, "-o", "/dev/null"][..],
        &SUMMARY_JSON[..],
    ]
    .concat());
    assert_eq!(status, Some(0), "{stderr}");
    let summary = Summary::of(&stderr);
    assert_eq!(summary.0["ended"], "the duration ended", "{stderr}");
    let seconds = summary.0["seconds"].as_f64().expect("seconds");
    assert!(seconds >= 0.5, "a 500 ms session lasted {seconds} s");
    for duration in ["1m", "30s", "30"] {
        // Refused for another reason, after the duration was taken.
        let (status, stderr) = run(&["-d", duration, "--pid", &pid, "--frequency", "0"]);
        assert_eq!(status, Some(2), "{duration}: {stderr}");
        assert!(stderr.contains("--frequency"), "-d {duration} was not taken: {stderr}");
    }
}

/// Regression (`--pid 1` as root, on a host whose pid 1 could not be read, blamed missing
/// privileges): root, with CAP_SYS_PTRACE, that is refused the mappings of a process (here an
/// unreadable file is mounted over its `/proc/PID/maps`, in a mount namespace of the test's
/// own, and the tracer runs without CAP_DAC_OVERRIDE) is told what refused it, not to get root.
#[test]
fn root_refused_a_process_is_told_what_refused_it() {
    privileged_test!(shared);
    let target = sleeper();
    let dir = tempfile::tempdir().expect("tempdir");
    let unreadable = dir.path().join("maps");
    std::fs::write(&unreadable, "").expect("create");
    std::fs::set_permissions(&unreadable, std::os::unix::fs::PermissionsExt::from_mode(0o000)).expect("chmod");
    std::os::unix::fs::chown(&unreadable, Some(65534), Some(65534)).expect("chown");
    let script = format!(
        "mount --bind {} /proc/{}/maps && exec setpriv --bounding-set=-dac_override,-dac_read_search \
         --inh-caps=-dac_override,-dac_read_search \"$@\"",
        unreadable.display(),
        target.pid()
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script, "sh"])
        .arg(tracer_binary())
        .args(["--pid", &target.pid().to_string(), "-d", "1", "-o", "/dev/null"])
        .stdout(Stdio::null())
        .output()
        .expect("run unshare");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one sentence expected: {stderr}");
    assert!(stderr.contains("permission denied reading /proc/"), "{stderr}");
    assert!(
        stderr.contains("although running as root with CAP_SYS_PTRACE"),
        "{stderr}"
    );
    assert!(!stderr.contains("sudo") && !stderr.contains("needs root"), "{stderr}");
}
