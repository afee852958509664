//! An ssh session that drops (SIGHUP, with the terminal gone), SIGUSR1, and SIGPIPE from a
//! closed stderr end the session like SIGTERM: everything collected is written, the status is
//! 0, and no temporary file is left.

use super::{busy_nobody, folded_samples, temporaries_of, tracer, until_sampling, wait_bounded};
use crate::support::{SUMMARY_JSON, Summary, ticks_per_second, wait_for_cpu};

/// Regression (SIGHUP killed the tracer with status 129, an empty output and scratch files
/// left): SIGHUP and SIGPIPE with stderr closed (its reader gone, as after a dropped ssh
/// session), and SIGUSR1 with stderr open, each end a `--pid` session with its output whole.
#[test]
fn hangup_usr1_and_pipe_end_the_session_with_everything_written() {
    privileged_test!();
    let target = busy_nobody();
    let pid = target.pid().to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.folded");
    for (signal, name, close_stderr) in [
        (libc::SIGHUP, "SIGHUP", true),
        (libc::SIGPIPE, "SIGPIPE", true),
        (libc::SIGUSR1, "SIGUSR1", false),
    ] {
        let _ = std::fs::remove_file(&out);
        let (mut child, stderr, _) = until_sampling(tracer(&[
            "--pid".as_ref(),
            pid.as_ref(),
            "-F".as_ref(),
            "499".as_ref(),
            "-o".as_ref(),
            out.as_os_str(),
            SUMMARY_JSON[0].as_ref(),
            SUMMARY_JSON[1].as_ref(),
        ]));
        // Half a second of the target's CPU: samples to lose, however busy the host.
        wait_for_cpu(target.pid(), ticks_per_second() / 2);
        let stderr = if close_stderr {
            drop(stderr);
            None
        } else {
            Some(stderr)
        };
        // Our own child, not reaped yet.
        let _ = sframe_trace::sys::process::kill(child.pid() as libc::pid_t, signal);
        let status = wait_bounded(&mut child.0);
        assert!(status.success(), "{name}: {status}");
        let written = folded_samples(&out);
        assert!(written > 0, "{name}: the samples before the signal were lost");
        assert!(temporaries_of(&out).is_empty(), "{name}: a temporary file was left");
        if let Some(stderr) = stderr {
            let stderr = std::io::read_to_string(stderr).unwrap_or_default();
            let summary = Summary::of(&stderr);
            assert_eq!(summary.0["ended"], "SIGUSR1", "{name}: {stderr}");
            assert_eq!(summary.count("samples"), written, "{name}: every sample written");
        }
    }
}
