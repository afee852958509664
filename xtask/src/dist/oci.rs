//! The container image of one architecture as an OCI image archive (`oci-archive`, what
//! `podman load` and `skopeo copy oci-archive:` take): one layer holding the static binary
//! alone at `/sframe-trace` (and an empty `/tmp`), no base image, the binary as entrypoint.
//! Written by hand from the image specification: `oci-layout`, `index.json`, and the blobs
//! (layer, config, manifest) named by their sha256, all reproducible (fixed times and owners).

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::Context as _;
use serde_json::json;

use super::Arch;
use crate::cmd::sh;

/// The name `podman load` gives the image: `localhost/sframe-trace:VERSION`.
pub fn reference(version: &str) -> String {
    format!("localhost/sframe-trace:{version}")
}

/// Write `sframe-trace-VERSION-ARCH.oci.tar` into `out` with `binary` as the only file; its path.
pub fn image(binary: &Path, version: &str, arch: Arch, out: &Path) -> anyhow::Result<PathBuf> {
    let work = out.join(format!("oci-{}", arch.name));
    if work.exists() {
        fs::remove_dir_all(&work)?;
    }
    let layout = work.join("layout");
    let blobs = layout.join("blobs/sha256");
    fs::create_dir_all(&blobs)?;
    let rootfs = work.join("rootfs");
    fs::create_dir_all(rootfs.join("tmp"))?;
    fs::copy(binary, rootfs.join("sframe-trace"))?;
    sh(Command::new("chmod").arg("1777").arg(rootfs.join("tmp")))?;
    let layer_tar = work.join("layer.tar");
    sh(&mut super::tar(
        &rootfs,
        &layer_tar,
        &["sframe-trace".as_ref(), "tmp".as_ref()],
        false,
    ))?;
    let diff_id = sha256(&layer_tar)?;
    sh(Command::new("gzip").args(["-9n", "-f"]).arg(&layer_tar))?;
    let layer = blob(&blobs, &work.join("layer.tar.gz"))?;
    let config = json!({
        "architecture": arch.debian,
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {
            "Entrypoint": ["/sframe-trace"],
            "Env": ["PATH=/"],
            "WorkingDir": "/tmp",
            "Labels": {
                "org.opencontainers.image.title": "sframe-trace",
                "org.opencontainers.image.version": version,
                "org.opencontainers.image.description": "System-wide stack tracer walking SFrame tables in eBPF; run with --privileged --pid=host",
            },
        },
        "rootfs": { "type": "layers", "diff_ids": [format!("sha256:{diff_id}")] },
        "history": [{ "created": "1970-01-01T00:00:00Z", "created_by": "cargo xtask dist" }],
    });
    let config = write_blob(&blobs, serde_json::to_vec(&config)?)?;
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": { "mediaType": "application/vnd.oci.image.config.v1+json", "digest": config.0, "size": config.1 },
        "layers": [{ "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer.0, "size": layer.1 }],
    });
    let manifest = write_blob(&blobs, serde_json::to_vec(&manifest)?)?;
    let index = json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest.0,
            "size": manifest.1,
            "platform": { "architecture": arch.debian, "os": "linux" },
            "annotations": { "org.opencontainers.image.ref.name": reference(version) },
        }],
    });
    fs::write(layout.join("index.json"), serde_json::to_vec(&index)?)?;
    fs::write(layout.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    let archive = out.join(format!("sframe-trace-{version}-{}.oci.tar", arch.name));
    let members = ["oci-layout".as_ref(), "index.json".as_ref(), "blobs".as_ref()];
    sh(&mut super::tar(&layout, &archive, &members, false))?;
    fs::remove_dir_all(&work)?;
    Ok(archive)
}

/// The sha256 of a file, hex.
fn sha256(path: &Path) -> anyhow::Result<String> {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .context("running sha256sum")?;
    anyhow::ensure!(out.status.success(), "sha256sum {} failed", path.display());
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .map(str::to_owned)
        .context("sha256sum printed nothing")
}

/// Move `file` into `blobs` under its digest: (`sha256:HEX`, size).
fn blob(blobs: &Path, file: &Path) -> anyhow::Result<(String, u64)> {
    let hex = sha256(file)?;
    let size = fs::metadata(file)?.len();
    fs::rename(file, blobs.join(&hex))?;
    Ok((format!("sha256:{hex}"), size))
}

/// Write `bytes` into `blobs` under their digest.
fn write_blob(blobs: &Path, bytes: Vec<u8>) -> anyhow::Result<(String, u64)> {
    let tmp = blobs.join("incoming");
    fs::write(&tmp, bytes)?;
    blob(blobs, &tmp)
}
