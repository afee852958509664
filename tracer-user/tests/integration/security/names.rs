//! Names other users control, as nobody makes them: a program whose command name and hot
//! function carry newlines, a forged perf-script frame, `;`, what reads as a count and terminal
//! escape sequences, run from a file whose name does too. Traced in every
//! text format and in the live view, none of it forges a record or reaches a terminal raw.

use std::{ffi::OsStr, os::unix::ffi::OsStrExt as _, path::Path};

use super::{nobody_does, sticky_dir, trace};
use crate::support::{Running, compile_fixture};

/// The placeholder name of `fixtures/security/hostile.c`'s hot function.
const PLACEHOLDER: &[u8] = b"hostile_symbol_placeholder_0123456789";
/// What it becomes: a forged perf-script frame line and record end, a window title, `;`, DEL
/// and a trailing count.
const HOSTILE: &[u8] = b"abcd\n\tffff fake (/x)\n\n\x1b]0;PWNED\x07;\x7f 99";
/// The command name the program sets.
const COMM: &str = "\x1b]0;PWN\x07;x 9\n";

/// Build the hostile program into `dir` (readable by everyone) and, as nobody, copy it to a
/// hostile file name there and run it; the running program.
fn hostile_program(dir: &Path) -> Running {
    assert_eq!(PLACEHOLDER.len(), HOSTILE.len());
    let built = compile_fixture("security/hostile", &dir.join("hostile"), &[]);
    let mut bytes = std::fs::read(&built).expect("read the program");
    let mut patched = 0;
    while let Some(at) = bytes.windows(PLACEHOLDER.len()).position(|w| w == PLACEHOLDER) {
        bytes[at..at + HOSTILE.len()].copy_from_slice(HOSTILE);
        patched += 1;
    }
    assert!(patched > 0, "the placeholder symbol is in the program");
    std::fs::write(&built, &bytes).expect("write the program");
    let name = dir.join(OsStr::from_bytes(b"evil;x 9 \x1b]0;PWNED\x07 12"));
    nobody_does(&["cp".as_ref(), built.as_os_str(), name.as_os_str()]);
    Running(
        super::as_nobody(&[name.as_os_str()])
            .spawn()
            .expect("run the hostile program"),
    )
}

/// No raw control byte but line ends (and the tabs of perf-script lines).
fn assert_no_controls(bytes: &[u8], allowed: &[u8], what: &str) {
    if let Some(at) = bytes
        .iter()
        .position(|&b| (b < 0x20 || b == 0x7f) && !allowed.contains(&b))
    {
        let from = at.saturating_sub(40);
        panic!(
            "{what}: a raw {:#04x} in {:?}",
            bytes[at],
            String::from_utf8_lossy(&bytes[from..(at + 40).min(bytes.len())])
        );
    }
}

/// Regression (an object path with a newline injected 134 fake samples into perf-script;
/// escape sequences in a program's name set the window title and cleared the screen in
/// `--live`): nobody's hostile program traced in folded, perf-script, json and svg at once
/// gives as many records as samples in each, every name escaped, and its names (seen, escaped)
/// in the outputs; the summary and the live view carry no raw escape sequence.
#[test]
fn hostile_names_forge_nothing_and_reach_no_terminal() {
    privileged_test!(paired);
    let shared = sticky_dir();
    let program = hostile_program(shared.path());
    let pid = program.pid().to_string();
    let out = tempfile::tempdir().expect("tempdir");
    let path = |name: &str| out.path().join(name);
    let ran = trace(&[
        "--pid".as_ref(),
        pid.as_ref(),
        "-F".as_ref(),
        "499".as_ref(),
        "-d".as_ref(),
        "2".as_ref(),
        "-f".as_ref(),
        "folded".as_ref(),
        "-o".as_ref(),
        path("folded").as_os_str(),
        "-f".as_ref(),
        "perf-script".as_ref(),
        "-o".as_ref(),
        path("perf").as_os_str(),
        "-f".as_ref(),
        "json".as_ref(),
        "-o".as_ref(),
        path("json").as_os_str(),
        "-f".as_ref(),
        "svg".as_ref(),
        "-o".as_ref(),
        path("svg").as_os_str(),
    ]);
    assert!(ran.status.success(), "{}: {}", ran.status, ran.stderr.escape_debug());
    assert_no_controls(ran.stderr.as_bytes(), b"\n", "the summary");
    // The reference count: the text summary is checked above for what it must not carry; the
    // other formats must carry as many samples as the folded output.
    let samples = super::folded_samples(&path("folded"));
    assert!(samples > 0, "{}", ran.stderr.escape_debug());

    let folded = std::fs::read(path("folded")).expect("read folded");
    assert_no_controls(&folded, b"\n", "folded");
    let folded = String::from_utf8(folded).expect("folded is UTF-8");
    for line in folded.lines() {
        let (stack, count) = line.rsplit_once(' ').expect("a count");
        count.parse::<u64>().unwrap_or_else(|_| panic!("count of {line:?}"));
        let (_, last) = stack.rsplit_once(';').unwrap_or(("", stack));
        assert!(!last.ends_with(" 99"), "a forged count: {line:?}");
    }
    assert!(
        folded.contains("\\x1b]0_PWN\\x07_x 9\\x0a;") && folded.contains("\\x0a\\x09ffff fake (/x)\\x0a"),
        "the hostile names, escaped, were traced: {folded}"
    );

    let perf = std::fs::read(path("perf")).expect("read perf-script");
    assert_no_controls(&perf, b"\n\t", "perf-script");
    let perf = String::from_utf8(perf).expect("perf-script is UTF-8");
    let records: Vec<&str> = perf.split_terminator("\n\n").collect();
    assert_eq!(records.len() as u64, samples, "perf-script records");
    for record in &records {
        assert!(record.lines().skip(1).all(|l| l.starts_with('\t')), "{record:?}");
    }

    let json = std::fs::read(path("json")).expect("read json");
    assert_no_controls(&json, b"\n", "json");
    let json = String::from_utf8(json).expect("json is UTF-8");
    assert_eq!(json.lines().count() as u64, samples, "json lines");
    for line in json.lines() {
        let sample: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_eq!(sample["comm"], COMM, "the command name, exactly");
    }

    let svg = std::fs::read(path("svg")).expect("read svg");
    assert_no_controls(&svg, b"\n\t\r", "svg");
    let svg = String::from_utf8(svg).expect("svg is UTF-8");
    let mut reader = quick_xml::Reader::from_str(&svg);
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("the SVG is not well-formed XML at {}: {e}", reader.buffer_position()),
        }
    }

    // The live view in a pseudo-terminal: the program's OSC sequence never reaches it.
    let tracer = crate::support::tracer_binary();
    let live = crate::live::Pty::run(&format!("{} --live --pid {pid} -F 499 -d 3", tracer.display()));
    let (ok, screen) = live.finish(std::time::Duration::from_secs(120));
    assert!(ok, "{}", screen.escape_debug());
    assert!(
        screen.contains("\\x1b]0;PWNED"),
        "the view showed the name, escaped: {}",
        screen.escape_debug()
    );
    assert!(
        !screen.contains("\x1b]0;PWN"),
        "a raw OSC sequence reached the terminal"
    );
}
