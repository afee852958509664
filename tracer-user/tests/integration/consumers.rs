//! Every output format read back by a consumer that is not sframe-trace's writer, as folded
//! stacks (`comm;outermost;...;innermost` -> count), so that one session's outputs can be
//! compared with its folded output stack by stack: the json lines parsed here, the perf-script
//! text collapsed by inferno's perf collapser, the pprof file printed by `go tool pprof
//! -traces`, the OTLP requests decoded by the receiver built from the official protos, and the
//! flame graph's boxes laid out again from the folded stacks.
//!
//! A frame without a symbol is named as the folded output names it: `[OBJECT+0xOFFSET]` (its
//! file name and object-relative address), `[kernel 0xADDR]`, `[unknown 0xADDR]`.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::Command,
    time::Duration,
};

use inferno::collapse::{
    Collapse as _,
    perf::{Folder, Options},
};
use serde_json::Value;

use crate::otlp::{Receiver, Traced, sframe_trace, summary_samples};

/// Folded stacks and their counts.
pub type Stacks = BTreeMap<String, u64>;

/// Folded text (`STACK COUNT` lines).
pub fn folded(text: &str) -> Stacks {
    let mut stacks = Stacks::new();
    for line in text.lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap_or_else(|| panic!("not folded: {line}"));
        *stacks.entry(stack.to_owned()).or_default() +=
            count.parse::<u64>().unwrap_or_else(|_| panic!("not folded: {line}"));
    }
    stacks
}

/// The `-f json` stream: one stack per line, each frame named from its fields.
pub fn json(text: &str) -> Stacks {
    let mut stacks = Stacks::new();
    for line in text.lines() {
        let sample: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let mut stack = sample["comm"].as_str().expect("comm").to_owned();
        for frame in sample["frames"].as_array().expect("frames").iter().rev() {
            stack.push(';');
            stack.push_str(&json_frame_name(frame));
        }
        *stacks.entry(stack).or_default() += 1;
    }
    stacks
}

fn json_frame_name(frame: &Value) -> String {
    if let Some(symbol) = frame["symbol"].as_str() {
        return symbol.to_owned();
    }
    let addr = frame["addr"].as_str().expect("addr");
    match (frame["source"].as_str(), frame["object"].as_str()) {
        (Some("kernel"), _) => format!("[kernel {addr}]"),
        (_, Some(object)) => format!("[{}+{}]", file_name(object), frame["offset"].as_str().expect("offset")),
        (_, None) => format!("[unknown {addr}]"),
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `-f perf-script` text collapsed by inferno's perf collapser; its weights (periods) turned
/// back into counts of `period_ns`.
pub fn perf_script(text: &[u8], period_ns: u64) -> Stacks {
    let mut options = Options::default();
    options.nthreads = 1;
    let mut collapsed = Vec::new();
    Folder::from(options)
        .collapse(text, &mut collapsed)
        .expect("inferno collapses the perf-script text");
    folded(&String::from_utf8(collapsed).expect("utf-8"))
        .into_iter()
        .map(|(stack, weight)| {
            assert_eq!(
                weight % period_ns,
                0,
                "{stack}: {weight} is not a whole number of periods"
            );
            (stack, weight / period_ns)
        })
        .collect()
}

/// The samples of a pprof file, as `go tool pprof -traces` prints them (the `comm` label
/// first, inlined functions as frames of their own).
pub fn pprof(file: &Path) -> Stacks {
    let out = Command::new("go")
        .args(["tool", "pprof", "-traces", "-sample_index=samples"])
        .arg(file)
        .output()
        .expect("run go tool pprof");
    assert!(
        out.status.success(),
        "go tool pprof -traces failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut stacks = Stacks::new();
    for block in text.split("-----------+").skip(1) {
        let mut comm = None;
        let mut count = None;
        let mut frames = Vec::new();
        for line in block.lines().skip(1) {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            if let Some(value) = line.strip_prefix("comm:") {
                comm = Some(value.trim().to_owned());
            } else if line
                .split_once(':')
                .is_some_and(|(key, _)| !key.contains(' ') && count.is_none())
            {
                // Another label (event, pid, tid).
            } else if count.is_none() {
                let (value, name) = line
                    .split_once(char::is_whitespace)
                    .unwrap_or_else(|| panic!("not a trace's first frame: {line}"));
                count = Some(value.parse::<u64>().unwrap_or_else(|_| panic!("not a count: {line}")));
                frames.push(name.trim().to_owned());
            } else {
                frames.push(line.to_owned());
            }
        }
        if frames.is_empty() && comm.is_none() {
            // After the last trace.
            continue;
        }
        let (Some(comm), Some(count)) = (comm, count) else {
            panic!("a trace without comm or count:\n{block}")
        };
        let mut stack = comm;
        for frame in frames.iter().rev() {
            stack.push(';');
            stack.push_str(frame.strip_suffix(" (inline)").unwrap_or(frame));
        }
        *stacks.entry(stack).or_default() += count;
    }
    stacks
}

/// The samples of the OTLP requests the receiver decoded (each request a window of the
/// session), with the thread name as comm.
pub fn otlp(requests: &[Value]) -> Stacks {
    let mut stacks = Stacks::new();
    for request in requests {
        for resource in request["resources"].as_array().expect("resources") {
            for profile in resource["profiles"].as_array().expect("profiles") {
                for sample in profile["samples"].as_array().expect("samples") {
                    let mut stack = sample["attributes"]["thread.name"]
                        .as_str()
                        .expect("thread.name")
                        .to_owned();
                    for frame in sample["frames"].as_array().expect("frames").iter().rev() {
                        let functions = frame["functions"].as_array().expect("functions");
                        if functions.is_empty() {
                            let address = frame["address"].as_u64().expect("address");
                            let mapping = frame["mapping"].as_str().unwrap_or_default();
                            stack.push_str(&if frame["attributes"]["profile.frame.type"] == "kernel" {
                                format!(";[kernel {address:#x}]")
                            } else if mapping.is_empty() {
                                format!(";[unknown {address:#x}]")
                            } else {
                                format!(";[{}+{address:#x}]", file_name(mapping))
                            });
                        }
                        for function in functions.iter().rev() {
                            stack.push(';');
                            stack.push_str(function.as_str().expect("a name"));
                        }
                    }
                    *stacks.entry(stack).or_default() += sample["values"][0].as_u64().expect("a count");
                }
            }
        }
    }
    stacks
}

/// A box of a flame graph: depth (0: the root `all`), name, first sample and width in samples.
pub type FlameBox = (usize, String, u64, u64);

/// The boxes of an inferno flame graph: `<title>NAME (...)</title><rect ... y="Y" ...
/// fg:x="X" fg:w="W"/>`, depths from the `y` of each box (the root at the bottom).
pub fn svg_boxes(svg: &str) -> BTreeSet<FlameBox> {
    let mut raw = Vec::new();
    for part in svg.split("<g><title>").skip(1) {
        let (title, rest) = part.split_once("</title>").expect("a title");
        let name = title
            .rsplit_once(" (")
            .map_or(title, |(name, _)| name)
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&");
        let attribute = |key: &str| -> u64 {
            let start = rest
                .find(&format!("{key}=\""))
                .unwrap_or_else(|| panic!("no {key} in {rest}"))
                + key.len()
                + 2;
            let digits: String = rest[start..].chars().take_while(char::is_ascii_digit).collect();
            digits.parse().unwrap_or_else(|_| panic!("{key} of {title}"))
        };
        raw.push((attribute("y"), name, attribute("fg:x"), attribute("fg:w")));
    }
    let root_y = raw.iter().map(|b| b.0).max().expect("boxes in the flame graph");
    let step = raw.iter().map(|b| root_y - b.0).filter(|&d| d > 0).min().unwrap_or(1);
    raw.into_iter()
        .map(|(y, name, x, w)| (((root_y - y) / step) as usize, name, x, w))
        .collect()
}

/// The boxes a flame graph of `stacks` has: the stacks sorted as text, each prefix one box
/// spanning the samples of the adjacent stacks that share it.
pub fn flame_boxes(stacks: &Stacks) -> BTreeSet<FlameBox> {
    let total: u64 = stacks.values().sum();
    let mut boxes = BTreeSet::from([(0, "all".to_owned(), 0, total)]);
    // The open box at each depth: (name, start).
    let mut open: Vec<(String, u64)> = Vec::new();
    let mut x = 0;
    for (stack, count) in stacks {
        let frames: Vec<&str> = stack.split(';').collect();
        let shared = open
            .iter()
            .zip(&frames)
            .take_while(|((name, _), frame)| name == *frame)
            .count();
        for (depth, (name, start)) in open.drain(shared..).enumerate() {
            boxes.insert((shared + depth + 1, name, start, x - start));
        }
        open.extend(frames[shared..].iter().map(|f| ((*f).to_owned(), x)));
        x += count;
    }
    for (depth, (name, start)) in open.into_iter().enumerate() {
        boxes.insert((depth + 1, name, start, x - start));
    }
    boxes
}

/// Assert that `got` (a format read back) holds exactly the stacks of `folded`, showing the
/// first differences.
pub fn assert_same(what: &str, got: &Stacks, folded: &Stacks) {
    if got == folded {
        return;
    }
    let only_got: Vec<_> = got.iter().filter(|(s, n)| folded.get(*s) != Some(n)).take(5).collect();
    let only_folded: Vec<_> = folded.iter().filter(|(s, n)| got.get(*s) != Some(n)).take(5).collect();
    panic!(
        "{what} does not carry the stacks of the folded output ({} stacks, {} samples vs {} stacks, {} samples)\n\
         in {what} only (or with another count): {only_got:#?}\nin folded only (or with another count): {only_folded:#?}",
        got.len(),
        got.values().sum::<u64>(),
        folded.len(),
        folded.values().sum::<u64>(),
    );
}

/// The files formats are written to by [`every_format`], and their `-f` names.
const FILE_FORMATS: &[&str] = &["folded", "json", "perf-script", "pprof", "svg"];

/// What one session writing every format left, each format read back by its consumer.
pub struct EveryFormat {
    pub traced: Traced,
    /// The json lines as written (for the oracle).
    pub json_text: String,
    pub folded: Stacks,
    pub json: Stacks,
    pub perf_script: Stacks,
    pub pprof: Stacks,
    pub otlp: Stacks,
    pub svg: BTreeSet<FlameBox>,
}

impl EveryFormat {
    /// Run one session of `sframe-trace -F HZ ARGS` writing folded, json, perf-script, pprof
    /// and SVG files and exporting OTLP/gRPC to a receiver every second, launching `command`
    /// with `envs`; its outputs read back. The session must succeed within `limit`.
    pub fn run(hz: u64, args: &[&str], command: &[&str], envs: &[(&str, &str)], limit: Duration) -> EveryFormat {
        let go = Command::new("go").arg("version").output();
        assert!(
            go.is_ok_and(|o| o.status.success()),
            "`go` is missing: install the Debian package golang-go (cargo xtask setup does)"
        );
        let receiver = Receiver::start("grpc", false);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = |format: &str| dir.path().join(format!("out.{format}"));
        let mut all: Vec<String> = vec!["-F".to_owned(), hz.to_string()];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        for format in FILE_FORMATS {
            all.extend(["-f".to_owned(), (*format).to_owned(), "-o".to_owned()]);
            all.push(path(format).display().to_string());
        }
        all.extend(
            [
                "-f",
                "otlp",
                "--otlp-endpoint",
                &format!("http://127.0.0.1:{}", receiver.port),
                "--export-interval",
                "1",
                "--",
            ]
            .map(str::to_owned),
        );
        all.extend(command.iter().map(|a| (*a).to_owned()));
        let traced = sframe_trace(&all, envs, limit);
        assert!(
            traced.status.success(),
            "{} failed ({}):\n{}",
            traced.command,
            traced.status,
            traced.stderr
        );
        let read =
            |format: &str| std::fs::read(path(format)).unwrap_or_else(|e| panic!("read the {format} output: {e}"));
        let text = |format: &str| String::from_utf8(read(format)).unwrap_or_else(|_| panic!("{format}: not UTF-8"));
        let json_text = text("json");
        let requests = receiver.requests();
        for request in &requests {
            assert_eq!(request["errors"], serde_json::json!([]), "dictionary errors: {request}");
        }
        let folded = folded(&text("folded"));
        assert_eq!(
            folded.values().sum::<u64>(),
            summary_samples(&traced),
            "the folded output holds every sample the summary counts"
        );
        EveryFormat {
            json: json(&json_text),
            json_text,
            perf_script: perf_script(&read("perf-script"), 1_000_000_000 / hz),
            pprof: pprof(&path("pprof")),
            otlp: otlp(&requests),
            svg: svg_boxes(&text("svg")),
            folded,
            traced,
        }
    }

    /// Every format carries exactly the stacks of the folded output: json, perf-script,
    /// pprof and OTLP stack by stack with the same counts, the flame graph box by box.
    pub fn assert_all_the_same(&self) {
        assert!(!self.folded.is_empty(), "no stacks:\n{}", self.traced.stderr);
        assert_same("the json stream", &self.json, &self.folded);
        assert_same(
            "the perf-script text (collapsed by inferno)",
            &self.perf_script,
            &self.folded,
        );
        assert_same("the pprof file (go tool pprof -traces)", &self.pprof, &self.folded);
        assert_same("the OTLP export (as the receiver decoded it)", &self.otlp, &self.folded);
        let expected = flame_boxes(&self.folded);
        let total: u64 = self.folded.values().sum();
        let extra: Vec<_> = self.svg.difference(&expected).take(5).collect();
        assert!(
            extra.is_empty(),
            "flame graph boxes the folded stacks do not make: {extra:#?}"
        );
        // inferno leaves out boxes narrower than 0.1 pixel of its 1200.
        let missing: Vec<_> = expected
            .iter()
            .filter(|b| b.3 * 12_000 >= total && !self.svg.contains(*b))
            .take(5)
            .collect();
        assert!(missing.is_empty(), "flame graph boxes missing: {missing:#?}");
    }
}
