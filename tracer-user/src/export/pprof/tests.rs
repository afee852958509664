//! The pprof writer, decoded again with the message definitions and checked for the structure
//! pprof readers rely on.

use std::io::Read as _;

use super::*;
use crate::export::model::ResolvedStack;

fn frame(symbol: Option<&str>, object: Option<usize>, offset: u64, line: Option<u32>, inlined: bool) -> ResolvedFrame {
    ResolvedFrame {
        addr: offset.wrapping_add(0x55_0000_0000),
        object,
        offset,
        symbol: symbol.map(str::to_owned),
        file: line.map(|_| "/src/app.c".to_owned()),
        line,
        inlined,
        source: if object == Some(2) {
            FrameSource::Kernel
        } else {
            FrameSource::Sframe
        },
    }
}

fn resolved() -> Resolved {
    let mut objects = crate::export::model::test_objects();
    objects[0].build_id = Some(vec![0xde, 0xad, 0x01]);
    let hot = vec![
        frame(Some("mix"), Some(0), 0x1136, Some(12), true),
        frame(Some("hot_loop"), Some(0), 0x1136, Some(30), false),
        frame(None, Some(1), 0x2a0, None, false),
        frame(Some("main"), Some(0), 0x1200, Some(40), false),
    ];
    let mut kernel = vec![frame(Some("clear_page"), Some(2), 0xffff_ffff_8100_0000, None, false)];
    kernel.extend(hot[2..].iter().cloned());
    let stack = |tid, frames, count| ResolvedStack {
        pid: 7,
        tid,
        comm: "app".to_owned(),
        event: "cpu-clock".to_owned(),
        frames,
        count,
        weight_ns: count * 1000,
        truncated: None,
        cpu: None,
    };
    Resolved {
        objects,
        stacks: vec![stack(8, hot, 30), stack(9, kernel, 5)],
        start_unix_ns: 1_763_700_000_000_000_000,
        duration_ns: 2_000_000_000,
        period_ns: 1000,
    }
}

/// Write, gunzip and decode.
fn round_trip(resolved: &Resolved) -> Profile {
    let mut gz = Vec::new();
    write(&mut gz, resolved).expect("write");
    assert_eq!(&gz[..2], [0x1f, 0x8b], "gzip magic");
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gz.as_slice())
        .read_to_end(&mut raw)
        .expect("gunzip");
    Profile::decode(raw.as_slice()).expect("decode profile.proto")
}

/// The names of a sample's frames, leaf first, through its locations, lines and functions.
fn names(p: &Profile, sample: &Sample) -> Vec<String> {
    let s = |i: i64| p.string_table[i as usize].clone();
    sample
        .location_id
        .iter()
        .flat_map(|&id| {
            let location = &p.location[id as usize - 1];
            assert_eq!(location.id, id, "location ids are their position + 1");
            location.line.iter().map(|line| {
                let function = &p.function[line.function_id as usize - 1];
                s(function.name)
            })
        })
        .collect()
}

/// Sample types, period, time and labels say what the values are.
#[test]
fn header_and_labels() {
    let p = round_trip(&resolved());
    let s = |i: i64| p.string_table[i as usize].as_str();
    assert_eq!(p.string_table[0], "", "string 0 is the empty string");
    let types: Vec<(&str, &str)> = p.sample_type.iter().map(|t| (s(t.r#type), s(t.unit))).collect();
    assert_eq!(types, [("samples", "count"), ("cpu", "nanoseconds")]);
    let period_type = p.period_type.as_ref().expect("period type");
    assert_eq!((s(period_type.r#type), s(period_type.unit)), ("cpu", "nanoseconds"));
    assert_eq!(p.period, 1000);
    assert_eq!(
        (p.time_nanos, p.duration_nanos),
        (1_763_700_000_000_000_000, 2_000_000_000)
    );
    assert_eq!(p.sample.len(), 2);
    assert_eq!(p.sample[0].value, [30, 30_000]);
    let labels: Vec<(&str, String)> = p.sample[0]
        .label
        .iter()
        .map(|l| {
            (
                s(l.key),
                if l.str != 0 {
                    s(l.str).to_owned()
                } else {
                    l.num.to_string()
                },
            )
        })
        .collect();
    assert_eq!(
        labels,
        [
            ("pid", "7".to_owned()),
            ("tid", "8".to_owned()),
            ("comm", "app".to_owned()),
            ("event", "cpu-clock".to_owned()),
            // One letter per location: the inlined function shares its caller's.
            ("sources", "sss".to_owned())
        ]
    );
}

/// A stack whose user frames end early carries why (`truncated`); a complete one has no such
/// label.
#[test]
fn truncated_stacks_say_why() {
    let mut r = resolved();
    r.stacks[1].truncated = Some("exec_or_exit");
    let p = round_trip(&r);
    let s = |i: i64| p.string_table[i as usize].as_str();
    let truncated = |sample: &Sample| {
        sample
            .label
            .iter()
            .find(|l| s(l.key) == "truncated")
            .map(|l| s(l.str).to_owned())
    };
    assert_eq!(truncated(&p.sample[0]), None);
    assert_eq!(truncated(&p.sample[1]).as_deref(), Some("exec_or_exit"));
}

/// The second value names what the weights measure: the time blocked for offcpu, a neutral
/// time when events of several kinds share the profile.
#[test]
fn weight_type_follows_the_events() {
    let types = |events: &[&str]| {
        let mut r = resolved();
        for (stack, event) in r.stacks.iter_mut().zip(events) {
            stack.event = (*event).to_owned();
        }
        let p = round_trip(&r);
        let t = &p.sample_type[1];
        (
            p.string_table[t.r#type as usize].clone(),
            p.string_table[t.unit as usize].clone(),
        )
    };
    let ns = "nanoseconds".to_owned();
    assert_eq!(types(&["cpu-clock", "cpu-clock"]), ("cpu".to_owned(), ns.clone()));
    assert_eq!(types(&["offcpu", "offcpu"]), ("off_cpu".to_owned(), ns.clone()));
    assert_eq!(types(&["offcpu", "cpu-clock"]), ("time".to_owned(), ns));
}

/// An inlined function and its caller at one address are one location with two lines
/// (inlined first); a frame without symbol is a function named by object and offset; locations
/// and functions shared between samples are written once.
#[test]
fn locations_lines_and_functions() {
    let p = round_trip(&resolved());
    assert_eq!(names(&p, &p.sample[0]), ["mix", "hot_loop", "[libx.so+0x2a0]", "main"]);
    assert_eq!(names(&p, &p.sample[1]), ["clear_page", "[libx.so+0x2a0]", "main"]);
    assert_eq!(p.sample[0].location_id.len(), 3);
    let inlined = &p.location[p.sample[0].location_id[0] as usize - 1];
    assert_eq!(inlined.address, 0x1136);
    assert_eq!(inlined.line.iter().map(|l| l.line).collect::<Vec<_>>(), [12, 30]);
    // libx.so and main are shared by both samples.
    assert_eq!(p.sample[0].location_id[1..], p.sample[1].location_id[1..]);
    assert_eq!(p.location.len(), 4);
    assert_eq!(p.function.len(), 5);
    let mix = &p.function[inlined.line[0].function_id as usize - 1];
    assert_eq!(p.string_table[mix.filename as usize], "/src/app.c");
}

/// Each object with locations is a mapping with its path and hex build-id, marked symbolized;
/// user locations hold object-relative addresses inside their mapping.
#[test]
fn mappings_with_build_ids() {
    let p = round_trip(&resolved());
    let s = |i: i64| p.string_table[i as usize].as_str();
    let files: Vec<&str> = p.mapping.iter().map(|m| s(m.filename)).collect();
    assert_eq!(files, ["/usr/bin/app", "/usr/lib/libx.so", "[kernel.kallsyms]"]);
    let app = &p.mapping[0];
    assert_eq!(s(app.build_id), "dead01");
    assert!(app.has_functions && app.has_filenames && app.has_line_numbers && app.has_inline_frames);
    assert_eq!(p.mapping[1].build_id, 0);
    assert!(p.mapping[1].has_functions && !p.mapping[1].has_line_numbers);
    for location in &p.location {
        let mapping = &p.mapping[location.mapping_id as usize - 1];
        assert_eq!(mapping.id, location.mapping_id);
        assert!(
            (mapping.memory_start..mapping.memory_limit).contains(&location.address),
            "{location:?} outside {mapping:?}"
        );
    }
    assert_eq!(p.mapping[2].memory_start, 0xffff_ffff_8100_0000);
}
