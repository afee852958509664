//! Room in the table maps. BPF array and preallocated hash maps take their whole size when
//! they are created, so the maps are sized twice: while the tables of the processes running at
//! start are built, the `--max-table-memory` budget bounds them; then the maps are created for
//! what those tables use plus room to grow (objects loaded later: new processes, dlopen),
//! never more than the budget. Pure arithmetic; no maps are touched here.

use tracer_common::trace::ROW_CHUNK;

use crate::table::{Capacity, ROW_BYTES, RULE_BYTES, TableSet};

/// The rule table can hold at most this many rules (16-bit rule index in a row).
const MAX_RULES: usize = 1 << 16;
/// Kernel memory a page entry costs in a preallocated hash map, bookkeeping included
/// (roughly: key, value, element header, bucket).
const PAGE_COST: u64 = 64;
/// Room to grow beyond twice what is loaded at start: rows, pages, rules.
const HEADROOM_ROW_CHUNKS: usize = 2048;
const HEADROOM_PAGES: usize = 4096;
const HEADROOM_RULES: usize = 4096;

/// Bytes of one row chunk.
fn chunk_bytes() -> u64 {
    ROW_CHUNK as u64 * ROW_BYTES
}

/// The capacities `bytes` of kernel memory allow: an eighth for rules (at most all of them),
/// a sixteenth for pages, the rest for rows.
pub fn for_budget(bytes: u64) -> Capacity {
    let rules = usize::try_from(bytes / 8 / RULE_BYTES).map_or(MAX_RULES, |r| r.clamp(1, MAX_RULES));
    let rest = bytes.saturating_sub(rules as u64 * RULE_BYTES);
    let pages = (rest / 16 / PAGE_COST).max(1);
    let rows = rest.saturating_sub(pages * PAGE_COST) / chunk_bytes();
    Capacity {
        row_chunks: usize::try_from(rows.max(1)).unwrap_or(usize::MAX),
        pages: usize::try_from(pages).unwrap_or(usize::MAX),
        rules,
    }
}

/// Room for what `tables` holds twice over plus a fixed headroom, plus `expected` bytes of
/// rows still to come, within `budget`.
pub fn with_headroom(tables: &TableSet, budget: &Capacity, expected: u64) -> Capacity {
    let grow = |used: usize, headroom: usize, max: usize| used.saturating_mul(2).saturating_add(headroom).min(max);
    let expected_chunks = usize::try_from(expected / chunk_bytes()).unwrap_or(usize::MAX);
    Capacity {
        row_chunks: grow(
            tables.row_chunks(),
            HEADROOM_ROW_CHUNKS.saturating_add(expected_chunks),
            budget.row_chunks,
        ),
        pages: grow(tables.pages().len(), HEADROOM_PAGES, budget.pages),
        rules: grow(tables.rules().len(), HEADROOM_RULES, budget.rules),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::PAGE_ENTRY_BYTES;

    /// Kernel memory of maps with these capacities.
    pub fn bytes(capacity: &Capacity) -> u64 {
        capacity.row_chunks as u64 * chunk_bytes()
            + capacity.pages as u64 * PAGE_ENTRY_BYTES.max(PAGE_COST)
            + capacity.rules as u64 * RULE_BYTES
    }

    /// A budget is never exceeded, and the rows get most of it.
    #[test]
    fn budget_is_respected() {
        for kib in [64u64, 1 << 10, 16 << 10, 256 << 10, 4 << 20] {
            let c = for_budget(kib << 10);
            assert!(bytes(&c) <= kib << 10, "{kib} KiB: {c:?}");
            if kib >= 16 << 10 {
                assert!(
                    c.row_chunks as u64 * chunk_bytes() * 10 >= (kib << 10) * 7,
                    "{kib} KiB: {c:?}"
                );
                assert_eq!(c.rules, MAX_RULES, "{kib} KiB: {c:?}");
            }
        }
    }

    /// An empty set gets the fixed headroom, bounded by the budget.
    #[test]
    fn headroom_is_bounded() {
        let empty = TableSet::new();
        let roomy = with_headroom(&empty, &for_budget(1 << 30), 0);
        assert_eq!(
            roomy.row_chunks,
            2 + HEADROOM_ROW_CHUNKS,
            "one chunk (the minimum) twice, plus headroom"
        );
        assert_eq!(roomy.pages, HEADROOM_PAGES);
        let tight = for_budget(1 << 20);
        let capped = with_headroom(&empty, &tight, 0);
        assert!(capped.row_chunks <= tight.row_chunks && capped.pages <= tight.pages);
    }
}
