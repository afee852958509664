//! Samples inside `exit_group` and `execve` after the kernel took the address space away carry
//! the stack the thread had entering the call (fixtures/first/ending.c).

use std::process::Command;

use super::pprof::{pprof_stacks, settle};
use crate::oracle::Oracle;
use crate::support::{SUMMARY_JSON, Summary, Tracer, compile_fixture, own_name};

/// Exits of the program in [`samples_inside_exit_and_exec_carry_the_stack_of_the_call`], with
/// and without threads.
const EXITS: usize = 3;
/// Execs of its exec run (its last image then exits too).
const EXECS: &str = "3";

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
    let mut oracle = Oracle::default();
    let (mut total, mut wrong, mut unknown) = (0u64, Vec::new(), 0u64);
    // Samples while the memory was freed, by the call they were in, and those not exact.
    let (mut in_exit, mut in_exec, mut inside_not_exact) = (0u64, 0u64, Vec::new());
    for stack in pprof_stacks(&out) {
        if stack.comm != name {
            continue;
        }
        total += stack.count;
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
                wrong.push(what);
            } else if inside {
                inside_not_exact.push(what);
            } else {
                unknown += stack.count;
            }
            continue;
        }
        if let Err(why) = oracle.edges(frames) {
            wrong.push(format!("{} x {why}: {:?}", stack.count, oracle.names(frames)));
            continue;
        }
        if !inside {
            continue;
        }
        let names = oracle.names(frames);
        let exec = stack.kernel.iter().any(|f| f.contains("execve"));
        if exec {
            in_exec += stack.count;
        } else {
            in_exit += stack.count;
        }
        // The thread that called exit or exec, from `ending_leave` down to `_start`; or one
        // the exit killed, from `ending_spin` down to where `clone3` started it (its outermost
        // frame, as the tracer must say).
        let caller = names.iter().position(|n| n == "ending_leave");
        let killed = names.first().is_some_and(|n| n == "ending_spin")
            && names.last().is_some_and(|n| n == "clone3")
            && stack.truncated.is_none();
        match oracle.judge(frames) {
            Ok(()) if caller.is_some_and(|at| names[..at].iter().all(|n| !n.starts_with("ending_"))) => {}
            Err(_) if killed => {}
            verdict => inside_not_exact.push(format!(
                "{} x {verdict:?} {:?}: {names:?} over {:?}",
                stack.count, stack.truncated, stack.kernel
            )),
        }
    }
    eprintln!(
        "{stderr}\n{name}: {total} samples ({unknown} of a PC in no known object); {in_exit} while its exits \
         freed its memory, {in_exec} while its execs did; {} stacks kept at exit and exec, given to {} samples",
        summary.count("call_entries.kept"),
        summary.count("call_entries.given"),
    );
    assert!(wrong.is_empty(), "wrong stacks:\n{}", wrong.join("\n"));
    assert!(
        inside_not_exact.is_empty(),
        "samples inside the calls without the call's whole stack:\n{}",
        inside_not_exact.join("\n")
    );
    // Each teardown of 256 MiB takes tens of milliseconds.
    assert!(
        in_exit >= 10 && in_exec >= 10,
        "too few samples while the memory was freed: {in_exit} in exits, {in_exec} in execs"
    );
    assert!(summary.count("call_entries.given") >= in_exit + in_exec);
}
