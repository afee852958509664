//! Python frames into a sample's stack: the words the kernel appended after the native frames
//! (`tracer_common::python`: per frame the code object, the instruction pointer and the code
//! object's identity at the sample, each run closed by `PY_RUN_END`) parsed into runs ([`runs`]), and each run given to an
//! evaluation-loop frame of the native stack, innermost run to innermost such frame, the run's
//! frames taking that frame's place, innermost first as the native frames are ([`merge`]).
//!
//! Mismatches are kept apart, never guessed across: evaluation-loop frames left without a run
//! stay native frames, and runs left without an evaluation-loop frame are dropped; both are
//! counted. Which end lacks is known: when both walks reached their ends (the native one the
//! outermost frame, the chain its end: `PY_CHAIN_END`), an evaluation-loop frame without a
//! run is the innermost (a call being entered or left: its frame is on the C stack, its run
//! not yet or no longer in the chain), so runs are given outermost first; otherwise a walk
//! was cut short at its outer end, and runs are given innermost first.

use tracer_common::python::{PY_CHAIN_END, PY_CODE_BIT, PY_RUN_END, of_frame_words};

/// A Python frame as recorded: its code object, its instruction pointer, and the code
/// object's identity when the sample was taken (`tracer_common::python::code_ident`; 0: the
/// kernel could not read it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PyFrameRef {
    pub code: u64,
    pub instr: u64,
    pub ident: u32,
}

/// One frame of a merged stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merged {
    /// The native frame at this index of the sample's user frames.
    Native(usize),
    Python(PyFrameRef),
}

/// What [`merge`] could not match.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unmatched {
    /// Evaluation-loop frames without a run (left native).
    pub eval_frames: usize,
    /// Runs without an evaluation-loop frame (dropped).
    pub runs: usize,
}

/// Where the Python words of a record's user frames start: the first word with
/// `PY_CODE_BIT` (no native frame has it), or the end.
pub fn split(user: &[u64]) -> usize {
    user.iter().position(|w| w & PY_CODE_BIT != 0).unwrap_or(user.len())
}

/// Whether the Python words `words` are a chain walked whole (`PY_CHAIN_END`).
pub fn whole(words: &[u64]) -> bool {
    words.last() == Some(&PY_CHAIN_END)
}

/// The runs of the Python words `words` (each with `PY_CODE_BIT`), innermost first; a last run
/// without its end (the kernel stopped inside it) is kept, a dangling code word dropped.
pub fn runs(words: &[u64]) -> Vec<Vec<PyFrameRef>> {
    let mut out = Vec::new();
    let mut run = Vec::new();
    let mut at = 0;
    let words = words.strip_suffix(&[PY_CHAIN_END]).unwrap_or(words);
    while at < words.len() {
        if words[at] == PY_RUN_END {
            out.push(std::mem::take(&mut run));
            at += 1;
            continue;
        }
        let Some(&instr) = words.get(at + 1).filter(|&&w| w != PY_RUN_END) else {
            at += 1;
            continue;
        };
        let (code, instr, ident) = of_frame_words([words[at], instr]);
        run.push(PyFrameRef { code, instr, ident });
        at += 2;
    }
    if !run.is_empty() {
        out.push(run);
    }
    out
}

/// The stack of `native` frames (innermost first; `is_eval(i)` when frame `i` is in the
/// evaluation loop) with the `runs` put in place of their evaluation-loop frames; `whole` when
/// both walks reached their ends (module docs).
pub fn merge(
    native: usize,
    is_eval: impl Fn(usize) -> bool,
    runs: &[Vec<PyFrameRef>],
    whole: bool,
) -> (Vec<Merged>, Unmatched) {
    let mut out = Vec::with_capacity(native + runs.iter().map(Vec::len).sum::<usize>());
    let mut next = runs.iter();
    let mut unmatched = Unmatched::default();
    // Evaluation-loop frames with no run of their own, innermost first.
    let mut skip = if whole {
        (0..native).filter(|&i| is_eval(i)).count().saturating_sub(runs.len())
    } else {
        0
    };
    for i in 0..native {
        if !is_eval(i) {
            out.push(Merged::Native(i));
            continue;
        }
        if skip > 0 {
            skip -= 1;
            unmatched.eval_frames += 1;
            out.push(Merged::Native(i));
            continue;
        }
        match next.next() {
            // An empty run (a call that has not pushed its first frame) leaves its frame native.
            Some(run) if !run.is_empty() => out.extend(run.iter().copied().map(Merged::Python)),
            Some(_) => out.push(Merged::Native(i)),
            None => {
                unmatched.eval_frames += 1;
                out.push(Merged::Native(i));
            }
        }
    }
    unmatched.runs = next.count();
    (out, unmatched)
}
