//! The turns of privileged tests, across threads and test processes alike: locks (`flock`) on
//! files under `target/tmp/turns/` (`support::state_dir`), so that two test processes (two `cargo test` runs, or a
//! runner that starts one process per test) take turns as the threads of one do.
//!
//! Three kinds of turn. An exclusive turn (the default: tests that keep the whole machine busy
//! or whose bounds are times) runs alone among privileged tests. Paired turns (tests that keep
//! about one CPU busy with the workload they judge, and judge stacks, names and counts, not
//! times) run two at a time ([`PAIRED_SLOTS`]); shared turns (tests that mostly wait: on
//! collectors, exports, ports, a terminal, a refusal) up to [`shared_slots`] at a time; both
//! beside each other, never beside an exclusive one. A waiting exclusive turn goes before
//! turns asked for later (`queue` is taken first by all, and held until the gate is had).
//!
//! `cargo xtask test` records how busy the machine's CPUs were during each test's turn (see
//! `support::Turn`): an exclusive test that leaves a CPU idle is one to pair.

use std::{
    fs::File,
    os::unix::fs::OpenOptionsExt as _,
    path::{Path, PathBuf},
    time::Duration,
};

/// The kind of a privileged test's turn (see the module's comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Alone among privileged tests.
    Exclusive,
    /// Beside one other paired test ([`PAIRED_SLOTS`]) and the shared ones.
    Paired,
    /// Beside other shared ones, up to [`shared_slots`] at a time, and the paired ones.
    Shared,
}

/// Paired turns at once: on 2 CPUs, two tests that each keep one busy.
pub const PAIRED_SLOTS: usize = 2;

/// Sets how many shared turns run at once ([`DEFAULT_SHARED_SLOTS`] when unset or not a
/// number from 1 to 16).
pub const SHARED_SLOTS_VAR: &str = "SFRAME_TRACE_SHARED_TURNS";

/// Shared turns at once by default: on 2 CPUs, three tests that mostly wait still leave a CPU
/// to the tracers.
pub const DEFAULT_SHARED_SLOTS: usize = 3;

/// How many shared turns run at once.
pub fn shared_slots() -> usize {
    std::env::var(SHARED_SLOTS_VAR)
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|n| (1..=16).contains(n))
        .unwrap_or(DEFAULT_SHARED_SLOTS)
}

/// A turn held: the locks are released when it is dropped (or the process ends).
pub struct Held {
    _gate: File,
    _slot: Option<File>,
}

/// Wait for a turn of `kind`.
pub fn take(kind: Kind) -> Held {
    let dir = dir();
    let queue = open(&dir.join("queue"));
    let gate = open(&dir.join("gate"));
    lock(&queue, libc::LOCK_EX);
    lock(
        &gate,
        match kind {
            Kind::Exclusive => libc::LOCK_EX,
            Kind::Paired | Kind::Shared => libc::LOCK_SH,
        },
    );
    drop(queue);
    let slot = match kind {
        Kind::Exclusive => None,
        Kind::Paired => Some(slot(&dir, "paired", PAIRED_SLOTS)),
        Kind::Shared => Some(slot(&dir, "shared", shared_slots())),
    };
    Held {
        _gate: gate,
        _slot: slot,
    }
}

/// One of the `count` slot files named `prefix-N`, locked (polled: slots free up as tests
/// end).
fn slot(dir: &Path, prefix: &str, count: usize) -> File {
    let mut slots: Vec<File> = (0..count).map(|n| open(&dir.join(format!("{prefix}-{n}")))).collect();
    loop {
        for n in 0..slots.len() {
            let fd = std::os::fd::AsFd::as_fd(&slots[n]);
            if sframe_trace::sys::fs::flock(fd, libc::LOCK_EX | libc::LOCK_NB).is_ok() {
                return slots.swap_remove(n);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `target/tmp/turns`, created if need be.
fn dir() -> PathBuf {
    let dir = super::state_dir().join("turns");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    dir
}

/// Open (create) a lock file: not through a link, closed in children (a tracer or workload
/// that outlives its test must not hold the turn).
fn open(path: &Path) -> File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .unwrap_or_else(|e| panic!("opening {}: {e}", path.display()))
}

/// `flock(file, how)`, waiting as long as it takes (interrupted calls are retried).
fn lock(file: &File, how: libc::c_int) {
    loop {
        let Err(err) = sframe_trace::sys::fs::flock(std::os::fd::AsFd::as_fd(file), how) else {
            return;
        };
        assert!(err.kind() == std::io::ErrorKind::Interrupted, "flock: {err}");
    }
}
