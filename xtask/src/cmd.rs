//! Running commands loudly (each printed before it runs) or quietly (its output returned), for
//! every task. Knows nothing of the tasks themselves (but for the name of the variable that asks
//! the integration tests for their privileged tier).

use std::process::Command;

use anyhow::{Context as _, bail};

/// Print and run a command; fail with its status if it fails.
pub fn sh(cmd: &mut Command) -> anyhow::Result<()> {
    eprintln!("+ {}", show(cmd));
    let status = cmd.status().with_context(|| format!("cannot run {}", show(cmd)))?;
    if !status.success() {
        bail!("`{}` failed with {status}", show(cmd));
    }
    Ok(())
}

/// Run a command quietly and return its stdout, or None if it cannot run or fails.
pub fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn show(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        s.push(' ');
        s.push_str(&arg.to_string_lossy());
    }
    s
}

/// cargo, as the one running xtask (`$CARGO`), else from PATH. Under CI=true, without
/// incremental compilation: a clean clone builds each crate once, and the incremental caches of
/// its builds would take more than a gigabyte of disk for nothing.
pub fn cargo() -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()));
    if std::env::var("CI").as_deref() == Ok("true") {
        command.env("CARGO_INCREMENTAL", "0");
    }
    command
}

/// `cargo` whose builds also lint the workspace's crates with clippy, warnings denied: clippy's
/// driver compiles them (it is rustc with clippy's lints) while their dependencies build as
/// usual. `cargo xtask test` builds its tests so, and need not check the workspace once more in
/// a target directory of its own (seven minutes on two CPUs for the dependencies' metadata).
/// Every build of the test profile in one run must go through here: the wrapper is part of
/// cargo's fingerprints.
pub fn linting_cargo() -> Command {
    let mut command = cargo();
    let cargo_path = std::path::PathBuf::from(command.get_program());
    let beside = cargo_path.with_file_name("clippy-driver");
    let driver = if beside.is_file() {
        beside
    } else {
        "clippy-driver".into()
    };
    command
        .env("RUSTC_WORKSPACE_WRAPPER", driver)
        .env("CLIPPY_ARGS", CLIPPY_DENY_WARNINGS);
    command
}

/// clippy's arguments as `cargo clippy -- -D warnings` hands them to its driver (separated by
/// `__CLIPPY_HACKERY__`).
const CLIPPY_DENY_WARNINGS: &str = "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__";

/// Bytes free to an unprivileged writer on the file system of `path` (`statvfs`), if known.
pub fn free_bytes(path: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt as _;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is NUL-terminated and `stat` is written by statvfs before it is read.
    if unsafe { libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: statvfs succeeded, so it filled `stat`.
    let stat = unsafe { stat.assume_init() };
    Some(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// Whether this runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Build the tracer as users run it (release); its path.
pub fn build_release_tracer(root: &std::path::Path) -> anyhow::Result<std::path::PathBuf> {
    sh(&mut release_build())?;
    Ok(root.join("target/release/sframe-trace"))
}

/// `cargo build --release` of the tracer's binary (for the host; add `--target` for another).
pub fn release_build() -> Command {
    let mut command = cargo();
    command.args([
        "build",
        "--release",
        "--package",
        "tracer-user",
        "--bin",
        "sframe-trace",
    ]);
    command
}

/// The variable that asks for the privileged tier of the integration tests (read by
/// tracer-user/tests/integration/support.rs): without it they skip, even as root, so that
/// plain `cargo test` stays quick and root-free.
pub const PRIVILEGED_VAR: &str = "SFRAME_TRACE_PRIVILEGED";
