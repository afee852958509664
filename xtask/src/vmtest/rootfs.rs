//! The root file system of aarch64 guests: Debian arm64 packages (and what they depend on)
//! unpacked by `crate::debian::root` into `rootfs/SUITE-arm64/` in the cache, once (nothing
//! here can run arm64 code, so no maintainer script runs). The guest init mounts it where an
//! x86-64 guest mounts this machine's root; the binaries under test are cross-built here and
//! reached through the shared repository.

use std::{fs, os::unix::fs::symlink, path::Path, path::PathBuf};

use crate::debian::root::{self, Spec};

/// The suite the root file system is taken from (its glibc must be as old as the one the
/// cross compiler links against, Debian 12's).
pub const SUITE: &str = "bookworm";

/// What the guest runs besides the cross-built binaries: a shell and its tools (the init's
/// static busybox, which also serves as `/bin/sh`), the libraries of a Rust program, and what
/// the end-to-end tests run: gcc (they build their workloads), binutils' `nm`, util-linux's
/// `prlimit` and `unshare`, bash and coreutils (the tests' scripts), and libc's separate debug
/// information (found by build-id under /usr/lib/debug, as a user installs it: libc's own
/// functions, `__libc_start_call_main` among them, are not in its dynamic symbol table).
const PACKAGES: &[&str] = &[
    "busybox-static",
    "bash",
    "coreutils",
    "libc6",
    "libc6-dbg",
    "libgcc-s1",
    "gcc",
    "libc6-dev",
    "binutils",
    "util-linux",
];

/// The root file system of Debian architecture `arch` (built if not yet cached).
pub fn fetch(cache: &Path, arch: &str) -> anyhow::Result<PathBuf> {
    let name = format!("{SUITE}-{arch}");
    let spec = Spec {
        name: &name,
        suite: SUITE,
        arch,
        packages: PACKAGES,
        needs: "bin/busybox",
    };
    root::fetch(cache, &spec, |dir| {
        for sub in ["lib/modules", "boot"] {
            fs::create_dir_all(dir.join(sub))?;
        }
        if !dir.join("bin/sh").exists() {
            symlink("busybox", dir.join("bin/sh"))?;
        }
        Ok(())
    })
}
