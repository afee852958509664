//! `sframe-trace symbolize` writes every file format with the stacks of an on-host run: a
//! program is traced into folded, svg, pprof, json and perf-script at once; its pprof, the
//! user locations' names taken out, is symbolized again off-host into each format, and each
//! result is compared with the on-host file of the same format, stack for stack (the streamed
//! formats record for record, without what a profile does not hold: times, CPUs and absolute
//! addresses). Privileged, like every tracing test.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use prost::Message as _;

use crate::support::{SFRAME_CFLAGS, gcc, read_pprof, tracer_binary};

/// A loop in three functions, some tens of milliseconds per round; argument: rounds.
const PROGRAM: &str = r#"
#include <stdlib.h>
__attribute__((noinline)) long leaf(long n) { long s = 0; for (long i = 0; i < n; i++) s += i * i % 7; return s; }
__attribute__((noinline)) long mid(long n) { return leaf(n) + 1; }
int main(int argc, char **argv) {
    long t = 0;
    for (int j = 0; j < (argc > 1 ? atoi(argv[1]) : 30); j++) t += mid(20000000);
    return (int)(t & 1);
}
"#;

const FORMATS: [&str; 5] = ["folded", "svg", "pprof", "json", "perf-script"];

fn sframe_trace(args: &[&str]) -> String {
    let out = Command::new(tracer_binary())
        .args(args)
        .env_remove("DEBUGINFOD_URLS")
        .output()
        .expect("run sframe-trace");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "sframe-trace {args:?} failed: {stderr}");
    stderr
}

/// The stacks of a file of `format`, each with how often it occurs: text lines for folded
/// and svg (the svg written from the same stacks is the same text), for pprof the labels and
/// names of each sample, for json and perf-script each record without its time, CPU and
/// addresses.
/// `line` with the text of an SVG's `<text id="title" ...>` element left out.
fn without_title(line: &str) -> String {
    let Some(start) = line.find("<text id=\"title\"") else {
        return line.to_owned();
    };
    let end = line[start..].find("</text>").map_or(line.len(), |e| start + e);
    format!("{}{}", &line[..start], &line[end..])
}

fn stacks(format: &str, path: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let text = || std::fs::read_to_string(path).expect("read the output");
    match format {
        "folded" => {
            for line in text().lines() {
                *out.entry(line.to_owned()).or_default() += 1;
            }
        }
        // The title names the command traced on the host, which a profile does not carry:
        // everything else must be the same.
        "svg" => {
            for line in text().lines() {
                *out.entry(without_title(line)).or_default() += 1;
            }
        }
        "pprof" => {
            let p = read_pprof(path);
            let s = |i: i64| p.string_table[i as usize].clone();
            for sample in &p.sample {
                let labels: Vec<String> = sample
                    .label
                    .iter()
                    .map(|l| format!("{}={}/{}", s(l.key), s(l.str), l.num))
                    .collect();
                let frames: Vec<String> = sample
                    .location_id
                    .iter()
                    .map(|id| {
                        let l = p.location.iter().find(|l| l.id == *id).expect("location");
                        let m = p.mapping.iter().find(|m| m.id == l.mapping_id).expect("mapping");
                        let lines: Vec<String> = l
                            .line
                            .iter()
                            .map(|line| {
                                let f = p.function.iter().find(|f| f.id == line.function_id).expect("function");
                                format!("{}@{}:{}", s(f.name), s(f.filename), line.line)
                            })
                            .collect();
                        format!("{}+{:#x}:{}", s(m.filename), l.address, lines.join("|"))
                    })
                    .collect();
                let key = format!("{labels:?} {frames:?} {:?}", sample.value);
                *out.entry(key).or_default() += 1;
            }
        }
        "json" => {
            for line in text().lines() {
                let mut v: serde_json::Value = serde_json::from_str(line).expect("a json record");
                let record = v.as_object_mut().expect("an object");
                record.remove("time");
                record.remove("cpu");
                for frame in record["frames"].as_array_mut().expect("frames") {
                    frame.as_object_mut().expect("a frame").remove("addr");
                }
                *out.entry(v.to_string()).or_default() += 1;
            }
        }
        "perf-script" => {
            for record in text().split("\n\n").filter(|r| !r.trim().is_empty()) {
                let mut lines = record.lines();
                // `comm pid/tid [cpu] time: weight event:`: without CPU and time.
                let head: Vec<&str> = lines.next().expect("a header").split_whitespace().collect();
                let mut key = format!("{} {} {:?}", head[0], head[1], &head[4..]);
                for frame in lines {
                    // `\tADDR NAME (OBJECT)`: without the address.
                    let (_, rest) = frame.trim_start().split_once(' ').expect("a frame");
                    key.push('\n');
                    key.push_str(rest);
                }
                *out.entry(key).or_default() += 1;
            }
        }
        other => panic!("no reader for {other}"),
    }
    out
}

#[test]
fn symbolize_writes_every_format_with_the_on_host_stacks() {
    privileged_test!(shared);
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let src = d.join("offl.c");
    std::fs::write(&src, PROGRAM).expect("write the source");
    let program = gcc(&src, &d.join("offl"), &[&SFRAME_CFLAGS[..], &["-g"]].concat());

    let on = |format: &str| d.join(format!("on.{format}"));
    let mut args: Vec<String> = ["--no-kernel", "-F", "499", "--summary-format", "json"]
        .map(str::to_owned)
        .to_vec();
    for format in FORMATS {
        args.extend(["-f", format, "-o"].map(str::to_owned));
        args.push(on(format).to_str().expect("path").to_owned());
    }
    args.extend([
        "--".to_owned(),
        program.to_str().expect("path").to_owned(),
        "12".to_owned(),
    ]);
    sframe_trace(&args.iter().map(String::as_str).collect::<Vec<_>>());

    // The on-host pprof with its user frames unnamed, as `--symbolize none` writes them.
    let mut unnamed = read_pprof(&on("pprof"));
    assert!(
        unnamed.sample.iter().map(|s| s.value[0]).sum::<i64>() > 20,
        "too few samples to compare"
    );
    for l in &mut unnamed.location {
        l.line.clear();
    }
    let unnamed_path = d.join("unnamed.pb");
    std::fs::write(&unnamed_path, unnamed.encode_to_vec()).expect("write");

    for format in FORMATS {
        let off: PathBuf = d.join(format!("off.{format}"));
        sframe_trace(&[
            "symbolize",
            unnamed_path.to_str().expect("path"),
            "-f",
            format,
            "-o",
            off.to_str().expect("path"),
            "--offline",
        ]);
        let expected = stacks(format, &on(format));
        assert!(
            expected.keys().any(|k| k.contains("leaf")),
            "{format}: the on-host output does not name leaf: {expected:?}"
        );
        assert_eq!(stacks(format, &off), expected, "{format}: off-host stacks differ");
    }
}
