//! Python frames of samples merged and named against a fake process memory: what a stack
//! holds, how the cache follows a code object replaced at its address, and what is counted.

use std::sync::{Arc, Mutex};

use tracer_common::python::{PY_RUN_END, PyProcInfo, frame_words};

use super::{PyCodes, PyFrame, PyFunction};
use crate::python::MemReader;
use crate::python::{
    CodeLayout,
    layout::V3_11,
    merge::{Merged, PyFrameRef},
    testing::FakeMemory,
};

/// Two entries of eight code units: the first on the first line, the second three past it.
const TABLE: [u8; 4] = [0xef, 0x00, 0xef, 0x06];
/// The evaluation loop of the fake interpreter.
const EVAL: (u64, u64) = (0x1000, 0x2000);

fn info() -> PyProcInfo {
    PyProcInfo {
        runtime: 0,
        eval_start: EVAL.0,
        eval_end: EVAL.1,
        cold_start: 0,
        cold_end: 0,
        offsets: V3_11.kernel,
        ident: V3_11.code.ident_offsets(),
        _pad: 0,
    }
}

/// Registry Python state over `memory` (shared: tests change it), every process reading it.
fn codes(memory: &Arc<Mutex<FakeMemory>>) -> PyCodes {
    let memory = Arc::clone(memory);
    let reader = MemReader::with(Box::new(move || {
        let memory = Arc::clone(&memory);
        Box::new(move |_pid, addr, buf: &mut [u8]| buf.is_empty() || memory.lock().unwrap().read(addr, buf))
    }));
    PyCodes::with_reader(reader)
}

/// The instruction pointer `offset` bytes into the code of the code object at `code`.
fn instr(c: &CodeLayout, code: u64, offset: u64) -> u64 {
    code + u64::from(c.code_adaptive) + offset
}

/// A frame of the code object at `code` of `memory` (with its identity now), `offset` bytes
/// into its code.
fn at(memory: &Mutex<FakeMemory>, c: &CodeLayout, code: u64, offset: u64) -> PyFrameRef {
    PyFrameRef {
        code,
        instr: instr(c, code, offset),
        ident: memory.lock().unwrap().ident(c, code),
    }
}

fn name(codes: &PyCodes, frame: PyFrame) -> Option<(String, String, u32)> {
    let PyFunction { qualname, filename } = codes.function(frame.function)?;
    Some((qualname.into(), filename.into(), frame.line))
}

/// A sample whose native stack runs the evaluation loop twice (a C function calling back
/// into Python between): each run of Python frames takes its evaluation-loop frame's place,
/// innermost first; names and lines come from the code objects; a function met in two
/// processes is one function.
#[test]
fn runs_replace_their_evaluation_loop_frames() {
    let c = V3_11.code;
    let memory = Arc::new(Mutex::new(FakeMemory::default()));
    {
        let mut m = memory.lock().unwrap();
        m.function(&c, 0x10_000, "key", "/srv/app.py", 10, &TABLE);
        m.function(&c, 0x20_000, "sort.<locals>.<lambda>", "/srv/app.py", 20, &TABLE);
        m.function(&c, 0x30_000, "<module>", "/srv/app.py", 1, &TABLE);
    }
    let mut codes = codes(&memory);
    codes.set(7, Some((info(), c)));
    codes.set(8, Some((info(), c)));
    // PC in C code, return addresses into the loop, into C (`sorted`), into the loop, `main`.
    let native = [0x9000, EVAL.0 + 0x11, 0x9500, EVAL.0 + 0x21, 0x9900];
    let [key, lambda, module] = [
        at(&memory, &c, 0x10_000, 20),
        at(&memory, &c, 0x20_000, 2),
        at(&memory, &c, 0x30_000, 4),
    ];
    let mut python = Vec::new();
    for run in [&[key, lambda][..], &[module]] {
        for f in run {
            python.extend(frame_words(f.code, f.instr, f.ident));
        }
        python.push(PY_RUN_END);
    }
    let user: Vec<u64> = native.iter().chain(&python).copied().collect();
    let lookup = |i: usize| if i == 0 { user[0] } else { user[i] - 1 };
    let merged = codes
        .merge(7, &user, native.len(), true, lookup)
        .expect("Python frames");
    assert_eq!(
        merged,
        vec![
            Merged::Native(0),
            Merged::Python(key),
            Merged::Python(lambda),
            Merged::Native(2),
            Merged::Python(module),
            Merged::Native(4),
        ]
    );
    assert!([key, lambda, module].iter().all(|f| f.ident != 0), "identities kept");
    let named: Vec<_> = merged
        .iter()
        .filter_map(|m| match m {
            Merged::Python(p) => name(&codes, codes.frame(7, *p).expect("not elided")),
            Merged::Native(_) => None,
        })
        .collect();
    let named: Vec<(&str, &str, u32)> = named.iter().map(|(q, f, l)| (q.as_str(), f.as_str(), *l)).collect();
    assert_eq!(
        named,
        [
            ("key", "/srv/app.py", 13),
            ("sort.<locals>.<lambda>", "/srv/app.py", 20),
            ("<module>", "/srv/app.py", 1)
        ]
    );
    assert_eq!(
        codes.frame(8, key).expect("not elided").function,
        codes.frame(7, key).expect("not elided").function,
        "one function"
    );
    let stats = codes.stats();
    assert_eq!(
        (
            stats.frames,
            stats.unnamed,
            stats.eval_frames_without_run,
            stats.runs_dropped
        ),
        (5, 0, 0, 0)
    );
    // Without its native stack's second evaluation-loop frame (the walk was cut short), the
    // outer run is dropped, counted; a sample of a process not known keeps its native frames.
    let cut: Vec<u64> = user[..3].iter().chain(&python).copied().collect();
    assert_eq!(codes.merge(7, &cut, 3, false, lookup).map(|m| m.len()), Some(4));
    assert_eq!(codes.stats().runs_dropped, 1);
    assert_eq!(codes.merge(99, &user, native.len(), true, lookup), None);
    assert_eq!(codes.stats().runs_dropped, 3);
    assert_eq!(
        codes.merge(7, &native, native.len(), true, lookup),
        None,
        "no Python words"
    );
}

/// A frame is named by a cached code object only if the identity the kernel recorded with it
/// is the cached one's: a code object freed and another made at its address (a module's body
/// once run, and then a function's) names the frames of each its own, and a frame of the
/// first resolved after the second was read is named by address, counted, never after the
/// second. A code object that cannot be read is named by address, a cached one still names
/// the late samples of a process gone, and a process exec'ing (forgotten) starts afresh.
#[test]
fn a_code_object_made_at_a_freed_ones_address_never_names_its_frames() {
    let c = V3_11.code;
    let memory = Arc::new(Mutex::new(FakeMemory::default()));
    memory
        .lock()
        .unwrap()
        .function(&c, 0x10_000, "_TrivialRe", "/a.py", 5, &TABLE);
    let mut codes = codes(&memory);
    codes.set(7, Some((info(), c)));
    let qualname = |codes: &PyCodes, frame: PyFrameRef| {
        let named = codes.frame(7, frame).expect("not elided");
        name(codes, named).map(|(q, _, _)| q)
    };
    let first = at(&memory, &c, 0x10_000, 0);
    assert_eq!(qualname(&codes, first).as_deref(), Some("_TrivialRe"));
    let missing = PyFrameRef {
        code: 0x50_000,
        instr: instr(&c, 0x50_000, 0),
        ident: 77,
    };
    assert_eq!(
        codes.frame(7, missing).expect("not elided"),
        PyFrame {
            function: PyFrame::UNNAMED,
            line: 0,
            code: 0x50_000
        }
    );
    // The kernel could not read the code object: nothing to name it by.
    assert_eq!(qualname(&codes, PyFrameRef { ident: 0, ..first }), None);
    assert_eq!(codes.stats().unnamed, 2);
    // Freed, and another code object made at its address, with its names elsewhere.
    {
        let mut m = memory.lock().unwrap();
        m.code(&c, 0x10_000, [0x60_000, 0x60_400, 0x60_800], 9);
        m.string(&c, 0x60_000, "sort.<locals>.<lambda>", 1);
        m.string(&c, 0x60_400, "/b.py", 1);
        m.bytes(&c, 0x60_800, &TABLE);
    }
    let second = at(&memory, &c, 0x10_000, 0);
    assert_ne!(second.ident, first.ident);
    // A sample taken before the change: its frame is the cached one's.
    assert_eq!(
        qualname(&codes, first).as_deref(),
        Some("_TrivialRe"),
        "cached, the frame's own"
    );
    // One taken after it: read afresh.
    let named = codes.frame(7, second).expect("not elided");
    assert_eq!(
        name(&codes, named),
        Some(("sort.<locals>.<lambda>".into(), "/b.py".into(), 9))
    );
    // A late frame of the first, the second in the cache and in memory: by address, counted.
    assert_eq!(
        codes.frame(7, first).expect("not elided"),
        PyFrame {
            function: PyFrame::UNNAMED,
            line: 0,
            code: 0x10_000
        }
    );
    assert_eq!((codes.stats().replaced, codes.stats().unnamed), (1, 2));
    assert_eq!(qualname(&codes, second).as_deref(), Some("sort.<locals>.<lambda>"));
    // Its process gone (the memory reads nothing): the cached code object still names the
    // samples that come in late, and a frame of another identity does not evict it.
    let saved = std::mem::take(&mut *memory.lock().unwrap());
    assert_eq!(qualname(&codes, first), None);
    assert_eq!(qualname(&codes, second).as_deref(), Some("sort.<locals>.<lambda>"));
    *memory.lock().unwrap() = saved;
    // A process not (or no longer) known: unnamed.
    codes.forget(7);
    assert_eq!(codes.frame(7, second).expect("not elided").function, PyFrame::UNNAMED);
    codes.set(7, Some((info(), c)));
    assert_eq!(qualname(&codes, second).as_deref(), Some("sort.<locals>.<lambda>"));
}
