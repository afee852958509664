//! [`RowSpace`]: which rows of the global row array (`ROWS`) belong to a loaded object, so
//! [`super::TableSet`] can place a new object's rows where an unloaded one's were. It only
//! does the bookkeeping of row indices: it holds no rows and knows nothing of pages or objects.
//!
//! 1. Rows below the high-water mark `end` are taken, except the free ranges; rows from `end`
//!    up to `limit` were never used (or were freed at the top, which lowers `end`).
//! 2. [`RowSpace::find`] is first fit: the lowest free range large enough, else `end`.
//! 3. [`RowSpace::release`] merges a freed range with the free ranges it touches; a free range
//!    that reaches `end` is given back to the unused top instead of being kept.

use std::ops::Range;

/// Taken and free rows of a row array of at most `limit` rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct RowSpace {
    /// Free ranges below `end`: ascending, non-empty, never touching each other, none ending
    /// at `end`.
    free: Vec<Range<u32>>,
    /// The high-water mark: one past the last taken row.
    end: u32,
    limit: u32,
}

impl Default for RowSpace {
    /// As many rows as a `u32` row index can address.
    fn default() -> Self {
        Self::new(u32::MAX)
    }
}

impl RowSpace {
    pub fn new(limit: u32) -> Self {
        Self {
            free: Vec::new(),
            end: 0,
            limit,
        }
    }

    /// The high-water mark: rows at and past it are not in use.
    pub fn end(&self) -> u32 {
        self.end
    }

    /// Rows in use.
    pub fn live(&self) -> u32 {
        self.end - self.free.iter().map(|r| r.end - r.start).sum::<u32>()
    }

    /// Rows that may still be taken, in free ranges and above `end`, all below `limit` (they
    /// need not be contiguous).
    pub fn free(&self) -> u32 {
        let below_end: u32 = self
            .free
            .iter()
            .map(|r| r.end.min(self.limit).saturating_sub(r.start))
            .sum();
        self.limit.saturating_sub(self.end) + below_end
    }

    /// Hold at most `limit` rows from now on. Rows taken past it stay taken, but nothing more
    /// goes above `limit`.
    pub fn set_limit(&mut self, limit: u32) {
        self.limit = limit;
    }

    /// Step 2: where `n` rows would go, or `None` when no free range and not the top has room.
    pub fn find(&self, n: u32) -> Option<u32> {
        // `r.start + n <= r.end <= end`: no overflow.
        let fits = |r: &&Range<u32>| r.end - r.start >= n && r.start + n <= self.limit;
        if let Some(range) = self.free.iter().find(fits) {
            return Some(range.start);
        }
        (self.limit.saturating_sub(self.end) >= n).then_some(self.end)
    }

    /// Take `n` rows at `start`, which [`RowSpace::find`] returned for `n`.
    pub fn take(&mut self, start: u32, n: u32) {
        if start == self.end {
            self.end += n;
            return;
        }
        if let Some(at) = self.free.iter().position(|r| r.start == start) {
            let range = &mut self.free[at];
            range.start += n;
            if range.start == range.end {
                self.free.remove(at);
            }
        }
    }

    /// Step 3: give back `range`, which was taken.
    pub fn release(&mut self, range: Range<u32>) {
        if range.start >= range.end {
            return;
        }
        let at = self.free.partition_point(|r| r.start < range.start);
        let mut merged = range;
        if at < self.free.len() && self.free[at].start == merged.end {
            merged.end = self.free.remove(at).end;
        }
        if at > 0 && self.free[at - 1].end == merged.start {
            merged.start = self.free.remove(at - 1).start;
            self.insert_or_lower(at - 1, merged);
        } else {
            self.insert_or_lower(at, merged);
        }
    }

    /// Keep `range` as the free range at `at`, or lower `end` to its start if it reaches `end`
    /// (the range before it cannot reach it too: free ranges never touch).
    fn insert_or_lower(&mut self, at: usize, range: Range<u32>) {
        if range.end == self.end {
            self.end = range.start;
        } else {
            self.free.insert(at, range);
        }
    }

    /// The free ranges below `end`, ascending.
    #[cfg(test)]
    pub fn free_ranges(&self) -> &[Range<u32>] {
        &self.free
    }
}

#[cfg(test)]
mod tests;
