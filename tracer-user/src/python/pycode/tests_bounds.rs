//! The bounds on what a process that forges its interpreter's memory can make the naming of
//! Python frames hold and do: line tables kept once, the work of a sample, one user's share of
//! the names, the bytes of names one sample carries, and which process gives way in a full
//! kernel map.

use std::sync::{Arc, Mutex};

use tracer_common::python::PyProcInfo;

use super::{CODE_COST, MAX_READS_PER_SAMPLE, MAX_SAMPLE_BYTES, Names, PyCodes, PyFrame, PyFunction};
use crate::python::MemReader;
use crate::python::{CodeLayout, layout::V3_11, merge::PyFrameRef, testing::FakeMemory};

fn info() -> PyProcInfo {
    PyProcInfo {
        runtime: 0,
        eval_start: 0x1000,
        eval_end: 0x2000,
        cold_start: 0,
        cold_end: 0,
        offsets: V3_11.kernel,
        ident: V3_11.code.ident_offsets(),
        _pad: 0,
    }
}

fn codes(memory: &Arc<Mutex<FakeMemory>>) -> PyCodes {
    let memory = Arc::clone(memory);
    let reader = MemReader::with(Box::new(move || {
        let memory = Arc::clone(&memory);
        Box::new(move |_pid, addr, buf: &mut [u8]| buf.is_empty() || memory.lock().unwrap().read(addr, buf))
    }));
    let mut codes = PyCodes::with_reader(reader);
    codes.owner = |pid| if pid == 7 { 65534 } else { 0 };
    codes
}

/// A new sample (its bounds start afresh).
fn new_sample(codes: &PyCodes, pid: u32) {
    assert_eq!(codes.merge(pid, &[], 0, true, |_| 0), None);
}

/// A frame of the code object at `code` of `memory`, `offset` bytes into its code.
fn at(memory: &Mutex<FakeMemory>, c: &CodeLayout, code: u64, offset: u64) -> PyFrameRef {
    PyFrameRef {
        code,
        instr: code + u64::from(c.code_adaptive) + offset,
        ident: memory.lock().unwrap().ident(c, code),
    }
}

fn size(codes: &PyCodes, what: &str) -> usize {
    let mut found = 0;
    codes.sizes(&mut |name, n| {
        if name == what {
            found = n;
        }
    });
    found
}

/// Regression (a forger's 16,384 code objects sharing one 64 KiB line table were kept with a
/// copy each): the table is kept once; one freed and another of its length made at its
/// address, with other bytes, gives the code objects read after it their own lines.
#[test]
fn a_line_table_shared_by_code_objects_is_kept_once() {
    let c = V3_11.code;
    let memory = Arc::new(Mutex::new(FakeMemory::default()));
    // Entries of eight code units on lines 1, 2, 3, ... (kind 10 + 1: one line past the last).
    let table: Vec<u8> = (0..(64 << 10) / 3).flat_map(|_| [0x80 | 11 << 3 | 7, 0, 0]).collect();
    let (n, table_at) = (200u64, 0x900_000);
    {
        let mut m = memory.lock().unwrap();
        m.bytes(&c, table_at, &table);
        m.string(&c, 0x800_000, "f", 1);
        for i in 0..n {
            m.code(&c, 0x10_000 + i * 0x1000, [0x800_000, 0x800_000, table_at], 10);
        }
    }
    let mut codes = codes(&memory);
    codes.set(8, Some((info(), c)));
    for i in 0..n {
        new_sample(&codes, 8);
        let frame = codes
            .frame(8, at(&memory, &c, 0x10_000 + i * 0x1000, 32))
            .expect("kept");
        assert_eq!(frame.line, 13, "code object {i}");
    }
    let held = size(&codes, "python.code_bytes");
    assert!(held <= table.len() + n as usize * CODE_COST, "{held} bytes held");
    // Another table of the same length at the same address.
    let other: Vec<u8> = (0..(64 << 10) / 3).flat_map(|_| [0x80 | 10 << 3 | 7, 0, 0]).collect();
    {
        let mut m = memory.lock().unwrap();
        m.bytes(&c, table_at, &other);
        m.code(&c, 0x5_000_000, [0x800_000, 0x800_000, table_at], 10);
    }
    new_sample(&codes, 8);
    assert_eq!(codes.frame(8, at(&memory, &c, 0x5_000_000, 32)).expect("kept").line, 10);
}

/// A sample whose frames are all new code objects reads at most [`MAX_READS_PER_SAMPLE`]
/// (two each: the code object, its line table); its other frames are unnamed and counted, and
/// the next sample names further.
#[test]
fn a_samples_reads_are_bounded() {
    let c = V3_11.code;
    let memory = Arc::new(Mutex::new(FakeMemory::default()));
    {
        let mut m = memory.lock().unwrap();
        for i in 0..256 {
            m.function(&c, 0x10_000 + i * 0x1000, &format!("f{i}"), "a.py", 1, &[0xef, 0]);
        }
    }
    let mut codes = codes(&memory);
    codes.set(8, Some((info(), c)));
    let sample = |codes: &PyCodes| -> usize {
        new_sample(codes, 8);
        (0..256)
            .map(|i| codes.frame(8, at(&memory, &c, 0x10_000 + i * 0x1000, 0)).expect("kept"))
            .filter(|f| f.function != PyFrame::UNNAMED)
            .count()
    };
    let per_sample = MAX_READS_PER_SAMPLE as usize / 2;
    assert_eq!(sample(&codes), per_sample);
    assert_eq!(codes.stats().over_budget, 256 - per_sample as u64);
    assert_eq!(sample(&codes), 2 * per_sample, "cached ones named, new ones read");
}

/// Regression (one process's 8,192 functions of 8 KiB names took the session's 64 MiB of
/// names, and an honest process's frames were all unnamed): one user's functions stop at its
/// share, another user's are still named.
#[test]
fn one_users_functions_stop_at_its_share() {
    let mut names = Names::default();
    let long = "\u{10000}".repeat(256);
    let mut over = None;
    for i in 0..100_000 {
        let f = names.intern(65534, format!("{i}{long}"), format!("{i}{long}"));
        if f == Names::OVER_USER {
            over = Some(i);
            break;
        }
    }
    let over = over.expect("the user's share ends");
    assert!(names.bytes <= (64 << 20) / 16, "{} bytes", names.bytes);
    assert!(over > 1000, "a share of thousands of functions: {over}");
    let honest = names.intern(0, "main".into(), "/srv/app.py".into());
    assert_ne!(honest, Names::OVER_USER);
    assert_ne!(honest, PyFrame::UNNAMED);
    // A function the user named before is still named.
    assert_eq!(names.intern(65534, format!("0{long}"), format!("0{long}")), 0);
}

/// Regression (256 frames with 1,024-character names of 4-byte characters made a json record
/// 2.1 MB): a sample's Python frames carry at most [`MAX_SAMPLE_BYTES`] of names; past it one
/// `[python frames elided]` frame stands for the rest, counted.
#[test]
fn a_samples_names_are_bounded() {
    let c = V3_11.code;
    let memory = Arc::new(Mutex::new(FakeMemory::default()));
    let long = "\u{10000}".repeat(1000);
    {
        let mut m = memory.lock().unwrap();
        for i in 0..64u64 {
            let code = 0x10_000 + i * 0x10_000;
            m.code(&c, code, [code + 0x1000, code + 0x6000, code + 0xb000], 1);
            m.string(&c, code + 0x1000, &format!("{i}{long}"), 4);
            m.string(&c, code + 0x6000, &long, 4);
            m.bytes(&c, code + 0xb000, &[0xef, 0]);
        }
    }
    let mut codes = codes(&memory);
    codes.set(8, Some((info(), c)));
    new_sample(&codes, 8);
    let frames: Vec<Option<PyFrame>> = (0..64u64)
        .map(|i| codes.frame(8, at(&memory, &c, 0x10_000 + i * 0x10_000, 0)))
        .collect();
    let kept: Vec<PyFrame> = frames.iter().flatten().copied().collect();
    let elided = kept.iter().position(|f| f.function == PyFrame::ELIDED).expect("elided");
    assert_eq!(elided, kept.len() - 1, "the marker comes last");
    let bytes: usize = kept[..elided]
        .iter()
        .map(|f| {
            let PyFunction { qualname, filename } = codes.function(f.function).expect("named");
            assert!(qualname.len() <= 1024 && filename.len() <= 1024, "names cut");
            qualname.len() + filename.len()
        })
        .sum();
    assert!(bytes <= MAX_SAMPLE_BYTES, "{bytes}");
    assert!(elided >= 4, "frames before the bound: {elided}");
    assert_eq!(codes.stats().elided, 64 - elided as u64);
    assert_eq!(
        codes.function(PyFrame::ELIDED).map(|f| f.qualname),
        Some("[python frames elided]".into())
    );
    // The next sample starts afresh.
    new_sample(&codes, 8);
    assert!(
        codes
            .frame(8, at(&memory, &c, 0x10_000, 0))
            .is_some_and(|f| f.function != PyFrame::ELIDED)
    );
}

/// In a full map the process least recently sampled gives way, never one sampled after the
/// process to be added was found; processes not in the map are not chosen.
#[test]
fn the_least_recently_sampled_gives_way() {
    let memory = Arc::new(Mutex::new(FakeMemory::default()));
    let mut codes = codes(&memory);
    let c = V3_11.code;
    for pid in [10, 11, 12] {
        codes.set(pid, Some((info(), c)));
        codes.set_in_map(pid, true);
    }
    new_sample(&codes, 10);
    new_sample(&codes, 12);
    assert_eq!(codes.map_victim(13), Some(11), "never sampled: the oldest idle");
    codes.set(13, Some((info(), c)));
    assert_eq!(codes.map_victim(13), Some(11));
    codes.set_in_map(11, false);
    assert_eq!(codes.map_victim(13), Some(10));
    // A process found before the others were sampled does not push them out.
    new_sample(&codes, 10);
    codes.set_in_map(11, true);
    assert_eq!(
        codes.map_victim(11),
        None,
        "11 was found before 10 and 12 were last sampled"
    );
    // Sampled while out of the map: to be put back.
    codes.set_in_map(11, false);
    new_sample(&codes, 11);
    assert_eq!(codes.take_readmit(), vec![11]);
}
