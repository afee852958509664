//! The perf-script writer, read back by inferno's perf collapser (the Rust port of
//! stackcollapse-perf.pl).

use inferno::collapse::{
    Collapse as _,
    perf::{Folder, Options},
};

use super::*;
use crate::export::{
    folded,
    model::{Resolved, ResolvedFrame, ResolvedStack},
};

fn frame(
    symbol: Option<&str>,
    object: Option<usize>,
    offset: u64,
    inlined: bool,
    source: FrameSource,
) -> ResolvedFrame {
    ResolvedFrame {
        addr: 0x55_0000_0000 + offset,
        object,
        offset,
        symbol: symbol.map(str::to_owned),
        file: None,
        line: None,
        inlined,
        source,
    }
}

/// Samples of three different stacks: inlined frames, a library frame without symbol, kernel
/// frames, a frame in no object, a C++ name with spaces.
fn samples() -> Vec<ResolvedSample> {
    let user = vec![
        frame(Some("mix"), Some(0), 0x1136, true, FrameSource::Sframe),
        frame(Some("hot_loop"), Some(0), 0x1136, false, FrameSource::Sframe),
        frame(None, Some(1), 0x2a0, false, FrameSource::EhFrame),
        frame(Some("ns::run(int, char)"), Some(0), 0x1200, false, FrameSource::Fp),
        frame(None, None, 0x4000, false, FrameSource::Fp),
    ];
    let mut kernel = vec![
        frame(Some("clear_page"), Some(2), 0xffff_ffff, false, FrameSource::Kernel),
        frame(None, Some(2), 0xffff_fff0, false, FrameSource::Kernel),
    ];
    kernel.extend(user.iter().skip(2).cloned());
    let sample = |frames: Vec<ResolvedFrame>, time_ns: u64, tid: u32| ResolvedSample {
        time_ns,
        time_unix_ns: time_ns,
        pid: 7,
        tid,
        cpu: 1,
        comm: "app".to_owned(),
        event: "cpu-clock".to_owned(),
        weight_ns: 2_004_008,
        frames,
        truncated: None,
    };
    vec![
        sample(user.clone(), 12_345_678_901_234, 7),
        sample(user.clone(), 12_345_680_905_242, 8),
        sample(kernel, 12_345_682_909_250, 7),
        sample(user[1..].to_vec(), 12_345_684_913_258, 7),
    ]
}

/// The header carries command, pid/tid, CPU, time and period in perf's layout, frames are one
/// line each with address, name and object.
#[test]
fn records_have_perf_layout() {
    let mut out = Vec::new();
    write_sample(&mut out, &samples()[0], &crate::export::model::test_objects()).expect("write");
    let text = String::from_utf8(out).expect("utf-8");
    let lines: Vec<&str> = text.split('\n').collect();
    assert_eq!(lines[0], "app 7/7 [001] 12345.678901: 2004008 cpu-clock:");
    assert_eq!(lines[1], "\t      5500001136 mix (/usr/bin/app)");
    assert_eq!(lines[2], "\t      5500001136 hot_loop (/usr/bin/app)");
    assert_eq!(lines[3], "\t      55000002a0 [libx.so+0x2a0] (/usr/lib/libx.so)");
    assert_eq!(lines[5], "\t      5500004000 [unknown 0x5500004000] ([unknown])");
    assert_eq!(&lines[6..], ["", ""], "a record ends with an empty line");
}

/// inferno-collapse-perf turns the records into exactly the folded lines of the same samples,
/// each count multiplied by the period.
#[test]
fn collapses_into_the_folded_stacks() {
    let objects = crate::export::model::test_objects();
    let samples = samples();
    let mut text = Vec::new();
    for sample in &samples {
        write_sample(&mut text, sample, &objects).expect("write");
    }
    let mut options = Options::default();
    options.nthreads = 1;
    let mut collapsed = Vec::new();
    Folder::from(options)
        .collapse(text.as_slice(), &mut collapsed)
        .expect("collapse");
    let collapsed = String::from_utf8(collapsed).expect("utf-8");

    let resolved = Resolved {
        objects,
        stacks: samples
            .iter()
            .map(|s| ResolvedStack {
                pid: s.pid,
                tid: s.tid,
                comm: s.comm.clone(),
                event: s.event.clone(),
                frames: s.frames.clone(),
                count: 1,
                weight_ns: s.weight_ns,
                truncated: None,
                cpu: None,
            })
            .collect(),
        ..Resolved::default()
    };
    let mut expected: Vec<String> = folded::lines(&resolved)
        .into_iter()
        // The collapser drops C++ argument lists, as it does for perf's own output.
        .map(|(line, count)| format!("{} {}", line.replace("(int, char)", ""), count * 2_004_008))
        .collect();
    expected.sort();
    let mut got: Vec<String> = collapsed.lines().map(str::to_owned).collect();
    got.sort();
    assert_eq!(got, expected);
    assert_eq!(got.len(), 3, "{got:?}");
}
