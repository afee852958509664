//! Debian kernels for the matrix: a suite name (`bookworm`) is resolved to the kernel release
//! its `linux-image-ARCH` (`amd64` or `arm64`, the guest's architecture) depends on, the
//! packages of that release are downloaded with the private apt of `crate::debian` and
//! unpacked once into the cache: `kernels/RELEASE/` holds `vmlinuz`, `config` and
//! `root/lib/modules/RELEASE/` (with its `modules.dep`). The parsing and naming are pure
//! functions; the rest runs apt-get, dpkg-deb and depmod.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

use crate::{
    cmd::{output, sh},
    debian::{Apt, fresh, suite_key},
};

/// Suites searched when a kernel is named by its release (`6.1.0-41-amd64`) instead of a suite.
const SEARCHED_SUITES: &[&str] = &["bookworm", "trixie", "sid", "bullseye"];

/// A kernel ready to boot.
pub struct Kernel {
    /// The release, as `uname -r` prints it in the guest.
    pub release: String,
    /// `kernels/RELEASE/` in the cache.
    pub dir: PathBuf,
}

impl Kernel {
    pub fn image(&self) -> PathBuf {
        self.dir.join("vmlinuz")
    }

    /// The unpacked tree modprobe and depmod take as their root (`-d`, `-b`).
    pub fn module_root(&self) -> PathBuf {
        self.dir.join("root")
    }
}

/// Whether `name` is a kernel release (starts with a digit) rather than a suite.
pub fn is_release(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_digit())
}

/// The release `linux-image-ARCH` depends on, from `apt-cache depends linux-image-ARCH`.
pub fn release_from_depends(depends: &str) -> Option<String> {
    depends.lines().find_map(|line| {
        let package = line.trim().strip_prefix("Depends:")?.trim();
        let release = package.strip_prefix("linux-image-")?;
        (is_release(release) && !release.contains(char::is_whitespace)).then(|| release.to_owned())
    })
}

/// The packages that may carry a release's image and modules (which exist depends on the
/// suite: one `linux-image-*` package up to now, split packages possibly later).
pub fn package_candidates(release: &str) -> Vec<String> {
    ["linux-image", "linux-binary", "linux-modules"]
        .iter()
        .map(|prefix| format!("{prefix}-{release}"))
        .collect()
}

/// The kernel named `name` (a suite or a release) of Debian architecture `arch`, downloaded
/// and unpacked if not yet cached.
pub fn fetch(cache: &Path, name: &str, arch: &str) -> anyhow::Result<Kernel> {
    let (release, suite) = if is_release(name) {
        (name.to_owned(), None)
    } else {
        (resolve(cache, name, arch)?, Some(name))
    };
    let dir = cache.join("kernels").join(&release);
    if !dir.join("complete").exists() {
        let suite = match suite {
            Some(suite) => suite.to_owned(),
            None => find_suite(cache, &release, arch)?,
        };
        unpack(cache, &suite, arch, &release, &dir)?;
    }
    Ok(Kernel { release, dir })
}

/// The release of a suite's `linux-image-ARCH`, remembered for a day under `suites/SUITE`
/// ([`suite_key`]; used longer when the archive cannot be reached).
fn resolve(cache: &Path, suite: &str, arch: &str) -> anyhow::Result<String> {
    let remembered = cache.join("suites").join(suite_key(suite, arch));
    // The kernel resolved before, if it is still in the cache.
    let cached = fs::read_to_string(&remembered)
        .ok()
        .map(|r| r.trim().to_owned())
        .filter(|r| cache.join("kernels").join(r).join("complete").exists());
    if let Some(release) = &cached
        && fresh(&remembered)
    {
        return Ok(release.clone());
    }
    let apt = Apt::new(cache, suite, arch)?;
    if let Err(e) = apt.update() {
        // Offline: a kernel fetched before still serves, older than a day or not.
        let Some(release) = cached else { return Err(e) };
        eprintln!("vm-test: cannot refresh {suite} ({e:#}); using its cached kernel {release}");
        return Ok(release);
    }
    let meta = format!("linux-image-{arch}");
    let depends = output(apt.command("apt-cache").args(["depends", &meta]))
        .with_context(|| format!("suite {suite} has no {meta} (is it a Debian suite?)"))?;
    let release = release_from_depends(&depends)
        .with_context(|| format!("cannot tell which kernel {meta} of {suite} depends on"))?;
    fs::create_dir_all(cache.join("suites"))?;
    fs::write(&remembered, &release)?;
    Ok(release)
}

/// The first searched suite that still carries `release`.
fn find_suite(cache: &Path, release: &str, arch: &str) -> anyhow::Result<String> {
    for suite in SEARCHED_SUITES {
        let apt = Apt::new(cache, suite, arch)?;
        if apt.update().is_ok() && apt.has(&format!("linux-image-{release}")) {
            return Ok((*suite).to_owned());
        }
    }
    bail!(
        "kernel {release} is in none of {} (only releases still in the archive can be fetched)",
        SEARCHED_SUITES.join(", ")
    )
}

/// Download the packages of `release` from `suite` and unpack the image, config and modules
/// into `dir` (through `dir.tmp`, renamed when complete).
fn unpack(cache: &Path, suite: &str, arch: &str, release: &str, dir: &Path) -> anyhow::Result<()> {
    let apt = Apt::new(cache, suite, arch)?;
    apt.update()?;
    let packages: Vec<String> = package_candidates(release).into_iter().filter(|p| apt.has(p)).collect();
    if packages.is_empty() {
        bail!("suite {suite} has no package of kernel {release}");
    }
    let tmp = dir.with_file_name(format!("{release}.tmp"));
    if tmp.exists() {
        fs::remove_dir_all(&tmp)?;
    }
    let unpacked = tmp.join("packages");
    apt.unpack(&packages, &unpacked)?;
    let found = |candidates: &[String]| candidates.iter().map(|c| unpacked.join(c)).find(|p| p.exists());
    let image = found(&[
        format!("boot/vmlinuz-{release}"),
        format!("usr/lib/modules/{release}/vmlinuz"),
        format!("lib/modules/{release}/vmlinuz"),
    ])
    .with_context(|| format!("the packages of {release} carry no vmlinuz"))?;
    let modules = found(&[format!("usr/lib/modules/{release}"), format!("lib/modules/{release}")])
        .with_context(|| format!("the packages of {release} carry no module tree"))?;
    fs::copy(&image, tmp.join("vmlinuz"))?;
    if let Some(config) = found(&[
        format!("boot/config-{release}"),
        format!("usr/lib/modules/{release}/config"),
    ]) {
        fs::copy(config, tmp.join("config"))?;
    }
    let root = tmp.join("root");
    fs::create_dir_all(root.join("lib/modules"))?;
    fs::rename(&modules, root.join("lib/modules").join(release))?;
    fs::remove_dir_all(&unpacked)?;
    sh(Command::new("depmod").arg("-b").arg(&root).arg(release))?;
    fs::write(tmp.join("complete"), "")?;
    if dir.exists() {
        fs::remove_dir_all(dir)?;
    }
    fs::rename(&tmp, dir).with_context(|| format!("moving {} into place", dir.display()))
}
