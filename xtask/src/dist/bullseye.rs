//! A Debian 11 (bullseye, glibc 2.31) root made with `debootstrap --variant=minbase`, cached
//! in `rootfs/bullseye-debootstrap/` once: the oldest glibc the static executable is tested
//! on, and a clean system (with systemd and man-db) for installing its Debian package with
//! dpkg. A `complete` marker (holding the extra packages) says
//! it is done; a lock keeps two runs from building it at the same time.

use std::{fs, path::PathBuf, process::Command};

use anyhow::Context as _;

use crate::{
    cmd::sh,
    debian::{self, root::lock},
    setup,
};

const NAME: &str = "bullseye-debootstrap";

/// Packages besides the minimal base: systemd and man-db, so that the package's unit is
/// verified (`systemd-analyze verify`, its `man:` documentation looked up) by bullseye's own.
const INCLUDE: &str = "systemd,man-db";

/// The root, made if not cached yet.
pub fn root() -> anyhow::Result<PathBuf> {
    setup::apt(&["debootstrap", "debian-archive-keyring"])?;
    let parent = debian::cache_dir()?.join("rootfs");
    fs::create_dir_all(&parent)?;
    let dir = parent.join(NAME);
    let complete = || fs::read_to_string(dir.join("complete")).is_ok_and(|c| c == INCLUDE);
    if complete() {
        eprintln!("dist: bullseye root present ({})", dir.display());
        return Ok(dir);
    }
    let _lock = lock(&parent.join(format!("{NAME}.lock")))?;
    if complete() {
        return Ok(dir);
    }
    let tmp = parent.join(format!("{NAME}.tmp"));
    if tmp.exists() {
        fs::remove_dir_all(&tmp)?;
    }
    let mirror = std::env::var("VMTEST_MIRROR").unwrap_or_else(|_| "http://deb.debian.org/debian".to_owned());
    sh(Command::new("debootstrap")
        .args([
            "--variant=minbase",
            "--arch=amd64",
            &format!("--include={INCLUDE}"),
            "--keyring",
            debian::KEYRING,
            "bullseye",
        ])
        .arg(&tmp)
        .arg(&mirror))
    .context("debootstrap of bullseye")?;
    fs::write(tmp.join("complete"), INCLUDE)?;
    if dir.exists() {
        fs::remove_dir_all(&dir)?;
    }
    fs::rename(&tmp, &dir)?;
    Ok(dir)
}
