//! Unit tests of `export::json`; each test says what it proves.

use super::*;
use crate::export::model::{FrameSource, ResolvedFrame};

/// Each sample is one line that parses as a JSON object with the documented fields: exact
/// time digits, hex addresses, `null` for what is unknown, escaped strings.
#[test]
fn one_object_per_line() {
    let objects = vec![ObjectInfo {
        path: "/usr/bin/app".to_owned(),
        name: "app".to_owned(),
        build_id: None,
    }];
    let sample = ResolvedSample {
        time_ns: 5,
        time_unix_ns: 1_763_700_000_000_000_042,
        pid: 7,
        tid: 8,
        cpu: 3,
        comm: "a\"b".to_owned(),
        event: "cpu-clock".to_owned(),
        weight_ns: 1000,
        frames: vec![
            ResolvedFrame {
                addr: 0xffff_ffff_8100_0010,
                object: None,
                offset: 0xffff_ffff_8100_0010,
                symbol: Some("do_syscall_64".to_owned()),
                file: None,
                line: None,
                inlined: false,
                source: FrameSource::Kernel,
            },
            ResolvedFrame {
                addr: 0x55_0000_1136,
                object: Some(0),
                offset: 0x1136,
                symbol: Some("mix".to_owned()),
                file: Some("/src/app.c".to_owned()),
                line: Some(12),
                inlined: true,
                source: FrameSource::EhFrame,
            },
            ResolvedFrame {
                addr: 0x55_0000_2000,
                object: Some(0),
                offset: 0x2000,
                symbol: None,
                file: None,
                line: None,
                inlined: false,
                source: FrameSource::Fp,
            },
        ],
        truncated: Some("no_mapping"),
    };
    let mut out = Vec::new();
    write_sample(&mut out, &sample, &objects).expect("write");
    write_sample(&mut out, &sample, &objects).expect("write");
    let text = String::from_utf8(out).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].contains("\"time\":1763700000.000000042,"), "{}", lines[0]);
    let v: serde_json::Value = serde_json::from_str(lines[0]).expect("a JSON object");
    assert_eq!(v["pid"], 7);
    assert_eq!(v["tid"], 8);
    assert_eq!(v["cpu"], 3);
    assert_eq!(v["comm"], "a\"b");
    assert_eq!(v["event"], "cpu-clock");
    assert_eq!(v["truncated"], "no_mapping");
    let frames = v["frames"].as_array().expect("frames");
    assert_eq!(frames.len(), 3);
    assert_eq!(frames[0]["addr"], "0xffffffff81000010");
    assert_eq!(frames[0]["object"], serde_json::Value::Null);
    assert_eq!(frames[0]["source"], "kernel");
    assert_eq!(frames[1]["symbol"], "mix");
    assert_eq!(frames[1]["object"], "/usr/bin/app");
    assert_eq!(frames[1]["offset"], "0x1136");
    assert_eq!(frames[1]["file"], "/src/app.c");
    assert_eq!(frames[1]["line"], 12);
    assert_eq!(frames[1]["inlined"], true);
    assert_eq!(frames[1]["source"], "eh_frame");
    assert_eq!(frames[2]["symbol"], serde_json::Value::Null);
    assert_eq!(frames[2]["line"], serde_json::Value::Null);
    assert_eq!(frames[2]["source"], "fp");
}
