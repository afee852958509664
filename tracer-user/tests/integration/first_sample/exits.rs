//! Samples inside `exit_group` and `execve` after the kernel took the address space away carry
//! the stack the thread had entering the call (fixtures/first/ending.c), system-wide, with
//! `--pid` and for a launched command.

use std::{
    io::Write as _,
    process::{Command, Stdio},
};

use super::pprof::{Traced, pprof_stacks, settle};
use crate::oracle::Oracle;
use crate::support::{SUMMARY_JSON, Summary, Tracer, compile_fixture, own_name};

/// Exits of the program in [`samples_inside_exit_and_exec_carry_the_stack_of_the_call`], with
/// and without threads.
const EXITS: usize = 3;
/// Execs of its exec run (its last image then exits too).
const EXECS: &str = "3";

/// The verdicts on the samples of the program (command name `name`) in some profiles.
#[derive(Default)]
struct Ending {
    /// Its samples.
    total: u64,
    /// Its samples of a PC in no known object (short, never inside the calls).
    unknown: u64,
    /// Its samples taken while its exits, and its execs, freed its memory.
    in_exit: u64,
    in_exec: u64,
    /// Wrong stacks, and samples inside the calls that are not the whole stack of the call.
    wrong: Vec<String>,
    inside_not_exact: Vec<String>,
}

impl Ending {
    /// Judge the program's samples in `stacks`.
    fn judge(&mut self, oracle: &mut Oracle, stacks: &[Traced], name: &str) {
        for stack in stacks.iter().filter(|s| s.comm == name) {
            self.total += stack.count;
            let frames = &stack.frames;
            let inside = stack.kernel.iter().any(|f| f == "exit_mmap");
            // A frame in no known object: the sampled PC of a process never loaded (short, but
            // never inside the calls); a caller there would have been invented (wrong).
            if let Some(at) = frames.iter().position(|f| f.object.as_os_str().is_empty()) {
                let what = format!(
                    "{} x frame {at} in no known object over {:?}",
                    stack.count, stack.kernel
                );
                if at > 0 || frames.len() > 1 {
                    self.wrong.push(what);
                } else if inside {
                    self.inside_not_exact.push(what);
                } else {
                    self.unknown += stack.count;
                }
                continue;
            }
            if let Err(why) = oracle.edges(frames) {
                self.wrong
                    .push(format!("{} x {why}: {:?}", stack.count, oracle.names(frames)));
                continue;
            }
            if !inside {
                continue;
            }
            let names = oracle.names(frames);
            if stack.kernel.iter().any(|f| f.contains("execve")) {
                self.in_exec += stack.count;
            } else {
                self.in_exit += stack.count;
            }
            // The thread that called exit or exec, from `ending_leave` down to `_start`; or one
            // the exit killed, from `ending_spin` down to where `clone3` started it (its
            // outermost frame, as the tracer must say).
            let caller = names.iter().position(|n| n == "ending_leave");
            let killed = names.first().is_some_and(|n| n == "ending_spin")
                && names.last().is_some_and(|n| n == "clone3")
                && stack.truncated.is_none();
            match oracle.judge(frames) {
                Ok(()) if caller.is_some_and(|at| names[..at].iter().all(|n| !n.starts_with("ending_"))) => {}
                Err(_) if killed => {}
                verdict => self.inside_not_exact.push(format!(
                    "{} x {verdict:?} {:?}: {names:?} over {:?}",
                    stack.count, stack.truncated, stack.kernel
                )),
            }
        }
    }

    /// None wrong, every sample inside the calls whole, and at least `exits` and `execs` of
    /// them.
    fn assert_whole(&self, exits: u64, execs: u64) {
        assert!(self.wrong.is_empty(), "wrong stacks:\n{}", self.wrong.join("\n"));
        assert!(
            self.inside_not_exact.is_empty(),
            "samples inside the calls without the call's whole stack:\n{}",
            self.inside_not_exact.join("\n")
        );
        assert!(
            self.in_exit >= exits && self.in_exec >= execs,
            "too few samples while the memory was freed: {} in exits, {} in execs",
            self.in_exit,
            self.in_exec
        );
    }
}

/// Inside `exit_group` and `execve`, once the kernel has taken the address space away (it
/// frees the memory in `exit_mmap`), a sample has the registers of the call and no stack:
/// fixtures/first/ending.c touches 256 MiB a few calls deep, then exits or execs itself from
/// there, so that about a tenth of its samples are taken while that memory is freed; in some
/// runs eight threads spin while it exits, and the last thread out (often one the exit killed)
/// frees it. Traced system-wide at 999 Hz: every one of those samples must carry the stack the
/// thread had entering the call (or taking the signal that killed it), exact down to `_start`
/// or the thread's start (judged against the disassembly: the call made from `ending_leave`,
/// the spin of `ending_spin`), and no sample of the program may be wrong.
#[test]
#[ignore = "judges the release tracer, as users run it system-wide; `cargo xtask test` builds it and runs this"]
fn samples_inside_exit_and_exec_carry_the_stack_of_the_call() {
    privileged_test!();
    let dir = tempfile::tempdir().expect("tempdir");
    let name = own_name(dir.path(), "ending");
    let exe = compile_fixture("first/ending", &dir.path().join(&name), &[]);
    let out = dir.path().join("samples.pb.gz");
    let out_arg = out.to_str().expect("path");
    let args = ["-a", "-F", "999", "-f", "pprof", "-o", out_arg];
    let tracer = Tracer::start(&[&SUMMARY_JSON[..], &args[..]].concat());
    let runs = std::iter::repeat_n(vec!["exit"], EXITS)
        .chain(std::iter::repeat_n(vec!["threads"], EXITS))
        .chain([vec!["exec", EXECS]]);
    for run in runs {
        let status = Command::new(&exe).args(&run).status().expect("run the program");
        assert!(status.success(), "{name} {run:?}: {status}");
    }
    settle(tracer.pid());
    let stderr = tracer.interrupt();
    let summary = Summary::of(&stderr);
    let mut ending = Ending::default();
    ending.judge(&mut Oracle::default(), &pprof_stacks(&out), &name);
    eprintln!(
        "{stderr}\n{name}: {} samples ({} of a PC in no known object); {} while its exits freed its memory, {} while \
         its execs did; {} stacks kept at exit and exec, given to {} samples",
        ending.total,
        ending.unknown,
        ending.in_exit,
        ending.in_exec,
        summary.count("call_entries.kept"),
        summary.count("call_entries.given"),
    );
    // Each teardown of 256 MiB takes tens of milliseconds.
    ending.assert_whole(10, 10);
    assert!(summary.count("call_entries.given") >= ending.in_exit + ending.in_exec);
}

/// The same with `--pid` and a launched command, where the tracer follows the process alone:
/// on Linux 6.16+ the kernel tells a process's exit before its last thread lets go of the
/// memory, and the samples while it frees it are still the process's (the kernel keeps the
/// exiting task, `tracer_common::notice::MAP_DYING`), so they are taken, whole; and the
/// session waits for them (a launched command until it is reaped).
#[test]
#[ignore = "judges the release tracer, as users run it; `cargo xtask test` builds it and runs this"]
fn samples_inside_exit_and_exec_carry_the_stack_with_pid_and_launched() {
    privileged_test!();
    let dir = tempfile::tempdir().expect("tempdir");
    let name = own_name(dir.path(), "ending");
    let exe = compile_fixture("first/ending", &dir.path().join(&name), &[]);
    let mut oracle = Oracle::default();
    let mut ending = Ending::default();
    for (i, run) in [vec!["exit"], vec!["threads"], vec!["exec", EXECS]].iter().enumerate() {
        let out = dir.path().join(format!("launched-{i}.pb.gz"));
        let mut args = vec!["-F", "999", "-f", "pprof", "-o", out.to_str().expect("path"), "--"];
        args.push(exe.to_str().expect("path"));
        args.extend(run);
        let stderr = Tracer::start(&args).finish();
        eprintln!("{name} {run:?} launched:\n{stderr}");
        ending.judge(&mut oracle, &pprof_stacks(&out), &name);
    }
    // `--pid` of a shell that execs the program once the tracer samples (a line on its stdin).
    for run in ["exit", "threads"] {
        let out = dir.path().join(format!("pid-{run}.pb.gz"));
        let mut shell = Command::new("sh")
            .args(["-c", &format!("read go && exec '{}' {run}", exe.display())])
            .stdin(Stdio::piped())
            .spawn()
            .expect("start the shell");
        let pid = shell.id().to_string();
        let tracer = Tracer::start(&[
            "--pid",
            &pid,
            "-F",
            "999",
            "-f",
            "pprof",
            "-o",
            out.to_str().expect("path"),
        ]);
        writeln!(shell.stdin.take().expect("stdin"), "go").expect("tell the shell to go on");
        let status = shell.wait().expect("wait for the program");
        assert!(status.success(), "{name} {run}: {status}");
        let stderr = tracer.finish();
        eprintln!("{name} {run} with --pid:\n{stderr}");
        ending.judge(&mut oracle, &pprof_stacks(&out), &name);
    }
    eprintln!(
        "{name}: {} samples ({} of a PC in no known object); {} while its exits freed its memory, {} while its execs \
         did",
        ending.total, ending.unknown, ending.in_exit, ending.in_exec,
    );
    ending.assert_whole(10, 5);
}
