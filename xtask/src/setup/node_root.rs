//! A newer Node.js for the V8 tests: Debian sid's `nodejs` (24, with its `libnode` and the
//! dependency closure, its own glibc included), unpacked by `crate::debian::root` into
//! `${XDG_CACHE_HOME:-~/.cache}/sframe-trace/rootfs/sid-nodejs/`, once. The tests run `node`
//! chrooted into it, as a container's. The host's apt and dpkg state are not touched.

use std::{path::PathBuf, process::Command, time::Instant};

use anyhow::Context as _;

use crate::{
    cmd::{is_root, sh},
    debian::{self, root},
};

/// The variable that tells the integration tests where the root is (read by
/// tracer-user/tests/integration/support/roots.rs).
pub const VAR: &str = "SFRAME_TRACE_SID_NODE_ROOT";

/// The root's directory name under `rootfs/` in the cache.
const NAME: &str = "sid-nodejs";

/// `node` inside the root.
pub const NODE: &str = "usr/bin/node";

/// Where the root is (whether it is there or not).
pub fn path() -> anyhow::Result<PathBuf> {
    Ok(debian::cache_dir()?.join("rootfs").join(NAME))
}

/// Build the root if it is not there yet.
pub fn node_root() -> anyhow::Result<()> {
    let started = Instant::now();
    let cache = debian::cache_dir()?;
    let spec = root::Spec {
        name: NAME,
        suite: "sid",
        arch: "amd64",
        packages: &["nodejs"],
        needs: NODE,
    };
    let dir = root::fetch(&cache, &spec, |dir| {
        if is_root() {
            sh(Command::new("chroot").arg(dir).args([&format!("/{NODE}"), "--version"]))?;
        }
        Ok(())
    })
    .context("building the unstable root of Node.js")?;
    eprintln!(
        "setup: Node.js root in {:.1} s ({})",
        started.elapsed().as_secs_f64(),
        dir.display()
    );
    Ok(())
}
