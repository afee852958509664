//! Profiles from elsewhere are input: a gzip bomb, a file that is no profile and references
//! out of their tables are refused with a sentence; named locations keep their names, inlined
//! lines first, and labels give each stack its process and each frame how it was found; a
//! profile's stacks become one record per sample counted for the streamed formats. Counts are
//! not trusted: sums saturate, the records' frames and the unfolded frames are bounded.

use std::io::Write as _;

use prost::Message as _;

use super::{Expansion, FileFormat, expansion, read_profile, resolve, resolve_within, samples, unhex};
use crate::export::{
    model::{FrameSource, Resolved, ResolvedFrame, ResolvedStack, test_objects},
    pprof,
};

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).expect("gzip");
    enc.finish().expect("gzip")
}

#[test]
fn bombs_and_garbage_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bomb = dir.path().join("bomb.pb.gz");
    std::fs::write(&bomb, gzip(&vec![0u8; 4 << 20])).expect("write");
    let err = read_profile(&bomb, 1 << 20).expect_err("a bomb");
    assert!(err.to_string().contains("expands to more than 1048576 bytes"), "{err}");
    let big = dir.path().join("big.pb");
    std::fs::write(&big, vec![0u8; (1 << 20) + 1]).expect("write");
    assert!(read_profile(&big, 1 << 20).is_err_and(|e| e.to_string().contains("larger than")));
    let garbage = dir.path().join("garbage.pb");
    std::fs::write(&garbage, b"\xff\xff\xff\xff not a profile").expect("write");
    assert!(read_profile(&garbage, 1 << 20).is_err());
    assert!(read_profile(dir.path(), 1 << 20).is_err(), "a directory is read");
}

/// A profile with one kernel mapping whose location is named and one sample.
fn profile() -> pprof::Profile {
    let strings = [
        "",
        "[kernel.kallsyms]",
        "pid",
        "comm",
        "app",
        "inner",
        "outer",
        "k.c",
        "event",
        "cpu-clock",
    ];
    pprof::Profile {
        string_table: strings.iter().map(|s| (*s).to_owned()).collect(),
        mapping: vec![pprof::Mapping {
            id: 1,
            filename: 1,
            ..pprof::Mapping::default()
        }],
        function: vec![
            pprof::Function {
                id: 1,
                name: 5,
                system_name: 5,
                filename: 7,
            },
            pprof::Function {
                id: 2,
                name: 6,
                system_name: 6,
                filename: 7,
            },
        ],
        location: vec![pprof::Location {
            id: 1,
            mapping_id: 1,
            address: 0xffff_ffff_8100_0000,
            line: vec![
                pprof::Line {
                    function_id: 1,
                    line: 3,
                },
                pprof::Line {
                    function_id: 2,
                    line: 9,
                },
            ],
        }],
        sample: vec![pprof::Sample {
            location_id: vec![1],
            value: vec![4, 400],
            label: vec![
                pprof::Label {
                    key: 2,
                    num: 77,
                    ..pprof::Label::default()
                },
                pprof::Label {
                    key: 3,
                    str: 4,
                    ..pprof::Label::default()
                },
                pprof::Label {
                    key: 8,
                    str: 9,
                    ..pprof::Label::default()
                },
            ],
        }],
        ..pprof::Profile::default()
    }
}

#[test]
fn named_locations_keep_their_names() {
    let resolved = resolve(&profile(), true).expect("valid");
    assert_eq!(resolved.stacks.len(), 1);
    let stack = &resolved.stacks[0];
    assert_eq!(
        (stack.pid, stack.comm.as_str(), stack.count, stack.weight_ns),
        (77, "app", 4, 400)
    );
    let names: Vec<(&str, bool, Option<u32>)> = stack
        .frames
        .iter()
        .map(|f| (f.symbol.as_deref().unwrap_or("?"), f.inlined, f.line))
        .collect();
    assert_eq!(names, [("inner", true, Some(3)), ("outer", false, Some(9))]);
    assert!(stack.frames.iter().all(|f| f.source == FrameSource::Kernel));
    // The round trip through the encoder reads back the same.
    let bytes = profile().encode_to_vec();
    assert_eq!(pprof::Profile::decode(bytes.as_slice()).expect("decodes"), profile());
}

#[test]
fn references_out_of_the_tables_are_refused() {
    let mut p = profile();
    p.sample[0].location_id = vec![9];
    assert!(resolve(&p, true).is_err_and(|e| e.to_string().contains("location 9")));
    let mut p = profile();
    p.mapping[0].filename = 99;
    assert!(resolve(&p, true).is_err_and(|e| e.to_string().contains("string index 99")));
    let mut p = profile();
    p.location[0].line[0].function_id = 5;
    assert!(resolve(&p, true).is_err_and(|e| e.to_string().contains("function 5")));
}

#[test]
fn build_ids_parse_from_hex() {
    assert_eq!(unhex("00ff1a"), Some(vec![0, 0xff, 0x1a]));
    assert_eq!(unhex(""), None);
    assert_eq!(unhex("abc"), None);
    assert_eq!(unhex("zz"), None);
}

/// A stack of a kernel frame and two user frames (one with an inlined function), each found
/// its own way.
fn resolved() -> Resolved {
    let frame = |addr, object, symbol: &str, inlined, source| ResolvedFrame {
        addr,
        object: Some(object),
        offset: if source == FrameSource::Kernel {
            addr
        } else {
            addr & 0xffff
        },
        symbol: Some(symbol.to_owned()),
        file: Some("x.c".to_owned()),
        line: Some(7),
        inlined,
        source,
    };
    Resolved {
        objects: test_objects(),
        stacks: vec![ResolvedStack {
            pid: 5,
            tid: 6,
            comm: "app".to_owned(),
            event: "cpu-clock".to_owned(),
            frames: vec![
                frame(0xffff_ffff_8100_0010, 2, "schedule", false, FrameSource::Kernel),
                frame(0x7f00_0000_1234, 1, "helper", true, FrameSource::EhFrame),
                frame(0x7f00_0000_1234, 1, "lib_fn", false, FrameSource::EhFrame),
                frame(0x5500_0000_0100, 0, "main", false, FrameSource::Fp),
            ],
            count: 3,
            weight_ns: 10,
            truncated: None,
            cpu: None,
        }],
        start_unix_ns: 1_700_000_000_000_000_000,
        duration_ns: 1,
        period_ns: 1,
    }
}

/// What a frame says apart from its absolute address: symbol, object path, offset, inlined,
/// source.
type Seen = (Option<String>, Option<String>, u64, bool, FrameSource);

#[test]
fn frames_come_back_with_how_they_were_found() {
    let original = resolved();
    let again = resolve(&pprof::build(&original), true).expect("valid");
    let strip = |r: &Resolved| -> Vec<Seen> {
        r.stacks[0]
            .frames
            .iter()
            .map(|f| {
                let object = f.object.map(|o| r.objects[o].path.clone());
                (f.symbol.clone(), object, f.offset, f.inlined, f.source)
            })
            .collect()
    };
    assert_eq!(strip(&again), strip(&original));
    // Without the label, user frames are said to be SFrame's, kernel frames the kernel's.
    let mut unlabelled = pprof::build(&original);
    unlabelled.sample[0].label.pop();
    let sources: Vec<FrameSource> = resolve(&unlabelled, true).expect("valid").stacks[0]
        .frames
        .iter()
        .map(|f| f.source)
        .collect();
    assert_eq!(
        sources,
        [
            FrameSource::Kernel,
            FrameSource::Sframe,
            FrameSource::Sframe,
            FrameSource::Sframe
        ]
    );
}

/// Why a stack is truncated comes back; an unknown reason is dropped, not invented.
#[test]
fn truncation_comes_back() {
    let mut original = resolved();
    original.stacks[0].truncated = Some("no_mapping");
    let again = resolve(&pprof::build(&original), true).expect("valid");
    assert_eq!(again.stacks[0].truncated, Some("no_mapping"));
    let mut p = pprof::build(&original);
    let why = p.sample[0].label.last().expect("the truncated label").str;
    p.string_table[why as usize] = "not_a_reason".to_owned();
    assert_eq!(resolve(&p, true).expect("valid").stacks[0].truncated, None);
}

#[test]
fn stacks_become_one_record_per_sample() {
    let r = resolved();
    let records: Vec<_> = samples(&r).collect();
    assert_eq!(records.len(), 3);
    assert_eq!(records.iter().map(|s| s.weight_ns).collect::<Vec<_>>(), [4, 3, 3]);
    for s in &records {
        assert_eq!((s.pid, s.tid, s.comm.as_str()), (5, 6, "app"));
        assert_eq!(s.time_unix_ns, r.start_unix_ns);
        assert_eq!(s.frames, r.stacks[0].frames);
    }
}

/// `profile()` with `samples` copies of its sample, each counting `count`.
fn counted(samples: usize, count: i64) -> pprof::Profile {
    let mut p = profile();
    p.sample[0].value = vec![count, count];
    p.sample = vec![p.sample[0].clone(); samples];
    p
}

/// Regression (issue 29: folded sums wrapped to `9223372036854775805`): stacks counting
/// i64::MAX each add up saturating: two to their exact sum, three to `u64::MAX`.
#[test]
fn folded_sums_of_huge_counts_saturate() {
    let max = i64::MAX as u64;
    let two = crate::export::folded::lines(&resolve(&counted(2, i64::MAX), true).expect("valid"));
    assert_eq!(two.values().copied().collect::<Vec<_>>(), [2 * max]);
    let three = crate::export::folded::lines(&resolve(&counted(3, i64::MAX), true).expect("valid"));
    assert_eq!(three.values().copied().collect::<Vec<_>>(), [u64::MAX]);
    // A negative count is none.
    let negative = resolve(&counted(1, -5), true).expect("valid");
    assert_eq!(negative.stacks[0].count, 0);
}

/// Regression (issue 29: `-f json` wrote records forever for counts near i64::MAX): the
/// records' frames are counted, saturating, before anything is written, and more than the
/// bound is refused with the counts; exactly the bound is not.
#[test]
fn streamed_records_are_bounded_before_writing() {
    // Two frames per record (the location has two lines).
    let huge = resolve(&counted(3, i64::MAX), true).expect("valid");
    let err = expansion(&huge, FileFormat::Json, 1000).expect_err("refused");
    assert_eq!(
        err,
        Expansion {
            format: "json",
            samples: u64::MAX,
            frames: u64::MAX,
            max: 1000
        }
    );
    let text = err.to_string();
    assert!(
        text.contains("18446744073709551615 samples") && text.contains("--max-frames 1000"),
        "{text}"
    );
    let small = resolve(&counted(2, 5), true).expect("valid");
    assert_eq!(expansion(&small, FileFormat::PerfScript, 20), Ok((10, 20)));
    assert_eq!(
        expansion(&small, FileFormat::PerfScript, 19).map_err(|e| (e.samples, e.frames)),
        Err((10, 20))
    );
    // A stack counting none still makes one record of its frames.
    let none = resolve(&counted(1, 0), true).expect("valid");
    assert_eq!(expansion(&none, FileFormat::Json, 2), Ok((1, 2)));
}

/// The frames a profile's stacks unfold into are bounded: a sample repeating its location
/// past the bound is refused with a sentence, not unfolded.
#[test]
fn unfolded_frames_are_bounded() {
    let mut p = profile();
    p.sample[0].location_id = vec![1; 50];
    assert_eq!(
        resolve_within(&p, true, 100).expect("at the bound").stacks[0]
            .frames
            .len(),
        100
    );
    p.sample[0].location_id.push(1);
    let err = resolve_within(&p, true, 100).expect_err("past the bound");
    assert!(err.to_string().contains("more than 100 frames"), "{err}");
    // Across samples too.
    let mut p = counted(2, 1);
    p.sample[0].location_id = vec![1; 30];
    p.sample[1].location_id = vec![1; 30];
    assert!(resolve_within(&p, true, 100).is_err());
    assert!(resolve_within(&p, true, 120).is_ok());
}
