//! Unit tests of `export::folded`; each test says what it proves.

use super::*;
use crate::export::model::{FrameSource, ObjectInfo, ResolvedFrame, ResolvedStack};

fn frame(symbol: Option<&str>, object: Option<usize>, offset: u64, source: FrameSource) -> ResolvedFrame {
    ResolvedFrame {
        addr: 0x5000 + offset,
        object,
        offset,
        symbol: symbol.map(str::to_owned),
        file: None,
        line: None,
        inlined: false,
        source,
    }
}

fn stack(tid: u32, frames: Vec<ResolvedFrame>, count: u64) -> ResolvedStack {
    ResolvedStack {
        pid: 7,
        tid,
        comm: "app".to_owned(),
        event: crate::event::CPU_CLOCK.to_owned(),
        frames,
        count,
        weight_ns: count * 10,
        truncated: None,
        cpu: None,
    }
}

/// A line is `comm;outermost user;...;innermost user;outermost kernel;...;innermost kernel
/// COUNT`; separators in names are replaced, unknown frames are named by object and offset,
/// and stacks of two threads with the same names share one line.
#[test]
fn lines_go_from_outermost_to_innermost() {
    let objects = vec![ObjectInfo {
        path: "/lib/libx.so".to_owned(),
        name: "libx.so".to_owned(),
        build_id: None,
    }];
    let frames = vec![
        frame(Some("k_inner"), None, 0xa, FrameSource::Kernel),
        frame(None, None, 0xb, FrameSource::Kernel),
        frame(None, Some(0), 0x1234, FrameSource::Sframe),
        frame(Some("main;weird"), Some(0), 0x200, FrameSource::Sframe),
        frame(None, None, 0x99, FrameSource::Fp),
    ];
    let resolved = Resolved {
        objects,
        stacks: vec![stack(8, frames.clone(), 2), stack(9, frames, 3)],
        ..Resolved::default()
    };
    let mut out = Vec::new();
    write(&mut out, &resolved).expect("write");
    assert_eq!(
        String::from_utf8(out).expect("utf-8"),
        "app;[unknown 0x5099];main_weird;[libx.so+0x1234];[kernel 0x500b];k_inner 5\n"
    );
}

/// Lines of several events start with the event; offcpu lines count microseconds blocked.
#[test]
fn events_prefix_their_lines() {
    let frames = vec![frame(Some("nap"), None, 0x10, FrameSource::Sframe)];
    let mut offcpu = stack(8, frames.clone(), 2);
    offcpu.event = "offcpu".to_owned();
    offcpu.weight_ns = 7_500_000;
    let mut uprobe = stack(8, frames.clone(), 4);
    uprobe.event = "uprobe:/app:nap".to_owned();
    let resolved = Resolved {
        stacks: vec![offcpu.clone(), uprobe],
        ..Resolved::default()
    };
    assert_eq!(
        lines_of(&resolved),
        [
            ("offcpu;app;nap".to_owned(), 7500),
            ("uprobe:/app:nap;app;nap".to_owned(), 4)
        ]
    );
    let alone = Resolved {
        stacks: vec![offcpu],
        ..Resolved::default()
    };
    assert_eq!(lines_of(&alone), [("app;nap".to_owned(), 7500)]);
}

fn lines_of(resolved: &Resolved) -> Vec<(String, u64)> {
    lines(resolved).into_iter().collect()
}

/// Issue 31 (a cut stack looked like a whole one): a truncated stack has
/// `[truncated: REASON]` as its outermost frame, right under the command name; a Go stack that
/// ends at `runtime.goexit` or `runtime.mstart` with a zero return address, or at a stack switch
/// (`runtime.mcall`) whose rule holds in the innermost frame only, is complete and has none,
/// while a C stack cut the same way has it.
#[test]
fn truncated_stacks_show_a_marker_and_go_bases_are_complete() {
    let cut = |outermost: &str, why: &'static str| {
        let mut s = stack(
            8,
            vec![
                frame(Some("work"), None, 0x10, FrameSource::Sframe),
                frame(Some(outermost), None, 0x20, FrameSource::Fp),
            ],
            1,
        );
        s.truncated = Some(why);
        s
    };
    let resolved = Resolved {
        stacks: vec![
            cut("helper", "no_mapping"),
            cut("runtime.goexit.abi0", "zero_ra"),
            cut("runtime.mstart", "zero_ra"),
            cut("runtime.clone", "zero_ra"),
            cut("runtime.mcall", "topmost_only_rule"),
            cut("caller", "zero_ra"),
            cut("helper", "topmost_only_rule"),
            cut("runtime.goexit", "no_info"),
        ],
        ..Resolved::default()
    };
    let lines: Vec<String> = lines(&resolved).into_keys().collect();
    assert_eq!(
        lines,
        [
            "app;[truncated: no_info];runtime.goexit;work",
            "app;[truncated: no_mapping];helper;work",
            "app;[truncated: topmost_only_rule];helper;work",
            "app;[truncated: zero_ra];caller;work",
            "app;runtime.clone;work",
            "app;runtime.goexit.abi0;work",
            "app;runtime.mcall;work",
            "app;runtime.mstart;work",
        ]
    );
}
