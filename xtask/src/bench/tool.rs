//! The four tracers the bench compares (and bare sampling, the overhead's floor) and the command lines it runs them with, and
//! [`Spawned`]: a started process whose stderr is collected line by line as it arrives (the
//! tracers' summaries, the workloads' one-line results). How their output is read is `fold`'s
//! business; what is measured around them is the phases'.

use std::{
    fs::File,
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{Arc, Mutex},
    thread::{JoinHandle, sleep},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use super::sys::{self, Reaped};

/// A tracer under comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    /// sframe-trace itself.
    Ours,
    /// `perf record --call-graph dwarf`: 8 KiB stack copies, unwound by `perf script`.
    PerfDwarf,
    /// `perf record --call-graph fp`: the kernel's frame-pointer walk.
    PerfFp,
    /// bpftrace's `ustack` (`bpf_get_stackid`: the kernel's frame-pointer walk).
    Bpftrace,
    /// `perf record` without call graphs: the cost of taking the samples alone, the floor of
    /// every stack tracer's overhead (the overhead phase only: it has no stacks to judge).
    PerfBare,
}

/// The tracers that take stacks.
pub const TOOLS: [Tool; 4] = [Tool::Ours, Tool::PerfDwarf, Tool::PerfFp, Tool::Bpftrace];
/// What the overhead phase runs: the tracers, and bare sampling.
pub const OVERHEAD_TOOLS: [Tool; 5] = [
    Tool::Ours,
    Tool::PerfDwarf,
    Tool::PerfFp,
    Tool::Bpftrace,
    Tool::PerfBare,
];

impl Tool {
    pub fn name(self) -> &'static str {
        match self {
            Tool::Ours => "sframe-trace",
            Tool::PerfDwarf => "perf --call-graph dwarf",
            Tool::PerfFp => "perf --call-graph fp",
            Tool::Bpftrace => "bpftrace ustack",
            Tool::PerfBare => "perf record (no call graph)",
        }
    }

    /// The name in the JSON report.
    pub fn key(self) -> &'static str {
        match self {
            Tool::Ours => "sframe_trace",
            Tool::PerfDwarf => "perf_dwarf",
            Tool::PerfFp => "perf_fp",
            Tool::Bpftrace => "bpftrace",
            Tool::PerfBare => "perf_bare",
        }
    }

    /// Does it walk frame pointers (and so get the frame-pointer build of the benchmark)?
    pub fn frame_pointers(self) -> bool {
        matches!(self, Tool::PerfFp | Tool::Bpftrace)
    }

    /// Where its output goes, for a run whose files are named `base`: perf.data, our folded
    /// stacks, bpftrace's printed map (its stdout).
    pub fn output(self, base: &Path) -> PathBuf {
        match self {
            Tool::Bpftrace => base.with_extension("stdout"),
            Tool::Ours => base.with_extension("folded"),
            Tool::PerfDwarf | Tool::PerfFp | Tool::PerfBare => base.with_extension("perf.data"),
        }
    }

    /// The tool launching `program args...` and sampling it at `hz` (the tool's defaults
    /// otherwise: our kernel stacks, perf's kernel callchains).
    pub fn launch(self, tracer: &Path, hz: u32, base: &Path, program: &Path, args: &[String]) -> Command {
        let out = self.output(base);
        match self {
            Tool::Ours => {
                let mut cmd = Command::new(tracer);
                cmd.args(["-F", &hz.to_string(), "-o"])
                    .arg(out)
                    .arg("--")
                    .arg(program)
                    .args(args);
                cmd
            }
            Tool::PerfDwarf | Tool::PerfFp | Tool::PerfBare => {
                let mut cmd = self.perf_record(hz, &out);
                cmd.arg("--").arg(program).args(args);
                cmd
            }
            Tool::Bpftrace => {
                let mut cmd = Command::new("bpftrace");
                cmd.arg("-e")
                    .arg(format!("profile:hz:{hz} /pid == cpid/ {{ @[ustack] = count(); }}"))
                    .arg("-c")
                    .arg(format!("{} {}", program.display(), args.join(" ")));
                cmd
            }
        }
    }

    /// `perf record` on cpu-clock (no hardware events in a VM) with this tool's call graphs
    /// (none for bare sampling).
    pub fn perf_record(self, hz: u32, out: &Path) -> Command {
        let mut cmd = Command::new("perf");
        cmd.args(["record", "-e", "cpu-clock", "-F", &hz.to_string()]);
        match self {
            Tool::PerfDwarf => cmd.args(["--call-graph", "dwarf"]),
            Tool::PerfBare => &mut cmd,
            _ => cmd.args(["--call-graph", "fp"]),
        };
        cmd.arg("-o").arg(out);
        cmd
    }
}

/// A running process: its pid, and its stderr lines as they arrive. Reap it with
/// [`Spawned::reap`]; dropping it without reaping kills it.
pub struct Spawned {
    pid: u32,
    lines: Arc<Mutex<Vec<(Instant, String)>>>,
    reader: Option<JoinHandle<()>>,
    reaped: bool,
}

impl Spawned {
    /// Print and start `cmd` with stdin from /dev/null and stdout into `stdout`.
    pub fn start(cmd: &mut Command, stdout: &Path) -> anyhow::Result<Spawned> {
        eprintln!("+ {cmd:?}");
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(File::create(stdout).with_context(|| format!("creating {}", stdout.display()))?)
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot run {cmd:?}"))?;
        let stderr = child.stderr.take().context("stderr pipe")?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().expect("stderr lines").push((Instant::now(), line));
            }
        });
        // `child` is reaped by `wait4`, never by std.
        Ok(Spawned {
            pid: child.id(),
            lines,
            reader: Some(reader),
            reaped: false,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// When the first stderr line containing `needle` arrived; fail after `limit`.
    pub fn wait_line(&self, needle: &str, limit: Duration) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some((at, _)) = self
                .lines
                .lock()
                .expect("stderr lines")
                .iter()
                .find(|(_, l)| l.contains(needle))
            {
                return Ok(*at);
            }
            if Instant::now() > deadline {
                bail!(
                    "no `{needle}` on the stderr of pid {} within {limit:?}:\n{}",
                    self.pid,
                    self.stderr()
                );
            }
            sleep(Duration::from_millis(1));
        }
    }

    /// Everything written to stderr so far.
    pub fn stderr(&self) -> String {
        let lines = self.lines.lock().expect("stderr lines");
        lines.iter().map(|(_, l)| format!("{l}\n")).collect()
    }

    /// Wait for the process to exit (SIGINT after `limit`, then SIGKILL); its rusage and its
    /// whole stderr.
    pub fn reap(mut self, limit: Duration) -> anyhow::Result<(Reaped, String)> {
        let reaped = sys::wait4(self.pid, limit)?;
        self.reaped = true;
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        Ok((reaped, self.stderr()))
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if !self.reaped {
            sys::signal(self.pid, libc::SIGKILL);
            let _ = sys::wait4(self.pid, Duration::from_secs(5));
        }
    }
}
