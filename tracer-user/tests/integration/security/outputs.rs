//! `-o`: a link, FIFO or directory another user put at the output path is refused before
//! tracing, without blocking and without touching what a link points to; outputs are 0600
//! whatever the umask, replace an old file only once complete, and fail one at a time.

use std::process::Command;

use super::{
    busy_nobody, folded_samples, mode, nobody_does, said, sticky_dir, temporaries_of, trace, until_sampling,
    wait_bounded,
};
use crate::support::{SUMMARY_JSON, Summary};

/// Regression (root clobbered a file through a user's symlink at `-o`, and blocked forever on a
/// user's FIFO there): nobody pre-creates a symlink to a root-only file, a FIFO and a directory
/// at output paths in a sticky directory; each is refused in one sentence with status 2, at
/// once, the link's target unchanged and nothing created.
#[test]
fn links_fifos_and_directories_at_the_output_are_refused() {
    privileged_test!();
    let private = tempfile::tempdir().expect("tempdir");
    let precious = private.path().join("precious");
    std::fs::write(&precious, "root's own\n").expect("write");
    let shared = sticky_dir();
    let link = shared.path().join("out.folded");
    let fifo = shared.path().join("out.json");
    let dir = shared.path().join("out.svg");
    nobody_does(&["ln".as_ref(), "-s".as_ref(), precious.as_os_str(), link.as_os_str()]);
    nobody_does(&["mkfifo".as_ref(), fifo.as_os_str()]);
    nobody_does(&["mkdir".as_ref(), dir.as_os_str()]);
    let target = busy_nobody();
    let pid = target.pid().to_string();
    for (path, format, what) in [
        (&link, "folded", "a symbolic link"),
        (&fifo, "json", "a FIFO"),
        (&dir, "svg", "a directory"),
    ] {
        let ran = trace(&[
            "--pid".as_ref(),
            pid.as_ref(),
            "-d".as_ref(),
            "5".as_ref(),
            "-f".as_ref(),
            format.as_ref(),
            "-o".as_ref(),
            path.as_os_str(),
        ]);
        assert_eq!(ran.status.code(), Some(2), "{what}: {}", ran.stderr);
        let said = said(&ran.stderr);
        assert_eq!(said.len(), 1, "{what}: one sentence: {}", ran.stderr);
        assert!(
            said[0].contains("refusing to write") && said[0].contains(what),
            "{what}: {}",
            ran.stderr
        );
        assert!(
            ran.elapsed.as_secs() < 5,
            "{what}: refused before tracing, not after {:?}",
            ran.elapsed
        );
    }
    assert_eq!(std::fs::read_to_string(&precious).expect("read"), "root's own\n");
    assert_eq!(
        std::fs::read_dir(shared.path()).expect("list").count(),
        3,
        "nothing created beside them"
    );
}

/// Regression (`--pid 99999 -o old.folded` lost `old.folded`; outputs were 0644): a session
/// that fails keeps the old file and leaves no temporary; one that succeeds replaces it only at
/// the end (while it traces, the old file is still whole), with 0600 files even under umask 0.
#[test]
fn outputs_are_private_and_replace_an_old_file_only_when_complete() {
    privileged_test!(paired);
    let dir = tempfile::tempdir().expect("tempdir");
    let old = dir.path().join("old.folded");
    let json = dir.path().join("new.json");
    std::fs::write(&old, "old;stack 1\n").expect("write");
    let failed = trace(&["--pid".as_ref(), "999999999".as_ref(), "-o".as_ref(), old.as_os_str()]);
    assert_eq!(failed.status.code(), Some(2), "{}", failed.stderr);
    assert!(
        failed.stderr.contains("no process with pid 999999999"),
        "{}",
        failed.stderr
    );
    assert_eq!(std::fs::read_to_string(&old).expect("read"), "old;stack 1\n");
    assert!(temporaries_of(&old).is_empty(), "a temporary file was left");

    let target = busy_nobody();
    let pid = target.pid().to_string();
    let tracer = crate::support::tracer_binary();
    let script = format!(
        "umask 0; exec {} --pid {pid} -F 199 -d 3 --summary-format json -f folded -o {} -f json -o {}",
        tracer.display(),
        old.display(),
        json.display()
    );
    let mut shell = Command::new("sh");
    shell.args(["-c", &script]);
    let (mut child, stderr, _) = until_sampling(shell);
    assert_eq!(
        std::fs::read_to_string(&old).expect("read"),
        "old;stack 1\n",
        "the old output is replaced only when the new one is complete"
    );
    let temporaries = temporaries_of(&old);
    assert_eq!(temporaries.len(), 1, "the new output is written beside it");
    assert_eq!(mode(&temporaries[0]), 0o600);
    let status = wait_bounded(&mut child.0);
    let stderr = std::io::read_to_string(stderr).unwrap_or_default();
    assert!(status.success(), "{status}: {stderr}");
    let samples = Summary::of(&stderr).count("samples");
    assert!(samples > 0, "{stderr}");
    assert_eq!(folded_samples(&old), samples, "the new output, whole");
    assert_eq!(
        std::fs::read_to_string(&json).expect("read").lines().count() as u64,
        samples
    );
    for path in [&old, &json] {
        assert_eq!(mode(path), 0o600, "{}", path.display());
        assert!(
            temporaries_of(path).is_empty(),
            "{}: a temporary file was left",
            path.display()
        );
    }
}

/// Regression (`-f folded -o good -f json -o /dev/full` left `good` empty and printed no
/// summary): the failing output is named in the summary, the other is written whole, status 2.
#[test]
fn a_failing_output_fails_alone() {
    privileged_test!(paired);
    let dir = tempfile::tempdir().expect("tempdir");
    let good = dir.path().join("good");
    let target = busy_nobody();
    let pid = target.pid().to_string();
    let ran = trace(&[
        "--pid".as_ref(),
        pid.as_ref(),
        "-F".as_ref(),
        "199".as_ref(),
        "-d".as_ref(),
        "2".as_ref(),
        "-f".as_ref(),
        "folded".as_ref(),
        "-o".as_ref(),
        good.as_os_str(),
        "-f".as_ref(),
        "json".as_ref(),
        "-o".as_ref(),
        "/dev/full".as_ref(),
        SUMMARY_JSON[0].as_ref(),
        SUMMARY_JSON[1].as_ref(),
    ]);
    assert_eq!(ran.status.code(), Some(2), "{}", ran.stderr);
    let summary = Summary::of(&ran.stderr);
    let samples = summary.count("samples");
    assert!(samples > 0, "{}", ran.stderr);
    assert_eq!(folded_samples(&good), samples, "the good output, whole");
    let failed: Vec<&str> = summary.0["failed_outputs"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    assert!(
        matches!(failed[..], [only] if only.starts_with("/dev/full: ") && only.contains("No space left on device")),
        "the failed output is named, alone: {}",
        ran.stderr
    );
    assert_eq!(mode(&good), 0o600);
}
