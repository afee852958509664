//! The root file system of aarch64 guests: Debian arm64 packages (and what they depend on)
//! downloaded with the rig's private apt and unpacked, without their maintainer scripts (nothing
//! here can run arm64 code), into `rootfs/SUITE-arm64/` in the cache, once. The guest init
//! mounts it where an x86-64 guest mounts this machine's root; the binaries under test are
//! cross-built here and reached through the shared repository.
//!
//! [`package_closure`] (parsing `apt-cache depends --recurse`) is pure; the rest runs apt-get
//! and dpkg-deb.

use std::{
    fs,
    os::unix::fs::symlink,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

use super::kernel::{Apt, clear_debs};
use crate::cmd::{output, sh};

/// The suite the root file system is taken from (its glibc must be as old as the one the
/// cross compiler links against, Debian 12's).
pub const SUITE: &str = "bookworm";

/// What the guest runs besides the cross-built binaries: a shell and its tools (the init's
/// static busybox, which also serves as `/bin/sh`), the libraries of a Rust program, and what
/// the end-to-end tests run: gcc (they build their workloads), binutils' `nm`, util-linux's
/// `prlimit` and `unshare`, bash and coreutils (the tests' scripts).
const PACKAGES: &[&str] = &[
    "busybox-static",
    "bash",
    "coreutils",
    "libc6",
    "libgcc-s1",
    "gcc",
    "libc6-dev",
    "binutils",
    "util-linux",
];

/// The package names of `apt-cache depends --recurse` output: every unindented line, minus
/// virtual packages (`<name>`), de-duplicated, in order.
pub fn package_closure(depends: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in depends.lines() {
        if line.starts_with(char::is_whitespace) || line.is_empty() || line.starts_with('<') {
            continue;
        }
        let name = line.trim().to_owned();
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// The root file system of Debian architecture `arch` (built if not yet cached, or cached
/// with another package list: its `complete` marker holds the list).
pub fn fetch(cache: &Path, arch: &str) -> anyhow::Result<PathBuf> {
    let key = format!("{SUITE}-{arch}");
    let dir = cache.join("rootfs").join(&key);
    let wanted = PACKAGES.join(" ");
    if fs::read_to_string(dir.join("complete")).is_ok_and(|list| list == wanted) {
        return Ok(dir);
    }
    let apt = Apt::new(cache, SUITE, arch)?;
    apt.update()?;
    let depends = output(
        apt.command("apt-cache")
            .args([
                "depends",
                "--recurse",
                "--no-recommends",
                "--no-suggests",
                "--no-conflicts",
                "--no-breaks",
                "--no-replaces",
                "--no-enhances",
            ])
            .args(PACKAGES),
    )
    .with_context(|| format!("{SUITE} ({arch}) lacks one of {}", PACKAGES.join(", ")))?;
    let packages = package_closure(&depends);
    let download = apt.download(&packages)?;
    let tmp = dir.with_file_name(format!("{key}.tmp"));
    if tmp.exists() {
        fs::remove_dir_all(&tmp)?;
    }
    fs::create_dir_all(&tmp)?;
    for deb in fs::read_dir(&download)? {
        let deb = deb?.path();
        if deb.extension().is_some_and(|e| e == "deb") {
            sh(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tmp))?;
        }
    }
    clear_debs(&download)?;
    if !tmp.join("bin/busybox").exists() {
        bail!("busybox-static of {SUITE} ({arch}) has no /bin/busybox");
    }
    for sub in [
        "proc",
        "sys",
        "dev",
        "run",
        "tmp",
        "var/tmp",
        "root",
        "lib/modules",
        "boot",
    ] {
        fs::create_dir_all(tmp.join(sub))?;
    }
    if !tmp.join("bin/sh").exists() {
        symlink("busybox", tmp.join("bin/sh"))?;
    }
    fs::write(tmp.join("complete"), &wanted)?;
    if dir.exists() {
        fs::remove_dir_all(&dir)?;
    }
    fs::rename(&tmp, &dir).with_context(|| format!("moving {} into place", dir.display()))?;
    Ok(dir)
}
