//! The private root of Debian trixie's `python3.13`: the package and its dependency closure
//! (its own glibc included) unpacked by `crate::debian::root` into
//! `${XDG_CACHE_HOME:-~/.cache}/sframe-trace/rootfs/trixie-python3.13/`, once. The Python
//! tests run the interpreter chrooted into it, so that the traced process's `/proc/PID/root`
//! is that root and the tracer reads its mapped files through it, as for a container's
//! processes. The host's apt and dpkg state are not touched.

use std::{path::PathBuf, process::Command, time::Instant};

use anyhow::Context as _;

use crate::{
    cmd::{is_root, output, sh},
    debian::{self, root},
};

/// The variable that tells the integration tests where the root is (read by
/// tracer-user/tests/integration/support/roots.rs, which falls back to [`path`]'s logic).
pub const VAR: &str = "SFRAME_TRACE_PYTHON_ROOT";

/// The root's directory name under `rootfs/` in the cache.
const NAME: &str = "trixie-python3.13";

/// The interpreter, inside the root.
const PYTHON: &str = "usr/bin/python3.13";

/// Where the root is (whether it is there or not).
pub fn path() -> anyhow::Result<PathBuf> {
    Ok(debian::cache_dir()?.join("rootfs").join(NAME))
}

/// Build the root if it is not there yet; say how long it took and how large it is.
pub fn python_root() -> anyhow::Result<()> {
    let started = Instant::now();
    let cache = debian::cache_dir()?;
    let spec = root::Spec {
        name: NAME,
        suite: "trixie",
        arch: "amd64",
        packages: &["python3.13"],
        needs: PYTHON,
    };
    let mut built = false;
    let dir = root::fetch(&cache, &spec, |dir| {
        built = true;
        // As root (the tests' case), the interpreter must run there before the root counts
        // as complete.
        if is_root() {
            sh(Command::new("chroot")
                .arg(dir)
                .args([&format!("/{PYTHON}"), "-c", "import sys; print(sys.version)"]))?;
        }
        Ok(())
    })
    .context("building the trixie root of python3.13")?;
    if !built {
        eprintln!("setup: python3.13 root present ({})", dir.display());
        return Ok(());
    }
    let size = output(Command::new("du").args(["-sh"]).arg(&dir)).unwrap_or_default();
    let size = size.split_whitespace().next().unwrap_or("?");
    eprintln!(
        "setup: python3.13 root built in {:.1} s, {size} ({})",
        started.elapsed().as_secs_f64(),
        dir.display()
    );
    Ok(())
}

/// The variable that tells the integration tests where the unstable root is.
pub const SID_VAR: &str = "SFRAME_TRACE_SID_PYTHON_ROOT";

/// The root's directory name of Debian unstable's `python3.14` and `python3.15`, whose
/// frames the tracer walks (tracer-user/tests/integration/python_session.rs).
const SID_NAME: &str = "sid-python3.14-3.15";

/// Where the unstable root is (whether it is there or not).
pub fn sid_path() -> anyhow::Result<PathBuf> {
    Ok(debian::cache_dir()?.join("rootfs").join(SID_NAME))
}

/// Build the root of unstable's `python3.14` and `python3.15` if it is not there yet.
pub fn sid_python_root() -> anyhow::Result<()> {
    let started = Instant::now();
    let cache = debian::cache_dir()?;
    let spec = root::Spec {
        name: SID_NAME,
        suite: "sid",
        arch: "amd64",
        packages: &["python3.14", "python3.15"],
        needs: "usr/bin/python3.15",
    };
    let dir = root::fetch(&cache, &spec, |dir| {
        if is_root() {
            for python in ["/usr/bin/python3.14", "/usr/bin/python3.15"] {
                sh(Command::new("chroot")
                    .arg(dir)
                    .args([python, "-c", "import sys; print(sys.version)"]))?;
            }
        }
        Ok(())
    })
    .context("building the unstable root of python3.14 and python3.15")?;
    eprintln!(
        "setup: python3.14 and python3.15 root in {:.1} s ({})",
        started.elapsed().as_secs_f64(),
        dir.display()
    );
    Ok(())
}
