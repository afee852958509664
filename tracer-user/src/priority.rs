//! The priority of a tracing session's thread, the one that drains the ring buffers (the session
//! runs on one thread: `commands::runtime`). A root tracer that must keep up with the samples
//! of every process cannot wait its turn behind them: one user's 128 spinning threads made
//! `-d 4` last 33.6 s at normal priority, and still 8.1 s at nice -10, because any nice value
//! only buys a share that shrinks with the number of runnable threads a user can make. So by
//! default the thread runs under `SCHED_FIFO` at priority 1, the lowest real-time one: ahead of
//! every normal thread, behind all real-time work, and bounded by the kernel's real-time
//! throttling (`kernel.sched_rt_runtime_us`, 95 % of each CPU by default) should it ever spin.
//! `SCHED_RESET_ON_FORK` is set with it, so the threads the session starts (table builds) and
//! the commands it launches run at normal priority, but for the thread the session waits on
//! to read processes' memory (`python::pymem`), which takes the session's priority
//! ([`inherit`]): at normal priority, behind the same busy threads, each of its reads kept the
//! session waiting. `--drain-priority` picks another (`nice:N`, `none`); where `SCHED_FIFO` is
//! not allowed (a cgroup without real-time time), the thread falls back to nice -20, with a
//! warning.

use std::{fmt, sync::Mutex};

/// The priority the session's thread was given, for the threads it waits on ([`inherit`]).
static SESSION: Mutex<DrainPriority> = Mutex::new(DrainPriority::Unchanged);

/// How the session's thread is scheduled (`--drain-priority`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainPriority {
    /// `SCHED_FIFO` at this priority (1-99).
    Fifo(u8),
    /// Normal scheduling at this nice value (-20 to 19).
    Nice(i8),
    /// Left as it is.
    Unchanged,
}

impl Default for DrainPriority {
    fn default() -> DrainPriority {
        DrainPriority::Fifo(1)
    }
}

impl fmt::Display for DrainPriority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DrainPriority::Fifo(p) => write!(f, "fifo:{p}"),
            DrainPriority::Nice(n) => write!(f, "nice:{n}"),
            DrainPriority::Unchanged => f.write_str("none"),
        }
    }
}

/// `fifo:N` (1-99), `nice:N` (-20 to 19) or `none`.
pub fn parse(text: &str) -> Result<DrainPriority, String> {
    let bad = || format!("{text:?}: expected fifo:N (1-99), nice:N (-20 to 19) or none");
    if text == "none" {
        return Ok(DrainPriority::Unchanged);
    }
    let (kind, value) = text.split_once(':').ok_or_else(bad)?;
    match kind {
        "fifo" => match value.parse::<u8>() {
            Ok(p @ 1..=99) => Ok(DrainPriority::Fifo(p)),
            _ => Err(bad()),
        },
        "nice" => match value.parse::<i8>() {
            Ok(n @ -20..=19) => Ok(DrainPriority::Nice(n)),
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

/// Schedule the calling thread (the session's) as `priority` says; what could not be done is a
/// warning.
pub fn apply(priority: DrainPriority) {
    *SESSION.lock().unwrap_or_else(|e| e.into_inner()) = priority;
    set(priority);
}

/// Schedule `thread`, just spawned by the session's thread, as the session's was ([`apply`]):
/// a thread the session waits on. Set from here, before the thread first runs (left to
/// itself, it would first have to be scheduled at normal priority, behind the busy threads it
/// is to run ahead of). A nice value can only be set by the thread itself ([`inherit_nice`]).
pub fn inherit(thread: &std::thread::JoinHandle<()>) {
    if let DrainPriority::Fifo(p) = *SESSION.lock().unwrap_or_else(|e| e.into_inner())
        && let Err(r) = crate::sys::priority::thread_fifo(thread, p)
    {
        log::debug!("cannot run a helper thread under SCHED_FIFO: error {r}");
    }
}

/// In a thread the session waits on: its nice value as the session's (see [`inherit`]).
pub fn inherit_nice() {
    if let DrainPriority::Nice(n) = *SESSION.lock().unwrap_or_else(|e| e.into_inner()) {
        nice(n);
    }
}

fn set(priority: DrainPriority) {
    match priority {
        DrainPriority::Unchanged => {}
        DrainPriority::Fifo(p) => {
            if let Err(err) = crate::sys::priority::own_fifo(p) {
                log::warn!("cannot run the session's thread under SCHED_FIFO ({err}); at nice -20 instead");
                nice(-20);
            }
        }
        DrainPriority::Nice(n) => nice(n),
    }
}

/// Set the calling thread's nice value.
fn nice(n: i8) {
    if let Err(err) = crate::sys::priority::own_nice(n) {
        log::warn!("cannot set the session's thread to nice {n}: {err}");
    }
}

#[cfg(test)]
mod tests {
    use super::{DrainPriority, parse};

    /// The flag's values and their bounds: what is accepted reads back as written.
    #[test]
    fn values_are_parsed_and_bounded() {
        assert_eq!(parse("fifo:1"), Ok(DrainPriority::Fifo(1)));
        assert_eq!(parse("nice:-10"), Ok(DrainPriority::Nice(-10)));
        assert_eq!(parse("none"), Ok(DrainPriority::Unchanged));
        for bad in [
            "fifo:0", "fifo:100", "nice:-21", "nice:20", "rr:1", "fifo", "", "nice:x",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        for good in ["fifo:1", "fifo:99", "nice:-20", "nice:19", "none"] {
            assert_eq!(parse(good).map(|p| p.to_string()).as_deref(), Ok(good));
        }
        assert_eq!(DrainPriority::default().to_string(), "fifo:1");
    }
}
