//! Hostile perf maps, each beside a process running JIT code (fixtures/jit/jit.c): a symlink
//! to a host file, a FIFO (opening it would block), a map owned by another user, one larger
//! than the tracer reads, and one full of malformed and overlong lines around a good one. The
//! tracer must refuse the first four and count them by name, skip and count the bad lines of
//! the last and use its good line, and finish normally.

use std::{
    io::BufRead as _,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use super::user_stacks;
use crate::support::{Running, SFRAME_CFLAGS, SUMMARY_JSON, Summary, Tracer, gcc};

/// A perf map the test placed, removed afterwards whatever it is.
pub(crate) struct Placed(pub(crate) PathBuf);

impl Drop for Placed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Build fixtures/jit/jit.c into `dir`.
pub(crate) fn build_jit(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/jit/jit.c");
    gcc(&src, &dir.join("jit"), &SFRAME_CFLAGS)
}

/// Start the JIT program for `seconds` in `dir` (`dump`: writing its jitdump there): the
/// process and the address of its JIT function, once it is ready.
pub(super) fn start_jit(program: &Path, dir: &Path, seconds: &str, dump: bool) -> (Running, u64) {
    let mut command = Command::new(program);
    command.arg(seconds).current_dir(dir);
    if dump {
        command.arg("dump");
    }
    ready(command)
}

/// `command` (the JIT program) started with its stdout piped, once it printed `ready ADDRESS`:
/// the process and the address of its JIT function.
pub(crate) fn ready(mut command: Command) -> (Running, u64) {
    let mut child = command.stdout(Stdio::piped()).spawn().expect("start the JIT program");
    let stdout = child.stdout.take().expect("stdout");
    let running = Running(child);
    let line = std::io::BufReader::new(stdout)
        .lines()
        .next()
        .and_then(Result::ok)
        .unwrap_or_default();
    let addr = line
        .strip_prefix("ready 0x")
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .unwrap_or_else(|| panic!("the JIT program said {line:?}"));
    (running, addr)
}

#[test]
fn hostile_perf_maps_are_refused_and_counted() {
    privileged_test!();
    let dir = tempfile::tempdir().expect("tempdir");
    let program = build_jit(dir.path());
    let mut running = Vec::new();
    let mut placed = Vec::new();
    let mut place = |what: &str| {
        let (process, addr) = start_jit(&program, dir.path(), "30", false);
        let path = PathBuf::from(format!("/tmp/perf-{}.map", process.pid()));
        let _ = std::fs::remove_file(&path);
        placed.push(Placed(path.clone()));
        match what {
            "symlink" => std::os::unix::fs::symlink("/etc/passwd", &path).expect("symlink"),
            "fifo" => {
                let c = std::ffi::CString::new(path.to_str().expect("utf-8")).expect("path");
                sframe_trace::sys::fs::mkfifo(&c, 0o644).expect("mkfifo");
            }
            "other_owner" => {
                std::fs::write(&path, format!("{addr:x} 13 other_owners_name\n")).expect("write");
                std::os::unix::fs::chown(&path, Some(65534), Some(65534)).expect("chown");
            }
            "huge" => {
                let file = std::fs::File::create(&path).expect("create");
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
                file.set_len(1 << 30).expect("a sparse GiB");
            }
            _ => {
                let overlong = "f".repeat(100_000);
                let text = format!(
                    "nonsense\n0x 10 empty_hex\n{addr:x} 0 empty_range\n{addr:x} 13 {overlong}\n\
                     ffffffffffffffff 10 wraps\n{addr:x}\n{addr:x} 13 hostile_named_outer\n"
                );
                std::fs::write(&path, text).expect("write");
            }
        }
        running.push(process);
    };
    for what in ["symlink", "fifo", "other_owner", "huge", "malformed"] {
        place(what);
    }
    let pids: Vec<String> = running.iter().map(|p| p.pid().to_string()).collect();
    let pids = pids.join(",");
    let out = dir.path().join("out.json");
    let mut args = vec![
        "--pid",
        &pids,
        "-d",
        "2",
        "-F",
        "199",
        "-f",
        "json",
        "-o",
        out.to_str().expect("utf-8"),
    ];
    args.extend(SUMMARY_JSON);
    let stderr = Tracer::start(&args).finish();
    let summary = Summary::of(&stderr);
    assert_eq!(summary.count("jit.refused_by_reason.not_regular"), 2, "{stderr}");
    assert_eq!(summary.count("jit.refused_by_reason.other_owner"), 1, "{stderr}");
    assert_eq!(summary.count("jit.refused_by_reason.too_large"), 1, "{stderr}");
    assert_eq!(summary.count("jit.malformed_lines"), 6, "{stderr}");
    assert_eq!(
        summary.count("jit.perf_maps"),
        1,
        "only the malformed one is read: {stderr}"
    );
    let json = std::fs::read_to_string(&out).expect("read the json output");
    for (i, process) in running.iter().enumerate() {
        let names: Vec<String> = user_stacks(&json, process.pid())
            .into_iter()
            .flatten()
            .filter(|f| f.1.as_deref() == Some("[jit]"))
            .filter_map(|f| f.0)
            .collect();
        if i == 4 {
            assert!(
                !names.is_empty() && names.iter().all(|n| n == "hostile_named_outer"),
                "the good line names the JIT code: {names:?}"
            );
        } else {
            assert!(names.is_empty(), "a refused map named frames: {names:?}");
        }
    }
    drop(placed);
}
