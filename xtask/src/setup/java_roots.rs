//! Newer JVMs for the Java tests: Debian sid's `openjdk-21-jre-headless` and
//! `openjdk-25-jre-headless` with their dependency closure (their own glibc included),
//! unpacked by `crate::debian::root` into
//! `${XDG_CACHE_HOME:-~/.cache}/sframe-trace/rootfs/sid-openjdk-21-25/`, once. The tests run
//! `java` chrooted into it (a JVM built for sid's glibc does not run on the host's), so that
//! the traced process's root is that root, as for a container's JVM. The host's apt and dpkg
//! state are not touched.

use std::{path::PathBuf, process::Command, time::Instant};

use anyhow::Context as _;

use crate::{
    cmd::{is_root, sh},
    debian::{self, root},
};

/// The variable that tells the integration tests where the root is (read by
/// tracer-user/tests/integration/support/roots.rs).
pub const VAR: &str = "SFRAME_TRACE_SID_JAVA_ROOT";

/// The root's directory name under `rootfs/` in the cache.
const NAME: &str = "sid-openjdk-21-25";

/// The JVMs' releases, and each one's `java` inside the root.
pub const RELEASES: [(&str, &str); 2] = [
    ("21", "usr/lib/jvm/java-21-openjdk-amd64/bin/java"),
    ("25", "usr/lib/jvm/java-25-openjdk-amd64/bin/java"),
];

/// The `LD_LIBRARY_PATH` the `java` of `release` runs with in the root: the loader finds its
/// `libjli.so` through `$ORIGIN`, which it cannot resolve without `/proc` (not mounted there).
pub fn library_path(release: &str) -> String {
    format!("/usr/lib/jvm/java-{release}-openjdk-amd64/lib")
}

/// Where the root is (whether it is there or not).
pub fn path() -> anyhow::Result<PathBuf> {
    Ok(debian::cache_dir()?.join("rootfs").join(NAME))
}

/// Build the root if it is not there yet.
pub fn java_root() -> anyhow::Result<()> {
    let started = Instant::now();
    let cache = debian::cache_dir()?;
    let spec = root::Spec {
        name: NAME,
        suite: "sid",
        arch: "amd64",
        packages: &["openjdk-21-jre-headless", "openjdk-25-jre-headless"],
        needs: RELEASES[1].1,
    };
    let dir = root::fetch(&cache, &spec, |dir| {
        if is_root() {
            for (release, java) in RELEASES {
                sh(Command::new("chroot")
                    .arg(dir)
                    .env("LD_LIBRARY_PATH", library_path(release))
                    .args([&format!("/{java}"), "-version"]))?;
            }
        }
        Ok(())
    })
    .context("building the unstable root of OpenJDK 21 and 25")?;
    eprintln!(
        "setup: OpenJDK 21 and 25 root in {:.1} s ({})",
        started.elapsed().as_secs_f64(),
        dir.display()
    );
    Ok(())
}
