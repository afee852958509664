//! Unit tests of `table::object`; each test says what it proves.

use tracer_common::unwind::{KIND_CFA, KIND_OUTERMOST, UnwindRule};

use super::{Flat, merge};

fn rule(cfa: i32) -> UnwindRule {
    UnwindRule {
        kind: KIND_CFA,
        cfa_offset: cfa,
        ..UnwindRule::NO_INFO
    }
}

fn flat(transitions: &[(u64, UnwindRule)]) -> Flat {
    let mut flat = Flat::default();
    for &(at, r) in transitions {
        flat.push(at, r);
    }
    flat
}

/// SFrame rows win where they exist; CFI rows fill the gaps between and around them, and
/// where neither has a rule there is none.
#[test]
fn cfi_fills_the_gaps_of_sframe() {
    let no = UnwindRule::NO_INFO;
    let outermost = UnwindRule {
        kind: KIND_OUTERMOST,
        ..no
    };
    let sframe = flat(&[
        (0x1000, rule(8)),
        (0x1004, rule(16)),
        (0x1010, no),
        (0x1020, rule(8)),
        (0x1030, no),
    ]);
    let cfi = flat(&[
        (0x0f00, outermost),
        (0x0f10, no),
        (0x1000, rule(99)),
        (0x1030, rule(24)),
        (0x1040, no),
    ]);
    let merged = merge(sframe, cfi);
    assert_eq!(
        merged.transitions,
        [
            (0x0f00, outermost),
            (0x0f10, no),
            (0x1000, rule(8)),
            (0x1004, rule(16)),
            (0x1010, rule(99)),
            (0x1020, rule(8)),
            (0x1030, rule(24)),
            (0x1040, no),
        ]
    );
}
