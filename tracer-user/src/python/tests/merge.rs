//! Tests of the Python words of a record and their merging into the native stack.

use tracer_common::python::{PY_CHAIN_END, PY_CODE_BIT, PY_RUN_END, frame_words};

use crate::python::merge::{Merged, PyFrameRef, Unmatched, merge, runs, split, whole};

fn f(code: u64) -> PyFrameRef {
    PyFrameRef {
        code,
        instr: code + 0x40,
        ident: 0xa5_0000 | code as u32,
    }
}

/// Words of frames `codes` (instruction pointers `code + 0x40`, identities as [`f`] gives),
/// as the kernel writes them.
fn words(runs: &[&[u64]]) -> Vec<u64> {
    let mut out = Vec::new();
    for run in runs {
        for &code in *run {
            let frame = f(code);
            out.extend(frame_words(frame.code, frame.instr, frame.ident));
        }
        out.push(PY_RUN_END);
    }
    out
}

/// Native frames end at the first tagged word; runs come back in order, the identities taken out of the tagged words, empty
/// runs kept, an unterminated last run kept and a dangling code word dropped.
#[test]
fn words_parse_into_runs() {
    let mut user = vec![0x401000, 0x402000, 0x403000];
    user.extend(words(&[&[0xa0, 0xa1], &[], &[0xb0]]));
    let at = split(&user);
    assert_eq!(at, 3);
    assert_eq!(runs(&user[at..]), [vec![f(0xa0), f(0xa1)], vec![], vec![f(0xb0)]]);
    let cut = [PY_CODE_BIT | 0xc0, PY_CODE_BIT | 0x100, PY_CODE_BIT | 0xc1];
    assert_eq!(
        runs(&cut),
        [vec![PyFrameRef {
            code: 0xc0,
            instr: 0x100,
            ident: 0,
        }]]
    );
    assert_eq!(split(&[1, 2]), 2);
}

/// Runs replace the evaluation-loop frames innermost first; other native frames stay where
/// they are.
#[test]
fn runs_replace_eval_frames() {
    // native: 0 C function, 1 eval, 2 C caller (e.g. sorted), 3 eval, 4 main.
    let eval = |i| i == 1 || i == 3;
    let r = runs(&words(&[&[0xa0, 0xa1], &[0xb0]]));
    let (stack, unmatched) = merge(5, eval, &r, false);
    use Merged::*;
    assert_eq!(
        stack,
        [
            Native(0),
            Python(f(0xa0)),
            Python(f(0xa1)),
            Native(2),
            Python(f(0xb0)),
            Native(4)
        ]
    );
    assert_eq!(unmatched, Unmatched::default());
}

/// More evaluation-loop frames than runs: the outer ones stay native and are counted; more
/// runs than frames (a native walk cut short): the outer runs are dropped and counted; an
/// empty run leaves its frame native.
#[test]
fn mismatches_are_counted_not_guessed() {
    use Merged::*;
    let r = runs(&words(&[&[0xa0]]));
    let (stack, unmatched) = merge(3, |i| i >= 1, &r, false);
    assert_eq!(stack, [Native(0), Python(f(0xa0)), Native(2)]);
    assert_eq!(
        unmatched,
        Unmatched {
            eval_frames: 1,
            runs: 0
        }
    );
    let r = runs(&words(&[&[0xa0], &[0xb0], &[0xc0]]));
    let (stack, unmatched) = merge(2, |i| i == 1, &r, false);
    assert_eq!(stack, [Native(0), Python(f(0xa0))]);
    assert_eq!(
        unmatched,
        Unmatched {
            eval_frames: 0,
            runs: 2
        }
    );
    let r = runs(&words(&[&[], &[0xb0]]));
    let (stack, _) = merge(2, |_| true, &r, false);
    assert_eq!(stack, [Native(0), Python(f(0xb0))]);
}

/// Both walks whole and an evaluation-loop frame without a run: it is the innermost (a call
/// being entered or left), so the runs go to the outer frames, where they ran; the marker of a
/// whole chain is no frame.
#[test]
fn with_both_walks_whole_the_frame_without_a_run_is_the_innermost() {
    use Merged::*;
    // native: 0 eval (entering), 1 C caller (sorted), 2 eval (running 0xa0), 3 main.
    let mut w = words(&[&[0xa0]]);
    assert!(!whole(&w));
    w.push(PY_CHAIN_END);
    assert!(whole(&w));
    let r = runs(&w);
    assert_eq!(r, [vec![f(0xa0)]]);
    let eval = |i| i == 0 || i == 2;
    let (stack, unmatched) = merge(4, eval, &r, true);
    assert_eq!(stack, [Native(0), Native(1), Python(f(0xa0)), Native(3)]);
    assert_eq!(unmatched.eval_frames, 1);
    // A walk cut short: its missing runs are the outer ones.
    let (stack, _) = merge(4, eval, &r, false);
    assert_eq!(stack, [Python(f(0xa0)), Native(1), Native(2), Native(3)]);
}
