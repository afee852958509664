//! Python frames of samples merged and named against a fake process memory: what a stack
//! holds, how the cache follows a code object replaced at its address, and what is counted.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use tracer_common::python::{PY_CODE_BIT, PY_RUN_END, PyProcInfo};

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
    }
}

/// Registry Python state over `memory` (shared: tests change it), every process reading it.
fn codes(memory: &Arc<Mutex<FakeMemory>>, recheck: Duration) -> PyCodes {
    let memory = Arc::clone(memory);
    let reader = MemReader::with(Box::new(move || {
        let memory = Arc::clone(&memory);
        Box::new(move |_pid, addr, buf: &mut [u8]| buf.is_empty() || memory.lock().unwrap().read(addr, buf))
    }));
    PyCodes::with_reader(reader, recheck)
}

/// The instruction pointer `offset` bytes into the code of the code object at `code`.
fn instr(c: &CodeLayout, code: u64, offset: u64) -> u64 {
    code + u64::from(c.code_adaptive) + offset
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
    let mut codes = codes(&memory, Duration::from_secs(60));
    codes.set(7, Some((info(), c)));
    codes.set(8, Some((info(), c)));
    // PC in C code, return addresses into the loop, into C (`sorted`), into the loop, `main`.
    let native = [0x9000, EVAL.0 + 0x11, 0x9500, EVAL.0 + 0x21, 0x9900];
    let python = [
        0x10_000 | PY_CODE_BIT,
        instr(&c, 0x10_000, 20) | PY_CODE_BIT,
        0x20_000 | PY_CODE_BIT,
        instr(&c, 0x20_000, 2) | PY_CODE_BIT,
        PY_RUN_END,
        0x30_000 | PY_CODE_BIT,
        instr(&c, 0x30_000, 4) | PY_CODE_BIT,
        PY_RUN_END,
    ];
    let user: Vec<u64> = native.iter().chain(&python).copied().collect();
    let lookup = |i: usize| if i == 0 { user[0] } else { user[i] - 1 };
    let merged = codes
        .merge(7, &user, native.len(), true, lookup)
        .expect("Python frames");
    let key = PyFrameRef {
        code: 0x10_000,
        instr: instr(&c, 0x10_000, 20),
    };
    assert_eq!(
        merged,
        vec![
            Merged::Native(0),
            Merged::Python(key),
            Merged::Python(PyFrameRef {
                code: 0x20_000,
                instr: instr(&c, 0x20_000, 2)
            }),
            Merged::Native(2),
            Merged::Python(PyFrameRef {
                code: 0x30_000,
                instr: instr(&c, 0x30_000, 4)
            }),
            Merged::Native(4),
        ]
    );
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

/// A code object that cannot be read is named by address and counted; a code object freed
/// and replaced at its address is named afresh once its cache entry is checked again; a
/// process exec'ing (forgotten) starts an empty cache.
#[test]
fn cached_code_objects_are_checked_again() {
    let c = V3_11.code;
    let memory = Arc::new(Mutex::new(FakeMemory::default()));
    memory
        .lock()
        .unwrap()
        .function(&c, 0x10_000, "first", "/a.py", 5, &TABLE);
    // Long enough that the steps before a sleep never span it, on a busy machine too.
    let recheck = Duration::from_secs(1);
    let mut codes = codes(&memory, recheck);
    codes.set(7, Some((info(), c)));
    let at = |code: u64| PyFrameRef {
        code,
        instr: instr(&c, code, 0),
    };
    assert_eq!(
        name(&codes, codes.frame(7, at(0x10_000)).expect("not elided"))
            .unwrap()
            .0,
        "first"
    );
    let missing = codes.frame(7, at(0x50_000)).expect("not elided");
    assert_eq!(
        missing,
        PyFrame {
            function: PyFrame::UNNAMED,
            line: 0,
            code: 0x50_000
        }
    );
    assert_eq!(codes.stats().unnamed, 1);
    // Freed, and another code object made at its address, with its name elsewhere.
    {
        let mut m = memory.lock().unwrap();
        m.code(&c, 0x10_000, [0x60_000, 0x60_400, 0x60_800], 9);
        m.string(&c, 0x60_000, "second", 1);
        m.string(&c, 0x60_400, "/b.py", 1);
        m.bytes(&c, 0x60_800, &TABLE);
    }
    assert_eq!(
        name(&codes, codes.frame(7, at(0x10_000)).expect("not elided"))
            .unwrap()
            .0,
        "first",
        "cached"
    );
    std::thread::sleep(recheck + Duration::from_millis(100));
    assert_eq!(
        name(&codes, codes.frame(7, at(0x10_000)).expect("not elided")).unwrap(),
        ("second".into(), "/b.py".into(), 9)
    );
    // Unchanged past the check: still named (the header read again matched).
    std::thread::sleep(recheck + Duration::from_millis(100));
    assert_eq!(
        name(&codes, codes.frame(7, at(0x10_000)).expect("not elided"))
            .unwrap()
            .0,
        "second"
    );
    // Its process gone (the memory reads nothing), a cached code object still names the
    // samples that come in late.
    let saved = std::mem::take(&mut *memory.lock().unwrap());
    std::thread::sleep(recheck + Duration::from_millis(100));
    assert_eq!(
        name(&codes, codes.frame(7, at(0x10_000)).expect("not elided"))
            .unwrap()
            .0,
        "second"
    );
    *memory.lock().unwrap() = saved;
    // A process not (or no longer) known: unnamed.
    codes.forget(7);
    assert_eq!(
        codes.frame(7, at(0x10_000)).expect("not elided").function,
        PyFrame::UNNAMED
    );
    codes.set(7, Some((info(), c)));
    assert_eq!(
        name(&codes, codes.frame(7, at(0x10_000)).expect("not elided"))
            .unwrap()
            .0,
        "second"
    );
}
