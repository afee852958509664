//! Hardening: the tracer under what production hosts do to it (fixtures/hardening). Each test
//! asserts that the tracer survives (exit status 0, a summary), that none of the samples it
//! keeps has a wrong stack (judged against the call chains the fixtures are written with),
//! that its memory and process map stay bounded, and that what it loses is counted.
//! `SFRAME_TRACE_HARDENING_LONG=1` (`cargo xtask test --long`) makes the storms last 30 s.
//!
//! Submodules: `storm` (fork/exec storms, processes killed mid-walk), `reuse` (dlopen/dlclose
//! churn, pid reuse, a program replaced while traced), `load` (10 kHz on every CPU, maps and
//! ring buffer far too small), `hostile` (corrupted ELF files that processes run from), `files`
//! (FIFOs, symlinks and fake identities behind mapped paths), `reads` (bounded reads,
//! non-UTF-8 names, one open per object), `shrink` (a library emptied by its owner while
//! traced), `soak` (a system-wide tracer exporting OTLP while
//! processes and files come and go: memory and open files stay flat; 30 minutes with
//! [`LONG_VAR`]), `watch` (the tracer's memory and open files, read from outside),
//! `footprint` (the `/proc` readers `watch` and the bench share).

mod files;
pub(crate) mod footprint;
mod hostile;
mod load;
mod reads;
mod reuse;
mod shrink;
mod soak;
mod storm;
mod watch;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use crate::support::own_name;
pub(crate) use footprint::status_kib;

/// Set to run the long variants.
const LONG_VAR: &str = "SFRAME_TRACE_HARDENING_LONG";

/// The sample ring buffer of the tests that judge stacks: room for many seconds of samples, so
/// that a tracer starved of CPU by a busy machine catches up instead of losing what is judged.
const ROOMY: [&str; 2] = ["--ring-buffer-size", "128M"];

/// How long a storm lasts: 5 s, or 30 s with [`LONG_VAR`].
fn storm_duration() -> Duration {
    if std::env::var_os(LONG_VAR).is_some_and(|v| v != "0") {
        Duration::from_secs(30)
    } else {
        Duration::from_secs(5)
    }
}

/// Compile `fixtures/hardening/SOURCE.c` into `dir/OUT`, without frame pointers and with
/// SFrame, calls kept calls, with `extra` flags.
fn compile(dir: &Path, source: &str, out: &str, extra: &[&str]) -> PathBuf {
    crate::support::compile_fixture(&format!("hardening/{source}"), &dir.join(out), extra)
}

/// `first` and `second`: fixtures/hardening/chain.c twice, not position-independent, so that
/// their code is at the same addresses and a frame resolved through the other's mappings
/// shows as a foreign name. Their files (and so their command names) are `first-TAG` and
/// `second-TAG`, names no other program uses (see `own_name`).
pub(crate) fn chain_programs(dir: &Path) -> (PathBuf, PathBuf) {
    (
        compile(dir, "chain", &own_name(dir, "first"), &["-no-pie"]),
        compile(dir, "chain", &own_name(dir, "second"), &["-no-pie", "-DSECOND"]),
    )
}

/// The command name of a program started from `path`.
fn comm(path: &Path) -> String {
    let name = path.file_name().expect("a file name").to_string_lossy();
    name.chars().take(15).collect()
}

/// The call chain of `first` or `second` (`prefix`) with `depth` levels of recursion, from
/// `_start`.
pub(crate) fn chain_of(prefix: &str, depth: usize) -> Vec<String> {
    let mut chain: Vec<String> = ["_start", "__libc_start_main", "__libc_start_call_main", "main"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    chain.push(format!("{prefix}_outer"));
    chain.extend(std::iter::repeat_n(format!("{prefix}_middle"), depth));
    chain.push(format!("{prefix}_leaf"));
    chain
}

/// The verdict on one sample (shared with the Python tests: `support/judge.rs`), and `judge`:
/// `frames` (outermost first) against `chain`.
pub(crate) use crate::support::judge::{Verdict, against_chain as judge};

/// One line of folded output: command name, user frames outermost first (glibc's
/// `__libc_start_main_impl` named as in the chains), count. Runs take no kernel stacks.
pub(crate) struct Folded {
    pub(crate) comm: String,
    pub(crate) frames: Vec<String>,
    pub(crate) count: u64,
}

/// The lines of a folded file; every line must parse (the output is complete). The
/// `[truncated: REASON]` frame a cut stack starts with is an annotation, left out: a cut stack
/// is judged by its frames.
pub(crate) fn read_folded(path: &Path) -> Vec<Folded> {
    let text = std::fs::read_to_string(path).expect("read the folded output");
    text.lines()
        .map(|line| {
            let (stack, count) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("not a folded line: {line:?}"));
            let mut frames = stack
                .split(';')
                .enumerate()
                .filter(|(i, f)| *i != 1 || !(f.starts_with("[truncated: ") && f.ends_with(']')))
                .map(|(_, f)| f.replace("__libc_start_main_impl", "__libc_start_main"));
            Folded {
                comm: frames.next().unwrap_or_default(),
                frames: frames.collect(),
                count: count
                    .parse()
                    .unwrap_or_else(|_| panic!("not a count in folded line {line:?}")),
            }
        })
        .collect()
}

/// Samples by verdict, and the wrong stacks themselves.
#[derive(Debug, Default)]
pub(crate) struct Verdicts {
    counts: BTreeMap<Verdict, u64>,
    wrong: Vec<String>,
}

impl Verdicts {
    /// Judge the lines `chain_for` gives a chain for (by command name and frames).
    pub(crate) fn of(lines: &[Folded], chain_for: impl Fn(&Folded) -> Option<Vec<String>>) -> Verdicts {
        let mut verdicts = Verdicts::default();
        for line in lines {
            let Some(chain) = chain_for(line) else { continue };
            let frames: Vec<&str> = line.frames.iter().map(String::as_str).collect();
            let verdict = judge(&frames, &chain);
            *verdicts.counts.entry(verdict).or_default() += line.count;
            if verdict == Verdict::Wrong {
                verdicts
                    .wrong
                    .push(format!("{};{} {}", line.comm, line.frames.join(";"), line.count));
            }
        }
        verdicts
    }

    pub(crate) fn get(&self, verdict: Verdict) -> u64 {
        self.counts.get(&verdict).copied().unwrap_or(0)
    }

    pub(crate) fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    /// None wrong, and at least `floor` judged.
    pub(crate) fn assert_sound(&self, what: &str, floor: u64) {
        eprintln!(
            "{what}: {} samples judged, {} exact, {} truncated, {} wrong",
            self.total(),
            self.get(Verdict::Exact),
            self.get(Verdict::Truncated),
            self.get(Verdict::Wrong)
        );
        assert!(
            self.wrong.is_empty(),
            "{what}: wrong stacks:\n{}",
            self.wrong.join("\n")
        );
        assert!(self.total() >= floor, "{what}: only {} samples judged", self.total());
    }
}

/// The chain for stacks of the programs `first` and `second` (as [`chain_programs`] built
/// them) with `depth` levels, by command name, for their lines in their own code (a frame
/// named `first_*` or `second_*`). Not judged: the lines of every other program (a system-wide
/// trace has them, and their function names can look like ours: GCC's `cc1` has
/// `first_commutative_argument`), and our programs' samples outside their chain (the dynamic
/// loader before `main`, `exit`; samples of a process gone before its mappings were read,
/// which cannot be symbolized).
pub(crate) fn chain_by_comm(programs: &(PathBuf, PathBuf), depth: usize) -> impl Fn(&Folded) -> Option<Vec<String>> {
    let (first, second) = (comm(&programs.0), comm(&programs.1));
    move |line| {
        let in_chain = line
            .frames
            .iter()
            .any(|f| f.starts_with("first_") || f.starts_with("second_"));
        if !in_chain {
            return None;
        }
        // A frame of one program in the other's stack is wrong: judge against the comm's chain.
        if line.comm == first {
            Some(chain_of("first", depth))
        } else if line.comm == second {
            Some(chain_of("second", depth))
        } else {
            None
        }
    }
}

/// The processes the tracer counted at its start ("every process (N now)").
fn processes_at_start(stderr: &[String]) -> u64 {
    stderr
        .iter()
        .find_map(|l| l.split("every process (").nth(1)?.split(' ').next()?.parse().ok())
        .expect("process count at start")
}

/// A free pid far behind the last one handed out (the kernel hands them out in order), for
/// clone3's set_tid.
fn free_pid() -> u32 {
    let read = |p: &str| -> u32 {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(|| panic!("read {p}"))
    };
    let (max, last) = (read("/proc/sys/kernel/pid_max"), read("/proc/sys/kernel/ns_last_pid"));
    // Pids wrap from pid_max back to 300.
    let range = max - 300;
    (max / 4..max / 2)
        .step_by(97)
        .map(|back| 300 + (last.saturating_sub(300) + range - back % range) % range)
        .find(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        .expect("a free pid")
}
