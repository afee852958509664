//! The Debian package of one architecture, built with `dpkg-deb` from the staged files: the
//! static binary in /usr/bin, the man page, bash, zsh and fish completions, the systemd unit
//! of continuous OTLP export (installed, left disabled: nothing starts it until the admin says
//! so) with its settings in /etc/default/sframe-trace, and the copyright. No dependency: the
//! binary is static. `lintian` must accept it without errors (the test runs it).

use std::{fs, os::unix::fs::PermissionsExt as _, path::Path, path::PathBuf, process::Command};

use anyhow::Context as _;

use super::Arch;
use crate::cmd::sh;

/// Build `sframe-trace_VERSION_DEBARCH.deb` in `out` from `stage`; its path.
pub fn package(root: &Path, stage: &Path, version: &str, arch: Arch, out: &Path) -> anyhow::Result<PathBuf> {
    let tree = out.join(format!("deb-{}", arch.debian));
    if tree.exists() {
        fs::remove_dir_all(&tree)?;
    }
    let put = |rel: &str, bytes: &[u8], mode: u32| -> anyhow::Result<()> {
        let path = tree.join(rel);
        fs::create_dir_all(path.parent().context("a parent")?)?;
        fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        fs::set_permissions(&path, fs::Permissions::from_mode(mode))?;
        Ok(())
    };
    let read = |p: &Path| fs::read(p).with_context(|| format!("reading {}", p.display()));
    put("usr/bin/sframe-trace", &read(&stage.join("sframe-trace"))?, 0o755)?;
    put(
        "usr/share/man/man1/sframe-trace.1.gz",
        &gzip(&read(&stage.join("sframe-trace.1"))?)?,
        0o644,
    )?;
    let completions = stage.join("completions");
    put(
        "usr/share/bash-completion/completions/sframe-trace",
        &read(&completions.join("sframe-trace.bash"))?,
        0o644,
    )?;
    put(
        "usr/share/zsh/vendor-completions/_sframe-trace",
        &read(&completions.join("_sframe-trace"))?,
        0o644,
    )?;
    put(
        "usr/share/fish/vendor_completions.d/sframe-trace.fish",
        &read(&completions.join("sframe-trace.fish"))?,
        0o644,
    )?;
    let packaging = root.join("packaging");
    put(
        "lib/systemd/system/sframe-trace.service",
        &read(&packaging.join("sframe-trace.service"))?,
        0o644,
    )?;
    put("etc/default/sframe-trace", &read(&packaging.join("default"))?, 0o644)?;
    put(
        "usr/share/doc/sframe-trace/copyright",
        &read(&packaging.join("copyright"))?,
        0o644,
    )?;
    put(
        "usr/share/doc/sframe-trace/changelog.gz",
        &gzip(changelog(version).as_bytes())?,
        0o644,
    )?;
    put(
        "usr/share/lintian/overrides/sframe-trace",
        &read(&packaging.join("lintian-overrides"))?,
        0o644,
    )?;
    put("DEBIAN/conffiles", b"/etc/default/sframe-trace\n", 0o644)?;
    put("DEBIAN/prerm", &read(&packaging.join("prerm"))?, 0o755)?;
    let size_kib = du_kib(&tree)?;
    put("DEBIAN/control", control(version, arch, size_kib).as_bytes(), 0o644)?;
    put("DEBIAN/md5sums", md5sums(&tree)?.as_bytes(), 0o644)?;
    let deb = out.join(format!("sframe-trace_{version}_{}.deb", arch.debian));
    sh(Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Zxz", "--build"])
        .arg(&tree)
        .arg(&deb))?;
    fs::remove_dir_all(&tree)?;
    Ok(deb)
}

/// The control file.
pub fn control(version: &str, arch: Arch, size_kib: u64) -> String {
    format!(
        "Package: sframe-trace\n\
         Version: {version}\n\
         Architecture: {}\n\
         Maintainer: sframe-trace maintainers <sframe-trace@users.noreply.github.com>\n\
         Installed-Size: {size_kib}\n\
         Section: devel\n\
         Priority: optional\n\
         Description: system-wide stack tracer walking SFrame tables in eBPF\n \
         sframe-trace samples the user and kernel stacks of running processes (one,\n \
         several or every process on the host) and unwinds them in the kernel with\n \
         SFrame and .eh_frame tables, without frame pointers. It writes folded stacks,\n \
         flame graphs, pprof, JSON or perf-script, or exports OpenTelemetry profiles.\n \
         .\n \
         The binary is static. A systemd unit for continuous export is installed\n \
         disabled; see /etc/default/sframe-trace.\n",
        arch.debian
    )
}

/// The changelog of a native package of `version`.
fn changelog(version: &str) -> String {
    format!(
        "sframe-trace ({version}) unstable; urgency=medium\n\n  \
         * Release {version}.\n\n \
         -- sframe-trace maintainers <sframe-trace@users.noreply.github.com>  Tue, 01 Dec 2026 00:00:00 +0000\n"
    )
}

/// `gzip -9n` of `bytes` (no name, no time: reproducible).
fn gzip(bytes: &[u8]) -> anyhow::Result<Vec<u8>> {
    use std::io::Write as _;
    let mut child = Command::new("gzip")
        .args(["-9n", "-c"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("running gzip")?;
    let mut stdin = child.stdin.take().context("gzip's stdin")?;
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output()?;
    writer.join().map_err(|_| anyhow::anyhow!("gzip writer panicked"))??;
    anyhow::ensure!(out.status.success(), "gzip failed");
    Ok(out.stdout)
}

/// Installed size in KiB (`du -sk`, without DEBIAN/).
fn du_kib(tree: &Path) -> anyhow::Result<u64> {
    let out = Command::new("du")
        .args(["-sk", "--exclude=DEBIAN"])
        .arg(tree)
        .output()
        .context("running du")?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .context("du printed no size")
}

/// `md5sum` lines of every file outside DEBIAN/ and /etc (conffiles are not listed).
fn md5sums(tree: &Path) -> anyhow::Result<String> {
    let out = Command::new("sh")
        .current_dir(tree)
        .args(["-c", "find usr lib -type f | LC_ALL=C sort | xargs md5sum"])
        .output()
        .context("running md5sum")?;
    anyhow::ensure!(out.status.success(), "md5sum failed");
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
