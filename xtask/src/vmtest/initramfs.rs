//! The guest's initramfs: a static busybox, the guest init (`init.sh`), `/dev/console`, and the
//! modules the guest needs before it can reach its files (virtio PCI, 9p over virtio, overlayfs),
//! with their dependencies in load order and decompressed (busybox's insmod loads plain `.ko`).
//! Written as an uncompressed `newc` cpio archive, which every kernel unpacks; the archive
//! writer and the parsing of modprobe's plan are pure.

use std::{fs, path::Path, process::Command};

use anyhow::{Context as _, bail};

use super::kernel::Kernel;
use crate::cmd::output;

/// The guest init, run by the kernel as `/init`.
const INIT: &str = include_str!("init.sh");

/// The modules the guest init needs to mount the host's files, in the order asked of modprobe.
const BOOT_MODULES: &[&str] = &["virtio_pci", "9pnet_virtio", "9p", "overlay"];

/// A `newc` cpio archive under construction.
#[derive(Default)]
pub struct Cpio {
    bytes: Vec<u8>,
    inode: u32,
}

impl Cpio {
    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) {
        self.inode += 1;
        let fields = [
            self.inode,
            mode,
            0, // uid
            0, // gid
            1, // nlink
            0, // mtime
            data.len() as u32,
            0, // devmajor
            0, // devminor
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0, // check
        ];
        self.bytes.extend_from_slice(b"070701");
        for field in fields {
            self.bytes.extend_from_slice(format!("{field:08x}").as_bytes());
        }
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(0);
        self.pad();
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
    }

    pub fn dir(&mut self, name: &str) {
        self.entry(name, 0o040_755, (0, 0), &[]);
    }

    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.entry(name, 0o100_000 | mode, (0, 0), data);
    }

    pub fn char_device(&mut self, name: &str, major: u32, minor: u32) {
        self.entry(name, 0o020_600, (major, minor), &[]);
    }

    /// The archive, closed by its trailer.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, (0, 0), &[]);
        self.bytes
    }
}

/// The module files of modprobe's plan (`--show-depends`: `insmod PATH [OPTIONS]` per module to
/// load, `builtin NAME` for those compiled in), in load order, each once.
pub fn insmod_paths(plans: &[String]) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for line in plans.iter().flat_map(|plan| plan.lines()) {
        if let Some(path) = line
            .trim()
            .strip_prefix("insmod ")
            .and_then(|rest| rest.split_whitespace().next())
            && !paths.iter().any(|p| p == path)
        {
            paths.push(path.to_owned());
        }
    }
    paths
}

/// The archive's name for a module file: its load position first, so the guest's glob loads
/// them in order, and without its compression suffix.
pub fn module_name(position: usize, path: &str) -> String {
    let file = path.rsplit('/').next().unwrap_or(path);
    let file = [".xz", ".zst", ".gz"]
        .iter()
        .find_map(|s| file.strip_suffix(s))
        .unwrap_or(file);
    format!("{position:02}-{file}")
}

/// A module's bytes, decompressed with the tool its suffix names.
fn module_bytes(path: &str) -> anyhow::Result<Vec<u8>> {
    let tool = if path.ends_with(".xz") {
        "xz"
    } else if path.ends_with(".zst") {
        "zstd"
    } else if path.ends_with(".gz") {
        "gzip"
    } else {
        return fs::read(path).with_context(|| format!("reading {path}"));
    };
    let out = Command::new(tool)
        .args(["-dc", path])
        .output()
        .with_context(|| format!("running {tool} -dc {path}"))?;
    if !out.status.success() {
        bail!("{tool} could not decompress {path}");
    }
    Ok(out.stdout)
}

/// Build the initramfs of `kernel` with the static busybox at `busybox`.
pub fn build(kernel: &Kernel, busybox: &Path) -> anyhow::Result<Vec<u8>> {
    let root = kernel.module_root();
    // Packages that list no built-in modules (sid's split packages) leave modprobe unable to
    // tell a built-in module from a missing one: those are taken as built in, and a missing
    // one shows as the guest init's failure to mount the host's files.
    let lists_builtins = root
        .join("lib/modules")
        .join(&kernel.release)
        .join("modules.builtin")
        .exists();
    let mut plans = Vec::new();
    for module in BOOT_MODULES {
        let plan = output(
            Command::new("modprobe")
                .args(["-C", "/dev/null", "-d"])
                .arg(&root)
                .args(["-S", &kernel.release, "--show-depends", module]),
        );
        match plan {
            Some(plan) => plans.push(plan),
            None if !lists_builtins => {
                eprintln!(
                    "vm-test: kernel {} has no module {module}: taken as built in",
                    kernel.release
                )
            }
            None => bail!("kernel {} has no module {module}", kernel.release),
        }
    }
    let mut cpio = Cpio::default();
    for dir in [
        "bin",
        "dev",
        "proc",
        "sys",
        "host",
        "rw",
        "newroot",
        "lib",
        "lib/boot-modules",
    ] {
        cpio.dir(dir);
    }
    cpio.char_device("dev/console", 5, 1);
    cpio.file("init", 0o755, INIT.as_bytes());
    let busybox = fs::read(busybox).with_context(|| format!("reading {}", busybox.display()))?;
    cpio.file("bin/busybox", 0o755, &busybox);
    for (position, path) in insmod_paths(&plans).iter().enumerate() {
        let name = format!("lib/boot-modules/{}", module_name(position, path));
        cpio.file(&name, 0o644, &module_bytes(path)?);
    }
    Ok(cpio.finish())
}
