//! The tracing workloads of fixtures/workloads (`fixtures/workloads/build.sh`), built once per
//! test process: each set the first time a test asks for it, into one directory of this process
//! under `target/tmp/workloads/` (`support::state_dir`; created with a random name, mode 0700, removed when the
//! process exits; those of processes gone are removed by the next), then shared by every test
//! of the process. Tests only run and read the programs; the few that write an output file
//! there name it after themselves.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::{Mutex, OnceLock},
};

/// Where the accuracy workloads were built ahead (`cargo xtask vm-test` for an aarch64 guest,
/// which has no cross tools: `fixtures/workloads/build.sh` output, one directory per set).
pub const PREBUILT_WORKLOADS_VAR: &str = "SFRAME_TRACE_WORKLOADS";

/// The tracing workloads of fixtures/workloads, by set (`SET/PROGRAM`).
pub struct Workloads {
    dir: PathBuf,
}

impl Workloads {
    /// The directory of the sets.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

/// The sets built so far by this process (held while one is built, so each is built once).
static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// This process's directory of built sets, made on first use.
static DIR: OnceLock<PathBuf> = OnceLock::new();

/// The tracing workloads of fixtures/workloads (sets `v1`, `v2`, `v3`, `none`; on aarch64 also
/// `v1-pac`, `v2-pac`, `v3-pac`): those of `sets` not built yet by this process are built (see
/// the module's comment), or all are taken from [`PREBUILT_WORKLOADS_VAR`] when it is set (each
/// of `sets` must be there).
pub fn build_workloads(sets: &[&str]) -> Workloads {
    if let Some(dir) = std::env::var_os(PREBUILT_WORKLOADS_VAR) {
        let dir = PathBuf::from(dir);
        for set in sets {
            assert!(
                dir.join(set).is_dir(),
                "{PREBUILT_WORKLOADS_VAR}={}: no set {set} there",
                dir.display()
            );
        }
        return Workloads { dir };
    }
    let dir = DIR.get_or_init(process_dir);
    // A build that failed (its test panicked holding the lock) is tried again by the next.
    let mut built = BUILT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let missing: Vec<&str> = sets
        .iter()
        .copied()
        .filter(|set| !built.iter().any(|b| b == set))
        .collect();
    if !missing.is_empty() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/workloads/build.sh");
        let build = Command::new(&script)
            .arg(dir)
            .args(&missing)
            .env("WORKLOAD_ARCH", std::env::consts::ARCH)
            .output()
            .expect("run fixtures/workloads/build.sh (needs bash, gcc, binutils)");
        assert!(
            build.status.success(),
            "fixtures/workloads/build.sh {} failed ({}):\n{}",
            missing.join(" "),
            build.status,
            String::from_utf8_lossy(&build.stderr)
        );
        built.extend(missing.iter().map(|set| (*set).to_owned()));
    }
    Workloads { dir: dir.clone() }
}

/// Make this process's directory (`PID-RANDOM` under `target/tmp/workloads/`, mode 0700) and
/// have it removed at exit; first remove those of processes that are gone.
fn process_dir() -> PathBuf {
    let base = super::state_dir().join("workloads");
    std::fs::create_dir_all(&base).unwrap_or_else(|e| panic!("creating {}: {e}", base.display()));
    remove_stale(&base);
    let dir = tempfile::Builder::new()
        .prefix(&format!("{}-", std::process::id()))
        .tempdir_in(&base)
        .unwrap_or_else(|e| panic!("a directory in {}: {e}", base.display()))
        .keep();
    // `remove_at_exit` does not unwind (it only reads a `OnceLock` and removes files, ignoring
    // errors). Not registered (no memory): the directory is left to the next run's
    // `remove_stale`.
    let _ = sframe_trace::sys::process::at_exit(remove_at_exit);
    dir
}

/// Registered with `atexit`: remove this process's directory (best effort).
extern "C" fn remove_at_exit() {
    if let Some(dir) = DIR.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Remove the directories of `base` whose process (the number before the `-`) is gone.
fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.split_once('-')).map(|(pid, _)| pid) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
