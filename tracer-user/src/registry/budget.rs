//! Room in the table maps. BPF array and preallocated hash maps take their whole size when
//! they are created, so the maps are sized twice: while the tables of the processes running at
//! start are built, the `--max-table-memory` budget bounds them; then the maps are created for
//! what those tables use plus room to grow (objects loaded later: new processes, dlopen),
//! never more than the budget. Pure arithmetic; no maps are touched here.

use tracer_common::trace::ROW_CHUNK;

use crate::tables::{Capacity, TableSet};
use tracer_unwind::table::{ROW_BYTES, RULE_BYTES};

/// The rule table can hold at most this many rules (16-bit rule index in a row).
const MAX_RULES: usize = 1 << 16;
/// Kernel memory a page entry costs in a preallocated hash map, bookkeeping included
/// (roughly: key, value, element header, bucket).
const PAGE_COST: u64 = 64;
/// Room to grow beyond twice what is loaded at start: rows, pages, rules. Pages are cheap
/// (64 bytes each) and a host that builds software loads new large objects all the time
/// (each build of a program is a new file): 32768 pages are 2 GiB of code in 64 KiB pages,
/// 2 MiB of kernel memory, where 4096 filled up on a busy build host while the rows had room.
const HEADROOM_ROW_CHUNKS: usize = 2048;
const HEADROOM_PAGES: usize = 32768;
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
mod tests;
