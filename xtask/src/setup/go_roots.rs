//! Go toolchains newer than the host's (Debian bookworm's 1.19) for the Go tests: Debian sid's
//! `golang-1.NN-go` of each release in [`RELEASES`] the suite has, with its dependency closure
//! (the standard library's source), unpacked by `crate::debian::root` into
//! `${XDG_CACHE_HOME:-~/.cache}/sframe-trace/rootfs/sid-golang-1.NN/`, once. Go's tools are
//! static executables that find their standard library from their own path: they run from
//! there, no chroot. The host's apt and dpkg state are not touched.

use std::path::PathBuf;

use anyhow::Context as _;

use crate::debian::{self, Apt, root};

/// The variable that names the toolchains to the tests (`go` executables, `:`-separated; read
/// by `sframe_trace::testing::go::toolchains`, which falls back to [`paths`]' logic).
pub const VAR: &str = "SFRAME_TRACE_GO_TOOLCHAINS";

/// The Go releases fetched when sid has them.
const RELEASES: [&str; 2] = ["1.26", "1.27"];

/// The root's directory name under `rootfs/` of release `release`.
fn name(release: &str) -> String {
    format!("sid-golang-{release}")
}

/// The `go` executable inside the root of `release`.
fn go_in_root(release: &str) -> String {
    format!("usr/lib/go-{release}/bin/go")
}

/// The `go` of every release whose root is there.
pub fn paths() -> anyhow::Result<Vec<PathBuf>> {
    let rootfs = debian::cache_dir()?.join("rootfs");
    Ok(RELEASES
        .iter()
        .map(|release| rootfs.join(name(release)).join(go_in_root(release)))
        .filter(|go| go.is_file())
        .collect())
}

/// Unpack the releases sid has and that are not there yet; say which.
pub fn go_roots() -> anyhow::Result<()> {
    let cache = debian::cache_dir()?;
    let apt = Apt::new(&cache, "sid", "amd64")?;
    apt.update().context("updating the private lists of sid")?;
    for release in RELEASES {
        let package = format!("golang-{release}-go");
        if !apt.has(&package) {
            eprintln!("setup: sid has no {package}: Go {release} is not tested");
            continue;
        }
        let (name, needs) = (name(release), go_in_root(release));
        let packages = [package.as_str()];
        let spec = root::Spec {
            name: &name,
            suite: "sid",
            arch: "amd64",
            packages: &packages,
            needs: &needs,
        };
        let dir = root::fetch(&cache, &spec, |_| Ok(())).with_context(|| format!("unpacking sid's {package}"))?;
        eprintln!("setup: Go {release} present ({})", dir.join(&needs).display());
    }
    Ok(())
}
