//! Unit tests of `table::entry`; each test says what it proves.

use tracer_common::unwind::{KIND_CFA, KIND_OUTERMOST, UnwindRule};

use super::{MAX_ENTRY_CODE, mark};
use crate::table::transitions::Flat;

const NO: UnwindRule = UnwindRule::NO_INFO;
const OUT: UnwindRule = UnwindRule {
    kind: KIND_OUTERMOST,
    ..UnwindRule::NO_INFO
};

fn rule(cfa: i32) -> UnwindRule {
    UnwindRule {
        kind: KIND_CFA,
        cfa_offset: cfa,
        ..UnwindRule::NO_INFO
    }
}

/// Functions `[start, end)` with one rule each, as the sources flatten them.
fn flat(functions: &[(u64, u64, UnwindRule)]) -> Flat {
    let mut flat = Flat::default();
    for &(start, end, r) in functions {
        flat.cover(start, end);
        flat.push(start, r);
        flat.push(end, NO);
    }
    flat
}

/// glibc's x86-64 loader: `_dl_start`'s neighbour ends at 0x1ab6f, `_start` at 0x1ab70 has no
/// FDE, the next function starts at 0x1abb0. The 64 bytes of entry code become outermost, the
/// functions around keep their rules, and the covered runs stay maximal.
#[test]
fn the_loaders_entry_code_is_outermost() {
    let mut f = flat(&[(0x1a660, 0x1ab6f, rule(8)), (0x1abb0, 0x1abf2, rule(16))]);
    assert!(mark(&mut f, 0x1ab70));
    assert_eq!(
        f.transitions,
        [
            (0x1a660, rule(8)),
            (0x1ab6f, NO),
            (0x1ab70, OUT),
            (0x1abb0, rule(16)),
            (0x1abf2, NO)
        ]
    );
    assert_eq!(f.covered, [(0x1a660, 0x1ab6f), (0x1ab70, 0x1abf2)]);
    // Touching the function before: one run.
    let mut f = flat(&[(0x1000, 0x1010, rule(8)), (0x1020, 0x1030, rule(16))]);
    assert!(mark(&mut f, 0x1010));
    assert_eq!(f.covered, [(0x1000, 0x1030)]);
    assert_eq!(
        f.transitions,
        [(0x1000, rule(8)), (0x1010, OUT), (0x1020, rule(16)), (0x1030, NO)]
    );
}

/// An entry a function covers keeps its unwind information (a library's `e_entry` may be an
/// ordinary function); an entry after every function, or further than [`MAX_ENTRY_CODE`]
/// from the next, is left without information: other code without it may be there.
#[test]
fn only_a_short_uncovered_block_bounded_by_functions_is_marked() {
    let functions = [(0x1000, 0x1100, rule(8)), (0x2000, 0x2100, rule(16))];
    for entry in [0x1000, 0x1080, 0x20ff, 0x2100, 0x3000, 0x2000 - MAX_ENTRY_CODE - 1] {
        let mut f = flat(&functions);
        let before = (f.transitions.clone(), f.covered.clone());
        assert!(!mark(&mut f, entry), "{entry:#x}");
        assert_eq!((f.transitions, f.covered), before, "{entry:#x}");
    }
    let mut f = flat(&functions);
    assert!(mark(&mut f, 0x2000 - MAX_ENTRY_CODE));
    // Before the first function.
    let mut f = flat(&functions);
    assert!(mark(&mut f, 0xf80));
    assert_eq!(f.transitions[..2], [(0xf80, OUT), (0x1000, rule(8))]);
}

/// A next function that is itself outermost from its start (the program's `_start` with
/// `RA undefined`) continues the entry's run: no two equal rules in a row.
#[test]
fn an_outermost_next_function_joins_the_run() {
    let mut f = flat(&[(0x1000, 0x1010, rule(8)), (0x1040, 0x1050, OUT)]);
    assert!(mark(&mut f, 0x1020));
    assert_eq!(
        f.transitions,
        [(0x1000, rule(8)), (0x1010, NO), (0x1020, OUT), (0x1050, NO)]
    );
    assert!(f.transitions.windows(2).all(|w| w[0].1 != w[1].1));
    // And one that ends exactly at the entry.
    let mut f = flat(&[(0x1000, 0x1010, OUT), (0x1040, 0x1050, rule(8))]);
    assert!(mark(&mut f, 0x1010));
    assert_eq!(f.transitions, [(0x1000, OUT), (0x1040, rule(8)), (0x1050, NO)]);
}
