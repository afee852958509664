//! `--max-memory` (150 MiB unless given): the bound on the tracer's own resident memory, its
//! anonymous pages (`RssAnon` of `/proc/self/status`: the heap its caches live in; the mapped
//! files `VmRSS` also counts are the kernel's to reclaim, and a system-wide session maps many,
//! so VmRSS would keep it shedding for nothing). The session looks at it at
//! every housekeeping tick; past the bound it sheds what it can build again (the symbol
//! cache's names and what blazesym parsed to find them, named again as frames ask) and gives
//! the freed memory back to the system, says so in its log (a warning, at most once per
//! [`SHED_INTERVAL`]) and counts it (`/metrics`: `sframe_trace_memory_sheds_total`). It never
//! stops the session: what the profile itself holds, the kernel tables and the samples are not
//! dropped, so the resident size may stay above a bound set too low, and the tracer goes on.

use std::time::{Duration, Instant};

use crate::symbolize::SymbolCache;

/// Caches are shed at most this often (they are rebuilt as frames ask, which costs time: a
/// resident size that stays above the bound must not make every tick rebuild them).
pub const SHED_INTERVAL: Duration = Duration::from_secs(10);

/// The bound, and when the caches were last shed.
#[derive(Debug)]
pub struct MemoryBound {
    max_bytes: u64,
    last_shed: Option<Instant>,
    /// Times the caches were shed.
    pub sheds: u64,
}

impl MemoryBound {
    pub fn new(max_bytes: u64) -> MemoryBound {
        MemoryBound {
            max_bytes,
            last_shed: None,
            sheds: 0,
        }
    }

    /// The bound, in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Whether the caches are to be shed now, the resident size being `rss_bytes` at `now`:
    /// above the bound, and not shed within [`SHED_INTERVAL`]. Counts the shedding it allows.
    pub fn shed_now(&mut self, rss_bytes: u64, now: Instant) -> bool {
        if rss_bytes <= self.max_bytes || self.last_shed.is_some_and(|t| now.duration_since(t) < SHED_INTERVAL) {
            return false;
        }
        self.last_shed = Some(now);
        self.sheds += 1;
        true
    }

    /// Look at the resident size; past the bound (see [`Self::shed_now`]) empty `symbols`
    /// and say so. The session hands the freed memory back (`SymbolCache::take_dropped`).
    pub fn bound(&mut self, symbols: &mut SymbolCache) {
        let rss = anon_rss_bytes();
        if self.shed_now(rss, Instant::now()) {
            let names = symbols.cached_names();
            symbols.shed();
            log::warn!(
                "resident memory (RssAnon) {} MiB is over --max-memory {} MiB: {names} cached frame names and the \
                 symbol data parsed for them were dropped (found again as frames ask; shed {} times so far)",
                rss >> 20,
                self.max_bytes >> 20,
                self.sheds
            );
        }
    }
}

/// The tracer's anonymous resident memory, from `RssAnon` in `/proc/self/status` (0 when it
/// cannot be read: then nothing is shed).
pub fn anon_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    parse_rss_anon(&status)
}

/// `RssAnon:  1234 kB` in a status text, in bytes.
fn parse_rss_anon(status: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse::<u64>().ok())
        .map_or(0, |kb| kb.saturating_mul(1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under the bound nothing is shed; above it the caches are shed once, then not again
    /// within the interval however long the size stays above, then again after it.
    #[test]
    fn sheds_above_the_bound_at_most_once_an_interval() {
        let mut bound = MemoryBound::new(100);
        let start = Instant::now();
        assert!(!bound.shed_now(100, start));
        assert!(bound.shed_now(101, start));
        assert!(!bound.shed_now(500, start + Duration::from_secs(1)));
        assert!(!bound.shed_now(500, start + SHED_INTERVAL - Duration::from_millis(1)));
        assert!(bound.shed_now(500, start + SHED_INTERVAL));
        assert_eq!(bound.sheds, 2);
    }

    /// `RssAnon` is read in bytes; a status without it, or a malformed one, gives 0 (nothing
    /// shed), and this process has some.
    #[test]
    fn rss_anon_is_read_from_the_status() {
        assert_eq!(parse_rss_anon("VmRSS:\t 9000 kB\nRssAnon:\t    2048 kB\n"), 2 << 20);
        assert_eq!(parse_rss_anon("VmRSS:\t 9000 kB\n"), 0);
        assert_eq!(parse_rss_anon("RssAnon: lots kB\n"), 0);
        assert!(anon_rss_bytes() > 0);
    }
}
