//! One guest run: the kernel command line, the qemu command, the shell script the guest runs,
//! and the boot itself. The guest sees the host's root read-only and the repository read-write
//! at its own path (both over 9p), runs `RUN/command.sh`, and leaves the command's output in
//! `RUN/output.log` and its exit status in `RUN/status`: files in the shared repository, read
//! while the guest runs, instead of the serial port (which carries only the kernel console,
//! kept in `RUN/console.log`). The builders of text are pure.

use std::{
    fs,
    io::{Read as _, Seek as _, SeekFrom, Write},
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use super::{arch::GuestArch, kernel::Kernel, progress::Progress, report::Outcome};

/// Environment variables the command inside the guest keeps from the host (besides `PATH`,
/// `HOME` and the `SFRAME_TRACE_*` settings of the tests).
const PASSED_ENV: &[&str] = &["USER", "CARGO_HOME", "RUSTUP_HOME", "RUST_BACKTRACE", "RUST_LOG", "CI"];

/// What the guest is to run, and how.
pub struct Run<'a> {
    pub arch: GuestArch,
    pub kernel: &'a Kernel,
    /// The guest's root file system, shared read-only: `/` for x86-64 guests, the arm64 root
    /// (`rootfs.rs`) for aarch64 ones.
    pub root: &'a Path,
    /// The initramfs file.
    pub initramfs: &'a Path,
    /// The repository, shared read-write.
    pub repo: &'a Path,
    /// The run directory inside the repository.
    pub dir: &'a Path,
    pub cpus: u32,
    pub memory: &'a str,
    pub timeout: Duration,
    /// How long the guest may print nothing (`progress::WATCHDOG`).
    pub watchdog: Duration,
    /// `kvm` or `tcg` (software emulation).
    pub accel: &'a str,
}

/// The kernel command line: console on the first serial port (`console`), no reboot on panic
/// (qemu exits), and the paths the guest init reads (`sframe_trace.*`, kept out of init's
/// environment by their dot, read from /proc/cmdline).
pub fn command_line(console: &str, run: &Path, repo: &Path, kernel: &Path) -> anyhow::Result<String> {
    let mut line = format!("console={console} panic=-1 loglevel=5 rdinit=/init");
    for (key, path) in [("run", run), ("repo", repo), ("kernel", kernel)] {
        let text = path.to_str().context("the guest's paths must be UTF-8")?;
        if text.is_empty() || text.contains(char::is_whitespace) || text.contains('"') {
            bail!(
                "{text:?} cannot be passed on a kernel command line: move the repository or cache to a path without spaces"
            );
        }
        line.push_str(&format!(" sframe_trace.{key}={text}"));
    }
    Ok(line)
}

/// A path as a qemu option value (commas doubled).
pub fn qemu_value(path: &Path) -> String {
    path.to_string_lossy().replace(',', ",,")
}

/// The qemu arguments of a run.
pub fn qemu_args(run: &Run, command_line: &str) -> Vec<String> {
    let mut args = run.arch.machine_args(run.accel);
    args.extend(
        [
            "-m",
            run.memory,
            "-smp",
            &run.cpus.to_string(),
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-no-reboot",
        ]
        .iter()
        .map(|s| (*s).to_owned()),
    );
    args.extend(["-kernel".to_owned(), run.kernel.image().to_string_lossy().into_owned()]);
    args.extend(["-initrd".to_owned(), run.initramfs.to_string_lossy().into_owned()]);
    args.extend(["-append".to_owned(), command_line.to_owned()]);
    args.extend([
        "-serial".to_owned(),
        format!("file:{}", run.dir.join("console.log").display()),
    ]);
    args.extend([
        "-fsdev".to_owned(),
        format!(
            "local,id=hostroot,path={},security_model=none,readonly=on,multidevs=remap",
            qemu_value(run.root)
        ),
        "-device".to_owned(),
        "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot".to_owned(),
        "-fsdev".to_owned(),
        format!(
            "local,id=repo,path={},security_model=none,multidevs=remap",
            qemu_value(run.repo)
        ),
        "-device".to_owned(),
        "virtio-9p-pci,fsdev=repo,mount_tag=repo".to_owned(),
    ]);
    args
}

/// A word quoted for the shell.
pub fn shell_quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:+,@%".contains(c))
    {
        return word.to_owned();
    }
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// The script the guest runs: the host's environment that matters, the working directory,
/// then the command.
pub fn command_script(env: &[(String, String)], cwd: &Path, command: &[String]) -> String {
    let mut script = String::from("# Written by cargo xtask vm-test; run by the guest init.\n");
    for (name, value) in env {
        script.push_str(&format!("export {name}={}\n", shell_quote(value)));
    }
    script.push_str(&format!("cd {} || exit 125\n", shell_quote(&cwd.to_string_lossy())));
    let words: Vec<String> = command.iter().map(|w| shell_quote(w)).collect();
    script.push_str(&format!("exec {}\n", words.join(" ")));
    script
}

/// The host's variables the guest command gets.
pub fn passed_env() -> Vec<(String, String)> {
    let mut env = vec![
        ("TERM".to_owned(), "dumb".to_owned()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
    ];
    for (name, value) in std::env::vars() {
        if ["PATH", "HOME"].contains(&name.as_str())
            || PASSED_ENV.contains(&name.as_str())
            || name.starts_with("SFRAME_TRACE_")
        {
            env.push((name, value));
        }
    }
    env
}

/// Boot the guest and wait for it, copying its output to stdout as it grows ([`watch`]).
pub fn boot(run: &Run, command_line: &str) -> anyhow::Result<Outcome> {
    let status_file = run.dir.join("status");
    let output_file = run.dir.join("output.log");
    for stale in [&status_file, &output_file] {
        if stale.exists() {
            fs::remove_file(stale)?;
        }
    }
    let args = qemu_args(run, command_line);
    let (program, _) = run.arch.qemu();
    eprintln!("+ {program} {}", args.join(" "));
    let mut qemu = Command::new(program);
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent; the guest dies
    // with xtask (killed or not) instead of running on unseen.
    unsafe {
        qemu.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let mut qemu = qemu
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(run.dir.join("qemu.log"))?)
        .spawn()
        .with_context(|| format!("starting {program}"))?;
    let watched = watch(
        &mut qemu,
        &output_file,
        Limits {
            timeout: run.timeout,
            watchdog: run.watchdog,
            poll: Duration::from_millis(500),
        },
        &mut std::io::stdout(),
    )?;
    let status = fs::read_to_string(&status_file)
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    Ok(match (status, watched) {
        (Some(code), _) => Outcome::Exited(code),
        (None, Watched::Stuck(what)) => Outcome::Stuck(what),
        (None, Watched::TimedOut) => Outcome::Timeout,
        (None, Watched::Exited) => Outcome::BootFailure,
    })
}

/// How long [`watch`] lets a guest run, and how often it looks.
pub struct Limits {
    /// The whole run.
    pub timeout: Duration,
    /// Without output (`progress::WATCHDOG`).
    pub watchdog: Duration,
    pub poll: Duration,
}

/// How [`watch`] saw the guest end.
#[derive(Debug, PartialEq, Eq)]
pub enum Watched {
    /// It exited by itself.
    Exited,
    /// It ran past the time limit and was killed.
    TimedOut,
    /// It printed nothing for the watchdog's time and was killed: what it was stuck in.
    Stuck(String),
}

/// Wait for `guest` (a child process: qemu, or a stand-in in the tests), copying what its
/// `output` file gains to `out` as it grows, with each test's time when it ends
/// (`progress.rs`); kill it (and reap it) when it runs past `limits.timeout` or prints nothing
/// for `limits.watchdog`, which is then said on stderr with the test it was stuck in.
pub fn watch(guest: &mut Child, output: &Path, limits: Limits, out: &mut dyn Write) -> anyhow::Result<Watched> {
    let started = Instant::now();
    let mut progress = Progress::new(started);
    let mut shown = 0u64;
    let watched = loop {
        shown = copy_new(output, shown, &mut progress, out);
        if guest.try_wait()?.is_some() {
            break Watched::Exited;
        }
        let now = Instant::now();
        let ended = if now.duration_since(started) > limits.timeout {
            Some(Watched::TimedOut)
        } else {
            progress.stuck(now, limits.watchdog).map(Watched::Stuck)
        };
        if let Some(ended) = ended {
            // The pid is the child's own, started by the caller and not yet reaped.
            let _ = guest.kill();
            let _ = guest.wait();
            if let Watched::Stuck(what) = &ended {
                eprintln!("vm-test: watchdog: {what}; the guest was stopped");
            }
            break ended;
        }
        thread::sleep(limits.poll);
    };
    copy_new(output, shown, &mut progress, out);
    Ok(watched)
}

/// Copy what `path` gained since byte `from` to `out`, and feed it to `progress`, whose lines
/// go to `out` after the line that ended each test; return the new length.
fn copy_new(path: &Path, from: u64, progress: &mut Progress, out: &mut dyn Write) -> u64 {
    let Ok(mut file) = fs::File::open(path) else {
        return from;
    };
    if file.seek(SeekFrom::Start(from)).is_err() {
        return from;
    }
    let mut new = Vec::new();
    if file.read_to_end(&mut new).is_err() {
        return from;
    }
    // Line by line, so that what `progress` says follows the line it is about.
    let now = Instant::now();
    for piece in new.split_inclusive(|b| *b == b'\n') {
        let _ = out.write_all(piece);
        for line in progress.feed(&String::from_utf8_lossy(piece), now) {
            let _ = writeln!(out, "{line}");
        }
    }
    let _ = out.flush();
    from + new.len() as u64
}

/// The last lines of the console and of qemu's own messages, for a guest that reported nothing.
pub fn console_tail(dir: &Path, lines: usize) -> String {
    let mut out = String::new();
    for name in ["qemu.log", "console.log"] {
        let path: PathBuf = dir.join(name);
        let text = fs::read_to_string(&path).unwrap_or_default();
        let all: Vec<&str> = text.lines().filter(|l| !l.contains("TCG doesn't support")).collect();
        for line in &all[all.len().saturating_sub(lines)..] {
            out.push_str(&format!("{name}: {line}\n"));
        }
    }
    out
}

/// Whether the kernel complained during the run (a warning, an oops, a BUG).
pub fn kernel_complained(dir: &Path) -> bool {
    let console = fs::read_to_string(dir.join("console.log")).unwrap_or_default();
    ["Call Trace", "BUG:", "WARNING:", "Oops"]
        .iter()
        .any(|m| console.contains(m))
}
