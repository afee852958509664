//! Helpers shared by the test modules: `privileged_test!`, which opens every test that needs
//! root (the privileged tier, asked for by `cargo xtask test`; their turns: `turns`), a child
//! process that cannot outlive its test, the tracing workloads built once per process
//! (`workloads`), the verdict on a sample's stack (`judge`), and the interpreters of private
//! roots (`roots`: trixie's `python3.13` run chrooted).

pub mod judge;
pub mod neighbours;
mod roots;
mod turns;
mod workloads;

pub use roots::{
    NO_JAVA_ROOT, NO_NODE_ROOT, NO_ROOT, NO_SID_ROOT, TRIXIE_PYTHON, in_root, required, sid_java, sid_node,
    sid_python_argv, trixie_python, trixie_python_argv, trixie_python_root,
};

pub use workloads::{Workloads, build_workloads};

use std::process::Child;
use std::{path::Path, process::Command};

pub use turns::Kind;

/// The name of the test function it is used in, as `cargo test` prints it (`module::test`).
macro_rules! test_name {
    () => {{
        fn here() {}
        $crate::support::test_path(::std::any::type_name_of_val(&here))
    }};
}

/// Opens a privileged test (one that loads BPF or samples real processes): takes its turn for
/// the rest of the function, named after the function (`module::test`, as `cargo test` names
/// it), or returns after reporting it skipped, as [`privileged`] does (under `CI=true` a test
/// that cannot run fails instead). The turn is exclusive (alone among privileged tests), or,
/// with `paired`, one beside another paired test (tests that keep one CPU busy and judge no
/// time), or with `shared`, one beside other shared tests (for tests that mostly wait); see
/// `support/turns.rs`. `privileged_test!(name)` (`privileged_test!(shared, name)`,
/// `privileged_test!(paired, name)`) also binds `name` to the test's name, for the helpers
/// that report skips of their own.
macro_rules! privileged_test {
    () => {
        privileged_test!(@ $crate::support::Kind::Exclusive)
    };
    (shared) => {
        privileged_test!(@ $crate::support::Kind::Shared)
    };
    (paired) => {
        privileged_test!(@ $crate::support::Kind::Paired)
    };
    ($name:ident) => {
        privileged_test!(@ $name, $crate::support::Kind::Exclusive)
    };
    (shared, $name:ident) => {
        privileged_test!(@ $name, $crate::support::Kind::Shared)
    };
    (paired, $name:ident) => {
        privileged_test!(@ $name, $crate::support::Kind::Paired)
    };
    (@ $name:ident, $kind:expr) => {
        let $name: &'static str = test_name!();
        let Some(_turn) = $crate::support::privileged($name, $kind) else {
            return;
        };
    };
    (@ $kind:expr) => {
        let Some(_turn) = $crate::support::privileged(test_name!(), $kind) else {
            return;
        };
    };
}

/// Names the directory of the tests' shared state (the privileged tests' turns, the built
/// workloads) instead of cargo's `target/tmp`: `cargo xtask vm-test` sets it in its guests,
/// where `target/` is the host's, over 9p (whose locks are not the host's).
pub const STATE_DIR_VAR: &str = "SFRAME_TRACE_TEST_STATE_DIR";

/// The directory of the tests' shared state: [`STATE_DIR_VAR`], else cargo's `target/tmp`.
pub fn state_dir() -> std::path::PathBuf {
    std::env::var_os(STATE_DIR_VAR).map_or_else(|| env!("CARGO_TARGET_TMPDIR").into(), Into::into)
}

/// `module::test` from the path of a function `here` declared in the test
/// (`integration::module::test::here`): the crate's name and `here` left out.
pub fn test_path(here: &'static str) -> &'static str {
    let path = here.strip_suffix("::here").unwrap_or(here);
    path.split_once("::").map_or(path, |(_crate, rest)| rest)
}

/// Where skipped tests are recorded, one line each, when set (`cargo xtask test` sets it and
/// prints their count at the end: a skipped test must not pass for a passed one).
pub const SKIPPED_VAR: &str = "SFRAME_TRACE_SKIPPED";

/// Set to `1` by `cargo xtask test` (and by hand, as root, to run privileged tests with plain
/// `cargo test`): the privileged tier runs. Without it plain `cargo test` stays root-free and
/// quick: each privileged test reports itself skipped, even as root.
pub const PRIVILEGED_VAR: &str = "SFRAME_TRACE_PRIVILEGED";

/// Whether the privileged tier was asked for: [`PRIVILEGED_VAR`] is `1`, or `CI=true` (under
/// CI a privileged test never skips: it runs, or fails when it cannot).
pub fn privileged_tier() -> bool {
    std::env::var(PRIVILEGED_VAR).as_deref() == Ok("1") || std::env::var("CI").as_deref() == Ok("true")
}

/// The turn of a privileged test, of `kind` (see `support/turns.rs`): `Some(turn)` when it may
/// run (hold it for the whole test),
/// `None` after reporting it skipped (see [`skipped`]): the privileged tier was not asked for
/// ([`privileged_tier`]), or this is not root. Under `CI=true`, not being root fails.
pub fn privileged(test: &str, kind: Kind) -> Option<Turn> {
    if !privileged_tier() {
        skipped(
            test,
            "privileged: run by `cargo xtask test`, or as root with SFRAME_TRACE_PRIVILEGED=1",
        );
        return None;
    }
    if sframe_trace::sys::process::effective_uid() == 0 {
        return Some(Turn {
            _held: turns::take(kind),
            test: test.to_owned(),
            since: std::time::Instant::now(),
            cpu: cpu_times(),
        });
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{test}: privileged tests must run under CI, but this is not root"
    );
    skipped(test, "not root: it loads BPF (run the tests with sudo)");
    None
}

/// Set by `cargo xtask test`: the file each privileged test appends its name and seconds to,
/// for the report of the slowest tests.
pub const TIMES_VAR: &str = "SFRAME_TRACE_TEST_TIMES";

/// A privileged test's turn: the others wait (all of them, or the exclusive ones for a shared
/// turn) until it is dropped, which records how long the test held it in the file [`TIMES_VAR`] names, if any (passed or failed alike).
pub struct Turn {
    _held: turns::Held,
    test: String,
    since: std::time::Instant,
    /// The machine's CPU time when the turn was taken ([`cpu_times`]).
    cpu: Option<(u64, u64)>,
}

/// The machine's CPU time so far, in ticks: (busy, all), from the first line of `/proc/stat`
/// (idle and iowait are not busy).
fn cpu_times() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .map_while(|t| t.parse().ok())
        .collect();
    let all: u64 = ticks.iter().take(8).sum();
    let idle = ticks.get(3)? + ticks.get(4).unwrap_or(&0);
    Some((all - idle, all))
}

impl Drop for Turn {
    fn drop(&mut self) {
        let Some(path) = std::env::var_os(TIMES_VAR) else {
            return;
        };
        // How busy the machine's CPUs were while the test held its turn: what an exclusive
        // test leaves idle is what running it beside others would win.
        let busy = match (self.cpu, cpu_times()) {
            (Some((busy0, all0)), Some((busy1, all1))) if all1 > all0 => {
                format!(" ({} % of the CPUs busy)", (busy1 - busy0) * 100 / (all1 - all0))
            }
            _ => String::new(),
        };
        let line = format!("{:.1} {}{busy}\n", self.since.elapsed().as_secs_f64(), self.test);
        // Best effort: a report line lost is no reason to fail a test.
        let _ = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .and_then(|mut file| std::io::Write::write_all(&mut file, line.as_bytes()));
    }
}

/// Report `test` as skipped because of `why`: a loud line on stderr (shown with `--nocapture`)
/// and a line in the file [`SKIPPED_VAR`] names, if any.
pub fn skipped(test: &str, why: &str) {
    eprintln!("\n!!!!! SKIPPED ({why}): {test} !!!!!\n");
    if let Some(path) = std::env::var_os(SKIPPED_VAR) {
        let line = format!("{test}: {why}\n");
        let written = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .and_then(|mut file| std::io::Write::write_all(&mut file, line.as_bytes()));
        written.unwrap_or_else(|err| panic!("recording {test} as skipped in {path:?}: {err}"));
    }
}

/// A process started by a test; killed and reaped on drop, even when an assertion fails.
pub struct Running(pub Child);

impl Running {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Wait until it runs `program` (its exec done, whatever the path it was started by) and
    /// has used some CPU time in it; fails when it ends first, or does not get there within
    /// [`SILENCE`]. That CPU time may still be the dynamic loader's (under emulation on a busy
    /// host above all): a test that reads the mappings once, without a tracer that reads them
    /// again as code is mapped, waits for the program to say it reached `main`.
    pub fn wait_working(&mut self, program: &Path) -> &mut Running {
        use std::os::unix::fs::MetadataExt;
        let want = std::fs::metadata(program).unwrap_or_else(|e| panic!("{}: {e}", program.display()));
        let pid = self.pid();
        let started = std::time::Instant::now();
        loop {
            if let Ok(Some(status)) = self.0.try_wait() {
                panic!("{} ended ({status}) before it got to work", program.display());
            }
            let exe = std::fs::metadata(format!("/proc/{pid}/exe"));
            let running = exe.is_ok_and(|m| (m.dev(), m.ino()) == (want.dev(), want.ino()));
            if running && cpu_ticks(pid) >= 2 {
                return self;
            }
            assert!(
                started.elapsed() < SILENCE,
                "{} (pid {pid}) did not get to work within {} s",
                program.display(),
                SILENCE.as_secs()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Wait until it sleeps in `nanosleep` (`/proc/PID/wchan`): a `sleep` the test started is
    /// past its loader and its start-up, and uses no more CPU time; fails when it ends first,
    /// or does not get there within [`SILENCE`].
    pub fn wait_asleep(&mut self) -> &mut Running {
        let pid = self.pid();
        let started = std::time::Instant::now();
        loop {
            if let Ok(Some(status)) = self.0.try_wait() {
                panic!("pid {pid} ended ({status}) before it slept");
            }
            let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
            if wchan.contains("nanosleep") {
                return self;
            }
            assert!(
                started.elapsed() < SILENCE,
                "pid {pid} did not sleep within {} s (wchan {wchan:?})",
                SILENCE.as_secs()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// The CPU time `pid` has used, in clock ticks (utime + stime of /proc/PID/stat, fields 14 and
/// 15, after the parenthesised command name), 0 when it cannot be read.
pub fn cpu_ticks(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let fields: Vec<u64> = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .skip(11)
                .take(2)
                .map(|f| f.parse().ok())
                .collect::<Option<_>>()?;
            Some(fields.iter().sum())
        })
        .unwrap_or(0)
}

/// Clock ticks per second, the unit of [`cpu_ticks`].
pub fn ticks_per_second() -> u64 {
    u64::try_from(sframe_trace::sys::clock_ticks()).unwrap_or(100)
}

/// Wait until process `pid` has used `ticks` more clock ticks of CPU time; fails the test if it
/// gets none for [`SILENCE`].
pub fn wait_for_cpu(pid: u32, ticks: u64) {
    let (mut last, mut since) = (cpu_ticks(pid), std::time::Instant::now());
    let until = last + ticks;
    while last < until {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let now = cpu_ticks(pid);
        if now > last {
            (last, since) = (now, std::time::Instant::now());
        }
        assert!(
            since.elapsed() < SILENCE,
            "process {pid} got no CPU for {} s",
            SILENCE.as_secs()
        );
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A tracer running in the background; its stderr is collected line by line.
pub struct Tracer {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    pub stderr: Vec<String>,
}

/// How long a starting tracer may make no progress before it counts as stuck: progress is a
/// line on stderr (while the tables load it prints its progress every few seconds) or CPU time
/// spent (one large object's table can take minutes on a busy machine), so a slow start is
/// waited for as long as it works, and a blocked one fails.
pub const SILENCE: std::time::Duration = std::time::Duration::from_secs(120);

/// How long a wait on a tracer that keeps working ([`Progress`]) lasts at most: a tracer
/// sampling the whole host always spends CPU time, so progress alone would wait forever for a
/// line that never comes.
pub const WORKING_AT_MOST: std::time::Duration = std::time::Duration::from_secs(600);

/// When a starting tracer last made progress (see [`SILENCE`]).
pub struct Progress {
    pid: u32,
    cpu: u64,
    printed: usize,
    at: std::time::Instant,
    since: std::time::Instant,
}

impl Progress {
    pub fn new(pid: u32) -> Progress {
        let now = std::time::Instant::now();
        Progress {
            pid,
            cpu: 0,
            printed: 0,
            at: now,
            since: now,
        }
    }

    /// Note what the tracer has `printed` so far (lines or bytes); whether it is stuck (no
    /// progress for [`SILENCE`]), or has worked for [`WORKING_AT_MOST`] without getting there.
    pub fn stuck(&mut self, printed: usize) -> bool {
        let cpu = cpu_ticks(self.pid);
        if cpu > self.cpu || printed > self.printed {
            (self.cpu, self.printed, self.at) = (cpu, printed, std::time::Instant::now());
        }
        self.at.elapsed() > SILENCE || self.since.elapsed() > WORKING_AT_MOST
    }
}

impl Tracer {
    /// Start `sframe-trace ARGS` (its stdout discarded) and wait until it samples.
    pub fn start(args: &[&str]) -> Tracer {
        let mut command = Command::new(tracer_binary());
        command.args(args).stdout(std::process::Stdio::null());
        Tracer::spawn(command)
    }

    /// Start `command` (which runs the tracer, e.g. through `unshare`, with `exec`) and wait
    /// until the tracer samples: as long as it makes progress (see [`SILENCE`]), failing at
    /// once with its stderr when it ends first.
    pub fn spawn(mut command: Command) -> Tracer {
        let mut child = command
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start sframe-trace");
        let stderr = child.stderr.take().expect("stderr");
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut tracer = Tracer {
            child,
            lines,
            stderr: Vec::new(),
        };
        tracer.wait_for("sampled", |line| line.contains(": sampling "));
        tracer
    }

    /// Like [`Tracer::start`], with the tracer telling each sweep for exited processes (see
    /// [`Tracer::wait_forgotten`]).
    pub fn start_sweeping(args: &[&str]) -> Tracer {
        Tracer::start_logging(args, sframe_trace::trace::SWEEP_LOG)
    }

    /// Like [`Tracer::start`], with the tracer's debug log of `target` on its stderr (for
    /// [`Tracer::wait_for`]: `trace::SWEEP_LOG`, `trace::LOAD_LOG`, `jit::WATCH_LOG`).
    pub fn start_logging(args: &[&str], target: &str) -> Tracer {
        let mut command = Command::new(tracer_binary());
        command
            .args(args)
            .env("RUST_LOG", format!("warn,aya::sys::bpf=error,{target}=debug"))
            .stdout(std::process::Stdio::null());
        Tracer::spawn(command)
    }

    /// Wait until the processes that exited before this call are forgotten by a tracer started
    /// with [`Tracer::start_sweeping`]: exited processes are forgotten after a grace period, and
    /// exits the tracer missed are found by its next sweep, so two sweeps after now every one
    /// is (as long as the tracer makes progress, however busy the machine). A sweep line printed
    /// before now may still be on its way: three sweeps after the last one seen are two after now.
    pub fn wait_forgotten(&mut self) {
        let sweep = |line: &str| -> Option<u64> { line.split("sweep ").nth(1)?.split(':').next()?.parse().ok() };
        self.drain();
        let last = self.stderr.iter().filter_map(|l| sweep(l)).max().unwrap_or(0);
        self.wait_for("swept twice more", |line| sweep(line).is_some_and(|n| n >= last + 3));
    }

    /// Wait until a tracer started with [`Tracer::start_logging`] for `trace::LOAD_LOG` has
    /// loaded process `pid` (its mappings and tables in the kernel).
    /// (A process loaded as the tracer started says so before the tracer samples: among the
    /// lines kept already.)
    pub fn wait_loaded(&mut self, pid: u32, what: &str) {
        let loaded = format!("pid {pid} loaded");
        self.drain();
        if self.stderr.iter().any(|line| line.ends_with(&loaded)) {
            return;
        }
        self.wait_for(what, |line| line.ends_with(&loaded));
    }

    /// Wait until the tracer prints a line `until` accepts (kept in `stderr`, like every line
    /// before it): as long as it makes progress (see [`SILENCE`]), failing with its stderr when
    /// it ends first or is stuck. `what` names the awaited moment in that failure.
    pub fn wait_for(&mut self, what: &str, until: impl FnMut(&str) -> bool) {
        let mut progress = Progress::new(self.child.id());
        self.wait_line(
            what,
            until,
            || std::time::Duration::from_secs(1),
            |printed| {
                progress.stuck(printed).then(|| {
                    format!(
                        "sframe-trace made no progress (no line, no CPU time) for {} s, or worked for {} s, \
                         before it {what}",
                        SILENCE.as_secs(),
                        WORKING_AT_MOST.as_secs()
                    )
                })
            },
        );
    }

    /// [`Tracer::wait_for`] for at most `limit` (a tracer that keeps sampling always makes
    /// progress): fails with its stderr when no line `until` accepts came by then.
    pub fn wait_within(&mut self, what: &str, limit: std::time::Duration, until: impl FnMut(&str) -> bool) {
        let deadline = std::time::Instant::now() + limit;
        let left = move || deadline.saturating_duration_since(std::time::Instant::now());
        self.wait_line(
            what,
            until,
            move || left().min(std::time::Duration::from_secs(1)),
            |_| {
                left()
                    .is_zero()
                    .then(|| format!("sframe-trace had not {what} after {limit:?}"))
            },
        );
    }

    /// The loop of [`Tracer::wait_for`] and [`Tracer::wait_within`]: each wait on a line lasts
    /// `poll()`; after one that brought none, `given_up(lines so far)` says why to fail, if so.
    fn wait_line(
        &mut self,
        what: &str,
        mut until: impl FnMut(&str) -> bool,
        mut poll: impl FnMut() -> std::time::Duration,
        mut given_up: impl FnMut(usize) -> Option<String>,
    ) {
        loop {
            match self.lines.recv_timeout(poll()) {
                Ok(line) => {
                    let done = until(&line);
                    self.stderr.push(line);
                    if done {
                        return;
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().expect("wait for sframe-trace");
                    panic!(
                        "sframe-trace ended ({status}) before it {what}:\n{}",
                        self.stderr.join("\n")
                    )
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if let Some(why) = given_up(self.stderr.len()) {
                        panic!("{why}:\n{}", self.stderr.join("\n"))
                    }
                }
            }
        }
    }

    /// Keep the lines printed so far in `stderr`, without waiting.
    pub fn drain(&mut self) {
        self.stderr.extend(self.lines.try_iter());
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stop it with SIGINT, as Ctrl-C does; its whole stderr.
    pub fn interrupt(self) -> String {
        let (status, text) = self.stop(libc::SIGINT);
        assert!(status.success(), "sframe-trace failed: {text}");
        text
    }

    /// Let it sample until process `target` has used `ticks` more clock ticks of CPU time
    /// (however busy the host: the samples of the target, not the wall time, are what a test
    /// needs), then interrupt it; its whole stderr.
    pub fn interrupt_after_cpu(self, target: u32, ticks: u64) -> String {
        wait_for_cpu(target, ticks);
        self.interrupt()
    }

    /// Send it `signal` and wait for it to end: its exit status and whole stderr.
    pub fn stop(mut self, signal: libc::c_int) -> (std::process::ExitStatus, String) {
        // Our own child, not reaped yet, so its pid cannot be reused.
        let _ = sframe_trace::sys::process::kill(self.child.id() as libc::pid_t, signal);
        self.wait()
    }

    /// Wait for it to end by itself (its duration); its whole stderr.
    pub fn finish(mut self) -> String {
        let (status, text) = self.wait();
        assert!(status.success(), "sframe-trace failed: {text}");
        text
    }

    fn wait(&mut self) -> (std::process::ExitStatus, String) {
        let status = self.child.wait().expect("wait for sframe-trace");
        self.stderr.extend(self.lines.iter());
        (status, self.stderr.join("\n"))
    }
}

/// A tracer a failed test leaves behind is killed, not left sampling.
impl Drop for Tracer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The flags that make the tracer write its summary as one JSON object on stderr, for
/// [`Summary::of`].
pub const SUMMARY_JSON: [&str; 2] = ["--summary-format", "json"];

/// The summary of a tracer run with [`SUMMARY_JSON`] (its fields are listed in docs/guide.md).
#[derive(Debug)]
pub struct Summary(pub serde_json::Value);

impl Summary {
    /// The last line of `stderr` that is a JSON object.
    pub fn of(stderr: &str) -> Summary {
        let line = stderr
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .unwrap_or_else(|| panic!("no JSON summary in: {stderr}"));
        Summary(serde_json::from_str(line).unwrap_or_else(|err| panic!("the summary is not JSON ({err}): {line}")))
    }

    /// The count at a dotted path, e.g. `processes.exited`: a missing field fails, except a
    /// reason not seen in a `*_by_reason` object, which is 0.
    pub fn count(&self, path: &str) -> u64 {
        let mut value = &self.0;
        let mut parent = "";
        for key in path.split('.') {
            match value.get(key) {
                Some(v) => value = v,
                None if parent.ends_with("_by_reason") => return 0,
                None => panic!("no `{path}` in the summary: {}", self.0),
            }
            parent = key;
        }
        value
            .as_u64()
            .unwrap_or_else(|| panic!("`{path}` is not a count in the summary: {}", self.0))
    }

    /// The notes: why objects have no table.
    pub fn notes(&self) -> Vec<String> {
        self.0["notes"]
            .as_array()
            .unwrap_or_else(|| panic!("no notes in the summary: {}", self.0))
            .iter()
            .filter_map(|n| n.as_str().map(str::to_owned))
            .collect()
    }
}

/// `name` with a tag of `dir` (a test's own temporary directory, named at random): a command
/// name (at most 15 bytes) no other program on the host uses, so that a system-wide trace,
/// which also sees other programs (other test runs' included), can be judged by it.
pub fn own_name(dir: &Path, name: &str) -> String {
    let dir_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tag: String = dir_name.chars().filter(char::is_ascii_alphanumeric).collect();
    let tag = &tag[tag.len().saturating_sub(6)..];
    assert!(
        name.len() + 1 + tag.len() <= 15,
        "{name}: a command name has at most 15 bytes"
    );
    format!("{name}-{tag}")
}

/// Wait for a tracer whose stderr goes to the file `stderr` to end: while it starts, as long
/// as it makes progress (see [`SILENCE`]); once it says it samples, `after_start` at most.
/// Past either, it is killed and the test fails with what it printed.
pub fn wait_tracer(child: &mut Child, stderr: &Path, after_start: std::time::Duration) -> std::process::ExitStatus {
    use std::time::Instant;
    let mut progress = Progress::new(child.id());
    let mut sampling: Option<Instant> = None;
    loop {
        if let Some(status) = child.try_wait().expect("wait for sframe-trace") {
            return status;
        }
        let text = std::fs::read_to_string(stderr).unwrap_or_default();
        if sampling.is_none() && text.contains(": sampling ") {
            sampling = Some(Instant::now() + after_start);
        }
        let late = match sampling {
            Some(until) => Instant::now() > until,
            None => progress.stuck(text.len()),
        };
        if late {
            let _ = child.kill();
            let _ = child.wait();
            let when = if sampling.is_some() {
                format!("{} s after it started sampling", after_start.as_secs())
            } else {
                format!("after {} s without progress before it sampled", SILENCE.as_secs())
            };
            panic!("sframe-trace still running {when}: killed:\n{text}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The tracer to run: `SFRAME_TRACE_BIN` when set (`cargo xtask test` points the accuracy tests
/// on external programs at the release build users run), else this test build's.
pub fn tracer_binary() -> std::path::PathBuf {
    std::env::var_os("SFRAME_TRACE_BIN").map_or_else(|| env!("CARGO_BIN_EXE_sframe-trace").into(), Into::into)
}

/// The flags of the programs the tracing tests unwind: optimized, without frame pointers (the
/// walker must use the tables), every call a real call (no sibling calls, so the call chain in
/// the source is the stack), and SFrame from the assembler.
pub const SFRAME_CFLAGS: [&str; 4] = [
    "-O2",
    "-fomit-frame-pointer",
    "-fno-optimize-sibling-calls",
    "-Wa,--gsframe",
];

/// Compile the C file `source` into `out` with the host gcc and `flags`; panics with gcc's
/// message (these tests need gcc).
pub fn gcc(source: &Path, out: &Path, flags: &[&str]) -> std::path::PathBuf {
    run(Command::new("gcc").args(flags).arg("-o").arg(out).arg(source));
    out.to_path_buf()
}

/// Compile `fixtures/SOURCE.c` into `out` with [`SFRAME_CFLAGS`] and `extra` flags.
pub fn compile_fixture(source: &str, out: &Path, extra: &[&str]) -> std::path::PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../fixtures/{source}.c"));
    gcc(&src, out, &[&SFRAME_CFLAGS[..], extra].concat())
}

/// The deterministic random numbers of every test (shared with the unit tests).
pub use tracer_unwind::testing::Rng;

/// Run a build or inspection command that must succeed; its stdout. Fails with the command,
/// its status and its output.
pub fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// [`run`], its stdout as text.
pub fn run_text(cmd: &mut Command) -> String {
    String::from_utf8_lossy(&run(cmd)).into_owned()
}

/// `sframe-trace ARGS`, run in an empty directory, is refused before anything happens: status 2,
/// one line on stderr that says `says`, and no file created.
pub fn assert_refused(args: &[&str], says: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_sframe-trace"))
        .current_dir(dir.path())
        .args(args)
        .output()
        .expect("run sframe-trace");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(says), "{args:?}: expected `{says}` in: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: one line expected: {stderr}");
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("read the directory").count(),
        0,
        "{args:?}: a file was created"
    );
}

/// The profile in a gzipped pprof file the tracer wrote.
pub fn read_pprof(path: &Path) -> sframe_trace::export::pprof::Profile {
    use prost::Message as _;
    use std::io::Read as _;
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .read_to_end(&mut bytes)
        .expect("gunzip");
    sframe_trace::export::pprof::Profile::decode(bytes.as_slice()).expect("a profile")
}

/// The samples of `pid` in the tracer's json output (one object per line), each with its
/// frames innermost first.
pub fn json_samples(text: &str, pid: u32) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .filter(|s| s["pid"].as_u64() == Some(u64::from(pid)))
        .collect()
}

/// The frames of a json sample.
pub fn json_frames(sample: &serde_json::Value) -> &[serde_json::Value] {
    sample["frames"].as_array().expect("a sample has frames")
}

/// The kernel program's settings for the tests that load it directly: 499 Hz, stacks up to
/// `max_depth` frames (with kernel stacks or not), a few processes, the default ring buffer.
pub fn kernel_config(max_depth: u32, kernel_stacks: bool) -> sframe_trace::bpf::KernelConfig {
    sframe_trace::bpf::KernelConfig {
        frequency: 499,
        max_depth,
        kernel_stacks,
        all_processes: false,
        max_processes: 4,
        table_capacity: None,
        events: sframe_trace::event::EventSet::default(),
        ring_buffer_bytes: sframe_trace::bpf::DEFAULT_RING_BUFFER_BYTES,
        copy_stacks: false,
    }
}
