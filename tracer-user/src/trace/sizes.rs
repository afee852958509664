//! A long session's state, watched: every [`EVERY`], the lengths of the session's long-lived
//! collections (objects, processes, names, stacks, tables) and the allocator's figures are
//! logged at debug level under the target `sframe_trace::sizes`
//! (`RUST_LOG=sframe_trace::sizes=debug`), one line each time, so that memory that grows in
//! a session of hours can be traced to what holds it. Nothing is logged otherwise. Each line
//! starts with `at_s`, the seconds since sampling started; the soak test
//! (tests/integration/hardening/soak.rs) reads these lines.

use std::time::{Duration, Instant};

use super::Sink;
use crate::manager::Manager;
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
    pub(super) fn tick(&mut self, manager: &Manager, sink: &Sink) {
        let catalog = manager.catalog();
        if !log::log_enabled!(target: "sframe_trace::sizes", log::Level::Debug)
            || self.last.is_some_and(|at| at.elapsed() < EVERY)
        {
            return;
        }
        self.last = Some(Instant::now());
        let mut line = String::new();
        let mut add = |name: &'static str, n: usize| line.push_str(&format!(" {name}={n}"));
        add("at_s", self.started.elapsed().as_secs() as usize);
        // Logged with what naming holds (`symbols.naming_kib`) at the same moment, so that memory
        // can be told apart from the symbol cache's, which is bounded on its own.
        add("rss_anon_kib", (super::memory::anon_rss_bytes() / 1024) as usize);
        allocator(&mut add);
        catalog.sizes(&mut add);
        manager.sizes(&mut add);
        sink.symbols.sizes(&mut add);
        sink.profile.sizes(&mut add);
        sink.copies.sizes(&mut add);
        add("late.held", sink.late.len());
        add("entries.kept", sink.entries.len());
        symfiles::sizes(&mut add);
        threads(&mut line);
        log::debug!(target: "sframe_trace::sizes", "sizes:{line}");
    }
}

/// What the threads hold of the heap, in KiB ([`crate::heap::per_thread`]): the bytes Rust
/// allocated less those it freed, `heap.counted_kib` in all and by kind of thread, the session's
/// (`heap.session_kib`: naming, processes, objects, exports), the blocking threads' that build
/// tables (`heap.blocking_kib`), the others alive (`heap.other_kib`) and those that ended
/// (`heap.ended_kib`). A kind may be negative: memory one thread allocated and another freed.
/// Unlike glibc's figures, the counts hold no allocator overhead, as `symbols.naming_kib`.
fn threads(line: &mut String) {
    use crate::heap::{Holder, per_thread};
    let me = std::process::id();
    let (mut session, mut blocking, mut other, mut ended) = (0isize, 0isize, 0isize, 0isize);
    for (holder, bytes) in per_thread() {
        let kind = match holder {
            Holder::Thread(tid) if tid == me => &mut session,
            Holder::Thread(tid) => match std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")) {
                Ok(comm) if comm.trim_end() == "tokio-runtime-w" => &mut blocking,
                Ok(_) => &mut other,
                Err(_) => &mut ended,
            },
            Holder::Ended => &mut ended,
            Holder::Others => &mut other,
        };
        *kind += bytes;
    }
    let total = session + blocking + other + ended;
    for (name, bytes) in [
        ("heap.counted_kib", total),
        ("heap.session_kib", session),
        ("heap.blocking_kib", blocking),
        ("heap.other_kib", other),
        ("heap.ended_kib", ended),
    ] {
        line.push_str(&format!(" {name}={}", bytes >> 10));
    }
}

/// What glibc's allocator holds, in KiB: in use, free in its arenas, and in mappings of their
/// own. (musl's allocator keeps no such statistics: nothing there.)
#[cfg_attr(
    not(target_env = "gnu"),
    expect(unused_variables, reason = "only glibc reports its heap")
)]
fn allocator(add: &mut dyn FnMut(&'static str, usize)) {
    #[cfg(target_env = "gnu")]
    {
        let stats = crate::sys::heap::stats();
        add("heap.in_use_kib", stats.in_use / 1024);
        add("heap.free_kib", stats.free / 1024);
        add("heap.arena_kib", stats.arena / 1024);
        add("heap.mmap_kib", stats.mmap / 1024);
    }
}
