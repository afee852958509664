//! The summary printed on stderr at the end: samples and losses, complete and truncated stacks
//! by stop reason, frames by source, and the unwind tables loaded.

use std::{collections::BTreeMap, fmt, time::Duration};

use tracer_common::{Counter, walk::StopReason};

use super::{
    objects::{Catalog, NoTable},
    profile::Profile,
};

pub struct Summary<'a> {
    pub elapsed: Duration,
    pub why: &'static str,
    pub profile: &'a Profile,
    pub catalog: &'a Catalog,
    pub counters: Vec<(Counter, u64)>,
    pub stops: Vec<(StopReason, u64)>,
    pub table_bytes: u64,
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
            "  user frames: {} from SFrame tables, {} from frame pointers",
            self.profile.table_frames, self.profile.fp_frames
        )?;
        let with: Vec<_> = self.catalog.objects.iter().filter(|o| o.table.is_ok()).collect();
        let rows: u64 = with.iter().map(|o| o.rows).sum();
        let mut without: BTreeMap<&str, u64> = BTreeMap::new();
        for o in &self.catalog.objects {
            if let Err(why) = &o.table {
                let reason = match why {
                    NoTable::NoSframe => "no .sframe",
                    NoTable::Unreadable(_) => "unreadable",
                    NoTable::RulesFull => "rule table full",
                };
                *without.entry(reason).or_default() += 1;
            }
        }
        let without: Vec<String> = without.iter().map(|(why, n)| format!("{n} {why}")).collect();
        writeln!(
            f,
            "  tables: {} objects with SFrame ({rows} rows, {} KiB in kernel maps), {} without{}",
            with.len(),
            self.table_bytes.div_ceil(1024),
            self.catalog.objects.len() - with.len(),
            if without.is_empty() {
                String::new()
            } else {
                format!(" ({})", without.join(", "))
            },
        )?;
        for o in &self.catalog.objects {
            if let Err(NoTable::Unreadable(why)) = &o.table {
                writeln!(f, "  note: {why}")?;
            }
        }
        Ok(())
    }
}
