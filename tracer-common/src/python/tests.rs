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
    flags: 0,
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
/// Where a fake code object keeps what its identity is made of, and its strings their length
/// and characters.
const IDENT: IdentOffsets = IdentOffsets {
    qualname: 16,
    filename: 24,
    linetable: 32,
    firstlineno: 44,
    str_length: 16,
    str_data: 40,
};

/// Lay out the parts of the identity of a code object at `code`: its names (`name` and
/// `file`, at most 8 bytes each) at `strings` and `strings + 0x100`, its first line `first`.
fn code_object(m: &mut Memory, code: u64, strings: u64, [name, file]: [&str; 2], first: u32) {
    let word = |s: &str| {
        let mut b = [0u8; 8];
        b[..s.len()].copy_from_slice(s.as_bytes());
        u64::from_le_bytes(b)
    };
    for (at, s) in [(strings, name), (strings + 0x100, file)] {
        m.word(at + u64::from(IDENT.str_length), s.len() as u64);
        m.word(at + u64::from(IDENT.str_data), word(s) | 0xee << (8 * s.len().min(7)));
    }
    m.word(code + u64::from(IDENT.qualname), strings);
    m.word(code + u64::from(IDENT.filename), strings + 0x100);
    m.word(code + u64::from(IDENT.linetable), strings + 0x200);
    m.word(code + 40, u64::from(first) << 32 | 0x1234);
}

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
        if f.code != 0 {
            code_object(&mut m, f.code, 0x7_0000 + f.code * 0x400, ["f", "a.py"], 1);
        }
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
        ident: IDENT,
        _pad: 0,
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

/// The words a sample's walk appends after `native` native frames, as the kernel keeps them.
struct Words {
    words: Vec<u64>,
    room: usize,
}

impl PyRecord for Words {
    fn push(&mut self, word: u64) -> bool {
        if self.words.len() >= self.room {
            return false;
        }
        self.words.push(word);
        true
    }

    fn used(&self) -> u32 {
        self.words.len() as u32
    }

    fn truncate(&mut self, len: u32) {
        self.words.truncate(len as usize);
    }
}

/// The walk of `tid`'s chain, step after step as the kernel takes them, into a record of
/// `room` words holding 3 native frames: the runs (code objects, innermost first), why the
/// walk stopped (`None`: complete), and whether the innermost run was dropped.
fn walk_with_room(info: &PyProcInfo, m: &Memory, tid: u32, room: usize) -> (Vec<Vec<u64>>, Option<PyStop>, bool) {
    let start = match current_frame(info, u64::from(tid), |a| m.read(a)) {
        Ok(start) => start,
        Err(e) => return (Vec::new(), Some(e), false),
    };
    let mut record = Words {
        words: vec![0x40_0010, 0x40_0020, 0x40_0030],
        room,
    };
    let mut walk = ChainWalk::new(start, record.used());
    let mut end = CONTINUE;
    for _ in 0..MAX_PY_SAMPLE_FRAMES + MAX_PY_THREADS {
        end = step(info, &mut walk, |a| m.read(a), &mut record);
        if end != CONTINUE {
            break;
        }
    }
    assert_eq!(
        &record.words[..3],
        [0x40_0010, 0x40_0020, 0x40_0030],
        "native frames kept"
    );
    let mut runs = vec![Vec::new()];
    let mut words = record.words[3..].iter();
    while let Some(&w) = words.next() {
        assert!(w & PY_CODE_BIT != 0, "every Python word is marked");
        if w == PY_RUN_END {
            runs.push(Vec::new());
            continue;
        }
        let second = *words.next().expect("an instruction pointer after each code object");
        assert!(second & PY_CODE_BIT != 0, "every Python word is marked");
        let (code, instr, ident) = of_frame_words([w, second]);
        assert!(instr > code, "the instruction pointer read is the frame's own");
        // The identity of the code object as the memory holds it (0 when unreadable).
        assert_eq!(
            ident,
            code_ident(&IDENT, code, |a| m.read(a)),
            "the identity of code object {code:#x}"
        );
        runs.last_mut().expect("a run").push(code);
    }
    // A last run closed by its end leaves an empty one behind.
    if runs.last().is_some_and(Vec::is_empty) {
        runs.pop();
    }
    let stop = match end {
        COMPLETE => None,
        CONTINUE => Some(PyStop::TooDeep),
        stop => Some(PyStop::try_from(stop as u32).expect("a stop")),
    };
    assert_eq!(walk.frames as usize, runs.iter().map(Vec::len).sum::<usize>());
    (runs, stop, walk.unsettled != 0)
}

fn walk(info: &PyProcInfo, m: &Memory, tid: u32) -> (Vec<Vec<u64>>, Option<PyStop>) {
    let (runs, stop, unsettled) = walk_with_room(info, m, tid, usize::MAX);
    assert!(!unsettled, "a settled chain");
    (runs, stop)
}

/// 3.11: runs end at the frame marked `is_entry`, which belongs to its run.
#[test]
fn entry_flag_splits_runs() {
    let frames = [py(0xa0), py(0xa1), entry(0xa2), entry(0xb0), py(0xc0), entry(0xc1)];
    let (info, m) = process(&ENTRY_FLAG, &[7, 9], 9, &frames);
    let (got, stop) = walk(&info, &m, 9);
    assert_eq!(got, [vec![0xa0, 0xa1, 0xa2], vec![0xb0], vec![0xc0, 0xc1]]);
    assert_eq!(stop, None);
}

/// 3.12+: a C-stack frame closes the run above it and is no Python frame; an empty run is one
/// whose call has pushed its C-stack frame only.
#[test]
fn cstack_frames_split_runs() {
    let frames = [py(0xa0), py(0xa1), C, C, py(0xb0), C];
    let (info, m) = process(&CSTACK, &[5], 5, &frames);
    let (got, stop) = walk(&info, &m, 5);
    assert_eq!(got, [vec![0xa0, 0xa1], vec![], vec![0xb0]]);
    assert_eq!(stop, None);
}

/// A chain that ends inside a run is cut short there, its frames kept.
#[test]
fn chain_ending_inside_a_run_is_chain_ended() {
    let (info, m) = process(&CSTACK, &[5], 5, &[py(0xa0), C, py(0xb0)]);
    let (got, stop) = walk(&info, &m, 5);
    assert_eq!(got, [vec![0xa0], vec![0xb0]]);
    assert_eq!(stop, Some(PyStop::ChainEnded));
}

/// The thread state is found by native thread id, not taken from the first thread.
#[test]
fn thread_state_by_native_id() {
    let (info, m) = process(&ENTRY_FLAG, &[3, 4, 5], 5, &[entry(0xd0)]);
    let (got, _) = walk(&info, &m, 5);
    assert_eq!(got, [vec![0xd0]]);
    // Thread 4 has a thread state but runs no Python frame.
    assert_eq!(current_frame(&info, 4, |a| m.read(a)).map(|s| s.frame), Ok(0));
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

/// A frame chain that loops without an entry frame is cut at `MAX_PY_SAMPLE_FRAMES`.
#[test]
fn frame_cycle_is_too_deep() {
    let (info, mut m) = process(&CSTACK, &[1], 1, &[py(0xa0), py(0xa1)]);
    m.word(0x10000 + 0x100 + u64::from(CSTACK.frame_previous), 0x10000);
    let (got, stop) = walk(&info, &m, 1);
    assert_eq!(stop, Some(PyStop::TooDeep));
    assert_eq!(got.concat().len(), MAX_PY_SAMPLE_FRAMES as usize);
}

/// An unreadable frame is a read failure; a full record stops the walk as too deep.
#[test]
fn unreadable_frame_and_full_record() {
    let (info, mut m) = process(&ENTRY_FLAG, &[1], 1, &[py(0xa0), py(0xa1), entry(0xa2)]);
    m.0.remove(&(0x10100 + u64::from(ENTRY_FLAG.frame_previous)));
    assert_eq!(walk(&info, &m, 1), (vec![vec![0xa0]], Some(PyStop::ReadFailed)));
    let (info, m) = process(&ENTRY_FLAG, &[1], 1, &[py(0xa0), entry(0xa1)]);
    // Three native words and room for one Python frame.
    let (got, stop, _) = walk_with_room(&info, &m, 1, 5);
    assert_eq!((got, stop), (vec![vec![0xa0]], Some(PyStop::TooDeep)));
    let (info, m) = process(&ENTRY_FLAG, &[1], 1, &[]);
    let mut broken = m;
    broken
        .0
        .remove(&(RUNTIME + u64::from(ENTRY_FLAG.runtime_interpreters_head)));
    assert_eq!(current_frame(&info, 1, |a| broken.read(a)), Err(PyStop::ReadFailed));
}

/// Give the thread's `_PyCFrame` (at tstate 0 + 0x300) a caller whose current frame is
/// `outer` (3.11, 3.12 layouts).
fn caller_cframe(m: &mut Memory, o: &PyOffsets, outer: u64) {
    let (cframe, caller) = (0x3000 + 0x300, 0x3000 + 0x380);
    let current = u64::from(o.cframe_current_frame);
    m.word(cframe + current + 8, caller);
    m.word(caller + current, outer);
}

/// A run that ends where its caller's `_PyCFrame` says is the thread's; the root `_PyCFrame`
/// (no current frame) leads to the end of the chain.
#[test]
fn runs_that_end_at_their_callers_frame_are_kept() {
    let frames = [py(0xa0), entry(0xa1), py(0xb0), entry(0xb1)];
    let (info, mut m) = process(&ENTRY_FLAG, &[9], 9, &frames);
    caller_cframe(&mut m, &ENTRY_FLAG, 0x10200);
    assert_eq!(walk(&info, &m, 9), (vec![vec![0xa0, 0xa1], vec![0xb0, 0xb1]], None));
    let (info, mut m) = process(&ENTRY_FLAG, &[9], 9, &[py(0xa0), entry(0xa1)]);
    caller_cframe(&mut m, &ENTRY_FLAG, 0);
    assert_eq!(walk(&info, &m, 9), (vec![vec![0xa0, 0xa1]], None));
    let (info, mut m) = process(&CSTACK_CFRAME, &[9], 9, &[py(0xa0), C, py(0xb0), C]);
    caller_cframe(&mut m, &CSTACK_CFRAME, 0x10200);
    assert_eq!(walk(&info, &m, 9), (vec![vec![0xa0], vec![0xb0]], None));
}

/// Offsets of a 3.12-style layout (a `_PyCFrame`, C-stack frames).
const CSTACK_CFRAME: PyOffsets = PyOffsets {
    tstate_frame: 56,
    cframe_current_frame: 0,
    ..CSTACK
};

/// A sample inside the entry of an evaluation-loop call: the thread's `_PyCFrame` is the new
/// one, its `current_frame` a stale word that leads to frames of another time. That run is
/// dropped (an empty run: its evaluation-loop frame stays native) whether it ends at the
/// wrong frame, in no frame or in unreadable memory, and the caller's runs follow.
#[test]
fn a_stale_innermost_run_is_dropped_and_the_callers_kept() {
    // The caller's frames: 0x10200.. (b0, b1); stale frames at 0x10000.. (a0 a1) that end at
    // `stale_end`.
    for (layout, stale_end) in [(&ENTRY_FLAG, 0x10300), (&ENTRY_FLAG, 0), (&CSTACK_CFRAME, 0x10300)] {
        let frames: &[Frame] = if layout.frame_is_entry == NO_FIELD {
            &[py(0xa0), C, py(0xb0), C]
        } else {
            &[py(0xa0), entry(0xa1), py(0xb0), entry(0xb1)]
        };
        let (info, mut m) = process(layout, &[9], 9, frames);
        caller_cframe(&mut m, layout, 0x10200);
        m.word(0x10100 + u64::from(layout.frame_previous), stale_end);
        let (got, stop, unsettled) = walk_with_room(&info, &m, 9, usize::MAX);
        let caller = if layout.frame_is_entry == NO_FIELD {
            vec![0xb0]
        } else {
            vec![0xb0, 0xb1]
        };
        assert_eq!(
            (got, stop, unsettled),
            (vec![vec![], caller], None, true),
            "{stale_end:#x}"
        );
    }
    // A stale word pointing at unreadable memory.
    let (info, mut m) = process(&ENTRY_FLAG, &[9], 9, &[py(0xa0), entry(0xa1), py(0xb0), entry(0xb1)]);
    caller_cframe(&mut m, &ENTRY_FLAG, 0x10200);
    m.word(0x3000 + 0x300 + u64::from(ENTRY_FLAG.cframe_current_frame), 0xdead_0000);
    let (got, stop, unsettled) = walk_with_room(&info, &m, 9, usize::MAX);
    assert_eq!((got, stop, unsettled), (vec![vec![], vec![0xb0, 0xb1]], None, true));
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

/// Offsets of a 3.10-style layout (`PyFrameObject`s, threads matched by `pthread_self()`).
const FRAME_OBJECT: PyOffsets = PyOffsets {
    runtime_interpreters_head: 32,
    interp_threads_head: 8,
    tstate_next: 8,
    tstate_native_thread_id: 176,
    tstate_frame: 24,
    cframe_current_frame: NO_FIELD,
    frame_code: 32,
    frame_previous: 24,
    frame_instr: 96,
    frame_owner: NO_FIELD,
    frame_is_entry: NO_FIELD,
    flags: PY_FRAME_OBJECT | PY_THREAD_PTHREAD,
};

/// 3.6-3.10: every `PyFrameObject` is a run of its own (each Python call is one
/// evaluation-loop call), its instruction the 32 bits of `f_lasti` (a neighbour's bytes above
/// them dropped, -1 kept as `0xffff_ffff`), no owner byte read; the thread state is the one
/// holding the thread's key.
#[test]
fn frame_objects_are_one_run_each() {
    let (info, mut m) = process(&FRAME_OBJECT, &[3, 4], 4, &[py(0xa0), py(0xa1), py(0xa2)]);
    m.word(0x10000 + u64::from(FRAME_OBJECT.frame_instr), 0x1234_5678_ffff_ffff);
    let (got, stop) = walk(&info, &m, 4);
    assert_eq!(got, [vec![0xa0], vec![0xa1], vec![0xa2]]);
    assert_eq!(stop, None);
    let read = |a| m.read(a);
    assert_eq!(
        read_frame(&info, 0x10000, read),
        Ok(PyFrame {
            code: 0xa0,
            instr: 0xffff_ffff,
            ident: code_ident(&IDENT, 0xa0, read),
            previous: 0x10100,
            last: true,
        })
    );
    assert_eq!(read_frame(&info, 0x10100, read).map(|f| f.instr), Ok(0xa1 + 0x41));
    // The other thread's state runs nothing; a key no thread state holds finds none.
    assert_eq!(current_frame(&info, 3, read).map(|s| s.frame), Ok(0));
    assert_eq!(current_frame(&info, 5, read), Err(PyStop::NoThreadState));
}

/// A frame carries the identity of its code object as it was when the frame was read: a code
/// object made at a freed one's address gets another, even with its names and line table at
/// the same addresses, when a name's length or last characters or the first line differ; the
/// same names and line make the same identity wherever they are. One whose parts cannot be
/// read gets 0. The words keep the addresses whole, the marker bits and the run markers apart.
#[test]
fn frames_carry_their_code_objects_identity() {
    let (info, mut m) = process(&CSTACK, &[5], 5, &[py(0xa000), C]);
    let ident = |m: &Memory| read_frame(&info, 0x10000, |a| m.read(a)).expect("a frame").ident;
    let strings = 0x50_0000;
    let mut seen = std::collections::BTreeSet::new();
    for (names, first) in [
        (["work_4", "turn4.py"], 1),
        (["work_5", "turn4.py"], 1),
        (["work_4", "turn5.py"], 1),
        (["work_4", "turn4.py"], 2),
        (["work_4", "turn4.p"], 1),
        (["<module>", "a.py"], 1),
        (["<module>", "b.py"], 1),
    ] {
        code_object(&mut m, 0xa000, strings, names, first);
        let got = ident(&m);
        assert_ne!(got, 0);
        assert!(seen.insert(got), "{names:?} line {first}: an identity of its own");
    }
    // The same names elsewhere, and a neighbour of the first line changed: the same.
    code_object(&mut m, 0xa000, strings, ["<module>", "b.py"], 1);
    m.word(0xa000 + 40, 1 << 32 | 0x9999);
    assert!(seen.contains(&ident(&m)));
    // The line table elsewhere: another.
    m.word(0xa000 + u64::from(IDENT.linetable), 0x60_0000);
    assert!(!seen.contains(&ident(&m)));
    // A name's length unreadable: 0.
    m.0.remove(&(strings + 0x100 + u64::from(IDENT.str_length)));
    assert_eq!(ident(&m), 0);
    // A long name: its last eight bytes count.
    code_object(&mut m, 0xa000, strings, ["<module>", "b.py"], 1);
    m.word(strings + 0x100 + u64::from(IDENT.str_length), 30);
    m.word(strings + 0x100 + u64::from(IDENT.str_data) + 22, 0x1111);
    let long = ident(&m);
    m.word(strings + 0x100 + u64::from(IDENT.str_data) + 22, 0x2222);
    assert_ne!(ident(&m), long);
    // Every bit of the identity survives the words; the addresses too, up to 2^48.
    for ident in [1, 0xfff, 0x1000, 0xff_ffff, 0xa5_5a5a] {
        let (code, instr) = (0x7fff_ffff_f000, 0x7fff_ffff_f0c4);
        let words = frame_words(code, instr, ident);
        assert_eq!(of_frame_words(words), (code, instr, ident));
        for w in words {
            assert!(w & PY_CODE_BIT != 0 && w != PY_RUN_END && w != PY_CHAIN_END);
        }
    }
    // A forged address above 2^48 does not spill into the identity or the markers.
    let words = frame_words(u64::MAX, u64::MAX, 0);
    assert_eq!(of_frame_words(words), (PY_ADDR_MASK, PY_ADDR_MASK, 0));
    assert!(words.iter().all(|w| w & (PY_RUN_END | PY_CHAIN_END) == PY_CODE_BIT));
}

mod v314;
