//! Perf map files (`/tmp/perf-PID.map`), the text JIT runtimes append one line to per compiled
//! function: `START SIZE NAME`, START and SIZE in hex (with or without `0x`), NAME the rest of
//! the line, spaces included. Pure: bytes in, named ranges out. The text is hostile (any
//! process can write its own map): a line longer than [`MAX_LINE`], without the three fields,
//! with an empty or wrapping range, or whose name is not UTF-8 is skipped and counted, never
//! trusted in part; at most [`MAX_ENTRIES`] ranges are kept per process, and at most the
//! bytes of its share of the JIT-name budget ([`PerfMap::set_room`], see [`super::budget`]):
//! each range is taken to cost its name plus [`ENTRY_COST`].
//!
//! Runtimes append while they run and may compile a function again at an address that held
//! another: a later line wins over the earlier ranges it overlaps (they are dropped), as the
//! code there is the later one.

use std::collections::BTreeMap;

/// The longest line taken (Java signatures run to a few hundred bytes).
pub const MAX_LINE: usize = 4096;
/// The most ranges kept for one process.
pub const MAX_ENTRIES: usize = 2_000_000;
/// What one kept range costs besides its name (its index node, its bounds, the name's box).
pub const ENTRY_COST: u64 = 80;

/// The named code ranges of one process, later lines winning over the ranges they overlap.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PerfMap {
    /// By start: (end, name).
    ranges: BTreeMap<u64, (u64, Box<str>)>,
    /// Lines skipped as malformed, in total.
    pub malformed: u64,
    /// Lines dropped because [`MAX_ENTRIES`] ranges were kept already.
    pub over_limit: u64,
    /// Lines dropped because the ranges kept held the room given already.
    pub over_budget: u64,
    /// What the ranges kept cost (see [`ENTRY_COST`]), and the most they may (`None`: no
    /// bound).
    bytes: u64,
    room: Option<u64>,
}

impl PerfMap {
    /// Ranges kept.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// What the ranges kept cost, in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The ranges kept may cost at most `room` bytes from now on (those kept stay).
    pub fn set_room(&mut self, room: u64) {
        self.room = Some(room);
    }

    /// Read `text`, whole lines only (each ended by `\n`); returns how many bytes it consumed,
    /// so that a caller reading a growing file passes the rest again with what follows. A
    /// line longer than [`MAX_LINE`] is skipped and counted once, even when it is not yet
    /// complete: its end is skipped when it comes (see [`PerfMap::add_text_from`]).
    pub fn add_text(&mut self, text: &[u8]) -> usize {
        let mut skipping = false;
        self.add_text_from(text, &mut skipping)
    }

    /// [`PerfMap::add_text`], with `skipping` telling (and left telling) whether the text
    /// starts inside an overlong line already counted.
    pub fn add_text_from(&mut self, text: &[u8], skipping: &mut bool) -> usize {
        let mut used = 0;
        while used < text.len() {
            let rest = &text[used..];
            match rest.iter().take(MAX_LINE + 1).position(|&b| b == b'\n') {
                Some(len) if !*skipping => {
                    self.add_line(&rest[..len]);
                    used += len + 1;
                }
                // Not a line that fits: skipped (counted once) through its newline, if it has
                // come yet; else everything is consumed and skipping goes on in the next text.
                _ if *skipping || rest.len() > MAX_LINE => {
                    if !*skipping {
                        self.malformed += 1;
                    }
                    match rest.iter().position(|&b| b == b'\n') {
                        Some(len) => {
                            *skipping = false;
                            used += len + 1;
                        }
                        None => {
                            *skipping = true;
                            return text.len();
                        }
                    }
                }
                // The start of a line still being written.
                _ => break,
            }
        }
        used
    }

    /// One line without its newline.
    fn add_line(&mut self, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.trim_ascii().is_empty() {
            return;
        }
        match parse_line(line) {
            Some((start, size, name)) => self.insert(start, size, name),
            None => self.malformed += 1,
        }
    }

    /// `[start, start + size)` is `name` now; the ranges it overlaps are dropped.
    fn insert(&mut self, start: u64, size: u64, name: &str) {
        let end = start + size;
        // Kept ranges never overlap, so their ends rise with their starts: those overlapping
        // the new one are the last that start before its end, back to the first that ends
        // after its start.
        let overlapping: Vec<u64> = self
            .ranges
            .range(..end)
            .rev()
            .take_while(|(_, (e, _))| *e > start)
            .map(|(s, _)| *s)
            .collect();
        for s in overlapping {
            if let Some((_, old)) = self.ranges.remove(&s) {
                self.bytes -= cost(&old);
            }
        }
        if self.ranges.len() >= MAX_ENTRIES {
            self.over_limit += 1;
            return;
        }
        let name = tracer_unwind::names::capped_str(name);
        if self.room.is_some_and(|room| self.bytes + cost(&name) > room) {
            self.over_budget += 1;
            return;
        }
        self.bytes += cost(&name);
        self.ranges.insert(start, (end, name.into()));
    }

    /// The name of the range holding `addr`.
    pub fn name(&self, addr: u64) -> Option<&str> {
        let (_, (end, name)) = self.ranges.range(..=addr).next_back()?;
        (addr < *end).then_some(&**name)
    }
}

/// What a range named `name` costs.
fn cost(name: &str) -> u64 {
    name.len() as u64 + ENTRY_COST
}

/// `START SIZE NAME`: `None` unless all three are there, the numbers hex, the range non-empty
/// and not wrapping, the name UTF-8.
fn parse_line(line: &[u8]) -> Option<(u64, u64, &str)> {
    let line = std::str::from_utf8(line).ok()?;
    let (start, rest) = line.trim_start().split_once(' ')?;
    let (size, name) = rest.trim_start().split_once(' ')?;
    let hex = |s: &str| {
        let digits = s.strip_prefix("0x").unwrap_or(s);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u64::from_str_radix(digits, 16).ok()
    };
    let (start, size) = (hex(start)?, hex(size)?);
    let name = name.trim();
    (size > 0 && start.checked_add(size).is_some() && !name.is_empty() && !name.contains('\0'))
        .then_some((start, size, name))
}

#[cfg(test)]
mod tests;
