//! Unit tests of `-e` specs, event sets and uprobe symbol resolution (on checked-in fixtures).

use std::{path::PathBuf, time::Duration};

use tracer_common::event::{EVENT_CPU_CLOCK, EVENT_OFFCPU, EventKind, event_id};

use super::*;

fn spec(text: &str) -> Result<EventSpec, SpecError> {
    text.parse()
}

fn strings(specs: &[&str]) -> Vec<String> {
    specs.iter().map(|s| (*s).to_owned()).collect()
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/bin/v2/x86_64")
        .join(name)
}

/// Every form of spec parses into its parts.
#[test]
fn specs_parse() {
    assert_eq!(spec("cpu-clock"), Ok(EventSpec::CpuClock));
    assert_eq!(spec("offcpu"), Ok(EventSpec::Offcpu));
    assert_eq!(
        spec("uprobe:/usr/bin/app:main"),
        Ok(EventSpec::Uprobe {
            path: "/usr/bin/app".into(),
            symbol: "main".into(),
            offset: 0
        })
    );
    assert_eq!(
        spec("uprobe:./a:b:parse.cold+0x10"),
        Ok(EventSpec::Uprobe {
            path: "./a:b".into(),
            symbol: "parse.cold".into(),
            offset: 16
        })
    );
    assert_eq!(
        spec("uprobe:app:f+8"),
        Ok(EventSpec::Uprobe {
            path: "app".into(),
            symbol: "f".into(),
            offset: 8
        })
    );
    assert_eq!(
        spec("uretprobe:/lib/libc.so.6:malloc"),
        Ok(EventSpec::Uretprobe {
            path: "/lib/libc.so.6".into(),
            symbol: "malloc".into()
        })
    );
    assert_eq!(
        spec("kprobe:__x64_sys_getppid"),
        Ok(EventSpec::Kprobe {
            symbol: "__x64_sys_getppid".into()
        })
    );
    assert_eq!(
        spec("tracepoint:sched:sched_process_fork"),
        Ok(EventSpec::Tracepoint {
            category: "sched".into(),
            name: "sched_process_fork".into()
        })
    );
}

/// Bad specs are refused with a sentence that names them and says what is wrong.
#[test]
fn bad_specs_are_refused() {
    let message = |text: &str| spec(text).expect_err(text).to_string();
    assert!(message("cycles").contains("`cycles` is not an event"));
    assert!(message("cpu-clock:1").contains("is not an event"));
    assert!(message("uprobe:/bin/app").contains("lacks its PATH:SYMBOL"));
    assert!(message("uprobe::main").contains("lacks its PATH:SYMBOL"));
    assert!(message("uprobe:/bin/app:").contains("lacks its PATH:SYMBOL"));
    assert!(message("uprobe:/bin/app:main+zz").contains("`zz` is not an offset"));
    assert!(message("uretprobe:/bin/app:ma;in").contains("`ma;in` is not a symbol"));
    assert!(message("kprobe:").contains("lacks its SYMBOL"));
    assert!(message("tracepoint:sched").contains("lacks its CATEGORY:NAME"));
    assert!(message("tracepoint:..:x").contains("is not a tracepoint category"));
    assert!(message("tracepoint:sched:a/b").contains("is not a tracepoint name"));
    for text in ["cycles", "uprobe:/bin/app", "tracepoint:sched"] {
        assert_eq!(message(text).lines().count(), 1, "{text}: one sentence");
    }
}

/// No spec means cpu-clock; ids are given by kind and slot in command-line order; the names
/// are those given.
#[test]
fn sets_number_their_events() {
    let set = EventSet::parse(&[], None).expect("default");
    assert_eq!(set.events().len(), 1);
    assert_eq!(set.events()[0].id, EVENT_CPU_CLOCK);
    assert_eq!(set.describe(99), "at 99 Hz");
    let set = EventSet::parse(
        &strings(&["kprobe:a", "offcpu", "kprobe:b", "uprobe:/x:f", "cpu-clock"]),
        Some(Duration::from_micros(500)),
    )
    .expect("valid");
    let ids: Vec<u32> = set.events().iter().map(|e| e.id).collect();
    assert_eq!(
        ids,
        [
            event_id(EventKind::Kprobe, 0),
            EVENT_OFFCPU,
            event_id(EventKind::Kprobe, 1),
            event_id(EventKind::Uprobe, 0),
            EVENT_CPU_CLOCK
        ]
    );
    assert_eq!(set.min_block, Duration::from_micros(500));
    assert_eq!(&*set.names().name(event_id(EventKind::Kprobe, 1)), "kprobe:b");
    assert_eq!(&*set.names().name(EVENT_OFFCPU), "offcpu");
    assert_eq!(
        set.describe(49),
        "on kprobe:a, offcpu (blocks of 500 us or more), kprobe:b, uprobe:/x:f, cpu-clock at 49 Hz"
    );
    assert!(set.has(EventKind::Offcpu) && !set.has(EventKind::Tracepoint));
}

/// Duplicates, too many probes of a kind, two offcpu and a stray --min-block are refused.
#[test]
fn bad_sets_are_refused() {
    let error =
        |specs: &[&str], min: Option<Duration>| EventSet::parse(&strings(specs), min).expect_err("refused").to_string();
    assert_eq!(error(&["kprobe:a", "kprobe:a"], None), "`kprobe:a` is given twice");
    assert_eq!(error(&["offcpu", "offcpu"], None), "`offcpu` is given twice");
    let nine: Vec<String> = (0..9).map(|i| format!("tracepoint:c:n{i}")).collect();
    let nine: Vec<&str> = nine.iter().map(String::as_str).collect();
    assert_eq!(error(&nine, None), "at most 8 tracepoint events can be traced at once");
    assert_eq!(
        error(&["cpu-clock"], Some(Duration::from_millis(2))),
        "--min-block applies to -e offcpu only"
    );
    assert!(error(&["bogus"], None).contains("`bogus` is not an event"));
}

/// A function's file offset: in a non-PIE executable (addresses 0x400000 above the file), from
/// `.symtab`; in a shared library, from `.dynsym`; with an offset into the function.
#[test]
fn symbols_resolve_to_file_offsets() {
    let exe = std::fs::read(fixture("chain-g-nopie")).expect("fixture");
    // nm: 0000000000400870 0000000000000014 T level1; the text segment maps file offset 0 at
    // 0x400000.
    assert_eq!(file_offset_in(&exe, "level1", 0), Ok(0x870));
    assert_eq!(file_offset_in(&exe, "level1", 4), Ok(0x874));
    let lib = std::fs::read(fixture("libshlib.so")).expect("fixture");
    // nm -D: 0000000000000530 0000000000000005 T shlib_leaf
    assert_eq!(file_offset_in(&lib, "shlib_leaf", 0), Ok(0x530));
}

/// Unknown functions, offsets past the function and files that are not ELF are errors.
#[test]
fn unprobeable_symbols_are_errors() {
    let exe = std::fs::read(fixture("chain-g-nopie")).expect("fixture");
    assert_eq!(
        file_offset_in(&exe, "no_such_function", 0),
        Err(SymbolError::NotFound("no_such_function".into()))
    );
    assert_eq!(
        file_offset_in(&exe, "level1", 0x14),
        Err(SymbolError::PastEnd {
            symbol: "level1".into(),
            offset: 0x14,
            size: 0x14
        })
    );
    assert!(matches!(
        file_offset_in(b"#!/bin/sh\n", "main", 0),
        Err(SymbolError::NotElf(_))
    ));
    let mut set = EventSet::parse(&strings(&["uprobe:/nonexistent/app:main"]), None).expect("parses");
    let message = set.resolve_probes().expect_err("unreadable").to_string();
    assert!(
        message.starts_with("`uprobe:/nonexistent/app:main`: cannot read /nonexistent/app"),
        "{message}"
    );
}
