//! The static executables: `cargo build --release --target ARCH-unknown-linux-musl`, with the
//! C parts of the dependencies (zstd, xz) compiled against musl's headers, and linked with
//! musl's own start files and libc (`link-self-contained`), so the result needs nothing at run
//! time. x86-64 compiles C with Debian's `musl-gcc`; aarch64 with the aarch64 cross compiler
//! pointed at the arm64 musl headers of Debian's `musl-dev:arm64`, unpacked privately.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

use super::Arch;
use crate::{
    cmd::{output, sh},
    debian::{self, Apt},
    setup,
};

/// Install what the static builds need: musl-tools (musl-gcc), the aarch64 cross compiler,
/// the musl targets of the toolchain in use and, for aarch64, the arm64 musl headers.
pub fn setup(arches: &[Arch]) -> anyhow::Result<()> {
    setup::apt(&[
        "musl-tools",
        "gcc-aarch64-linux-gnu",
        "dpkg-dev",
        "debian-archive-keyring",
    ])?;
    let installed = output(Command::new("rustup").args(["target", "list", "--installed"]))
        .context("rustup is needed to add the musl targets")?;
    let missing: Vec<&str> = arches
        .iter()
        .map(|a| a.triple)
        .filter(|t| !installed.lines().any(|l| l.trim() == *t))
        .collect();
    if !missing.is_empty() {
        sh(Command::new("rustup").args(["target", "add"]).args(&missing))?;
    }
    if arches.iter().any(|a| a.name == "aarch64") {
        arm64_musl_headers()?;
    }
    Ok(())
}

/// The arm64 musl headers (`usr/include/aarch64-linux-musl`), unpacked from Debian bookworm's
/// `musl-dev:arm64` into the cache once.
fn arm64_musl_headers() -> anyhow::Result<PathBuf> {
    let cache = debian::cache_dir()?;
    let dir = cache.join("musl-arm64");
    let include = dir.join("usr/include/aarch64-linux-musl");
    if include.join("stdio.h").exists() {
        return Ok(include);
    }
    let apt = Apt::new(&cache, "bookworm", "arm64")?;
    apt.update()?;
    apt.unpack(&["musl-dev".to_owned()], &dir)?;
    if !include.join("stdio.h").exists() {
        bail!("musl-dev:arm64 did not provide {}", include.display());
    }
    Ok(include)
}

/// Build the static executable for `arch`; its path.
pub fn static_binary(root: &Path, arch: Arch) -> anyhow::Result<PathBuf> {
    sh(&mut static_build(arch)?)?;
    let binary = root.join("target").join(arch.triple).join("release/sframe-trace");
    check_static(&binary)?;
    Ok(binary)
}

/// The `cargo build` of the static executable for `arch` (needs [`setup`]).
pub fn static_build(arch: Arch) -> anyhow::Result<Command> {
    let mut command = crate::cmd::release_build();
    command.args(["--target", arch.triple]);
    let var = arch.triple.replace('-', "_");
    let upper = var.to_uppercase();
    // musl's start files and libc from the Rust target, whatever the linker would pick.
    command.env(
        format!("CARGO_TARGET_{upper}_RUSTFLAGS"),
        "-C target-feature=+crt-static -C link-self-contained=yes",
    );
    match arch.name {
        "x86_64" => {
            command.env(format!("CC_{var}"), "musl-gcc");
        }
        _ => {
            let include = arm64_musl_headers()?;
            let gcc_include = output(Command::new("aarch64-linux-gnu-gcc").arg("-print-file-name=include"))
                .context("aarch64-linux-gnu-gcc is needed for the aarch64 build")?;
            command.env(format!("CC_{var}"), "aarch64-linux-gnu-gcc");
            command.env(
                format!("CFLAGS_{var}"),
                format!(
                    "-nostdinc -isystem {} -isystem {}",
                    include.display(),
                    gcc_include.trim()
                ),
            );
            command.env(format!("CARGO_TARGET_{upper}_LINKER"), "aarch64-linux-gnu-gcc");
        }
    }
    Ok(command)
}

/// Refuse a binary that asks for a program interpreter or shared libraries.
fn check_static(binary: &Path) -> anyhow::Result<()> {
    let headers = output(
        Command::new("readelf")
            .args(["--program-headers", "--dynamic"])
            .arg(binary),
    )
    .with_context(|| format!("readelf cannot read {}", binary.display()))?;
    if headers.contains("INTERP") || headers.contains("(NEEDED)") {
        bail!(
            "{} is not static: it has a program interpreter or needs shared libraries",
            binary.display()
        );
    }
    Ok(())
}

/// The architecture of the packages this machine runs, if it is one of them.
pub fn host_arch() -> Option<Arch> {
    super::ARCHES.into_iter().find(|a| a.name == std::env::consts::ARCH)
}

/// A release build of the tracer that runs here (it writes the man page and completions, and
/// is the tracer of the `external` stage): the static executable of this machine's
/// architecture, which the packages build anyway (one release build less for the test run),
/// else the host's own release build.
pub fn host_binary(root: &Path) -> anyhow::Result<PathBuf> {
    match host_arch() {
        Some(arch) => {
            setup(&[arch])?;
            static_binary(root, arch)
        }
        None => crate::cmd::build_release_tracer(root),
    }
}
