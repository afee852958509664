//! A long session's state, watched: every [`EVERY`], the lengths of the session's long-lived
//! collections (objects, processes, names, stacks, tables) and the allocator's figures are
//! logged at debug level under the target `sframe_trace::sizes`
//! (`RUST_LOG=sframe_trace::sizes=debug`), one line each time, so that memory that grows in
//! a session of hours can be traced to what holds it. Nothing is logged otherwise. Each line
//! starts with `at_s`, the seconds since sampling started; the soak test
//! (tests/integration/hardening/soak.rs) reads these lines.

use std::time::{Duration, Instant};

use super::{Sink, follow::Follower};
use crate::registry::Catalog;
use crate::symfiles;

/// How often the sizes are logged.
const EVERY: Duration = Duration::from_secs(10);

/// Logs the sizes at most every [`EVERY`].
pub(super) struct SizeLog {
    started: Instant,
    last: Option<Instant>,
}

impl SizeLog {
    /// A log of a session sampling from now on.
    pub(super) fn new() -> SizeLog {
        SizeLog {
            started: Instant::now(),
            last: None,
        }
    }

    /// Log the sizes if the log wants them and they are due.
    pub(super) fn tick(&mut self, catalog: &Catalog, follower: &Follower, sink: &Sink) {
        if !log::log_enabled!(target: "sframe_trace::sizes", log::Level::Debug)
            || self.last.is_some_and(|at| at.elapsed() < EVERY)
        {
            return;
        }
        self.last = Some(Instant::now());
        let mut line = String::new();
        let mut add = |name: &'static str, n: usize| line.push_str(&format!(" {name}={n}"));
        add("at_s", self.started.elapsed().as_secs() as usize);
        allocator(&mut add);
        catalog.sizes(&mut add);
        follower.sizes(&mut add);
        sink.symbols.sizes(&mut add);
        sink.profile.sizes(&mut add);
        sink.copies.sizes(&mut add);
        symfiles::sizes(&mut add);
        log::debug!(target: "sframe_trace::sizes", "sizes:{line}");
    }
}

/// What glibc's allocator holds, in KiB: in use, free in its arenas, and in mappings of their
/// own.
fn allocator(add: &mut dyn FnMut(&'static str, usize)) {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: mallinfo2 only reads the allocator's statistics.
        let info = unsafe { libc::mallinfo2() };
        add("heap.in_use_kib", info.uordblks / 1024);
        add("heap.free_kib", info.fordblks / 1024);
        add("heap.arena_kib", info.arena / 1024);
        add("heap.mmap_kib", info.hblkhd / 1024);
    }
}
