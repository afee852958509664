//! The Python programs the Python tests trace, the interpreters they run on, and how a
//! sample's Python frames are judged against a program's call structure (exact, truncated,
//! wrong), as the native tests judge native frames.
//!
//! Every program starts with the same prologue: `ready()` prints `ready`, waits for a line
//! on stdin if `PY_WALK_WAIT` is set (the tracer is started meanwhile), then prints
//! `going NAME PID UNIX_NS` (NAME the script's first argument), after which the program
//! works until it has used `PY_WALK_CPU` seconds of CPU (for ever without it), and prints
//! `done PID UNIX_NS` at the end of the script. Samples taken before `going` (interpreter
//! start-up, definitions, `ready` itself) or after `done` (the interpreter ending) are not
//! judged.

use std::collections::HashMap;

/// The prologue every script starts with (its lines are counted in the scripts' lines).
macro_rules! prologue {
    () => {
        r#"import os, sys, time; NS = getattr(time, "time_ns", lambda: int(time.time() * 1e9))
def ready():
    print("ready", flush=True)
    if os.environ.get("PY_WALK_WAIT"): sys.stdin.readline()
    global END; END = time.process_time() + float(os.environ.get("PY_WALK_CPU", "inf"))
    print("going", sys.argv[1] if len(sys.argv) > 1 else "-", os.getpid(), NS(), flush=True)
"#
    };
}

/// The line every script ends with: when its work is done (samples after it are the
/// interpreter ending, not the program).
macro_rules! epilogue {
    () => {
        "print(\"done\", os.getpid(), NS(), flush=True)\n"
    };
}

/// One program: its script and the Python stacks it can be sampled in, innermost first; a
/// name ending in `+` stands for one or more frames of it, and a first `*` for any frames
/// (the standard library's, which the program does not choose).
pub struct Program {
    pub name: &'static str,
    pub script: &'static str,
    pub shapes: &'static [&'static [&'static str]],
    /// A function and the text of the call it makes to the Python frame above it: a frame
    /// of that function with a frame above it is on the line of that call (the first line
    /// holding the text, definitions aside).
    pub calls: &'static [(&'static str, &'static str)],
}

/// Recursion in Python calling Python (one evaluation-loop call for all of it).
pub const FIB: Program = Program {
    name: "fib",
    script: concat!(
        prologue!(),
        r#"def fib_py_walk(n):
    return n if n < 2 else fib_py_walk(n - 1) + fib_py_walk(n - 2)
def spin_py_walk():
    ready()
    while time.process_time() < END:
        fib_py_walk(18)
spin_py_walk()
"#,
        epilogue!()
    ),
    shapes: &[
        &["fib_py_walk+", "spin_py_walk", "<module>"],
        &["spin_py_walk", "<module>"],
    ],
    calls: &[
        ("fib_py_walk", "fib_py_walk(n - 1)"),
        ("spin_py_walk", "fib_py_walk(18)"),
        ("<module>", "spin_py_walk()"),
    ],
};

/// C calling back into Python: `sorted` calls its key, a lambda, which calls a function.
pub const SORTED: Program = Program {
    name: "sorted",
    script: concat!(
        prologue!(),
        r#"def key_py_walk(x):
    s = 0
    for i in range(60):
        s += i
    return -x
def sort_py_walk():
    ready()
    while time.process_time() < END:
        sorted(range(2000), key=lambda x: key_py_walk(x))
sort_py_walk()
"#,
        epilogue!()
    ),
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
    calls: &[
        ("sort_py_walk.<locals>.<lambda>", "sorted(range(2000)"),
        ("sort_py_walk", "sorted(range(2000)"),
        ("<module>", "sort_py_walk()"),
    ],
};

/// A generator driven by a for loop (its frame is the generator's own, resumed).
pub const GENERATOR: Program = Program {
    name: "generator",
    script: concat!(
        prologue!(),
        r#"def work_py_walk(i):
    s = 0
    for j in range(60):
        s += j * i
    return s
def gen_py_walk(n):
    for i in range(n):
        yield work_py_walk(i)
def consume_py_walk():
    ready()
    while time.process_time() < END:
        for v in gen_py_walk(1000):
            pass
consume_py_walk()
"#,
        epilogue!()
    ),
    shapes: &[
        &["work_py_walk", "gen_py_walk", "consume_py_walk", "<module>"],
        &["gen_py_walk", "consume_py_walk", "<module>"],
        &["consume_py_walk", "<module>"],
    ],
    calls: &[
        ("gen_py_walk", "yield work_py_walk(i)"),
        ("consume_py_walk", "for v in gen_py_walk(1000)"),
        ("<module>", "consume_py_walk()"),
    ],
};

/// Methods of a class (qualified names).
pub const METHOD: Program = Program {
    name: "method",
    script: concat!(
        prologue!(),
        r#"class Calc_py_walk:
    def step(self, i):
        s = 0
        for j in range(100):
            s += j * i
        return s
    def run(self):
        ready()
        while time.process_time() < END:
            self.step(3)
Calc_py_walk().run()
"#,
        epilogue!()
    ),
    shapes: &[
        &["Calc_py_walk.step", "Calc_py_walk.run", "<module>"],
        &["Calc_py_walk.run", "<module>"],
    ],
    calls: &[
        ("Calc_py_walk.run", "self.step(3)"),
        ("<module>", "Calc_py_walk().run()"),
    ],
};

/// A second thread does the work while the main thread waits: the thread state is the
/// sampled thread's own, found by its native id.
pub const THREAD: Program = Program {
    name: "thread",
    script: concat!(
        prologue!(),
        r#"import threading
def fib_py_walk(n):
    return n if n < 2 else fib_py_walk(n - 1) + fib_py_walk(n - 2)
def worker_py_walk():
    ready()
    while time.process_time() < END:
        fib_py_walk(18)
t = threading.Thread(target=worker_py_walk)
t.start()
t.join()
"#,
        epilogue!()
    ),
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
        // The worker starting or ending: in `_bootstrap_inner` itself, or in the library's own
        // frames it calls before `run` or once `run` returned (`Thread._delete`).
        &["Thread._bootstrap_inner", "Thread._bootstrap"],
        &["*", "Thread._bootstrap_inner", "Thread._bootstrap"],
        // The main thread, woken in `join` once the worker is done (the library's own frames
        // above it).
        &["*", "Thread.join", "<module>"],
    ],
    calls: &[
        ("fib_py_walk", "fib_py_walk(n - 1)"),
        ("worker_py_walk", "fib_py_walk(18)"),
    ],
};

/// Every program.
pub const ALL: [&Program; 5] = [&FIB, &SORTED, &GENERATOR, &METHOD, &THREAD];

impl Program {
    /// The line of the call `calls` gives for `function` (by its last part with
    /// `short_names`), if any.
    fn call_line(&self, function: &str, short_names: bool) -> Option<i32> {
        let (_, text) = self.calls.iter().find(|(f, _)| {
            if short_names {
                short(f) == function
            } else {
                *f == function
            }
        })?;
        let at = self
            .script
            .lines()
            .position(|l| l.contains(text) && !l.trim_start().starts_with("def "))
            .unwrap_or_else(|| panic!("{}: no call `{text}` in the script", self.name));
        Some(at as i32 + 1)
    }
}

/// How a sample's Python frames compare with a program (the verdict of `support/judge.rs`:
/// truncated when the innermost frames of a shape are there without the outer ones).
pub use crate::support::judge::Verdict;

/// The name a frame of qualified name `name` has where names are `co_name`s (before 3.11: a
/// code object has no qualified name): its last part.
fn short(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

/// `py` (names, innermost first) against `shape` (see [`Program`]); `short_names`: the shape's
/// names are compared by their last part ([`short`]).
fn against(py: &[&str], shape: &[&'static str], short_names: bool) -> Verdict {
    let name_of = |want: &'static str| if short_names { short(want) } else { want };
    if let Some((&"*", outer)) = shape.split_first() {
        // Any frames, then the outer ones whole.
        return match py.len().checked_sub(outer.len()) {
            Some(inner) if inner > 0 && py[inner..].iter().zip(outer).all(|(&p, &o)| p == name_of(o)) => Verdict::Exact,
            _ => Verdict::Wrong,
        };
    }
    let mut at = 0;
    for (i, want) in shape.iter().enumerate() {
        let (name, many) = want.strip_suffix('+').map_or((*want, false), |n| (n, true));
        let name = name_of(name);
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

/// A Python frame of a sample: its qualified name and line.
pub type PyFrame = (String, Option<i32>);

/// The verdicts on a program's samples.
#[derive(Default)]
pub struct Tally {
    /// Names are `co_name`s, not qualified names (CPython before 3.11).
    pub short_names: bool,
    pub exact: usize,
    pub truncated: usize,
    pub wrong: Vec<String>,
}

impl Tally {
    /// Judge one sample's Python `frames` (innermost first; none: not judged) against
    /// `program`; `complete` is false when the sample's runs did not all find their place (it
    /// is then at best truncated).
    pub fn judge(&mut self, program: &Program, frames: &[PyFrame], complete: bool) {
        // The prologue's own frames are not the program's.
        if frames.is_empty() || frames.iter().any(|(name, _)| name == "ready") {
            return;
        }
        // Callers are on the line of their call.
        let off_line = frames.iter().skip(1).find(|(name, line)| {
            program
                .call_line(name, self.short_names)
                .is_some_and(|want| *line != Some(want))
        });
        if let Some(frame) = off_line {
            self.wrong
                .push(format!("{frame:?} not on its call's line in {frames:?}"));
            return;
        }
        let py: Vec<&str> = frames.iter().map(|(name, _)| name.as_str()).collect();
        let best = program
            .shapes
            .iter()
            .map(|shape| against(&py, shape, self.short_names))
            .min()
            .expect("a shape");
        match best {
            Verdict::Exact if complete => self.exact += 1,
            Verdict::Exact | Verdict::Truncated => self.truncated += 1,
            Verdict::Wrong => self.wrong.push(format!("{py:?} (complete: {complete})")),
        }
    }

    pub fn judged(&self) -> usize {
        self.exact + self.truncated + self.wrong.len()
    }

    /// None wrong, at least 95 % exact, and at least `least` judged; `what` names the run.
    pub fn check(&self, what: &str, least: usize) {
        let judged = self.judged();
        eprintln!(
            "{what}: {judged} samples with Python frames: {} exact, {} truncated, {} wrong",
            self.exact,
            self.truncated,
            self.wrong.len()
        );
        assert!(self.wrong.is_empty(), "{what}: wrong Python stacks: {:#?}", self.wrong);
        assert!(judged >= least, "{what}: only {judged} samples with Python frames");
        assert!(
            self.exact * 100 >= judged * 95,
            "{what}: {} of {judged} exact",
            self.exact
        );
    }
}

/// A `going NAME PID UNIX_NS` line of a program: its pid, and the program with when it went.
pub fn going(line: &str) -> Option<(u32, (&'static Program, u64))> {
    let mut words = line.strip_prefix("going ")?.split_whitespace();
    let name = words.next()?;
    let pid = words.next()?.parse().ok()?;
    let at = words.next()?.parse().ok()?;
    let program = ALL.into_iter().find(|p| p.name == name)?;
    Some((pid, (program, at)))
}

/// The `going` lines of `text`.
pub fn goings(text: &str) -> HashMap<u32, (&'static Program, u64)> {
    text.lines().filter_map(going).collect()
}

/// The `done PID UNIX_NS` lines of `text`: when each program's work ended.
pub fn dones(text: &str) -> HashMap<u32, u64> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.strip_prefix("done ")?.split_whitespace();
            Some((words.next()?.parse().ok()?, words.next()?.parse().ok()?))
        })
        .collect()
}

/// The words of the command that starts an interpreter.
pub type Interpreter = Vec<String>;

/// A command starting `python`.
pub fn command(python: &[String]) -> std::process::Command {
    let mut command = std::process::Command::new(&python[0]);
    command.args(&python[1..]);
    command
}

/// The interpreters the programs run on: Debian's 3.11 (a static interpreter), the default
/// `python3` on the path (on the image this suite is made on, pyenv's 3.11,
/// `libpython3.11.so`), pyenv's 3.12 and 3.13 (`pyenv root`), and Debian trixie's 3.13 run
/// chrooted into its private root (see `support::roots`). One missing is skipped, loudly,
/// and fails under CI.
pub fn interpreters(test: &str) -> Vec<Interpreter> {
    let mut out = vec![vec!["/usr/bin/python3.11".to_string()], vec!["python3".to_string()]];
    for minor in ["3.12", "3.13"] {
        out.extend(pyenv_required(test, minor));
    }
    out.extend(trixie(test));
    out
}

/// pyenv's 3.6 to 3.10, whose frames are `PyFrameObject`s (the same skipping).
pub fn older(test: &str) -> Vec<Interpreter> {
    ["3.6", "3.7", "3.8", "3.9", "3.10"]
        .iter()
        .filter_map(|minor| pyenv_required(test, minor))
        .collect()
}

/// Whether `python` is one of [`older`]'s: its frames are named by `co_name`.
pub fn is_older(python: &[String]) -> bool {
    ["3.6", "3.7", "3.8", "3.9", "3.10"]
        .iter()
        .any(|minor| python.first().is_some_and(|p| p.ends_with(&format!("/python{minor}"))))
}

/// Debian's 3.11, pyenv's 3.13 and trixie's 3.13 (the same skipping).
pub fn three_versions(test: &str) -> Vec<Interpreter> {
    let mut out = vec![vec!["/usr/bin/python3.11".to_string()]];
    out.extend(pyenv_required(test, "3.13"));
    out.extend(trixie(test));
    out
}

/// pyenv's 3.11 and 3.12 (`libpython3.X.so`), which [`three_versions`] leaves to `--pid` (the
/// same skipping).
pub fn pyenv_3_11_and_3_12(test: &str) -> Vec<Interpreter> {
    ["3.11", "3.12"]
        .iter()
        .filter_map(|minor| pyenv_required(test, minor))
        .collect()
}

/// Debian unstable's `python3.14` and `python3.15` in their private root; without it, skipped
/// (failing under CI).
pub fn sid(test: &str) -> Vec<Interpreter> {
    ["3.14", "3.15"]
        .iter()
        .filter_map(|minor| {
            let found = crate::support::sid_python_argv(minor);
            crate::support::required(test, found, crate::support::NO_SID_ROOT)
        })
        .collect()
}

/// pyenv's `python3.MINOR`; without it, skipped (failing under CI).
pub fn pyenv_required(test: &str, minor: &str) -> Option<Interpreter> {
    let missing = format!("no pyenv python{minor} installed");
    crate::support::required(test, pyenv(minor), &missing).map(|path| vec![path])
}

/// trixie's `python3.13` in its private root; without it, skipped (failing under CI).
fn trixie(test: &str) -> Option<Interpreter> {
    crate::support::required(test, crate::support::trixie_python_argv(), crate::support::NO_ROOT)
}

/// pyenv's `python3.MINOR`, if pyenv has one.
pub fn pyenv(minor: &str) -> Option<String> {
    let root = std::process::Command::new("pyenv")
        .arg("root")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| std::path::PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))?;
    let versions = std::fs::read_dir(root.join("versions")).ok()?;
    versions
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|v| {
            v.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{minor}.")))
        })
        .map(|v| v.join(format!("bin/python{minor}")))
        .find(|p| p.exists())
        .map(|p| p.display().to_string())
}
