//! Debian trixie's `python3.13`, run chrooted into the private root `cargo xtask setup`
//! unpacks: its interpreter is recognised (`python::detect_file`), and a session with `--pid`
//! registers the chrooted process (its `/proc/PID/root` is the private root, its interpreter and
//! glibc are the root's, not this machine's), so the kernel walks its Python frames and the
//! native frames are named from the root's interpreter. The session needs root; under
//! `CI=true` a missing root or privilege fails instead of skipping.

use std::process::Stdio;

use sframe_trace::python::detect_file;

use crate::support::{
    NO_ROOT, Running, SUMMARY_JSON, Summary, TRIXIE_PYTHON, Tracer, in_root, json_frames, json_samples, required,
    trixie_python, trixie_python_root,
};

/// A recursive fib, forever (the test kills it).
const FIB: &str = "\
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
def outer():
    while True:
        fib(16)
outer()
";

/// The root's interpreter is a 3.13 the tracer can walk: its runtime and evaluation loop found.
#[test]
fn trixie_python_is_detected() {
    let Some(root) = required("trixie_python_is_detected", trixie_python_root(), NO_ROOT) else {
        return;
    };
    let path = in_root(&root, TRIXIE_PYTHON);
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let image = detect_file(&file)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .unwrap_or_else(|| panic!("{} is not recognised as an interpreter", path.display()));
    assert_eq!((image.major, image.minor), (3, 13), "{}", path.display());
    assert_ne!(image.runtime, 0);
    assert!(image.eval.0 < image.eval.1, "evaluation loop {:x?}", image.eval);
}

/// Traced with `--pid`, the chrooted interpreter's samples are nearly all walked, several
/// Python frames deep, and their native frames are named from the root's `python3.13`
/// (`Py_RunMain`, below the evaluation loop) and the root's glibc (`__libc_start_main`). A chroot
/// keeps this machine's mounts, so `/proc/PID/maps` names the files by their path from this
/// machine's root (inside the private root).
#[test]
fn trixie_python_is_walked_through_its_root() {
    privileged_test!(paired, test);
    let Some(mut python) = required(test, trixie_python(), NO_ROOT) else {
        return;
    };
    let root = trixie_python_root().expect("the root of the command");
    let child = python
        .args(["-c", FIB])
        .stdout(Stdio::null())
        .spawn()
        .expect("start chroot ROOT python3.13");
    let mut running = Running(child);
    running.wait_working(&in_root(&root, TRIXIE_PYTHON));
    let pid = running.pid().to_string();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("stacks.json");
    let out_arg = out.to_str().expect("a UTF-8 path");
    let mut args = vec!["--pid", pid.as_str(), "-d", "5", "-f", "json", "-o", out_arg];
    args.extend(SUMMARY_JSON);
    let summary = Summary::of(&Tracer::start(&args).finish());
    let (samples, walks, frames) = (
        summary.count("samples"),
        summary.count("python.walks"),
        summary.count("python.frames"),
    );
    assert!(samples >= 10, "too few samples to judge: {}", summary.0);
    assert!(
        walks * 100 >= samples * 90,
        "walks {walks} of {samples} samples: {}",
        summary.0
    );
    assert!(frames >= walks * 3, "frames {frames} for {walks} walks: {}", summary.0);
    let text = std::fs::read_to_string(&out).expect("read the json output");
    let stacks = json_samples(&text, running.pid());
    let python = in_root(&root, TRIXIE_PYTHON).display().to_string();
    let libc = in_root(&root, "/usr/lib/x86_64-linux-gnu/libc.so.6")
        .display()
        .to_string();
    let has = |s: &serde_json::Value, object: &str, symbol: &str| {
        json_frames(s)
            .iter()
            .any(|f| f["object"] == object && f["symbol"] == symbol)
    };
    let named = stacks
        .iter()
        .filter(|s| has(s, &python, "Py_RunMain") && has(s, &libc, "__libc_start_main"))
        .count();
    assert!(
        named * 100 >= stacks.len() * 90 && !stacks.is_empty(),
        "{named} of {} samples reach Py_RunMain of {python} and __libc_start_main of {libc}: {}",
        stacks.len(),
        stacks.first().map(ToString::to_string).unwrap_or_default()
    );
}

/// Unstable's 3.14 and 3.15 (their private root) are interpreters the tracer walks: versions
/// read, layouts from their debug offsets (`native_thread_id` 160 and 184, tagged code, 3.15's
/// base frame), and the evaluation loop's unnamed cold part found (`.symtab` is stripped and
/// the named part is the loop's prologue only), disjoint from it and far larger.
#[test]
fn sid_pythons_are_detected() {
    use tracer_common::python::{PY_BASE_FRAME, PY_TAGGED_CODE};
    for (minor, thread_id, flags) in [(14, 160, PY_TAGGED_CODE), (15, 184, PY_TAGGED_CODE | PY_BASE_FRAME)] {
        let version = format!("3.{minor}");
        let found = crate::support::sid_python_argv(&version);
        let Some(argv) = required("sid_pythons_are_detected", found, crate::support::NO_SID_ROOT) else {
            return;
        };
        let path = in_root(std::path::Path::new(&argv[1]), &argv[2]);
        let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let image = detect_file(&file)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .unwrap_or_else(|| panic!("{} is not recognised as an interpreter", path.display()));
        assert_eq!((image.major, image.minor), (3, minor), "{}", path.display());
        let k = image.layout.kernel;
        assert_eq!((k.tstate_native_thread_id, k.flags), (thread_id, flags), "{version}");
        let (eval, cold) = (image.eval, image.cold.expect("the cold part found"));
        assert!(
            cold.1 <= eval.0 || cold.0 >= eval.1,
            "{version}: {cold:x?} in {eval:x?}"
        );
        assert!(
            cold.1 - cold.0 > 10 * (eval.1 - eval.0),
            "{version}: {cold:x?}, {eval:x?}"
        );
    }
}
