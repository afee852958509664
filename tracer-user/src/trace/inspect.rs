//! What /proc tells about a traced process that explains an empty or broken profile: the
//! process a thread id belongs to, whether it is a kernel thread, the CPU time it has used,
//! and whether a Java or Node.js runtime runs without the flag that makes its stacks whole or
//! named. Every read is bounded and any failure is "unknown", never an error: these only add
//! advice to the summary.

use std::collections::{HashMap, HashSet};

/// `PF_KTHREAD` in the flags of `/proc/PID/stat`.
const PF_KTHREAD: u64 = 0x0020_0000;
/// Processes whose runtime is looked at, at most, in a session.
const MAX_SEEN: usize = 65536;

/// The start of `/proc/PID/FILE` (bounded); `None` when unreadable.
fn read(pid: u32, file: &str) -> Option<Vec<u8>> {
    crate::jit::process::proc_file(pid, file)
}

/// What `/proc/PID/stat` and `status` say of a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    /// The thread group (process) the id belongs to.
    pub tgid: u32,
    pub comm: String,
    pub kernel_thread: bool,
    /// CPU time used so far, in clock ticks (user and system).
    pub cpu_ticks: u64,
}

/// The facts of `pid` (a process or thread id), `None` when it cannot be read.
pub fn facts(pid: u32) -> Option<Facts> {
    let status = String::from_utf8_lossy(&read(pid, "status")?).into_owned();
    let tgid = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())?;
    let (comm, flags, cpu_ticks) = parse_stat(&String::from_utf8_lossy(&read(pid, "stat")?))?;
    Some(Facts {
        tgid,
        comm,
        kernel_thread: flags & PF_KTHREAD != 0,
        cpu_ticks,
    })
}

/// The CPU time `pid` has used, in clock ticks; `None` when it cannot be read (gone).
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    parse_stat(&String::from_utf8_lossy(&read(pid, "stat")?)).map(|(_, _, ticks)| ticks)
}

/// `(comm, flags, utime + stime)` of a `/proc/PID/stat` line: the name is between the first
/// `(` and the last `)` (it may hold spaces and parentheses); after it come the state (field
/// 3), ..., flags (9), ..., utime (14) and stime (15).
pub(crate) fn parse_stat(stat: &str) -> Option<(String, u64, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_owned();
    let rest: Vec<&str> = stat.get(close + 1..)?.split_ascii_whitespace().collect();
    let field = |n: usize| rest.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    Some((comm, field(9)?, field(14)?.saturating_add(field(15)?)))
}

/// The processes met while tracing: their executable's name, and the runtimes that run
/// without the flag their stacks need, one sentence each; each looked at once.
#[derive(Debug)]
pub struct Runtimes {
    /// The tracer's own process.
    own: u32,
    seen: HashSet<u32>,
    /// The executable's file name of each process looked at.
    pub names: HashMap<u32, String>,
    /// The sentences, in the order met.
    pub notes: Vec<RuntimeNote>,
}

/// A sentence about a process's runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeNote {
    pub pid: u32,
    /// About Java's frame pointers (moot once its code heaps are read, `crate::jit::hotspot`).
    pub java: bool,
    /// About Node.js's names (moot once its JavaScript frames are named, `crate::v8`).
    pub node: bool,
    pub text: String,
}

impl Runtimes {
    pub fn new() -> Runtimes {
        Runtimes {
            own: std::process::id(),
            seen: HashSet::new(),
            names: HashMap::new(),
            notes: Vec::new(),
        }
    }

    /// Look at process `pid` if it is new (the tracer's own is never looked at): its
    /// executable's name, and its runtime's flags.
    pub fn see(&mut self, pid: u32) {
        if self.seen.len() >= MAX_SEEN || pid == self.own || !self.seen.insert(pid) {
            return;
        }
        let Some(exe) = std::fs::read_link(format!("/proc/{pid}/exe")).ok() else {
            return;
        };
        let name = exe
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.names.insert(pid, name.clone());
        let words = |file| crate::jit::java::words(pid, file).unwrap_or_default();
        if let Some(note) = runtime_note(pid, &name, &words("cmdline"), &words("environ")) {
            self.notes.push(RuntimeNote {
                pid,
                java: name == "java",
                node: name == "node" || name == "nodejs",
                text: note,
            });
        }
    }
}

/// The advice for process `pid` running executable `exe_name` with `args` and `env`: Java
/// without `-XX:+PreserveFramePointer` (its stacks stop at the first compiled frame), Node.js
/// without `--perf-basic-prof` (its JavaScript frames have no names). The flags count in the
/// variables each runtime reads options from too.
pub(crate) fn runtime_note(pid: u32, exe_name: &str, args: &[String], env: &[String]) -> Option<String> {
    use crate::jit::java;
    if java::without_frame_pointers(exe_name, args, env) {
        return Some(format!(
            "pid {pid} runs Java without -XX:+PreserveFramePointer, so its stacks stop at the first JIT-compiled \
             frame (`java;<leaf>`, counted as bad_frame_pointer): restart it with `java -XX:+PreserveFramePointer` \
             (and -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit for the names of compiled methods)"
        ));
    }
    if (exe_name == "node" || exe_name == "nodejs")
        && !java::option_given(args, env, &["--perf-basic-prof", "--perf-prof"], &["NODE_OPTIONS"])
    {
        return Some(format!(
            "pid {pid} runs Node.js without --perf-basic-prof, so its JavaScript frames have no names: \
             restart it with `node --perf-basic-prof` (or NODE_OPTIONS=--perf-basic-prof)"
        ));
    }
    None
}

#[cfg(test)]
mod tests;
