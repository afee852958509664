//! A property test over every output format: names other users control (command names,
//! object paths, symbols, source file names), made of newlines, `;`, spaces and digits,
//! control bytes, terminal escape sequences, XML specials and invalid UTF-8 (turned into text as
//! the tracer reads it, lossily), go through each writer, and each output still parses by its
//! consumer's rules with nothing forged and nothing lost. Deterministic: a fixed seed, so it
//! runs in every `cargo test`.

use std::io::Read as _;

use inferno::collapse::{
    Collapse as _,
    perf::{Folder, Options},
};
use prost::Message as _;

use super::{
    folded, json,
    live::{
        model::{SortKey, Table},
        screen::{self, Status, View},
    },
    model::{FrameSource, ObjectInfo, Resolved, ResolvedFrame, ResolvedSample, ResolvedStack},
    otlp::{self, ResourceInfo},
    perf_script, pprof, svg,
};

/// Pieces hostile names are made of.
const PIECES: &[&[u8]] = &[
    b"\n",
    b"\r\n",
    b";",
    b" 12",
    b" 3.5",
    b" ",
    b"\t",
    b"\x1b]0;PWNED\x07",
    b"\x1b[2J",
    b"\x1b[31m",
    b"\x00",
    b"\x7f",
    "\u{85}".as_bytes(),
    "\u{9b}".as_bytes(),
    b"#",
    b"(x)",
    b"->",
    b"+0x12",
    b"<script>&amp;\"'",
    b"]]>",
    b"\xff\xfe",
    b"\xc3",
    "é€".as_bytes(),
    b"[unknown]",
    b"main",
    b"7/8 [000] 1.0: 1 cpu-clock:",
    b"\n\tffff fake (/x)\n\n",
];

/// xorshift64*: a deterministic stream of numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A hostile name: 1 to 5 pieces, as bytes, read as the tracer reads names (lossily).
    fn name(&mut self) -> String {
        let mut bytes = Vec::new();
        for _ in 0..=self.below(5) {
            bytes.extend_from_slice(PIECES[self.below(PIECES.len())]);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// One profile of hostile stacks (and the same stacks as streamed samples).
fn hostile(rng: &mut Rng) -> (Resolved, Vec<ResolvedSample>) {
    let objects: Vec<ObjectInfo> = (0..3)
        .map(|_| {
            let path = format!("/tmp/{}", rng.name());
            ObjectInfo {
                name: path.rsplit('/').next().unwrap_or_default().to_owned(),
                path,
                build_id: None,
            }
        })
        .collect();
    let mut stacks = Vec::new();
    for i in 0..6 {
        let frames = (0..1 + rng.below(6))
            .map(|j| ResolvedFrame {
                // One symbol per address, as symbolization gives.
                addr: 0x55_0000_0000 + 0x1000 * u64::from(i) + 16 * j as u64,
                object: (rng.below(4) < 3).then(|| rng.below(3)),
                offset: 0x1000 * u64::from(i) + 16 * j as u64,
                symbol: (rng.below(4) < 3).then(|| rng.name()),
                file: (rng.below(2) == 0).then(|| rng.name()),
                line: Some(3),
                inlined: false,
                source: FrameSource::Sframe,
            })
            .collect();
        stacks.push(ResolvedStack {
            pid: 100 + i,
            tid: 200 + i,
            comm: rng.name(),
            event: crate::event::CPU_CLOCK.to_owned(),
            frames,
            count: 1 + rng.below(9) as u64,
            weight_ns: 0,
            truncated: None,
            cpu: None,
        });
    }
    for stack in &mut stacks {
        stack.weight_ns = stack.count * 1_000_000;
    }
    let samples = stacks
        .iter()
        .flat_map(|s| {
            (0..s.count).map(|n| ResolvedSample {
                time_ns: 1_000_000_000 + n,
                time_unix_ns: 1_700_000_000_000_000_000 + n,
                pid: s.pid,
                tid: s.tid,
                cpu: 1,
                comm: s.comm.clone(),
                event: s.event.clone(),
                weight_ns: 1_000_000,
                frames: s.frames.clone(),
                truncated: s.truncation(),
            })
        })
        .collect();
    let resolved = Resolved {
        objects,
        stacks,
        start_unix_ns: 1_700_000_000_000_000_000,
        duration_ns: 1_000_000_000,
        period_ns: 1_000_000,
    };
    (resolved, samples)
}

/// No control character but the line ends (and tabs where the format has them).
fn assert_no_controls(text: &str, allowed: &[char], what: &str) {
    if let Some(c) = text
        .chars()
        .find(|&c| (c.is_control() || c == '\u{7f}') && !allowed.contains(&c))
    {
        panic!("{what}: a raw {c:?} in {text:?}");
    }
}

/// Folded: one line per stack, ending in its count and holding one `;` per frame, never read
/// as a differential line (two counts) by inferno's rule; the counts of the whole profile add up.
fn check_folded(resolved: &Resolved) {
    let write = |resolved: &Resolved| {
        let mut out = Vec::new();
        folded::write(&mut out, resolved).expect("write folded");
        let text = String::from_utf8(out).expect("folded is UTF-8");
        assert_no_controls(&text, &['\n'], "folded");
        text
    };
    for stack in &resolved.stacks {
        let alone = Resolved {
            stacks: vec![stack.clone()],
            ..resolved.clone()
        };
        let text = write(&alone);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{text:?}");
        let (line, count) = lines[0].rsplit_once(' ').expect("a count");
        assert_eq!(count.parse::<u64>().ok(), Some(stack.count), "{text:?}");
        assert_eq!(line.split(';').count(), stack.frames.len() + 1, "frames of {text:?}");
        if let Some((_, word)) = line.trim().rsplit_once(' ') {
            assert!(
                word.is_empty() || !word.chars().all(|c| c.is_ascii_digit() || c == '.'),
                "a second count in {text:?}"
            );
        }
    }
    let total = folded_total(&write(resolved));
    assert_eq!(total, resolved.stacks.iter().map(|s| s.count).sum::<u64>());
}

/// perf-script: one record per sample (header, one tab-indented line per frame, a blank line),
/// and inferno's collapser counts exactly the samples written, at their period.
fn check_perf_script(resolved: &Resolved, samples: &[ResolvedSample]) {
    let mut out = Vec::new();
    for sample in samples {
        perf_script::write_sample(&mut out, sample, &resolved.objects).expect("write perf-script");
    }
    let text = String::from_utf8(out.clone()).expect("perf-script is UTF-8");
    assert_no_controls(&text, &['\n', '\t'], "perf-script");
    let records: Vec<&str> = text.split_terminator("\n\n").collect();
    assert_eq!(records.len(), samples.len(), "records");
    for (record, sample) in records.iter().zip(samples) {
        let mut lines = record.lines();
        let header = lines.next().expect("a header");
        assert!(!header.starts_with(['\t', ' ', '#']), "header {header:?}");
        let mut fields = header.split(' ');
        assert!(
            fields
                .next()
                .is_some_and(|comm| !comm.is_empty() || sample.comm.is_empty())
        );
        assert_eq!(
            fields.next(),
            Some(format!("{}/{}", sample.pid, sample.tid).as_str()),
            "{header:?}"
        );
        let frames: Vec<&str> = lines.collect();
        assert_eq!(frames.len(), sample.frames.len(), "{record:?}");
        for frame in frames {
            let (_, object) = frame.rsplit_once(' ').expect("an object");
            assert!(
                frame.starts_with('\t') && object.starts_with('(') && object.ends_with(')'),
                "{frame:?}"
            );
        }
    }
    // inferno 0.12.8's collapser slices names at byte offsets and panics inside non-ASCII
    // characters (`fix_partially_demangled_rust_symbol`): it reads ASCII text only.
    if !text.is_ascii() {
        return;
    }
    let mut options = Options::default();
    options.nthreads = 1;
    let mut collapsed = Vec::new();
    Folder::from(options)
        .collapse(out.as_slice(), &mut collapsed)
        .expect("inferno collapses perf-script");
    let weight = folded_total(&String::from_utf8(collapsed).expect("utf-8"));
    // The collapser skips frames whose name starts with `(` (perf's process names), and with
    // them a record that has no other frame.
    let expected: u64 = samples
        .iter()
        .filter(|s| {
            s.frames.iter().any(|f| {
                !tracer_unwind::names::escaped(&f.name(&resolved.objects))
                    .trim()
                    .starts_with('(')
            })
        })
        .map(|s| s.weight_ns)
        .sum();
    assert_eq!(weight, expected, "forged or lost records");
}

/// json: one object per sample that parses, its names as written (exactly: they are valid
/// UTF-8 strings), its frames all there.
fn check_json(resolved: &Resolved, samples: &[ResolvedSample]) {
    let mut out = Vec::new();
    for sample in samples {
        json::write_sample(&mut out, sample, &resolved.objects).expect("write json");
    }
    let text = String::from_utf8(out).expect("json is UTF-8");
    assert_no_controls(&text, &['\n'], "json");
    assert_eq!(text.lines().count(), samples.len());
    for (line, sample) in text.lines().zip(samples) {
        let value: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        assert_eq!(value["comm"], sample.comm.as_str());
        let frames = value["frames"].as_array().expect("frames");
        assert_eq!(frames.len(), sample.frames.len());
        for (written, frame) in frames.iter().zip(&sample.frames) {
            assert_eq!(written["symbol"].as_str(), frame.symbol.as_deref());
            assert_eq!(written["file"].as_str(), frame.file.as_deref());
        }
    }
}

/// svg: a well-formed XML document (every event of the reader parses) without raw control
/// characters, with one box per frame name.
fn check_svg(resolved: &Resolved) {
    let mut out = Vec::new();
    svg::write(&mut out, resolved).expect("write svg");
    let text = String::from_utf8(out).expect("svg is UTF-8");
    assert_no_controls(&text, &['\n', '\t', '\r'], "svg");
    let mut reader = quick_xml::Reader::from_str(&text);
    reader.config_mut().check_end_names = true;
    let mut titles = 0;
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(quick_xml::events::Event::Start(tag)) if tag.name().as_ref() == b"title" => titles += 1,
            Ok(quick_xml::events::Event::Text(text)) => {
                text.decode().expect("text decodes");
            }
            Ok(_) => {}
            Err(e) => panic!("not well-formed XML at {}: {e}", reader.buffer_position()),
        }
    }
    assert!(titles > resolved.stacks.len(), "{titles} boxes");
}

/// pprof and OTLP: names are strings of the string table, exactly as given.
fn check_protobufs(resolved: &Resolved) {
    let mut gz = Vec::new();
    pprof::write(&mut gz, resolved).expect("write pprof");
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gz.as_slice())
        .read_to_end(&mut raw)
        .expect("gunzip");
    let profile = pprof::Profile::decode(raw.as_slice()).expect("decode pprof");
    let request = otlp::encode(resolved, &ResourceInfo::for_host(None, Vec::new()));
    let decoded = opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest::decode(
        request.encode_to_vec().as_slice(),
    )
    .expect("decode otlp");
    let otlp_strings = decoded.dictionary.expect("a dictionary").string_table;
    for stack in &resolved.stacks {
        assert!(
            profile.string_table.contains(&stack.comm),
            "pprof comm {:?}",
            stack.comm
        );
        for symbol in stack.frames.iter().filter_map(|f| f.symbol.as_ref()) {
            assert!(profile.string_table.contains(symbol), "pprof {symbol:?}");
            assert!(otlp_strings.contains(symbol), "otlp {symbol:?}");
        }
    }
}

/// The live view: no control character reaches the terminal, in either mode.
fn check_live(resolved: &Resolved) {
    let table = Table::new(resolved, SortKey::SelfCount);
    for mode in [screen::Mode::Functions, screen::Mode::Stacks] {
        let view = View {
            mode,
            ..View::default()
        };
        for line in screen::render(&table, &Status::default(), &view, 200, 40) {
            assert_no_controls(&line.text, &[], "live view");
        }
    }
}

/// Hostile names through every format: each output parses by its consumer's rules, with no
/// record, frame or count forged and no control character written raw.
#[test]
fn hostile_names_cannot_forge_records_in_any_format() {
    let mut rng = Rng(0x6e61_6d65_7321);
    for _ in 0..200 {
        let (resolved, samples) = hostile(&mut rng);
        check_folded(&resolved);
        check_perf_script(&resolved, &samples);
        check_json(&resolved, &samples);
        check_svg(&resolved);
        check_protobufs(&resolved);
        check_live(&resolved);
    }
}

/// The sum of the counts of folded text (`STACK COUNT` lines).
fn folded_total(folded: &str) -> u64 {
    folded
        .lines()
        .map(|l| {
            l.rsplit_once(' ')
                .and_then(|(_, n)| n.parse::<u64>().ok())
                .expect("a count")
        })
        .sum()
}
