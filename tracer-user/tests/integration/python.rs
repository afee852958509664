//! CPython frames walked by the real eBPF program in a real interpreter (Debian's
//! `/usr/bin/python3.11`): the interpreter is found in the process's mappings through the
//! registry's open files, the kernel is told where it is, and every sample's Python frames
//! (code objects read back from `/proc/PID/mem`, merged into the native stack in place of the
//! evaluation-loop frames) are judged against the program's call structure. Needs root; under
//! `CI=true` it fails instead of skipping.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::FileExt as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sframe_trace::bpf::{Kernel, KernelConfig};
use sframe_trace::procmaps::{MappingKind, executable_mappings};
use sframe_trace::python::{PythonImage, code::read_code, detect_file, merge};
use sframe_trace::table::TableSet;
use sframe_trace::trace::objects::Catalog;
use tracer_common::trace::Sample;

use crate::support::{Running, privileged};

/// Recursion in Python calling Python (one evaluation-loop call for all of it), under a
/// function with a name no other process has.
const FIB: &str = r#"
def fib_py_walk(n):
    return n if n < 2 else fib_py_walk(n - 1) + fib_py_walk(n - 2)
def spin_py_walk():
    print("ready", flush=True)
    while True:
        fib_py_walk(18)
spin_py_walk()
"#;

/// Start the script, trace it for two seconds with the Python walk on, and return its samples,
/// the interpreter found and the pid.
fn trace(script: &str) -> (Vec<Sample>, PythonImage, u64, Running, BTreeMap<&'static str, u64>) {
    let child = Command::new("/usr/bin/python3.11")
        .args(["-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("/usr/bin/python3.11 (cargo xtask setup installs it)");
    let mut running = Running(child);
    let pid = running.pid();
    // Its mappings are complete once the script runs (it says so).
    let mut line = String::new();
    let stdout = running.0.stdout.take().expect("stdout");
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).expect("read the script's output");
    assert_eq!(line.trim(), "ready");
    let found = executable_mappings(pid).expect("read mappings");
    let (image, bias) = found
        .iter()
        .find_map(|m| match &m.kind {
            MappingKind::File { file, bias, .. } => detect_file(file).ok().flatten().map(|i| (i, *bias)),
            _ => None,
        })
        .expect("the interpreter among the process's mappings");
    let mut catalog = Catalog::with_tables(TableSet::new());
    let mappings = catalog.add_process(pid, &found);
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let (samples, counts) = runtime.block_on(async {
        let config = KernelConfig {
            frequency: 499,
            max_depth: 256,
            kernel_stacks: false,
            all_processes: false,
            max_processes: 4,
            table_capacity: None,
            events: sframe_trace::event::EventSet::default(),
            ring_buffer_bytes: sframe_trace::bpf::DEFAULT_RING_BUFFER_BYTES,
        };
        let mut kernel = Kernel::load(&config, &mut catalog.tables).expect("load the eBPF program");
        kernel.set_process(pid, &mappings).expect("set the process");
        kernel
            .set_python(pid, &image.proc_info(bias))
            .expect("set the interpreter");
        let mut events = kernel.events().expect("events");
        kernel.attach().expect("attach");
        let mut samples = Vec::new();
        let end = Instant::now() + Duration::from_secs(2);
        while let Ok(Some(sample)) = tokio::time::timeout_at(end.into(), events.next()).await {
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
    (samples, image, bias, running, counts)
}

/// The Python functions of a sample, innermost first, each run in place of its
/// evaluation-loop frame; `None` for a native frame. Code objects are read from the process.
fn python_stack(
    sample: &Sample,
    image: &PythonImage,
    bias: u64,
    mem: &std::fs::File,
    names: &mut HashMap<u64, String>,
) -> (Vec<Option<String>>, merge::Unmatched) {
    let info = image.proc_info(bias);
    let user = &sample.user[..sample.num_user as usize];
    let native = merge::split(user);
    let runs = merge::runs(&user[native..]);
    let is_eval = |i: usize| info.in_eval(if i == 0 { user[i] } else { user[i] - 1 });
    let (stack, unmatched) = merge::merge(native, is_eval, &runs);
    let frames = stack
        .iter()
        .map(|f| match f {
            merge::Merged::Native(_) => None,
            merge::Merged::Python(p) => Some(
                names
                    .entry(p.code)
                    .or_insert_with(|| {
                        read_code(&image.layout.code, p.code, &mut |a, b| mem.read_exact_at(b, a).is_ok())
                            .map_or_else(|e| format!("<unreadable: {e}>"), |c| c.qualname)
                    })
                    .clone(),
            ),
        })
        .collect();
    (frames, unmatched)
}

/// Recursive `fib` on 3.11: the Python frames of every sample with any are `fib_py_walk`
/// (one or more), `spin_py_walk`, `<module>`, outermost last, in place of the evaluation
/// loop's frame; none are wrong and at least 95 % are exact (the rest: samples taken while
/// the chain was being changed, counted as truncated when a prefix of the structure).
#[test]
fn recursive_fib_on_python3_11() {
    let Some(_serial) = privileged("recursive_fib_on_python3_11") else {
        return;
    };
    let (samples, image, bias, running, counts) = trace(FIB);
    eprintln!("python counters: {counts:?}; {} samples", samples.len());
    let mem = std::fs::File::open(format!("/proc/{}/mem", running.pid())).expect("open the process's memory");
    let mut names = HashMap::new();
    let (mut exact, mut truncated, mut wrong) = (0, 0, Vec::new());
    for sample in &samples {
        let (frames, unmatched) = python_stack(sample, &image, bias, &mem, &mut names);
        let py: Vec<&str> = frames.iter().flatten().map(String::as_str).collect();
        if py.is_empty() {
            continue;
        }
        let fibs = py.iter().take_while(|&&f| f == "fib_py_walk").count();
        let rest = &py[fibs..];
        if fibs >= 1 && rest == ["spin_py_walk", "<module>"] && unmatched == merge::Unmatched::default() {
            exact += 1;
        } else if py
            .iter()
            .all(|f| ["fib_py_walk", "spin_py_walk", "<module>"].contains(f))
            && ["spin_py_walk", "<module>"].starts_with(rest)
        {
            truncated += 1;
        } else {
            wrong.push(format!("{py:?} {unmatched:?}"));
        }
    }
    drop(running);
    let judged = exact + truncated + wrong.len();
    eprintln!(
        "{judged} samples with Python frames: {exact} exact, {truncated} truncated, {} wrong",
        wrong.len()
    );
    assert!(wrong.is_empty(), "wrong Python stacks: {wrong:#?}");
    assert!(
        judged >= 100,
        "only {judged} samples with Python frames of {}",
        samples.len()
    );
    assert!(exact * 100 >= judged * 95, "{exact} of {judged} exact");
}
