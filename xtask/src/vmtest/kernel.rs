//! Debian kernels for the matrix: a suite name (`bookworm`) is resolved to the kernel release
//! its `linux-image-ARCH` (`amd64` or `arm64`, the guest's architecture) depends on, the packages of that release are downloaded with apt-get
//! (a private configuration and state per suite, signatures checked against the Debian archive
//! keyring) and unpacked once into the cache: `kernels/RELEASE/` holds `vmlinuz`, `config` and
//! `root/lib/modules/RELEASE/` (with its `modules.dep`). The parsing and naming are pure
//! functions; the rest runs apt-get, dpkg-deb and depmod.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, SystemTime},
};

use anyhow::{Context as _, bail};

use crate::cmd::{output, sh};

/// The archive keyring apt checks the suites' signatures with.
pub const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// A suite's package lists and its resolved release are refreshed after this long.
const MAX_AGE: Duration = Duration::from_secs(86_400);

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

/// The apt sources of a suite: the suite itself, and for stable suites their updates and
/// security archives.
pub fn sources_list(suite: &str, arch: &str, mirror: &str, security: &str) -> String {
    let opts = format!("[arch={arch} signed-by={KEYRING}]");
    let rolling = matches!(suite, "sid" | "unstable" | "experimental") || suite.ends_with("-backports");
    let mut out = format!("deb {opts} {mirror} {suite} main\n");
    if !rolling {
        out.push_str(&format!("deb {opts} {mirror} {suite}-updates main\n"));
        out.push_str(&format!("deb {opts} {security} {suite}-security main\n"));
    }
    out
}

/// The name of a suite's state in the cache (`apt/`, `suites/`): the suite for amd64, the
/// suite and the architecture for the others (`bookworm-arm64`).
pub fn suite_key(suite: &str, arch: &str) -> String {
    if arch == "amd64" {
        suite.to_owned()
    } else {
        format!("{suite}-{arch}")
    }
}

/// A private apt for one Debian architecture: its own sources, lists, cache and (empty) dpkg
/// status, under `apt/SUITE/` (see [`suite_key`]).
pub struct Apt {
    pub dir: PathBuf,
}

impl Apt {
    pub fn new(cache: &Path, suite: &str, arch: &str) -> anyhow::Result<Apt> {
        let dir = cache.join("apt").join(suite_key(suite, arch));
        for sub in ["lists/partial", "archives/partial", "parts", "download"] {
            fs::create_dir_all(dir.join(sub)).with_context(|| format!("creating {}", dir.join(sub).display()))?;
        }
        let mirror = std::env::var("VMTEST_MIRROR").unwrap_or_else(|_| "http://deb.debian.org/debian".to_owned());
        let security = std::env::var("VMTEST_SECURITY_MIRROR")
            .unwrap_or_else(|_| "http://deb.debian.org/debian-security".to_owned());
        fs::write(dir.join("sources.list"), sources_list(suite, arch, &mirror, &security))?;
        fs::write(dir.join("status"), "")?;
        let user = output(Command::new("id").arg("-un")).unwrap_or_else(|| "root".to_owned());
        // Frozen mirror snapshots need the host's own date checks (off) carried over.
        let dates: String = output(Command::new("apt-config").arg("dump"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("Acquire::Check-Valid-Until ") || l.starts_with("Acquire::Check-Date "))
            .map(|l| format!("{l}\n"))
            .collect();
        let d = dir.display();
        let conf = format!(
            "Dir::Etc::Main \"{d}/parts/none\";\nDir::Etc::Parts \"{d}/parts\";\n\
             Dir::Etc::SourceList \"{d}/sources.list\";\nDir::Etc::SourceParts \"{d}/parts\";\n\
             Dir::Etc::Preferences \"{d}/parts/none\";\nDir::Etc::PreferencesParts \"{d}/parts\";\n\
             Dir::State \"{d}\";\nDir::State::Lists \"{d}/lists\";\nDir::State::status \"{d}/status\";\n\
             Dir::Cache \"{d}\";\nDir::Cache::archives \"{d}/archives\";\nDir::Cache::srcpkgcache \"\";\n\
             Dir::Cache::pkgcache \"\";\nAPT::Architecture \"{arch}\";\nAPT::Architectures {{ \"{arch}\"; }};\n\
             Acquire::Languages \"none\";\nAcquire::Retries \"3\";\nAPT::Sandbox::User \"{}\";\n{dates}",
            user.trim()
        );
        fs::write(dir.join("apt.conf"), conf)?;
        Ok(Apt { dir })
    }

    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("APT_CONFIG", self.dir.join("apt.conf"));
        cmd
    }

    /// `apt-get update`, unless the lists are younger than a day.
    /// Download `packages` (only them) into this cache's download directory, emptied of earlier
    /// packages first; that directory.
    pub fn download(&self, packages: &[String]) -> anyhow::Result<PathBuf> {
        let download = self.dir.join("download");
        clear_debs(&download)?;
        sh(self
            .command("apt-get")
            .current_dir(&download)
            .args(["-q", "download"])
            .args(packages))?;
        Ok(download)
    }

    pub fn update(&self) -> anyhow::Result<()> {
        let stamp = self.dir.join("updated");
        if fresh(&stamp) {
            return Ok(());
        }
        sh(self
            .command("apt-get")
            .args(["-q", "-o", "APT::Update::Error-Mode=any", "update"]))?;
        fs::write(&stamp, "")?;
        Ok(())
    }

    fn has(&self, package: &str) -> bool {
        output(self.command("apt-cache").args(["show", "--no-all-versions", package])).is_some()
    }
}

/// Whether a file exists and was written less than a day ago.
fn fresh(path: &Path) -> bool {
    fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_some_and(|age| age < MAX_AGE)
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
    let download = apt.download(&packages)?;
    let tmp = dir.with_file_name(format!("{release}.tmp"));
    if tmp.exists() {
        fs::remove_dir_all(&tmp)?;
    }
    let unpacked = tmp.join("packages");
    fs::create_dir_all(&unpacked)?;
    for deb in fs::read_dir(&download)? {
        let deb = deb?.path();
        if deb.extension().is_some_and(|e| e == "deb") {
            sh(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked))?;
        }
    }
    clear_debs(&download)?;
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

pub fn clear_debs(dir: &Path) -> anyhow::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "deb") {
            fs::remove_file(&path)?;
        }
    }
    Ok(())
}
