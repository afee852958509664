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
//! A stack whose user frames end before the outermost one has `[truncated: REASON]` as its
//! outermost frame (the stop reason's name, as the summary counts it), so that cut stacks
//! gather, and show, at the base of a flame graph.
//!
//! Counts that would pass `u64::MAX` (only a crafted profile has them) stay at `u64::MAX`.
//!
//! Names are written by the folded rule of [`tracer_unwind::names`]: control characters as `\xHH`, `;`
//! as `_`, and never ending in what reads as a count, so a line has one `;` per frame and ends
//! in its count whatever the names.

use std::{
    collections::{BTreeMap, HashMap},
    io::Write,
};

use super::model::{Resolved, truncation_marker};
use crate::event::is_offcpu;
use tracer_unwind::names;

/// How the lines are drawn, beyond the frames.
#[derive(Clone, Copy, Debug, Default)]
pub struct Style<'a> {
    /// The root frame of each process's stacks, by pid (its executable's name: a whole
    /// host's stacks group by process); a stack of a pid not in it, or without it, has its
    /// thread's name (`--per-thread`).
    pub processes: Option<&'a HashMap<u32, String>>,
    /// C++ and Rust names without parameter lists and template arguments (`--short-names`).
    pub short_names: bool,
}

/// The folded lines of `resolved` (without their counts), sorted, with their counts.
pub fn lines(resolved: &Resolved) -> BTreeMap<String, u64> {
    lines_styled(resolved, &Style::default())
}

/// [`lines`], drawn in `style`.
pub fn lines_styled(resolved: &Resolved, style: &Style<'_>) -> BTreeMap<String, u64> {
    let first_event = resolved.stacks.first().map(|s| s.event.as_str());
    let several_events = resolved.stacks.iter().any(|s| Some(s.event.as_str()) != first_event);
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    for stack in &resolved.stacks {
        let mut line = String::new();
        if several_events {
            line.push_str(&names::folded(&stack.event));
            line.push(';');
        }
        let root = style
            .processes
            .and_then(|names| names.get(&stack.pid))
            .unwrap_or(&stack.comm);
        line.push_str(&names::folded(root));
        if let Some(why) = stack.truncation() {
            line.push(';');
            line.push_str(&truncation_marker(why));
        }
        for frame in stack.frames.iter().rev() {
            line.push(';');
            let name = frame.name(&resolved.objects);
            if style.short_names {
                line.push_str(&names::folded(&super::short::short(&name)));
            } else {
                line.push_str(&names::folded(&name));
            }
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
    write_styled(out, resolved, &Style::default())
}

/// [`write`], drawn in `style`.
pub fn write_styled(out: &mut impl Write, resolved: &Resolved, style: &Style<'_>) -> std::io::Result<()> {
    for (line, count) in lines_styled(resolved, style) {
        writeln!(out, "{line} {count}")?;
    }
    out.flush()
}

#[cfg(test)]
mod tests;
