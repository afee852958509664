//! The summary printed on stderr at the end: samples and losses, complete and truncated stacks
//! by stop reason, frames by source, and the unwind tables loaded.

use std::{collections::BTreeMap, fmt, time::Duration};

use tracer_common::{Counter, walk::StopReason};

use super::{
    objects::{Catalog, NoTable, TableSource},
    profile::Profile,
};

/// Objects without a table whose reason is printed in full.
const MAX_NOTES: usize = 8;

pub struct Summary<'a> {
    pub elapsed: Duration,
    pub why: &'static str,
    pub profile: &'a Profile,
    pub catalog: &'a Catalog,
    pub counters: Vec<(Counter, u64)>,
    pub stops: Vec<(StopReason, u64)>,
    /// Kernel memory the loaded tables use, and the table maps' size.
    pub table_bytes: u64,
    pub table_capacity_bytes: u64,
    pub follow: super::follow::FollowStats,
}

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let counter = |c: Counter| self.counters.iter().find(|(k, _)| *k == c).map_or(0, |(_, v)| *v);
        writeln!(
            f,
            "sframe-trace: {} samples in {:.1} s ({}), {} lost",
            self.profile.samples,
            self.elapsed.as_secs_f64(),
            self.why,
            counter(Counter::EventsLost),
        )?;
        let complete = self
            .stops
            .iter()
            .find(|(r, _)| *r == StopReason::Outermost)
            .map_or(0, |(_, n)| *n);
        let truncated: Vec<String> = self
            .stops
            .iter()
            .filter(|(r, n)| *r != StopReason::Outermost && *n > 0)
            .map(|(r, n)| format!("{} {n}", r.name()))
            .collect();
        let total: u64 = self
            .stops
            .iter()
            .filter(|(r, _)| *r != StopReason::Outermost)
            .map(|(_, n)| n)
            .sum();
        write!(f, "  stacks: {complete} complete, {total} truncated")?;
        if !truncated.is_empty() {
            write!(f, " ({})", truncated.join(", "))?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "  user frames: {} from SFrame, {} from .eh_frame, {} from frame pointers",
            self.profile.sframe_frames, self.profile.cfi_frames, self.profile.fp_frames
        )?;
        let tables: Vec<_> = self
            .catalog
            .objects
            .iter()
            .filter_map(|o| o.table.as_ref().ok())
            .collect();
        let with = |source| tables.iter().filter(|t| t.source == source).count();
        let rows: u64 = tables.iter().map(|t| t.rows).sum();
        let mut without: BTreeMap<&str, u64> = BTreeMap::new();
        for o in &self.catalog.objects {
            if let Err(why) = &o.table {
                let reason = match why {
                    NoTable::NoUnwindInfo => "no unwind information",
                    NoTable::Unreadable(_) => "unreadable",
                    NoTable::TooLarge(_) => "too large (over the per-object read limit)",
                    NoTable::NoRoom(_) => "no room in the table maps (--max-table-memory)",
                };
                *without.entry(reason).or_default() += 1;
            }
        }
        let without: Vec<String> = without.iter().map(|(why, n)| format!("{n} {why}")).collect();
        writeln!(
            f,
            "  tables: {} with SFrame, {} with .eh_frame ({rows} rows, {} KiB of {} KiB of table maps in use), {} without{}",
            with(TableSource::Sframe),
            with(TableSource::Cfi),
            self.table_bytes.div_ceil(1024),
            self.table_capacity_bytes.div_ceil(1024),
            self.catalog.objects.len() - tables.len(),
            if without.is_empty() {
                String::new()
            } else {
                format!(" ({})", without.join(", "))
            },
        )?;
        // Exact, for `cargo xtask bench` and the 4-bytes-per-row aim (rows: the unwind rows the
        // tables were built from).
        if rows > 0 {
            writeln!(
                f,
                "  table memory: {} bytes in kernel maps for {rows} rows, {:.2} bytes per row",
                self.table_bytes,
                self.table_bytes as f64 / rows as f64
            )?;
        }
        let follow = &self.follow;
        let notices_lost = counter(Counter::NoticesLost);
        if notices_lost > 0 {
            writeln!(
                f,
                "  process notices lost: {notices_lost} (the notice ring buffer was full)"
            )?;
        }
        if *follow != Default::default() {
            writeln!(
                f,
                "  processes: {} loaded while tracing, {} refreshed (new code mapped), {} exited, {} gone before loading, \
                 {} without room, {} traced at the end; {} tables unloaded",
                follow.loaded,
                follow.refreshed,
                follow.exited,
                follow.vanished,
                follow.no_room,
                follow.traced_at_end,
                follow.unloaded
            )?;
        }
        // The first few reasons in full; system-wide there can be many.
        let notes: Vec<&String> = self
            .catalog
            .objects
            .iter()
            .filter_map(|o| match &o.table {
                Err(NoTable::Unreadable(why) | NoTable::TooLarge(why) | NoTable::NoRoom(why)) => Some(why),
                _ => None,
            })
            .collect();
        for why in notes.iter().take(MAX_NOTES) {
            writeln!(f, "  note: {why}")?;
        }
        if notes.len() > MAX_NOTES {
            writeln!(
                f,
                "  note: and {} more objects without a table",
                notes.len() - MAX_NOTES
            )?;
        }
        Ok(())
    }
}
