//! The embedded eBPF object, read back with aya-obj: every program and map `tracer_common`
//! names is in it, with the key and value sizes of the shared types, so the two sides cannot
//! drift apart unnoticed.

use std::mem::size_of;

use tracer_common::{
    Counter, MAP_COUNTERS, PROG_ON_SAMPLE,
    notice::{
        MAP_NOTICED, MAP_NOTICES, MAP_UNMAPPING, NOTICED_ENTRIES, NOTICES_BYTES, PROG_ON_EXEC, PROG_ON_EXEC_VMA,
        PROG_ON_EXIT, PROG_ON_MMAP, PROG_ON_MMAP_EXIT, PROG_ON_MMAP_EXIT_VMA, PROG_ON_MUNMAP, PROG_ON_MUNMAP_EXIT,
        UNMAPPING_ENTRIES,
    },
    python::{MAP_PY_STOPS, MAP_PYTHON, PY_COUNTERS, PYTHON_ENTRIES, PyProcInfo},
    trace::{
        MAP_PAGES, MAP_PROCS, MAP_PROGS, MAP_ROWS, MAP_RULES, MAP_SCRATCH, MAP_STOPS, PROG_WALK, ProcInfo, RowChunk,
        WalkState,
    },
    unwind::{PageEntry, PageKey, UnwindRule},
    walk::StopReason,
};

use super::PROGRAM;

/// Programs and maps match `tracer_common`: names, key and value sizes, fixed sizes.
#[test]
fn object_matches_the_shared_types() {
    let object = aya_obj::Object::parse(PROGRAM).expect("the embedded eBPF object parses");
    for program in [
        PROG_ON_SAMPLE,
        PROG_WALK,
        PROG_ON_EXEC,
        PROG_ON_EXEC_VMA,
        PROG_ON_EXIT,
        PROG_ON_MUNMAP,
        PROG_ON_MUNMAP_EXIT,
        PROG_ON_MMAP,
        PROG_ON_MMAP_EXIT,
        PROG_ON_MMAP_EXIT_VMA,
    ] {
        assert!(object.programs.contains_key(program), "program {program} missing");
    }
    let map = |name: &str| object.maps.get(name).unwrap_or_else(|| panic!("map {name} missing"));
    let u32_key = size_of::<u32>() as u32;
    for (name, key, value) in [
        (MAP_PROCS, u32_key, size_of::<ProcInfo>()),
        (MAP_PAGES, size_of::<PageKey>() as u32, size_of::<PageEntry>()),
        (MAP_ROWS, u32_key, size_of::<RowChunk>()),
        (MAP_RULES, u32_key, size_of::<UnwindRule>()),
        (MAP_SCRATCH, u32_key, size_of::<WalkState>()),
        (MAP_COUNTERS, u32_key, size_of::<u64>()),
        (MAP_STOPS, u32_key, size_of::<u64>()),
        (MAP_NOTICED, u32_key, size_of::<u64>()),
        (MAP_UNMAPPING, u32_key, size_of::<u64>()),
        (MAP_PYTHON, u32_key, size_of::<PyProcInfo>()),
        (MAP_PY_STOPS, u32_key, size_of::<u64>()),
    ] {
        let m = map(name);
        assert_eq!((m.key_size(), m.value_size()), (key, value as u32), "map {name}");
    }
    assert_eq!(map(MAP_COUNTERS).max_entries(), Counter::COUNT);
    assert_eq!(map(MAP_STOPS).max_entries(), StopReason::COUNT);
    assert_eq!(map(MAP_NOTICED).max_entries(), NOTICED_ENTRIES);
    assert_eq!(map(MAP_NOTICES).max_entries(), NOTICES_BYTES);
    assert_eq!(map(MAP_UNMAPPING).max_entries(), UNMAPPING_ENTRIES);
    assert_eq!(map(MAP_PYTHON).max_entries(), PYTHON_ENTRIES);
    assert_eq!(map(MAP_PY_STOPS).max_entries(), PY_COUNTERS);
    assert!(object.maps.contains_key(MAP_PROGS));
}
