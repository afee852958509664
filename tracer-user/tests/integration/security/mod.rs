//! A root tracer beside users it must not trust: each attack a local user can make on it, made
//! as that user (`setpriv` to nobody, in a sticky world-writable directory like `/tmp`), and the
//! proof that it fails: the host untouched, the tracer done in bounded time, its outputs whole
//! and private. Privileged, like every tracing test.

mod cli;
mod debuginfo;
mod jit;
mod names;
mod outputs;
mod python;
mod signals;
mod symbolize;
mod tables;

use std::{
    io::{BufRead as _, BufReader},
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

use crate::support::{Running, tracer_binary};

/// How long any tracer run here may take, at most, on a busy machine.
const LIMIT: Duration = Duration::from_secs(120);

/// The temporary files of the output `path` (`.NAME.*.tmp` beside it).
pub fn temporaries_of(path: &Path) -> Vec<PathBuf> {
    let name = path.file_name().expect("a file name").to_string_lossy().into_owned();
    let dir = path.parent().expect("a directory");
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    let n = p
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    n.starts_with(&format!(".{name}.")) && n.ends_with(".tmp")
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A fresh directory everyone may write to, sticky (mode 1777), like `/tmp`.
fn sticky_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).expect("chmod 1777");
    dir
}

/// `COMMAND ARGS...` run as nobody (no groups, no capabilities).
fn as_nobody(args: &[&std::ffi::OsStr]) -> Command {
    let mut command = Command::new("setpriv");
    command.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]);
    command.args(args);
    command
}

/// Run `command` as nobody and require success.
fn nobody_does(args: &[&std::ffi::OsStr]) {
    let status = as_nobody(args).status().expect("run setpriv");
    assert!(status.success(), "{args:?} as nobody: {status}");
}

/// A process of nobody's that keeps a CPU busy (a shell loop), killed at the end of the test.
fn busy_nobody() -> Running {
    Running(
        as_nobody(&["sh".as_ref(), "-c".as_ref(), "while :; do :; done".as_ref()])
            .spawn()
            .expect("spawn a busy shell"),
    )
}

/// A finished tracer run: its status, stderr and how long it took.
struct Ran {
    status: ExitStatus,
    stderr: String,
    elapsed: Duration,
}

/// Run `sframe-trace ARGS` to its end (killed after [`LIMIT`]).
fn trace(args: &[&std::ffi::OsStr]) -> Ran {
    let started = Instant::now();
    let mut child = Command::new(tracer_binary())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sframe-trace");
    let stderr = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let status = wait_bounded(&mut child);
    Ran {
        status,
        stderr: reader.join().expect("stderr reader"),
        elapsed: started.elapsed(),
    }
}

/// Wait for `child`, killing it (and failing) after [`LIMIT`].
fn wait_bounded(child: &mut Child) -> ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sframe-trace still ran after {LIMIT:?}");
        }
        sleep(Duration::from_millis(20));
    }
}

/// `sframe-trace ARGS`, to be started.
fn tracer(args: &[&std::ffi::OsStr]) -> Command {
    let mut command = Command::new(tracer_binary());
    command.args(args);
    command
}

/// Start `command` (a tracer) with stderr piped and read it until the tracer samples; the
/// child, the stderr reader (to keep or to drop, closing the pipe) and what it said so far.
fn until_sampling(mut command: Command) -> (Running, BufReader<std::process::ChildStderr>, String) {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sframe-trace");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let child = Running(child);
    let mut said = String::new();
    loop {
        let mut line = String::new();
        let n = stderr.read_line(&mut line).expect("read stderr");
        said.push_str(&line);
        assert!(n > 0, "sframe-trace ended before sampling: {said}");
        if line.contains(": sampling ") {
            return (child, stderr, said);
        }
    }
}

/// The folded stacks of a complete output file: every line whole, its count parsed; the sum.
fn folded_samples(path: &Path) -> u64 {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "{} ends mid-line",
        path.display()
    );
    text.lines()
        .map(|line| {
            line.rsplit_once(' ')
                .and_then(|(_, n)| n.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("not a folded line: {line:?}"))
        })
        .sum()
}

/// The file's permission bits.
fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("metadata").permissions().mode() & 0o7777
}

/// What stderr says, without log lines.
fn said(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| !l.contains(" WARN ")).collect()
}
