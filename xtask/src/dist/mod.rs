//! `cargo xtask dist`: what a production host installs, built into `target/dist/`:
//!
//! 1. a static executable per architecture (musl, the eBPF program embedded, no run-time
//!    dependency: it runs in a root that holds nothing but itself), [`build`];
//! 2. beside it, generated from the clap definitions by `sframe-trace generate`, the man page
//!    and the bash, zsh and fish completions;
//! 3. a tarball per architecture (`sframe-trace-VERSION-ARCH.tar.gz`: binary, man page,
//!    completions, README, licenses) and `SHA256SUMS`;
//! 4. a Debian package per architecture ([`deb`]);
//! 5. an OCI image archive per architecture, the static binary alone ([`oci`]).
//!
//! Idempotent: every step is redone from the sources (cargo's own build is incremental); each
//! command is printed before it runs. Installs what it needs (musl-tools, the musl targets,
//! the arm64 musl headers) like `demo` does.

pub mod build;
pub mod bullseye;
mod deb;
mod oci;

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

use crate::cmd::sh;

/// One architecture the tracer ships for.
#[derive(Clone, Copy, Debug)]
pub struct Arch {
    /// As `uname -m` says it, and in file names.
    pub name: &'static str,
    /// The Rust target of the static build.
    pub triple: &'static str,
    /// Debian's and OCI's name for it.
    pub debian: &'static str,
    /// The binutils `strip` that reads its objects.
    pub strip: &'static str,
}

pub const ARCHES: [Arch; 2] = [
    Arch {
        name: "x86_64",
        triple: "x86_64-unknown-linux-musl",
        debian: "amd64",
        strip: "strip",
    },
    Arch {
        name: "aarch64",
        triple: "aarch64-unknown-linux-musl",
        debian: "arm64",
        strip: "aarch64-linux-gnu-strip",
    },
];

/// The architecture named `name` (`x86_64` or `aarch64`).
pub fn arch(name: &str) -> anyhow::Result<Arch> {
    ARCHES
        .into_iter()
        .find(|a| a.name == name)
        .with_context(|| format!("no architecture `{name}` (x86_64 or aarch64)"))
}

/// The version the workspace declares (tracer-user's).
pub fn version(root: &Path) -> anyhow::Result<String> {
    let manifest = fs::read_to_string(root.join("Cargo.toml"))?;
    manifest
        .lines()
        .skip_while(|l| l.trim() != "[workspace.package]")
        .find_map(|l| l.strip_prefix("version = \"")?.strip_suffix('"').map(str::to_owned))
        .context("no version in [workspace.package] of Cargo.toml")
}

/// What `dist` wrote for one architecture.
pub struct Built {
    pub arch: Arch,
    /// The static executable.
    pub binary: PathBuf,
    pub tarball: PathBuf,
    pub deb: PathBuf,
    pub image: PathBuf,
}

/// `target/dist/`.
pub fn dir(root: &Path) -> PathBuf {
    root.join("target/dist")
}

/// The staged static executable of `arch` that [`dist`] wrote.
pub fn staged_binary(root: &Path, arch: &str) -> anyhow::Result<PathBuf> {
    let binary = dir(root)
        .join(format!("sframe-trace-{}-{arch}", version(root)?))
        .join("sframe-trace");
    if !binary.exists() {
        bail!("{} is missing: run `cargo xtask dist` first", binary.display());
    }
    Ok(binary)
}

/// Build everything for `arches` into `target/dist/` and write `SHA256SUMS` over it.
pub fn dist(root: &Path, arches: &[Arch]) -> anyhow::Result<Vec<Built>> {
    build::setup(arches)?;
    let version = version(root)?;
    let out = dir(root);
    fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let mut built = Vec::new();
    for &arch in arches {
        let binary = build::static_binary(root, arch)?;
        let stage = out.join(format!("sframe-trace-{version}-{}", arch.name));
        stage_files(root, &binary, &stage)?;
        // Without symbols (a third of its size); the eBPF object inside is data, untouched.
        sh(Command::new(arch.strip)
            .arg("--strip-all")
            .arg(stage.join("sframe-trace")))?;
        let tarball = tarball(&stage)?;
        let deb = deb::package(root, &stage, &version, arch, &out)?;
        let image = oci::image(&stage.join("sframe-trace"), &version, arch, &out)?;
        built.push(Built {
            arch,
            binary: stage.join("sframe-trace"),
            tarball,
            deb,
            image,
        });
    }
    checksums(&out)?;
    for b in &built {
        eprintln!(
            "dist: {} {}\n      {}\n      {}\n      {}",
            b.arch.name,
            b.binary.display(),
            b.tarball.display(),
            b.deb.display(),
            b.image.display()
        );
    }
    Ok(built)
}

/// `stage/`: the binary, `sframe-trace.1`, `completions/`, README.md and the licenses. The man
/// page and completions come from the host build of the same sources (the static binary may
/// be of another architecture).
fn stage_files(root: &Path, binary: &Path, stage: &Path) -> anyhow::Result<()> {
    if stage.exists() {
        fs::remove_dir_all(stage).with_context(|| format!("clearing {}", stage.display()))?;
    }
    fs::create_dir_all(stage)?;
    fs::copy(binary, stage.join("sframe-trace")).with_context(|| format!("copying {}", binary.display()))?;
    let host = build::host_binary(root)?;
    sh(Command::new(&host).arg("generate").arg(stage))?;
    for file in ["README.md", "LICENSE-MIT", "LICENSE-APACHE"] {
        fs::copy(root.join(file), stage.join(file)).with_context(|| format!("copying {file}"))?;
    }
    Ok(())
}

/// `STAGE.tar.gz` of the staged directory, owned by root, reproducible (fixed order and times).
fn tarball(stage: &Path) -> anyhow::Result<PathBuf> {
    let parent = stage.parent().context("the stage has a parent")?;
    let name = stage.file_name().context("the stage has a name")?;
    let tarball = parent.join(format!("{}.tar.gz", name.to_string_lossy()));
    sh(&mut tar(parent, &tarball, &[name], true))?;
    Ok(tarball)
}

/// `tar` of `members` (relative to `dir`) into `archive`, reproducible: sorted, owned by root,
/// time 0; gzipped (`gzip -n -9`, no name or time) when `gzip`.
pub fn tar(dir: &Path, archive: &Path, members: &[&std::ffi::OsStr], gzip: bool) -> Command {
    let mut command = Command::new("tar");
    command
        .current_dir(dir)
        .args(["--sort=name", "--owner=0", "--group=0", "--numeric-owner", "--mtime=@0"]);
    if gzip {
        command.args(["-I", "gzip -n -9"]);
    }
    command.arg("-cf").arg(archive).args(members);
    command
}

/// `SHA256SUMS` of the tarballs, packages and images in `out`.
fn checksums(out: &Path) -> anyhow::Result<()> {
    let mut files: Vec<String> = fs::read_dir(out)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tar.gz") || n.ends_with(".deb") || n.ends_with(".oci.tar"))
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("nothing to checksum in {}", out.display());
    }
    let sums = Command::new("sha256sum")
        .current_dir(out)
        .args(&files)
        .output()
        .context("running sha256sum")?;
    if !sums.status.success() {
        bail!("sha256sum failed: {}", String::from_utf8_lossy(&sums.stderr));
    }
    fs::write(out.join("SHA256SUMS"), sums.stdout)?;
    eprintln!("dist: {} ({} files)", out.join("SHA256SUMS").display(), files.len());
    Ok(())
}

#[cfg(test)]
mod tests;
