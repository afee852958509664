//! Host tests of the Python frame walk against fake interpreters laid out as 3.11 (entry flag)
//! and 3.12+ (C-stack frames) lay them out.

extern crate std;

use std::{collections::BTreeMap, vec, vec::Vec};

use super::*;

/// Offsets of a 3.11-style layout (a `_PyCFrame` between thread state and frame, `is_entry`).
const ENTRY_FLAG: PyOffsets = PyOffsets {
    runtime_interpreters_head: 40,
    interp_threads_head: 16,
    tstate_next: 8,
    tstate_native_thread_id: 160,
    tstate_frame: 56,
    cframe_current_frame: 8,
    frame_code: 32,
    frame_previous: 48,
    frame_instr: 56,
    frame_owner: 69,
    frame_is_entry: 68,
    _pad: 0,
};

/// Offsets of a 3.13-style layout (the frame in the thread state, C-stack frames).
const CSTACK: PyOffsets = PyOffsets {
    tstate_frame: 72,
    cframe_current_frame: NO_FIELD,
    frame_code: 0,
    frame_previous: 8,
    frame_instr: 56,
    frame_owner: 70,
    frame_is_entry: NO_FIELD,
    ..ENTRY_FLAG
};

const RUNTIME: u64 = 0x1000;

/// A process's memory, word by word; unwritten words are unreadable.
#[derive(Default)]
struct Memory(BTreeMap<u64, u64>);

impl Memory {
    fn word(&mut self, addr: u64, value: u64) {
        self.0.insert(addr, value);
    }

    fn byte(&mut self, addr: u64, value: u8) {
        let slot = self.0.entry(addr & !7).or_insert(0);
        let shift = 8 * (addr & 7);
        *slot = (*slot & !(0xff << shift)) | (u64::from(value) << shift);
    }

    fn read(&self, addr: u64) -> Option<u64> {
        self.0.get(&addr).copied()
    }
}

/// A frame to lay out: its code object (0: a C-stack frame) and whether it has `is_entry`.
#[derive(Clone, Copy)]
struct Frame {
    code: u64,
    entry: bool,
}

/// A process with one interpreter whose thread states are `threads` (native ids, newest
/// first); the thread `tid` runs `frames` (innermost first). Frames at 0x10000 + 0x100 * i,
/// instruction pointers `code + 0x40 + i`.
fn process(o: &PyOffsets, threads: &[u32], tid: u32, frames: &[Frame]) -> (PyProcInfo, Memory) {
    let mut m = Memory::default();
    let interp = 0x2000;
    m.word(RUNTIME + u64::from(o.runtime_interpreters_head), interp);
    let tstate = |i: usize| 0x3000 + 0x400 * i as u64;
    m.word(
        interp + u64::from(o.interp_threads_head),
        if threads.is_empty() { 0 } else { tstate(0) },
    );
    let frame_at = |i: usize| 0x10000 + 0x100 * i as u64;
    for (i, &id) in threads.iter().enumerate() {
        let t = tstate(i);
        m.word(t + u64::from(o.tstate_native_thread_id), u64::from(id));
        m.word(
            t + u64::from(o.tstate_next),
            if i + 1 < threads.len() { tstate(i + 1) } else { 0 },
        );
        let first = if frames.is_empty() { 0 } else { frame_at(0) };
        if o.cframe_current_frame == NO_FIELD {
            m.word(t + u64::from(o.tstate_frame), if id == tid { first } else { 0 });
        } else {
            let cframe = t + 0x300;
            m.word(t + u64::from(o.tstate_frame), cframe);
            m.word(
                cframe + u64::from(o.cframe_current_frame),
                if id == tid { first } else { 0 },
            );
        }
    }
    for (i, f) in frames.iter().enumerate() {
        let at = frame_at(i);
        m.word(
            at + u64::from(o.frame_previous),
            if i + 1 < frames.len() { frame_at(i + 1) } else { 0 },
        );
        m.word(at + u64::from(o.frame_code), f.code);
        m.word(at + u64::from(o.frame_instr), f.code + 0x40 + i as u64);
        m.byte(
            at + u64::from(o.frame_owner),
            if f.code == 0 { OWNER_CSTACK } else { 0 },
        );
        if o.frame_is_entry != NO_FIELD {
            m.byte(at + u64::from(o.frame_is_entry), u8::from(f.entry));
        }
    }
    let info = PyProcInfo {
        runtime: RUNTIME,
        eval_start: 0x40_0000,
        eval_end: 0x40_1000,
        cold_start: 0x50_0000,
        cold_end: 0x50_0100,
        offsets: *o,
    };
    (info, m)
}

fn py(code: u64) -> Frame {
    Frame { code, entry: false }
}

fn entry(code: u64) -> Frame {
    Frame { code, entry: true }
}

const C: Frame = Frame { code: 0, entry: false };

/// Every run of the chain of `tid`, as code objects, until the walk fails.
fn runs(info: &PyProcInfo, m: &Memory, tid: u32, evals: usize) -> (Vec<Vec<u64>>, Option<PyStop>) {
    let mut frame = match current_frame(info, tid, |a| m.read(a)) {
        Ok(f) => f,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut out = Vec::new();
    for _ in 0..evals {
        let mut run = Vec::new();
        match walk_eval(
            info,
            frame,
            |a| m.read(a),
            |code, instr| {
                assert!(instr > code, "the instruction pointer read is the frame's own");
                run.push(code);
                true
            },
        ) {
            Ok(next) => {
                out.push(run);
                frame = next;
            }
            Err(e) => {
                out.push(run);
                return (out, Some(e));
            }
        }
    }
    (out, None)
}

/// 3.11: runs end at the frame marked `is_entry`, which belongs to its run.
#[test]
fn entry_flag_splits_runs() {
    let frames = [py(0xa0), py(0xa1), entry(0xa2), entry(0xb0), py(0xc0), entry(0xc1)];
    let (info, m) = process(&ENTRY_FLAG, &[7, 9], 9, &frames);
    let (got, stop) = runs(&info, &m, 9, 3);
    assert_eq!(got, [vec![0xa0, 0xa1, 0xa2], vec![0xb0], vec![0xc0, 0xc1]]);
    assert_eq!(stop, None);
}

/// 3.12+: a C-stack frame closes the run above it and is no Python frame; an empty run is one
/// whose call has pushed its C-stack frame only.
#[test]
fn cstack_frames_split_runs() {
    let frames = [py(0xa0), py(0xa1), C, C, py(0xb0), C];
    let (info, m) = process(&CSTACK, &[5], 5, &frames);
    let (got, stop) = runs(&info, &m, 5, 3);
    assert_eq!(got, [vec![0xa0, 0xa1], vec![], vec![0xb0]]);
    assert_eq!(stop, None);
}

/// A native stack with more evaluation-loop frames than runs: the extra one ends the walk.
#[test]
fn more_eval_frames_than_runs_is_chain_ended() {
    let (info, m) = process(&CSTACK, &[5], 5, &[py(0xa0), C]);
    let (got, stop) = runs(&info, &m, 5, 2);
    assert_eq!(got, [vec![0xa0], vec![]]);
    assert_eq!(stop, Some(PyStop::ChainEnded));
}

/// The thread state is found by native thread id, not taken from the first thread.
#[test]
fn thread_state_by_native_id() {
    let (info, m) = process(&ENTRY_FLAG, &[3, 4, 5], 5, &[entry(0xd0)]);
    let (got, _) = runs(&info, &m, 5, 1);
    assert_eq!(got, [vec![0xd0]]);
    // Thread 4 has a thread state but runs no Python frame.
    assert_eq!(current_frame(&info, 4, |a| m.read(a)), Ok(0));
    assert_eq!(current_frame(&info, 6, |a| m.read(a)), Err(PyStop::NoThreadState));
}

/// A thread list longer than the search bound (or a cycle) ends as no thread state.
#[test]
fn thread_search_is_bounded() {
    let (info, mut m) = process(&CSTACK, &[1, 2], 99, &[]);
    // Make the second thread state point back at the first: a cycle.
    m.word(0x3000 + 0x400 + u64::from(CSTACK.tstate_next), 0x3000);
    assert_eq!(current_frame(&info, 99, |a| m.read(a)), Err(PyStop::NoThreadState));
}

/// A frame chain that loops without an entry frame is cut at `MAX_PY_FRAMES`.
#[test]
fn frame_cycle_is_too_deep() {
    let (info, mut m) = process(&CSTACK, &[1], 1, &[py(0xa0), py(0xa1)]);
    m.word(0x10000 + 0x100 + u64::from(CSTACK.frame_previous), 0x10000);
    let mut n = 0;
    let got = walk_eval(
        &info,
        0x10000,
        |a| m.read(a),
        |_, _| {
            n += 1;
            true
        },
    );
    assert_eq!(got, Err(PyStop::TooDeep));
    assert_eq!(n, MAX_PY_FRAMES);
}

/// An unreadable frame is a read failure; a full record stops the walk as too deep.
#[test]
fn unreadable_frame_and_full_record() {
    let (info, m) = process(&ENTRY_FLAG, &[1], 1, &[py(0xa0), entry(0xa1)]);
    assert_eq!(
        walk_eval(&info, 0x9_9990, |a| m.read(a), |_, _| true),
        Err(PyStop::ReadFailed)
    );
    assert_eq!(
        walk_eval(&info, 0x10000, |a| m.read(a), |_, _| false),
        Err(PyStop::TooDeep)
    );
    let (info, m) = process(&ENTRY_FLAG, &[1], 1, &[]);
    let mut broken = m;
    broken
        .0
        .remove(&(RUNTIME + u64::from(ENTRY_FLAG.runtime_interpreters_head)));
    assert_eq!(current_frame(&info, 1, |a| broken.read(a)), Err(PyStop::ReadFailed));
}

/// The hot and cold parts of the evaluation loop are both in it, their ends not.
#[test]
fn eval_ranges() {
    let (info, _) = process(&CSTACK, &[], 0, &[]);
    assert!(info.in_eval(0x40_0000) && info.in_eval(0x40_0fff) && info.in_eval(0x50_00ff));
    assert!(!info.in_eval(0x40_1000) && !info.in_eval(0x3f_ffff) && !info.in_eval(0x50_0100));
}

/// Stop reasons round-trip through their codes, and names are distinct.
#[test]
fn stop_codes_round_trip() {
    for (i, s) in PyStop::ALL.iter().enumerate() {
        assert_eq!(PyStop::try_from(i as u32), Ok(*s));
        assert!(PyStop::ALL[..i].iter().all(|o| o.name() != s.name()));
    }
    assert_eq!(PyStop::try_from(PyStop::COUNT), Err(PyStop::COUNT));
}
