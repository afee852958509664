//! Outputs a user can open: under sudo, the files are the invoking user's.

use std::{os::unix::fs::MetadataExt as _, process::Command};

use crate::support::{Running, tracer_binary};

/// Issue 31 (under `sudo`, the flame graph was root's, mode 0600: the user could not open
/// it): with `SUDO_UID`/`SUDO_GID`, the outputs and the summary file belong to that user,
/// mode 0600 (or `--output-mode`); with a malformed `SUDO_UID` they stay root's, and it is said.
#[test]
fn outputs_belong_to_the_sudo_user() {
    privileged_test!(shared);
    let target = Running(Command::new("sleep").arg("600").spawn().expect("start sleep"));
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |uid: &str, extra: &[&str]| {
        let (folded, svg, summary) = (
            dir.path().join("s.folded"),
            dir.path().join("s.svg"),
            dir.path().join("s.json"),
        );
        let out = Command::new(tracer_binary())
            .env("SUDO_UID", uid)
            .env("SUDO_GID", "65533")
            .args(["--pid", &target.pid().to_string(), "-d", "300ms"])
            .args(["-f", "folded", "-o"])
            .arg(&folded)
            .args(["-f", "svg", "-o"])
            .arg(&svg)
            .arg("--summary-output")
            .arg(&summary)
            .args(extra)
            .output()
            .expect("run sframe-trace");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        let meta = [&folded, &svg, &summary].map(|p| std::fs::metadata(p).unwrap_or_else(|e| panic!("{p:?}: {e}")));
        (meta.map(|m| (m.uid(), m.gid(), m.mode() & 0o7777)), stderr)
    };
    let (owners, _) = run("65534", &[]);
    assert_eq!(owners, [(65534, 65533, 0o600); 3]);
    let (owners, _) = run("65534", &["--output-mode", "644"]);
    assert_eq!(owners, [(65534, 65533, 0o644); 3]);
    let (owners, stderr) = run("-1", &[]);
    assert_eq!(owners, [(0, 0, 0o600); 3]);
    assert!(stderr.contains("SUDO_UID is `-1`"), "{stderr}");
}
