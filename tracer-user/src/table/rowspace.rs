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
mod tests {
    use super::*;

    /// First fit takes the lowest free range large enough, splits it, and goes to the top when
    /// no range is large enough.
    #[test]
    fn first_fit() {
        let mut space = RowSpace::new(100);
        for n in [10, 5, 20, 5] {
            let start = space.find(n).expect("room");
            space.take(start, n);
        }
        assert_eq!(space.end(), 40);
        space.release(0..10);
        space.release(15..35);
        assert_eq!(space.free_ranges(), [0..10, 15..35]);
        assert_eq!(space.find(12), Some(15), "0..10 is too small");
        assert_eq!(space.find(4), Some(0));
        space.take(0, 4);
        assert_eq!(space.free_ranges(), [4..10, 15..35]);
        assert_eq!(space.find(21), Some(40), "no free range holds 21");
        assert_eq!(space.live(), 40 - 6 - 20);
        assert_eq!(space.free(), 60 + 6 + 20);
        assert_eq!(space.find(61), None, "60 rows above the mark, the rest fragmented");
    }

    /// Releasing coalesces with both neighbours, and a free range reaching the mark lowers it.
    #[test]
    fn release_coalesces_and_lowers_the_mark() {
        let mut space = RowSpace::new(u32::MAX);
        for n in [10, 10, 10, 10] {
            let start = space.find(n).expect("room");
            space.take(start, n);
        }
        space.release(0..10);
        space.release(20..30);
        space.release(10..20);
        assert_eq!(space.free_ranges(), &[Range { start: 0, end: 30 }]);
        assert_eq!(space.live(), 10);
        space.release(30..40);
        assert_eq!(space.free_ranges(), [] as [Range<u32>; 0]);
        assert_eq!(space.end(), 0);
        assert_eq!(space.free(), u32::MAX);
    }

    /// A limit lowered below rows already taken refuses everything past it, free ranges
    /// included, and counts only the free rows below it.
    #[test]
    fn lowered_limit() {
        let mut space = RowSpace::new(100);
        for n in [10; 5] {
            let start = space.find(n).expect("room");
            space.take(start, n);
        }
        space.release(0..10);
        space.release(20..40);
        space.set_limit(30);
        assert_eq!(space.free(), 10 + 10);
        assert_eq!(space.find(15), None, "20..40 passes the limit, so does the top");
        assert_eq!(space.find(10), Some(0));
        space.set_limit(100);
        assert_eq!(space.find(15), Some(20));
    }
}
