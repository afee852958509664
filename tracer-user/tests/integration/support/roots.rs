//! The private root of Debian trixie's `python3.13` that `cargo xtask setup` unpacks
//! (xtask/src/setup/python_root.rs): where it is, and the interpreter run chrooted into it, so
//! that its `/proc/PID/root` is that root and the tracer reaches its mapped files through it,
//! as for a container's processes.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// The variable `cargo xtask test` names the root with.
pub const PYTHON_ROOT_VAR: &str = "SFRAME_TRACE_PYTHON_ROOT";

/// The interpreter, inside the root.
pub const TRIXIE_PYTHON: &str = "/usr/bin/python3.13";

/// Where the root is: [`PYTHON_ROOT_VAR`] when set, else where `cargo xtask setup` puts it,
/// `${XDG_CACHE_HOME:-~/.cache}/sframe-trace/rootfs/trixie-python3.13`; `None` when it is not
/// there or not complete (set-up not run, or cut short).
pub fn trixie_python_root() -> Option<PathBuf> {
    let root = match std::env::var_os(PYTHON_ROOT_VAR).filter(|v| !v.is_empty()) {
        Some(root) => PathBuf::from(root),
        None => trixie_python_root_default()?,
    };
    let complete = root.join("complete").is_file() && in_root(&root, TRIXIE_PYTHON).is_file();
    complete.then_some(root)
}

/// The variable `cargo xtask test` names the root of unstable's `python3.14` and `python3.15`
/// with (xtask/src/setup/python_root.rs).
pub const SID_PYTHON_ROOT_VAR: &str = "SFRAME_TRACE_SID_PYTHON_ROOT";

/// What a test needing that root is missing without it.
pub const NO_SID_ROOT: &str = "no private root of unstable's python3.14 and python3.15 (run `cargo xtask setup`)";

/// `chroot ROOT /usr/bin/python3.MINOR` of unstable's root ([`SID_PYTHON_ROOT_VAR`], else
/// `${XDG_CACHE_HOME:-~/.cache}/sframe-trace/rootfs/sid-python3.14-3.15`), or `None` when it
/// is not there or not complete.
pub fn sid_python_argv(minor: &str) -> Option<Vec<String>> {
    let root = match std::env::var_os(SID_PYTHON_ROOT_VAR).filter(|v| !v.is_empty()) {
        Some(root) => PathBuf::from(root),
        None => trixie_python_root_default()?.with_file_name("sid-python3.14-3.15"),
    };
    let python = format!("/usr/bin/python{minor}");
    let complete = root.join("complete").is_file() && in_root(&root, &python).is_file();
    complete.then(|| vec!["chroot".to_owned(), root.display().to_string(), python])
}

/// Where `cargo xtask setup` puts trixie's root.
fn trixie_python_root_default() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from(std::env::var_os("HOME")?).join(".cache")))?;
    Some(cache.join("sframe-trace/rootfs/trixie-python3.13"))
}

/// `path` (absolute inside the root) as this machine sees it.
pub fn in_root(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// What a root is missing is said in: tests needing it fail under CI, skip elsewhere.
pub const NO_ROOT: &str = "no private root of trixie's python3.13 (run `cargo xtask setup`)";

/// The words of `chroot ROOT /usr/bin/python3.13` (it needs root), or `None` when the root is
/// absent.
pub fn trixie_python_argv() -> Option<Vec<String>> {
    let root = trixie_python_root()?;
    Some(vec![
        "chroot".to_owned(),
        root.display().to_string(),
        TRIXIE_PYTHON.to_owned(),
    ])
}

/// `chroot ROOT /usr/bin/python3.13`: a command ready for `.args(["-c", script])`, or `None`
/// when the root is absent. Under `CI=true` a caller must fail, not skip, when it is `None`:
/// [`required`] does that.
pub fn trixie_python() -> Option<Command> {
    let argv = trixie_python_argv()?;
    let mut command = Command::new(&argv[0]);
    command.args(&argv[1..]);
    Some(command)
}

/// `found` for `test`: without it (`missing` says what is missing), it fails where `CI` is
/// set, else reports the test skipped and returns `None`.
pub fn required<T>(test: &str, found: Option<T>, missing: &str) -> Option<T> {
    if found.is_none() {
        assert!(std::env::var_os("CI").is_none(), "{test}: {missing}, under CI");
        super::skipped(test, missing);
    }
    found
}

/// The variable `cargo xtask test` names the root of unstable's OpenJDK 21 and 25 with
/// (xtask/src/setup/java_roots.rs).
pub const SID_JAVA_ROOT_VAR: &str = "SFRAME_TRACE_SID_JAVA_ROOT";

/// What a test needing that root is missing without it.
pub const NO_JAVA_ROOT: &str = "no private root of unstable's OpenJDK 21 and 25 (run `cargo xtask setup`)";

/// Unstable's `java` of `release` (`21`, `25`) in its root ([`SID_JAVA_ROOT_VAR`], else
/// `${XDG_CACHE_HOME:-~/.cache}/sframe-trace/rootfs/sid-openjdk-21-25`): the root, and the
/// `java` inside it; `None` when it is not there or not complete. It runs chrooted with
/// `LD_LIBRARY_PATH` naming its `lib` (its loader cannot resolve `$ORIGIN` without `/proc`).
pub fn sid_java(release: &str) -> Option<(PathBuf, String)> {
    let root = match std::env::var_os(SID_JAVA_ROOT_VAR).filter(|v| !v.is_empty()) {
        Some(root) => PathBuf::from(root),
        None => trixie_python_root_default()?.with_file_name("sid-openjdk-21-25"),
    };
    let java = format!("/usr/lib/jvm/java-{release}-openjdk-amd64/bin/java");
    let complete = root.join("complete").is_file() && in_root(&root, &java).is_file();
    complete.then_some((root, java))
}

/// The variable `cargo xtask test` names the root of unstable's Node.js with
/// (xtask/src/setup/node_root.rs).
pub const SID_NODE_ROOT_VAR: &str = "SFRAME_TRACE_SID_NODE_ROOT";

/// What a test needing that root is missing without it.
pub const NO_NODE_ROOT: &str = "no private root of unstable's Node.js (run `cargo xtask setup`)";

/// Unstable's Node.js root ([`SID_NODE_ROOT_VAR`], else
/// `${XDG_CACHE_HOME:-~/.cache}/sframe-trace/rootfs/sid-nodejs`), `None` when it is not there
/// or not complete; its `node` is `/usr/bin/node`, run chrooted.
pub fn sid_node() -> Option<PathBuf> {
    let root = match std::env::var_os(SID_NODE_ROOT_VAR).filter(|v| !v.is_empty()) {
        Some(root) => PathBuf::from(root),
        None => trixie_python_root_default()?.with_file_name("sid-nodejs"),
    };
    let complete = root.join("complete").is_file() && in_root(&root, "/usr/bin/node").is_file();
    complete.then_some(root)
}
