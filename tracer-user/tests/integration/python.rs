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

use sframe_trace::bpf::Kernel;
use sframe_trace::procmaps::{MappingKind, executable_mappings};
use sframe_trace::python::{
    PythonImage,
    code::{CodeInfo, read_code},
    detect_file, merge,
};
use sframe_trace::registry::Catalog;
use sframe_trace::table::TableSet;
use tracer_common::trace::Sample;

use crate::support::{Running, privileged};

/// Samples of the traced program to judge.
const SAMPLES: usize = 300;

/// Start the script, trace it with the Python walk on until it has [`SAMPLES`] samples, and
/// return them, the interpreter found and the pid.
fn trace(python: &str, script: &str) -> (Vec<Sample>, PythonImage, u64, Running, BTreeMap<&'static str, u64>) {
    let child = Command::new(python)
        .args(["-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("starting {python}: {err}"));
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
        let config = crate::support::kernel_config(256, false);
        let mut kernel = Kernel::load(&config, &mut catalog.loader.tables).expect("load the eBPF program");
        kernel.set_process(pid, &mappings).expect("set the process");
        kernel
            .set_python(pid, &image.proc_info(bias))
            .expect("set the interpreter");
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
    (samples, image, bias, running, counts)
}

/// The Python functions of a sample, innermost first, each run in place of its
/// evaluation-loop frame; `None` for a native frame. Code objects are read from the process.
fn python_stack(
    sample: &Sample,
    image: &PythonImage,
    bias: u64,
    mem: &std::fs::File,
    names: &mut HashMap<u64, Option<CodeInfo>>,
) -> (Vec<Option<PyFrame>>, merge::Unmatched) {
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
            merge::Merged::Python(p) => {
                let code = names.entry(p.code).or_insert_with(|| {
                    read_code(&image.layout.code, p.code, &mut |a, b| mem.read_exact_at(b, a).is_ok()).ok()
                });
                Some(match code {
                    Some(c) => (c.qualname.clone(), c.line(&image.layout.code, p.code, p.instr)),
                    None => ("<unreadable>".to_string(), None),
                })
            }
        })
        .collect();
    (frames, unmatched)
}

/// A Python frame of a sample: its qualified name and line.
type PyFrame = (String, Option<i32>);

/// One program: its script (it prints `ready` once its mappings are complete, then spins) and
/// the Python stacks it can be sampled in, innermost first; a name ending in `+` stands for one
/// or more frames of it.
struct Program {
    name: &'static str,
    script: &'static str,
    shapes: &'static [&'static [&'static str]],
    /// The line a frame of the function of this name is on while it calls the Python frame
    /// above it (the line of the call in the script, which starts with an empty line 1).
    call_lines: &'static [(&'static str, i32)],
}

/// Recursion in Python calling Python (one evaluation-loop call for all of it).
const FIB: Program = Program {
    name: "fib",
    script: r#"
def fib_py_walk(n):
    return n if n < 2 else fib_py_walk(n - 1) + fib_py_walk(n - 2)
def spin_py_walk():
    print("ready", flush=True)
    while True:
        fib_py_walk(18)
spin_py_walk()
"#,
    shapes: &[
        &["fib_py_walk+", "spin_py_walk", "<module>"],
        &["spin_py_walk", "<module>"],
    ],
    call_lines: &[("fib_py_walk", 3), ("spin_py_walk", 7), ("<module>", 8)],
};

/// C calling back into Python: `sorted` calls its key, a lambda, which calls a function.
const SORTED: Program = Program {
    name: "sorted",
    script: r#"
def key_py_walk(x):
    s = 0
    for i in range(60):
        s += i
    return -x
def sort_py_walk():
    print("ready", flush=True)
    while True:
        sorted(range(2000), key=lambda x: key_py_walk(x))
sort_py_walk()
"#,
    shapes: &[
        &[
            "key_py_walk",
            "sort_py_walk.<locals>.<lambda>",
            "sort_py_walk",
            "<module>",
        ],
        &["sort_py_walk.<locals>.<lambda>", "sort_py_walk", "<module>"],
        &["sort_py_walk", "<module>"],
    ],
    call_lines: &[
        ("sort_py_walk.<locals>.<lambda>", 10),
        ("sort_py_walk", 10),
        ("<module>", 11),
    ],
};

/// A generator driven by a for loop (its frame is the generator's own, resumed).
const GENERATOR: Program = Program {
    name: "generator",
    script: r#"
def work_py_walk(i):
    s = 0
    for j in range(60):
        s += j * i
    return s
def gen_py_walk(n):
    for i in range(n):
        yield work_py_walk(i)
def consume_py_walk():
    print("ready", flush=True)
    while True:
        for v in gen_py_walk(1000):
            pass
consume_py_walk()
"#,
    shapes: &[
        &["work_py_walk", "gen_py_walk", "consume_py_walk", "<module>"],
        &["gen_py_walk", "consume_py_walk", "<module>"],
        &["consume_py_walk", "<module>"],
    ],
    call_lines: &[("gen_py_walk", 9), ("consume_py_walk", 13), ("<module>", 15)],
};

/// Methods of a class (qualified names).
const METHOD: Program = Program {
    name: "method",
    script: r#"
class Calc_py_walk:
    def step(self, i):
        s = 0
        for j in range(100):
            s += j * i
        return s
    def run(self):
        print("ready", flush=True)
        while True:
            self.step(3)
Calc_py_walk().run()
"#,
    shapes: &[
        &["Calc_py_walk.step", "Calc_py_walk.run", "<module>"],
        &["Calc_py_walk.run", "<module>"],
    ],
    call_lines: &[("Calc_py_walk.run", 11), ("<module>", 12)],
};

/// A second thread does the work while the main thread waits: the thread state is the
/// sampled thread's own, found by its native id.
const THREAD: Program = Program {
    name: "thread",
    script: r#"
import threading
def fib_py_walk(n):
    return n if n < 2 else fib_py_walk(n - 1) + fib_py_walk(n - 2)
def worker_py_walk():
    print("ready", flush=True)
    while True:
        fib_py_walk(18)
t = threading.Thread(target=worker_py_walk)
t.start()
t.join()
"#,
    shapes: &[
        &[
            "fib_py_walk+",
            "worker_py_walk",
            "Thread.run",
            "Thread._bootstrap_inner",
            "Thread._bootstrap",
        ],
        &[
            "worker_py_walk",
            "Thread.run",
            "Thread._bootstrap_inner",
            "Thread._bootstrap",
        ],
    ],
    call_lines: &[("fib_py_walk", 4), ("worker_py_walk", 8)],
};

/// How a sample's Python frames compare with a shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Exact,
    /// The innermost frames of the shape, the outer ones missing.
    Truncated,
    Wrong,
}

/// `py` against `shape` (see [`Program`]).
fn judge(py: &[&str], shape: &[&str]) -> Verdict {
    let mut at = 0;
    for (i, want) in shape.iter().enumerate() {
        let (name, many) = want.strip_suffix('+').map_or((*want, false), |n| (n, true));
        if at == py.len() {
            return if i == 0 { Verdict::Wrong } else { Verdict::Truncated };
        }
        if py[at] != name {
            return Verdict::Wrong;
        }
        at += 1;
        while many && at < py.len() && py[at] == name {
            at += 1;
        }
    }
    if at == py.len() { Verdict::Exact } else { Verdict::Wrong }
}

/// The interpreters the programs run on: Debian's 3.11 (a static interpreter), the default
/// `python3` on the path (on the image this suite is made on, pyenv's 3.11, `libpython3.11.so`),
/// and pyenv's 3.12 and 3.13 where pyenv (`pyenv root`) has them (skipped, loudly, where not).
fn interpreters(test: &str) -> Vec<String> {
    let mut out = vec!["/usr/bin/python3.11".to_string(), "python3".to_string()];
    let root = std::process::Command::new("pyenv")
        .arg("root")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| std::path::PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let versions: Vec<std::path::PathBuf> = root
        .and_then(|r| std::fs::read_dir(r.join("versions")).ok())
        .map(|dir| dir.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default();
    for minor in ["3.12", "3.13"] {
        let found = versions
            .iter()
            .filter(|v| {
                v.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{minor}.")))
            })
            .map(|v| v.join(format!("bin/python{minor}")))
            .find(|p| p.exists());
        match found {
            Some(path) => out.push(path.display().to_string()),
            None => crate::support::skipped(test, &format!("no pyenv python{minor} installed")),
        }
    }
    out
}

/// Run `program` on every interpreter and judge every sample with Python frames: none wrong,
/// at least 95 % exact, and enough of them.
fn check(test: &str, program: &Program) {
    let Some(_serial) = privileged(test) else {
        return;
    };
    for python in interpreters(test) {
        let (samples, image, bias, running, counts) = trace(&python, program.script);
        let mem = std::fs::File::open(format!("/proc/{}/mem", running.pid())).expect("open the process's memory");
        let mut names = HashMap::new();
        let (mut exact, mut truncated, mut wrong) = (0, 0, Vec::new());
        for sample in &samples {
            let (frames, unmatched) = python_stack(sample, &image, bias, &mem, &mut names);
            let frames: Vec<&PyFrame> = frames.iter().flatten().collect();
            let py: Vec<&str> = frames.iter().map(|(name, _)| name.as_str()).collect();
            if py.is_empty() {
                continue;
            }
            // Callers are on the line of their call.
            let off_line = frames.iter().skip(1).find(|(name, line)| {
                program
                    .call_lines
                    .iter()
                    .any(|(n, want)| n == name && *line != Some(*want))
            });
            if let Some(frame) = off_line {
                wrong.push(format!("{frame:?} not on its call's line in {frames:?}"));
                continue;
            }
            let best = program
                .shapes
                .iter()
                .map(|shape| judge(&py, shape))
                .min_by_key(|v| *v as u8)
                .expect("a shape");
            match best {
                Verdict::Exact if unmatched == merge::Unmatched::default() => exact += 1,
                Verdict::Exact | Verdict::Truncated => truncated += 1,
                Verdict::Wrong => wrong.push(format!("{py:?} {unmatched:?}")),
            }
        }
        drop(running);
        let judged = exact + truncated + wrong.len();
        eprintln!(
            "{} on {python} ({}.{}): {} samples, {judged} with Python frames: {exact} exact, {truncated} truncated, {} wrong; {counts:?}",
            program.name,
            image.major,
            image.minor,
            samples.len(),
            wrong.len()
        );
        assert!(
            wrong.is_empty(),
            "{} on {python}: wrong Python stacks: {wrong:#?}",
            program.name
        );
        assert!(
            judged * 10 >= SAMPLES * 9,
            "{} on {python}: only {judged} samples with Python frames",
            program.name
        );
        assert!(
            exact * 100 >= judged * 95,
            "{} on {python}: {exact} of {judged} exact",
            program.name
        );
    }
}

#[test]
fn python_recursive_fib() {
    check("python_recursive_fib", &FIB);
}

#[test]
fn python_sorted_key_lambda() {
    check("python_sorted_key_lambda", &SORTED);
}

#[test]
fn python_generator() {
    check("python_generator", &GENERATOR);
}

#[test]
fn python_class_method() {
    check("python_class_method", &METHOD);
}

#[test]
fn python_thread() {
    check("python_thread", &THREAD);
}
