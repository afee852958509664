//! The folded format: one line per distinct stack, `comm;outermost;...;innermost COUNT` — user
//! frames from the outermost (`_start`) to the sampled function, then kernel frames from the
//! system-call entry to the sampled kernel function. Read by flamegraph.pl, inferno, speedscope.
//! Stacks of different threads or processes with the same command name and frame names share a
//! line.
//!
//! COUNT is the number of samples or hits, except for `offcpu`, whose lines count the
//! microseconds blocked (as off-CPU flame graphs do). When a profile has several events, each
//! line starts with its event (`offcpu;comm;...`), so that they never add up in one line.
//!
//! Counts that would pass `u64::MAX` (only a crafted profile has them) stay at `u64::MAX`.
//!
//! Names are written by the folded rule of [`crate::names`]: control characters as `\xHH`, `;`
//! as `_`, and never ending in what reads as a count, so a line has one `;` per frame and ends
//! in its count whatever the names.

use std::{collections::BTreeMap, io::Write};

use super::model::Resolved;
use crate::{event::is_offcpu, names};

/// The folded lines of `resolved` (without their counts), sorted, with their counts.
pub fn lines(resolved: &Resolved) -> BTreeMap<String, u64> {
    let first_event = resolved.stacks.first().map(|s| s.event.as_str());
    let several_events = resolved.stacks.iter().any(|s| Some(s.event.as_str()) != first_event);
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    for stack in &resolved.stacks {
        let mut line = String::new();
        if several_events {
            line.push_str(&names::folded(&stack.event));
            line.push(';');
        }
        line.push_str(&names::folded(&stack.comm));
        for frame in stack.frames.iter().rev() {
            line.push(';');
            line.push_str(&names::folded(&frame.name(&resolved.objects)));
        }
        let value = if is_offcpu(&stack.event) {
            stack.weight_ns / 1000
        } else {
            stack.count
        };
        // Saturating: a profile read by `symbolize` may count up to i64::MAX per stack.
        let sum = lines.entry(line).or_default();
        *sum = sum.saturating_add(value);
    }
    lines
}

/// Write `resolved` as folded lines, sorted for stable output.
pub fn write(out: &mut impl Write, resolved: &Resolved) -> std::io::Result<()> {
    for (line, count) in lines(resolved) {
        writeln!(out, "{line} {count}")?;
    }
    out.flush()
}

#[cfg(test)]
mod tests;
