//! Unit tests of `export::svg`; each test says what it proves.

use super::*;
use crate::export::model::{FrameSource, ResolvedFrame, ResolvedStack};

fn named(symbol: &str) -> ResolvedFrame {
    ResolvedFrame {
        addr: 0x1000,
        object: None,
        offset: 0x1000,
        symbol: Some(symbol.to_owned()),
        file: None,
        line: None,
        inlined: false,
        source: FrameSource::Sframe,
    }
}

/// Every frame of the stacks is a titled box of the graph, with its sample count.
#[test]
fn frames_become_boxes() {
    let stack = |frames: Vec<ResolvedFrame>, count| ResolvedStack {
        pid: 1,
        tid: 1,
        comm: "app".to_owned(),
        event: "cpu-clock".to_owned(),
        frames,
        count,
        weight_ns: 0,
        truncated: None,
        cpu: None,
    };
    let resolved = Resolved {
        stacks: vec![
            stack(vec![named("leaf"), named("main")], 30),
            stack(vec![named("other"), named("main")], 10),
        ],
        ..Resolved::default()
    };
    let mut out = Vec::new();
    write(&mut out, &resolved).expect("write");
    let svg = String::from_utf8(out).expect("utf-8");
    assert!(svg.starts_with("<?xml"), "{}", &svg[..100]);
    for title in [
        "<title>main (40 samples, 100.00%)</title>",
        "<title>leaf (30 samples, 75.00%)</title>",
        "<title>other (10 samples, 25.00%)</title>",
    ] {
        assert!(svg.contains(title), "no {title} in the SVG");
    }
}

/// An off-CPU graph counts microseconds, not samples: its widths are the folded counts.
#[test]
fn offcpu_widths_are_microseconds() {
    let resolved = Resolved {
        stacks: vec![ResolvedStack {
            pid: 1,
            tid: 1,
            comm: "app".to_owned(),
            event: "offcpu".to_owned(),
            frames: vec![named("wait"), named("main")],
            count: 2,
            weight_ns: 3_000_000,
            truncated: None,
            cpu: None,
        }],
        ..Resolved::default()
    };
    let mut out = Vec::new();
    write(&mut out, &resolved).expect("write");
    let svg = String::from_utf8(out).expect("utf-8");
    assert!(svg.contains("<title>wait (3,000 us, 100.00%)</title>"), "{svg}");
    assert!(
        svg.contains("microseconds off-CPU"),
        "the subtitle says what widths are"
    );
}

/// A profile without samples still gives an SVG document.
#[test]
fn empty_profile_is_a_picture() {
    let mut out = Vec::new();
    write(&mut out, &Resolved::default()).expect("write");
    assert!(String::from_utf8(out).expect("utf-8").contains("</svg>"));
}

/// Names in any script, with multi-byte characters where inferno shortens the labels of
/// narrow boxes, are drawn, never a panic.
#[test]
fn non_ascii_names_are_drawn() {
    let names = [
        "日本語の関数名_で長いもの",
        "ñandú_ñandú_ñandú_ñandú_ñandú",
        "€uro\u{301}_€uro\u{301}_€uro",
    ];
    let stacks = (1..200)
        .map(|i| ResolvedStack {
            pid: 1,
            tid: 1,
            comm: "ápp".to_owned(),
            event: "cpu-clock".to_owned(),
            frames: vec![
                named(&format!("{}{i}", names[i % 3].repeat(1 + i % 4))),
                named(&format!("{}{}", names[(i + 1) % 3], i % 7)),
                named("main"),
            ],
            count: (i * i % 97 + 1) as u64,
            weight_ns: 0,
            truncated: None,
            cpu: None,
        })
        .collect();
    let resolved = Resolved {
        stacks,
        ..Resolved::default()
    };
    let mut out = Vec::new();
    write(&mut out, &resolved).expect("write");
    let svg = String::from_utf8(out).expect("utf-8");
    assert!(svg.contains("ñandú"), "{svg}");
}

/// Issue 31 (every graph was titled `sframe-trace`, and a whole host's opened on its thin tips,
/// the processes below the first screen): the title names what was traced, the host and the
/// duration; the picture carries the script that scrolls a tall graph to its base; a truncated
/// stack's marker is a box of its own.
#[test]
fn title_names_the_trace_and_the_graph_opens_at_its_base() {
    let mut stack = ResolvedStack {
        pid: 1,
        tid: 1,
        comm: "app".to_owned(),
        event: "cpu-clock".to_owned(),
        frames: vec![named("leaf"), named("main")],
        count: 3,
        weight_ns: 0,
        truncated: Some("no_mapping"),
        cpu: None,
    };
    stack.weight_ns = 3;
    let resolved = Resolved {
        stacks: vec![stack],
        duration_ns: 2_500_000_000,
        ..Resolved::default()
    };
    let mut out = Vec::new();
    write_titled(
        &mut out,
        &resolved,
        "`./app --fast` (pid 12) on buildhost",
        &folded::Style::default(),
    )
    .expect("write");
    let svg = String::from_utf8(out).expect("utf-8");
    assert!(
        svg.contains("sframe-trace: `./app --fast` (pid 12) on buildhost, 2.5 s"),
        "the title: {}",
        &svg[..svg.len().min(3000)]
    );
    assert!(
        svg.contains("<title>[truncated: no_mapping] (3 samples"),
        "no marker box"
    );
    let script = svg.find("window.scrollTo").expect("the scroll script");
    assert!(
        script < svg.rfind("</svg>").expect("the end"),
        "the script is inside the picture"
    );
}

/// Widths never add up past what inferno sums in a u64: real counts are drawn as they are,
/// huge ones (a crafted profile) divided, a nonzero one staying drawn.
#[test]
fn huge_counts_are_divided_to_fit() {
    assert_eq!(divisor([30, 10].into_iter()), 1);
    assert_eq!(divisor([u64::MAX / 2].into_iter()), 1);
    let counts = [u64::MAX, u64::MAX, u64::MAX, 1];
    let d = divisor(counts.into_iter());
    let total: u128 = counts.iter().map(|&c| u128::from(scaled(c, d))).sum();
    assert!(total <= u128::from(u64::MAX), "{total}");
    assert_eq!(scaled(1, d), 1);
    assert_eq!(scaled(0, d), 0);
    // And the picture is drawn.
    let stack = |name| ResolvedStack {
        pid: 1,
        tid: 1,
        comm: "app".to_owned(),
        event: "cpu-clock".to_owned(),
        frames: vec![named(name), named("main")],
        count: u64::MAX,
        weight_ns: 0,
        truncated: None,
        cpu: None,
    };
    let resolved = Resolved {
        stacks: vec![stack("a"), stack("b"), stack("c")],
        ..Resolved::default()
    };
    let mut out = Vec::new();
    write(&mut out, &resolved).expect("write");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(text.contains("widths divided by"), "the subtitle says so");
}
