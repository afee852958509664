//! Unit tests of `trace::budget`; each test says what it proves.

use super::*;
use tracer_unwind::table::PAGE_ENTRY_BYTES;

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
