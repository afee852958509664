//! The JIT-name budget: what the names of JIT code (perf maps, jitdumps and the ELF images
//! built from them) may hold across all traced processes, and how long reading them may take.
//! Both are hostile (any process writes its own map or dump, as large and as fast growing as
//! the limits let it), so:
//! 1. memory: all of them together hold at most `--max-jit-memory` bytes (estimated: each
//!    name or record with its index entry), one process at most a [`SHARE_DIVISOR`]th of it;
//!    a line, record or image past that is dropped and counted by name (`*_over_budget`), and
//!    the names it would have given are missing, never wrong;
//! 2. time: one process's files are read for at most [`PROCESS_TIME`] per [`PERIOD`], all
//!    processes' for at most [`TOTAL_TIME`] (past it, a process that had less than [`FLOOR`]
//!    still gets that much, [`FLOORS_TIME`] in all: a few processes with huge files do not
//!    starve the others), and never longer than [`STEP`] at a time (a step that overran is
//!    paid for in the next period); a read
//!    cut short stops at its last complete line or record and goes on from there later (the
//!    names fall behind, counted in `reads_behind`). The session's loop, which also handles
//!    signals and the duration, thus never spends more than [`STEP`] at once on JIT files.
//!
//! Pure bookkeeping: no I/O.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use serde::Serialize;

/// `--max-jit-memory` unless given.
pub const DEFAULT_MAX: u64 = 256 << 20;
/// One process holds at most this fraction of the budget (so that, with the budget full of a
/// few processes' names, others still get theirs).
pub const SHARE_DIVISOR: u64 = 4;
/// The period the time budgets are counted over.
pub const PERIOD: Duration = Duration::from_secs(1);
/// Time one process's JIT files may take per [`PERIOD`].
pub const PROCESS_TIME: Duration = Duration::from_millis(100);
/// Time all processes' JIT files may take per [`PERIOD`].
pub const TOTAL_TIME: Duration = Duration::from_millis(300);
/// The longest stretch of reading at once.
pub const STEP: Duration = Duration::from_millis(50);
/// What a process gets per [`PERIOD`] even past [`TOTAL_TIME`], and all such together.
pub const FLOOR: Duration = Duration::from_millis(10);
pub const FLOORS_TIME: Duration = Duration::from_millis(200);

/// What one process's JIT names are held in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Part {
    /// The perf map of one incarnation.
    PerfMap(u32),
    /// The records of its jitdump.
    Dump,
    /// The ELF images built from them (held to the end of the session).
    Images,
}

/// What the summary says about the budget.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BudgetStats {
    /// `--max-jit-memory`, and the most held at once.
    pub limit_bytes: u64,
    pub peak_bytes: u64,
    /// Perf-map lines, jitdump code loads and jitdump images dropped because the budget (or
    /// their process's share of it) was full.
    pub perf_map_lines_over_budget: u64,
    pub jitdump_records_over_budget: u64,
    pub jitdump_images_over_budget: u64,
    /// Reads of JIT files cut short or put off because their process (or all) had used their
    /// time for the period: their names come later.
    pub reads_behind: u64,
}

/// The budget's state (module docs).
#[derive(Debug)]
pub struct JitBudget {
    limit: u64,
    total: u64,
    held: HashMap<(u32, Part), u64>,
    per_pid: HashMap<u32, u64>,
    period_start: Option<Instant>,
    spent_total: Duration,
    spent: HashMap<u32, Duration>,
    /// Spent past [`TOTAL_TIME`] this period (on [`FLOOR`]s).
    floors: Duration,
    /// Once set (the session is ending), no read goes past it.
    end_by: Option<Instant>,
    pub stats: BudgetStats,
}

impl Default for JitBudget {
    fn default() -> JitBudget {
        JitBudget::new(DEFAULT_MAX)
    }
}

impl JitBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> JitBudget {
        JitBudget {
            limit,
            total: 0,
            held: HashMap::new(),
            per_pid: HashMap::new(),
            period_start: None,
            spent_total: Duration::ZERO,
            spent: HashMap::new(),
            floors: Duration::ZERO,
            end_by: None,
            stats: BudgetStats {
                limit_bytes: limit,
                ..BudgetStats::default()
            },
        }
    }

    /// The most one process may hold.
    pub fn share(&self) -> u64 {
        self.limit / SHARE_DIVISOR
    }

    /// Bytes held in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// How many bytes `part` of `pid` may hold in all (what it holds now included).
    pub fn room(&self, pid: u32, part: Part) -> u64 {
        let own = self.held.get(&(pid, part)).copied().unwrap_or(0);
        let pid_total = self.per_pid.get(&pid).copied().unwrap_or(0);
        let free = self
            .share()
            .saturating_sub(pid_total)
            .min(self.limit.saturating_sub(self.total));
        own.saturating_add(free)
    }

    /// `part` of `pid` holds `bytes` now.
    pub fn set(&mut self, pid: u32, part: Part, bytes: u64) {
        let old = self.held.insert((pid, part), bytes).unwrap_or(0);
        if bytes == 0 {
            self.held.remove(&(pid, part));
        }
        let pid_total = self.per_pid.entry(pid).or_default();
        *pid_total = pid_total.saturating_sub(old).saturating_add(bytes);
        if *pid_total == 0 {
            self.per_pid.remove(&pid);
        }
        self.total = self.total.saturating_sub(old).saturating_add(bytes);
        self.stats.peak_bytes = self.stats.peak_bytes.max(self.total);
    }

    /// Until when `pid`'s files may be read now (at most [`STEP`]), `None` when its time (or
    /// everybody's) for this period is used (counted: its names fall behind). A `must` read
    /// (a process's last, at its exit) gets a [`STEP`] whatever was used, but never past the
    /// session's end ([`JitBudget::ending`]).
    pub fn grant(&mut self, pid: u32, must: bool) -> Option<Instant> {
        let now = Instant::now();
        self.roll(now);
        let left = if must { STEP } else { self.left(pid) };
        let mut until = now + left;
        if let Some(end) = self.end_by {
            until = until.min(end);
        }
        if until <= now {
            self.stats.reads_behind += 1;
            return None;
        }
        Some(until)
    }

    /// A new period when the last one is over. What was spent past a period's allowance (a
    /// step overran its time) is owed by the next: on average, no more than the allowance.
    fn roll(&mut self, now: Instant) {
        if self.period_start.is_none_or(|at| now.duration_since(at) >= PERIOD) {
            self.period_start = Some(now);
            self.spent_total = self.spent_total.saturating_sub(TOTAL_TIME + self.floors);
            self.floors = Duration::ZERO;
            self.spent.retain(|_, spent| {
                *spent = spent.saturating_sub(PROCESS_TIME);
                !spent.is_zero()
            });
        }
    }

    /// The time `pid` may take now (module docs), in this period.
    fn left(&self, pid: u32) -> Duration {
        let spent = self.spent.get(&pid).copied().unwrap_or_default();
        let within = PROCESS_TIME
            .saturating_sub(spent)
            .min(TOTAL_TIME.saturating_sub(self.spent_total));
        let floor = match FLOORS_TIME > self.floors {
            true => FLOOR.saturating_sub(spent),
            false => Duration::ZERO,
        };
        within.max(floor).min(STEP)
    }

    /// Whether `pid` has time left this period (without taking any).
    pub fn has_time(&self, pid: u32) -> bool {
        let fresh = self.period_start.is_none_or(|at| at.elapsed() >= PERIOD);
        let owes = self.spent.get(&pid).is_some_and(|&spent| spent >= 2 * PROCESS_TIME);
        (fresh && !owes) || !self.left(pid).is_zero()
    }

    /// `pid`'s files were read from `since` until now.
    /// (Reads timed without a grant, a JVM's code heaps, start a period as a grant does:
    /// what they spent is paid off as periods pass.)
    pub fn spend(&mut self, pid: u32, since: Instant) {
        self.roll(since);
        let took = since.elapsed();
        *self.spent.entry(pid).or_default() += took;
        if self.spent_total >= TOTAL_TIME {
            self.floors += took;
        }
        self.spent_total += took;
    }

    /// The session is ending: reads from now on end by `within` from now, together.
    pub fn ending(&mut self, within: Duration) {
        self.end_by = Some(Instant::now() + within);
    }
}

#[cfg(test)]
mod tests;
