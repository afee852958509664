//! Roots unpacked from Debian packages: a package list of one suite and architecture and its
//! dependency closure, downloaded with the private [`Apt`] and unpacked without their
//! maintainer scripts (nothing foreign runs on this machine, and the host's dpkg and apt state
//! are never touched) into `rootfs/NAME/` in the cache, once: a `complete` marker holding the
//! package list says it is done, a lock keeps two runs from building it at the same time. The
//! kernel matrix's arm64 guests mount such a root; the Python tests run trixie's `python3.13`
//! chrooted into one.
//!
//! [`package_closure`] (parsing `apt-cache depends --recurse`) and [`merged_usr_links`] are
//! pure; the rest runs apt-get and dpkg-deb (through [`Apt`]).

use std::{
    fs,
    os::{fd::AsRawFd as _, unix::fs::symlink},
    path::{Path, PathBuf},
};

use anyhow::{Context as _, bail};

use super::Apt;
use crate::cmd::output;

/// What a root holds.
pub struct Spec<'a> {
    /// Its directory under `rootfs/` in the cache.
    pub name: &'a str,
    /// The Debian suite and architecture its packages come from.
    pub suite: &'a str,
    pub arch: &'a str,
    /// The packages asked for (their dependencies come too, recommends do not).
    pub packages: &'a [&'a str],
    /// A file the root must hold once unpacked (relative to it), e.g. `usr/bin/python3.13`.
    pub needs: &'a str,
}

/// Directories a root gets for what is mounted or written there when it is used.
const MOUNT_POINTS: &[&str] = &["proc", "sys", "dev", "run", "tmp", "var/tmp", "root"];

/// The top-level directories that merged-/usr suites (trixie on) ship only under `/usr`.
const MERGED: &[&str] = &["bin", "sbin", "lib", "lib32", "lib64", "libx32"];

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

/// The links a root needs for merged /usr, given which of `bin`, `usr/bin`... exist: `X ->
/// usr/X` for each top-level directory of [`MERGED`] that only `usr/` has (its packages put
/// the program interpreter in `/usr/lib64` and the binaries name `/lib64/ld-linux-x86-64.so.2`;
/// dpkg's maintainer scripts, not run here, would make the links).
pub fn merged_usr_links(exists: impl Fn(&str) -> bool) -> Vec<(&'static str, String)> {
    MERGED
        .iter()
        .filter(|dir| !exists(dir) && exists(&format!("usr/{dir}")))
        .map(|dir| (*dir, format!("usr/{dir}")))
        .collect()
}

/// The root `spec` describes, built if not yet cached (or cached with another package list);
/// `finish` adds what its user needs (files, links) before it is marked complete.
pub fn fetch(cache: &Path, spec: &Spec, finish: impl FnOnce(&Path) -> anyhow::Result<()>) -> anyhow::Result<PathBuf> {
    let parent = cache.join("rootfs");
    fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
    let dir = parent.join(spec.name);
    let wanted = spec.packages.join(" ");
    let complete = || fs::read_to_string(dir.join("complete")).is_ok_and(|list| list == wanted);
    if complete() {
        return Ok(dir);
    }
    let _lock = lock(&parent.join(format!("{}.lock", spec.name)))?;
    // Built by another run while this one waited.
    if complete() {
        return Ok(dir);
    }
    let (suite, arch) = (spec.suite, spec.arch);
    let apt = Apt::new(cache, suite, arch)?;
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
            .args(spec.packages),
    )
    .with_context(|| format!("{suite} ({arch}) lacks one of {wanted}"))?;
    let packages = package_closure(&depends);
    let tmp = dir.with_file_name(format!("{}.tmp", spec.name));
    if tmp.exists() {
        fs::remove_dir_all(&tmp)?;
    }
    apt.unpack(&packages, &tmp)?;
    for (link, target) in merged_usr_links(|p| tmp.join(p).exists()) {
        symlink(target, tmp.join(link))?;
    }
    if !tmp.join(spec.needs).exists() {
        bail!("the packages {wanted} of {suite} ({arch}) have no /{}", spec.needs);
    }
    for sub in MOUNT_POINTS {
        fs::create_dir_all(tmp.join(sub))?;
    }
    finish(&tmp)?;
    fs::write(tmp.join("complete"), &wanted)?;
    if dir.exists() {
        fs::remove_dir_all(&dir)?;
    }
    fs::rename(&tmp, &dir).with_context(|| format!("moving {} into place", dir.display()))?;
    Ok(dir)
}

/// An exclusive lock on `path` (created if missing), held until the file is dropped.
pub fn lock(path: &Path) -> anyhow::Result<fs::File> {
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    // SAFETY: flock on a descriptor this function owns; it blocks until the lock is granted.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        bail!("locking {}: {}", path.display(), std::io::Error::last_os_error());
    }
    Ok(file)
}
