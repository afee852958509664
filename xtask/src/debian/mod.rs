//! Debian packages without the host's apt: a private apt per suite and architecture ([`Apt`]:
//! its own sources, lists, cache and empty dpkg status under the cache, signatures checked
//! against the Debian archive keyring), and roots unpacked from a package list and its
//! dependency closure (`root`). The kernel matrix fetches its kernels and arm64 root with them;
//! `setup` its private trixie root of `python3.13`. The sources and names are pure functions;
//! the rest runs apt-get and dpkg-deb.

pub mod root;
#[cfg(test)]
mod tests;

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, SystemTime},
};

use anyhow::Context as _;

use crate::cmd::{output, sh};

/// `${XDG_CACHE_HOME:-~/.cache}/sframe-trace`: the downloaded and unpacked set-up artifacts
/// (the private apt states, roots, the kernel matrix's kernels), owned by the user who runs
/// the tasks (root for the tests), never a shared temporary directory.
pub fn cache_dir() -> anyhow::Result<PathBuf> {
    let base = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            PathBuf::from(std::env::var_os("HOME").context("neither XDG_CACHE_HOME nor HOME is set")?).join(".cache")
        }
    };
    Ok(base.join("sframe-trace"))
}

/// The archive keyring apt checks the suites' signatures with.
pub const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// A suite's package lists and its resolved release are refreshed after this long.
const MAX_AGE: Duration = Duration::from_secs(86_400);

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

    /// Download `packages` (only them) into this cache's download directory, emptied of earlier
    /// packages first, and unpack them into `into` (created if missing) with `dpkg-deb -x`: their
    /// files only, no maintainer script run. The downloaded packages are removed after.
    pub fn unpack(&self, packages: &[String], into: &Path) -> anyhow::Result<()> {
        let download = self.dir.join("download");
        clear_debs(&download)?;
        sh(self
            .command("apt-get")
            .current_dir(&download)
            .args(["-q", "download"])
            .args(packages))?;
        fs::create_dir_all(into).with_context(|| format!("creating {}", into.display()))?;
        for deb in fs::read_dir(&download)? {
            let deb = deb?.path();
            if deb.extension().is_some_and(|e| e == "deb") {
                sh(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(into))?;
            }
        }
        clear_debs(&download)
    }

    /// `apt-get update`, unless the lists are younger than a day.
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

    /// Whether the suite has `package`.
    pub fn has(&self, package: &str) -> bool {
        output(self.command("apt-cache").args(["show", "--no-all-versions", package])).is_some()
    }
}

/// Whether a file exists and was written less than a day ago.
pub fn fresh(path: &Path) -> bool {
    fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_some_and(|age| age < MAX_AGE)
}

/// Remove the `.deb` files of `dir`.
fn clear_debs(dir: &Path) -> anyhow::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "deb") {
            fs::remove_file(&path)?;
        }
    }
    Ok(())
}
