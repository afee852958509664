//! Hostile neighbours for the tests that trace the whole host: programs an unprivileged user
//! runs beside the tracer to load it (issue 29's attacks), started as nobody in a sticky
//! directory of their own, killed when dropped. A test that judges its own processes with
//! these beside it shows that one user's programs do not blind the tracer to everybody else.

use std::{
    io::{BufRead as _, BufReader},
    os::unix::fs::PermissionsExt as _,
    path::Path,
    process::{Command, Stdio},
};

use super::{Running, SFRAME_CFLAGS, gcc};

/// The neighbours, alive as long as this is.
pub struct Neighbours {
    _running: Vec<Running>,
    _dir: tempfile::TempDir,
}

/// Start, as nobody: a shell loop keeping a CPU busy, and fixtures/jit/jit.c writing a jitdump
/// filled to 32 MiB that grows by a record every 100 ms (the attack that once stalled sessions
/// for minutes). Returns once the jitdump is written.
pub fn start() -> Neighbours {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).expect("chmod 1777");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/jit/jit.c");
    let program = gcc(&src, &dir.path().join("grower"), &SFRAME_CFLAGS);
    let nobody = |program: &str| {
        let mut command = Command::new("setpriv");
        command.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", program]);
        command
    };
    let burner = nobody("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .expect("start a busy shell as nobody");
    let burner = Running(burner);
    let mut grower = nobody(program.to_str().expect("utf-8 path"))
        .args(["600", "grow", "32"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the growing jitdump as nobody");
    let stdout = grower.stdout.take().expect("stdout");
    let grower = Running(grower);
    let line = BufReader::new(stdout)
        .lines()
        .next()
        .and_then(Result::ok)
        .unwrap_or_default();
    assert!(line.starts_with("ready "), "the growing jitdump said {line:?}");
    Neighbours {
        _running: vec![burner, grower],
        _dir: dir,
    }
}
