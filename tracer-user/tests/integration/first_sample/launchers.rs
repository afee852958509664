//! A program started through a launcher that execs it: `setarch -R` (no address-space
//! randomization, so every run maps at the same addresses), `env`, `sh -c 'exec …'` and
//! `bash -c …`. The launcher lives a millisecond or two before its exec, mostly in the dynamic
//! loader, so that nearly all of its samples come before the tracer has loaded it, and its
//! exec's teardown is sampled with the launcher's stack at the call's entry. Every sample of
//! those processes, the launcher's and the program's (fixtures/first/brief.c), is judged
//! against the disassembly (stripped launchers included: their functions are delimited by the
//! calls into them and `_start` is their ELF entry): none wrong, at least 99 % exact.

use std::{
    collections::{BTreeMap, HashSet},
    path::Path,
    process::Command,
};

use super::brief::{WORK, brief_beside_a_whole_host_tracer, early_walks};
use super::pprof::{pprof_stacks, settle};
use super::tally::Tally;
use crate::oracle::Oracle;
use crate::support::Summary;

/// Runs through each launcher.
const RUNS: usize = 75;
/// Samples that must be exact, in percent (module docs).
const MIN_EXACT_PERCENT: u64 = 99;

/// Each launcher: its command name and the command that runs `exe` through it.
fn launchers(exe: &Path) -> Vec<(&'static str, Command)> {
    let exe_str = exe.to_str().expect("path");
    let mut setarch = Command::new("setarch");
    setarch.args([std::env::consts::ARCH, "-R"]).arg(exe).arg(WORK);
    let mut env = Command::new("env");
    env.args(["FIRST_SAMPLE=1"]).arg(exe).arg(WORK);
    let mut sh = Command::new("sh");
    sh.args(["-c", &format!("exec '{exe_str}' {WORK}")]);
    let mut bash = Command::new("bash");
    bash.args(["-c", &format!("'{exe_str}' {WORK}")]);
    vec![("setarch", setarch), ("env", env), ("sh", sh), ("bash", bash)]
}

#[test]
#[ignore = "judges the release tracer, as users run it system-wide; `cargo xtask test` builds it and runs this"]
fn programs_started_through_launchers_are_exact_from_the_first_sample() {
    privileged_test!();
    let dir = tempfile::tempdir().expect("tempdir");
    let (name, exe, out, tracer) = brief_beside_a_whole_host_tracer(dir.path());
    // The processes started here: each launcher's pid and command name (a launcher that forks
    // before its exec is followed by the program's name below).
    let mut started: Vec<(u32, &str)> = Vec::new();
    for round in 0..RUNS {
        for (comm, mut command) in launchers(&exe) {
            let mut child = command.spawn().unwrap_or_else(|e| panic!("run {comm}: {e}"));
            started.push((child.id(), comm));
            let status = child.wait().expect("wait for the launcher");
            assert!(status.success(), "{comm} {name} (round {round}): {status}");
        }
    }
    settle(tracer.pid());
    let stderr = tracer.interrupt();
    let summary = Summary::of(&stderr);
    let stacks = pprof_stacks(&out);
    let programs: HashSet<u32> = stacks.iter().filter(|s| s.comm == name).map(|s| s.pid).collect();
    let launcher_of = |pid: u32| started.iter().find(|(p, _)| *p == pid).map(|(_, comm)| *comm);
    let mut oracle = Oracle::default();
    let mut program = Tally::default();
    let mut launchers: BTreeMap<&str, Tally> = BTreeMap::new();
    for stack in &stacks {
        if stack.comm == name {
            program.add(&mut oracle, stack);
        } else if let Some(comm) = launcher_of(stack.pid).filter(|comm| *comm == stack.comm).or_else(|| {
            // A shell that forked the program instead of exec'ing it: the child's samples
            // before its exec.
            ["sh", "bash"]
                .into_iter()
                .find(|comm| programs.contains(&stack.pid) && *comm == stack.comm)
        }) {
            launchers.entry(comm).or_default().add(&mut oracle, stack);
        }
    }
    eprintln!(
        "{stderr}\n{name} run {RUNS} times through each of setarch -R, env, sh and bash; {}\nthe program: {}",
        early_walks(&summary),
        program.report(),
    );
    for (comm, tally) in &launchers {
        eprintln!("{comm}: {}", tally.report());
    }
    assert!(
        program.total() >= RUNS as u64,
        "too few samples of {name}: {}",
        program.total()
    );
    assert!(
        launchers.values().map(Tally::total).sum::<u64>() > 0,
        "no sample of a launcher: their milliseconds before the exec were not tested"
    );
    let mut all = program;
    for tally in launchers.into_values() {
        all.merge(tally);
    }
    eprintln!("all: {}", all.report());
    all.assert_exact(MIN_EXACT_PERCENT);
}
