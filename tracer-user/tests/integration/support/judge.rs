//! The verdict on one sample's stack, shared by the tests that judge stacks sample by sample:
//! `hardening` (and `follow`, through it: folded stacks against the chain of their program)
//! and `python` (a sample's Python frames against its program's shapes). The tallies of a
//! whole run stay with their tests (`trace::folded::Verdict`, `golang`, `external`): each
//! counts what its own bar is about.

/// How one sample's stack compares with what its program must show. Ordered from best to
/// worst, so that the best of several comparisons is their `min`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// The whole stack, down to where the sample was taken.
    Exact,
    /// A part of it without its outer end (the walk stopped early).
    Truncated,
    /// Anything else: a frame that is not there, or one named wrongly.
    Wrong,
}

/// `frames` (outermost first) against `chain`: exact when it is `chain[..j]`, truncated when it
/// is `chain[i..j]` with `i > 0`, else wrong (an empty stack too).
pub fn against_chain(frames: &[&str], chain: &[String]) -> Verdict {
    let window = |i: usize| {
        frames.len() + i <= chain.len() && frames.iter().zip(&chain[i..]).all(|(f, c)| f == c) && !frames.is_empty()
    };
    if window(0) {
        Verdict::Exact
    } else if (1..chain.len()).any(window) {
        Verdict::Truncated
    } else {
        Verdict::Wrong
    }
}

/// The chain's outer part is exact, an inner part without `_start` truncated, anything with a
/// frame off the chain (or none at all) wrong.
#[test]
fn against_chain_tells_exact_truncated_and_wrong() {
    let chain: Vec<String> = ["_start", "main", "run", "leaf"].map(str::to_owned).to_vec();
    assert_eq!(against_chain(&["_start", "main"], &chain), Verdict::Exact);
    assert_eq!(
        against_chain(&["_start", "main", "run", "leaf"], &chain),
        Verdict::Exact
    );
    assert_eq!(against_chain(&["main", "run"], &chain), Verdict::Truncated);
    assert_eq!(against_chain(&["_start", "run"], &chain), Verdict::Wrong);
    assert_eq!(
        against_chain(&["_start", "main", "run", "leaf", "more"], &chain),
        Verdict::Wrong
    );
    assert_eq!(against_chain(&[], &chain), Verdict::Wrong);
}

/// The best of several comparisons is their minimum: exact before truncated before wrong.
#[test]
fn verdicts_order_from_best_to_worst() {
    assert!(Verdict::Exact < Verdict::Truncated && Verdict::Truncated < Verdict::Wrong);
}
