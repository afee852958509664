//! CPython frames walked by the real eBPF program in a real interpreter (Debian's
//! `/usr/bin/python3.11`): the interpreter is found in the process's mappings through the
//! registry's open files, the kernel is told where it is, and every sample's Python frames
//! (code objects read back from `/proc/PID/mem`, merged into the native stack in place of the
//! evaluation-loop frames) are judged against the program's call structure. Needs root; under
//! `CI=true` it fails instead of skipping.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use sframe_trace::bpf::Kernel;
use sframe_trace::procmaps::{MappingKind, executable_mappings};
use sframe_trace::python::{detect_file, merge};
use sframe_trace::registry::Catalog;
use sframe_trace::tables::TableSet;
use tracer_common::sample::Sample;

use crate::support::Running;

pub mod programs;

use programs::{FIB, GENERATOR, METHOD, Program, PyFrame, SORTED, THREAD, Tally, interpreters};

/// Samples of the traced program to judge.
const SAMPLES: usize = 300;

/// What tracing a program gave: its samples, the version of its interpreter, the registry
/// that loaded it (which names its Python frames), the running program and the kernel's
/// counters.
struct Traced {
    samples: Vec<Sample>,
    version: (u8, u8),
    catalog: Catalog,
    running: Running,
    counts: BTreeMap<&'static str, u64>,
}

/// Start the script, trace it with the Python walk on until it has [`SAMPLES`] samples.
fn trace(python: &[String], script: &str) -> Traced {
    let child = programs::command(python)
        .args(["-c", script, "-"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("starting {python:?}: {err}"));
    let mut running = Running(child);
    let pid = running.pid();
    // Its mappings are complete once the script works (it says so).
    let stdout = running.0.stdout.take().expect("stdout");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let mut line = || lines.next().and_then(Result::ok).unwrap_or_default();
    assert_eq!(line(), "ready");
    assert!(line().starts_with("going "), "the script goes to work");
    let found = executable_mappings(pid).expect("read mappings");
    let version = found
        .iter()
        .find_map(|m| match &m.kind {
            MappingKind::File { file, .. } => detect_file(file).ok().flatten().map(|i| (i.major, i.minor)),
            _ => None,
        })
        .expect("the interpreter among the process's mappings");
    let mut catalog = Catalog::with_tables(TableSet::new());
    let mappings = catalog.add_process(pid, &found);
    let info = catalog.python_info(pid).expect("the registry finds the interpreter");
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let (samples, counts) = runtime.block_on(async {
        let config = crate::support::kernel_config(256, false);
        let mut kernel = Kernel::load(&config, &mut catalog.loader.tables).expect("load the eBPF program");
        kernel.set_process(pid, &mappings).expect("set the process");
        kernel.set_python(pid, &info).expect("set the interpreter");
        let mut events = kernel.events().expect("events");
        kernel.attach().expect("attach");
        let mut samples = Vec::new();
        // Until the program has enough samples (a busy machine gives it less CPU), within a
        // generous bound.
        let end = Instant::now() + Duration::from_secs(120);
        let mut own = 0;
        while own < SAMPLES {
            let Ok(Some(sample)) = tokio::time::timeout_at(end.into(), events.next()).await else {
                break;
            };
            own += usize::from(sample.tgid == pid);
            samples.push(*sample);
        }
        kernel.detach();
        while let Some(sample) = events.try_next() {
            samples.push(*sample);
        }
        let py = kernel.python_counts().expect("python counters");
        let mut counts: BTreeMap<&'static str, u64> = py.stops.iter().map(|&(s, n)| (s.name(), n)).collect();
        counts.insert("walks", py.walks);
        counts.insert("frames", py.frames);
        for (reason, n) in kernel.stop_reasons().expect("stop reasons") {
            if n > 0 {
                counts.insert(reason.name(), n);
            }
        }
        (samples, counts)
    });
    let samples = samples.into_iter().filter(|s| s.tgid == pid).collect();
    Traced {
        samples,
        version,
        catalog,
        running,
        counts,
    }
}

/// The Python frames of a sample, innermost first, merged and named by the registry as a
/// session does (code objects read from the running process); whether every run found its
/// evaluation-loop frame and every such frame its run.
fn python_stack(sample: &Sample, catalog: &Catalog) -> (Vec<PyFrame>, bool) {
    let user = &sample.user[..sample.num_user as usize];
    let native = merge::split(user);
    let lookup = |i: usize| if i == 0 { user[i] } else { user[i] - 1 };
    let before = catalog.runtimes.python.code.stats();
    let whole = sample.stop == tracer_common::walk::StopReason::Outermost as u32;
    let Some(merged) = catalog
        .runtimes
        .python
        .code
        .merge(sample.tgid, user, native, whole, lookup)
    else {
        return (Vec::new(), true);
    };
    let after = catalog.runtimes.python.code.stats();
    let complete =
        (after.eval_frames_without_run, after.runs_dropped) == (before.eval_frames_without_run, before.runs_dropped);
    let frames = merged
        .iter()
        .filter_map(|f| match f {
            merge::Merged::Native(_) => None,
            merge::Merged::Python(p) => {
                // None: left out by the sample's output bound (not for these programs).
                let frame = catalog.runtimes.python.code.frame(sample.tgid, *p)?;
                Some(match catalog.runtimes.python.code.function(frame.function) {
                    Some(function) => (function.qualname.into(), (frame.line != 0).then_some(frame.line as i32)),
                    None => (format!("[python {:#x}]", frame.code), None),
                })
            }
        })
        .collect();
    (frames, complete)
}

/// Run `program` on every interpreter and judge every sample with Python frames: none wrong,
/// at least 95 % exact, and enough of them.
fn check(test: &str, program: &Program) {
    for python in interpreters(test) {
        let traced = trace(&python, program.script);
        let python = python.join(" ");
        let mut tally = Tally::default();
        for sample in &traced.samples {
            let (frames, complete) = python_stack(sample, &traced.catalog);
            tally.judge(program, &frames, complete);
        }
        drop(traced.running);
        let (major, minor) = traced.version;
        let what = format!(
            "{} on {python} ({major}.{minor}), {} samples; {:?}",
            program.name,
            traced.samples.len(),
            traced.counts
        );
        tally.check(&what, SAMPLES * 9 / 10);
    }
}

#[test]
fn python_recursive_fib() {
    privileged_test!(paired, test);
    check(test, &FIB);
}

#[test]
fn python_sorted_key_lambda() {
    privileged_test!(paired, test);
    check(test, &SORTED);
}

#[test]
fn python_generator() {
    privileged_test!(paired, test);
    check(test, &GENERATOR);
}

#[test]
fn python_class_method() {
    privileged_test!(paired, test);
    check(test, &METHOD);
}

#[test]
fn python_thread() {
    privileged_test!(paired, test);
    check(test, &THREAD);
}
