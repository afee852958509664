//! Symbol files other users write, as nobody writes them (issue 29): a program whose DWARF nests
//! inlined calls 20,000 deep (blazesym's parser recursed once per level and overflowed the
//! tracer's stack), one whose hot function has a 4 MiB name (written once per sample), and one
//! whose MiniDebugInfo is an xz bomb (decompressed to hundreds of MiB). Each runs beside an
//! honest program under a `--pid` session of both: the session ends on time within a memory
//! ceiling, the honest program's stacks are exact, the attacker's object is counted with its
//! reason, the outputs stay small; `symbolize`, `dump` and `check` take the same files.

use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use prost::Message as _;
use tracer_unwind::names::{CUT_MARKER, MAX_NAME_BYTES};
use tracer_unwind::{dwarfdepth::MAX_INLINE_DEPTH, testing::hostile};

use super::{LIMIT, as_nobody, nobody_does, sticky_dir};
use crate::hardening::{Verdicts, chain_of, read_folded, status_kib};
use crate::support::{
    Running, SFRAME_CFLAGS, SUMMARY_JSON, Summary, compile_fixture, gcc, own_name, read_pprof, run_text, tracer_binary,
};

/// How long the sessions sample.
const SECONDS: u64 = 3;
/// The most the outputs of one session may weigh (each holds a few hundred samples).
const MAX_OUTPUT: u64 = 16 << 20;

/// `main` calling `entry`, a function of the assembler file beside it.
const MAIN: &str = "void ENTRY(void);\nint main(void) { ENTRY(); return 0; }\n";

/// A program that spins in `main`.
const SPIN: &str = "int main(void) { for (volatile unsigned long i = 0;; i++) ; }\n";

/// Build `main` + the assembler text `asm` (whose function `entry` main calls) into
/// `dir/name`, no DWARF but the assembler file's; `extra`: more gcc flags.
fn build(dir: &Path, name: &str, entry: &str, asm: &str, extra: &[&str]) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    let s = dir.join(format!("{name}.s"));
    std::fs::write(&c, MAIN.replace("ENTRY", entry)).expect("write main");
    std::fs::write(&s, asm).expect("write the assembler file");
    let out = dir.join(format!("{name}.built"));
    run_text(
        Command::new("gcc")
            .args(["-O2", "-Wa,--gsframe"])
            .args(extra)
            .arg("-o")
            .arg(&out)
            .arg(&c)
            .arg(&s),
    );
    out
}

/// The attacker's program `built`, copied by nobody to `dir/name` (nobody's file), run as nobody.
fn run_as_nobody(built: &Path, dir: &Path, name: &str) -> (Running, PathBuf) {
    let path = dir.join(name);
    nobody_does(&["cp".as_ref(), built.as_os_str(), path.as_os_str()]);
    let mut running = Running(as_nobody(&[path.as_os_str()]).spawn().expect("run the attack"));
    running.wait_working(&path);
    (running, path)
}

/// What a session of the honest program and the attacker's left.
struct Session {
    stderr: String,
    summary: Summary,
    peak_kib: u64,
    folded: PathBuf,
    json: PathBuf,
    pprof: PathBuf,
    honest_comm: String,
}

/// Trace the honest chain program (built here) and the running `attacker` with `--pid` for
/// [`SECONDS`] into folded, json and pprof; the session must end within a generous margin of
/// its duration, with status 0. Its peak memory is read from /proc while it runs.
fn session(dir: &Path, attacker: &Running, extra: &[&str]) -> Session {
    let honest_comm = own_name(dir, "first");
    let honest_path = compile_fixture("hardening/chain", &dir.join(&honest_comm), &[]);
    let mut honest = Running(
        Command::new(&honest_path)
            .arg("0")
            .spawn()
            .expect("run the honest program"),
    );
    honest.wait_working(&honest_path);
    let out = |name: &str| dir.join(name);
    let (folded, json, pprof) = (out("out.folded"), out("out.json"), out("out.pb"));
    let stderr_path = out("stderr");
    let (honest_pid, attacker_pid) = (honest.pid().to_string(), attacker.pid().to_string());
    let seconds = SECONDS.to_string();
    let mut args: Vec<&OsStr> = vec![
        "--pid".as_ref(),
        honest_pid.as_ref(),
        "--pid".as_ref(),
        attacker_pid.as_ref(),
        "--no-kernel".as_ref(),
        "-F".as_ref(),
        "199".as_ref(),
        "-d".as_ref(),
        seconds.as_ref(),
    ];
    for (format, path) in [("folded", &folded), ("json", &json), ("pprof", &pprof)] {
        args.extend([OsStr::new("-f"), OsStr::new(format), OsStr::new("-o"), path.as_os_str()]);
    }
    args.extend(SUMMARY_JSON.map(OsStr::new));
    args.extend(extra.iter().map(OsStr::new));
    let mut child = Command::new(tracer_binary())
        .args(&args)
        .env_remove("DEBUGINFOD_URLS")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
        .spawn()
        .expect("start sframe-trace");
    let started = Instant::now();
    let mut peak_kib = 0;
    let status = loop {
        peak_kib = peak_kib.max(status_kib(child.id(), "VmHWM").unwrap_or(0));
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "sframe-trace -d {SECONDS} still ran after {LIMIT:?}: {}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = std::fs::read_to_string(&stderr_path).expect("read stderr");
    assert!(status.success(), "sframe-trace: {status}\n{stderr}");
    drop(honest);
    Session {
        summary: Summary::of(&stderr),
        stderr,
        peak_kib,
        folded,
        json,
        pprof,
        honest_comm,
    }
}

impl Session {
    /// The honest program's stacks are exact (none wrong, enough judged) and every output is
    /// small.
    fn assert_honest_exact_and_outputs_small(&self) {
        let lines = read_folded(&self.folded);
        let verdicts = Verdicts::of(&lines, |line| {
            (line.comm == self.honest_comm && line.frames.iter().any(|f| f.starts_with("first_")))
                .then(|| chain_of("first", 1))
        });
        verdicts.assert_sound("the honest program", 20);
        for path in [&self.folded, &self.json, &self.pprof] {
            let size = std::fs::metadata(path).expect("an output").len();
            assert!(size < MAX_OUTPUT, "{}: {size} bytes", path.display());
        }
    }

    /// The json frames of the attacker (`pid`), flattened.
    fn attacker_names(&self, pid: u32) -> Vec<String> {
        let text = std::fs::read_to_string(&self.json).expect("read json");
        let samples = crate::support::json_samples(&text, pid);
        assert!(!samples.is_empty(), "no samples of the attacker: {}", self.stderr);
        samples
            .iter()
            .flat_map(|s| crate::support::json_frames(s).to_vec())
            .filter_map(|f| f["symbol"].as_str().map(str::to_owned))
            .collect()
    }

    /// `symbolize` of the session's pprof, its user locations unnamed: it ends well, the
    /// output is small, and says `expect` somewhere.
    fn symbolize_again(&self, dir: &Path, expect: &str) {
        let mut unnamed = read_pprof(&self.pprof);
        for location in &mut unnamed.location {
            location.line.clear();
        }
        let input = dir.join("unnamed.pb");
        std::fs::write(&input, unnamed.encode_to_vec()).expect("write");
        for format in ["json", "folded"] {
            let output = dir.join(format!("offline.{format}"));
            let started = Instant::now();
            let out = Command::new(tracer_binary())
                .args([
                    OsStr::new("symbolize"),
                    input.as_os_str(),
                    OsStr::new("-f"),
                    OsStr::new(format),
                ])
                .args([OsStr::new("-o"), output.as_os_str(), OsStr::new("--offline")])
                .env_remove("DEBUGINFOD_URLS")
                .output()
                .expect("run symbolize");
            assert!(
                out.status.success(),
                "symbolize -f {format}: {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(started.elapsed() < LIMIT);
            let size = std::fs::metadata(&output).expect("output").len();
            assert!(size < MAX_OUTPUT, "symbolize -f {format}: {size} bytes");
            let text = std::fs::read_to_string(&output).expect("read");
            assert!(text.contains(expect), "symbolize -f {format} does not say {expect:?}");
        }
    }
}

/// `dump` and `check` of the attacker's file end by themselves (no signal), within the limit,
/// with a small output.
fn offline_commands_take(path: &Path) {
    for command in ["dump", "check"] {
        let started = Instant::now();
        let out = Command::new(tracer_binary())
            .args([OsStr::new(command), path.as_os_str()])
            .output()
            .expect("run");
        assert!(
            out.status.code().is_some(),
            "{command}: ended by a signal: {}",
            out.status
        );
        assert!(started.elapsed() < LIMIT, "{command} took {:?}", started.elapsed());
        assert!(
            out.stdout.len() + out.stderr.len() < MAX_OUTPUT as usize,
            "{command}: {} bytes",
            out.stdout.len()
        );
    }
}

/// Regression (issue 29, defect 1: a 325 KB program whose `.debug_info` nests 20,000 inlined
/// calls made naming recurse once per level, the tracer aborted and wrote nothing for anyone):
/// nobody's program is named from its symbol table, counted as `dwarf_too_deep`, and the session
/// ends with the honest program's stacks exact.
#[test]
fn deeply_nested_inlines_cost_nobody_the_session() {
    privileged_test!();
    let dir = sticky_dir();
    let asm = hostile::nested_inlines_asm("deep_spin", 20_000);
    let built = build(dir.path(), "deep", "deep_spin", &asm, &[]);
    let size = std::fs::metadata(&built).expect("built").len();
    assert!(
        (300 << 10..1 << 20).contains(&size),
        "the attack program is {size} bytes"
    );
    let (attacker, path) = run_as_nobody(&built, dir.path(), "deep");
    let ran = session(dir.path(), &attacker, &[]);
    ran.assert_honest_exact_and_outputs_small();
    assert_eq!(
        ran.summary.count("symbols.symbol_table_only_by_reason.dwarf_too_deep"),
        1,
        "{}",
        ran.stderr
    );
    // Named all the same, from its symbol table: the function, no inlined frames.
    let names = ran.attacker_names(attacker.pid());
    assert!(names.iter().any(|n| n == "deep_spin"), "{names:?}");
    eprintln!("peak {} KiB; the bound is {MAX_INLINE_DEPTH} levels", ran.peak_kib);
    ran.symbolize_again(dir.path(), "deep_spin");
    offline_commands_take(&path);
}

/// Regression (issue 29, defect 3: a 4 MiB symbol made `-f json` write 2.3 GB in a 2-second
/// session): nobody's function of a 4 MiB name is named cut to the bound, marked as cut, in
/// every output, which stay small; `symbolize` cuts it the same.
#[test]
fn a_four_mib_symbol_is_cut_in_every_output() {
    privileged_test!();
    let dir = sticky_dir();
    let long = format!("long_{}", "x".repeat(4 << 20));
    let asm = hostile::long_name_asm("long_entry", &long);
    let built = build(dir.path(), "long", "long_entry", &asm, &[]);
    let (attacker, path) = run_as_nobody(&built, dir.path(), "long");
    let ran = session(dir.path(), &attacker, &[]);
    ran.assert_honest_exact_and_outputs_small();
    let names = ran.attacker_names(attacker.pid());
    let cut: Vec<&String> = names.iter().filter(|n| n.starts_with("long_xxx")).collect();
    assert!(!cut.is_empty(), "the long function is not named: {names:?}");
    for name in cut {
        assert_eq!(name.len(), MAX_NAME_BYTES);
        assert!(name.ends_with(CUT_MARKER), "{name}");
    }
    let folded = std::fs::read_to_string(&ran.folded).expect("folded");
    assert!(folded.contains(CUT_MARKER), "the folded output has no cut name");
    let cut_name = &long[..MAX_NAME_BYTES - CUT_MARKER.len()];
    ran.symbolize_again(dir.path(), &format!("{cut_name}{CUT_MARKER}"));
    offline_commands_take(&path);
}

/// Regression (issue 29, defect 7: a 156 KB `.gnu_debugdata`, xz of zeros, was decompressed to
/// 512 MiB before it was refused, about 550 MB resident): nobody's stripped program whose
/// MiniDebugInfo decompresses to 480 MiB is refused at the cap, counted as
/// `minidebuginfo_too_large`, and the tracer's peak stays far below what it decompresses to.
#[test]
fn a_minidebuginfo_bomb_is_refused_at_its_cap() {
    privileged_test!();
    let dir = sticky_dir();
    std::fs::write(dir.path().join("bomb.c"), SPIN).expect("write the program");
    let plain = gcc(
        &dir.path().join("bomb.c"),
        &dir.path().join("bomb.plain"),
        &[&SFRAME_CFLAGS[..], &["-s"]].concat(),
    );
    let bomb = dir.path().join("zeros.xz");
    write_xz_zeros(&bomb, 480 << 20);
    let built = dir.path().join("bomb.built");
    run_text(
        Command::new("objcopy")
            .arg("--add-section")
            .arg(format!(".gnu_debugdata={}", bomb.display()))
            .arg(&plain)
            .arg(&built),
    );
    let (attacker, path) = run_as_nobody(&built, dir.path(), "bomb");
    let ran = session(dir.path(), &attacker, &["--max-symbol-memory", "64M"]);
    ran.assert_honest_exact_and_outputs_small();
    assert_eq!(
        ran.summary.count("symbols.refused_by_reason.minidebuginfo_too_large"),
        1,
        "{}",
        ran.stderr
    );
    // Before the cap it decompressed twice (vetting, then blazesym): 480 MiB at least.
    eprintln!("peak {} KiB", ran.peak_kib);
    assert!(ran.peak_kib < 256 << 10, "peak {} KiB: {}", ran.peak_kib, ran.stderr);
    offline_commands_take(&path);
}

/// `bytes` zeros compressed with xz into `path` (a few dozen KiB).
fn write_xz_zeros(path: &Path, bytes: usize) {
    use std::io::Write as _;
    let file = std::fs::File::create(path).expect("create");
    let mut encoder = xz2::write::XzEncoder::new(file, 1);
    let chunk = vec![0u8; 1 << 20];
    for _ in 0..bytes / chunk.len() {
        encoder.write_all(&chunk).expect("compress");
    }
    encoder.finish().expect("finish");
}
