//! The traced processes: given pids, a command launched for the purpose, or every process on
//! the host; and the moment to stop (they all exited, the duration ended, Ctrl-C, SIGTERM,
//! SIGHUP, SIGUSR1 or SIGPIPE).
//! The signals are listened for from the start of the session ([`Signals`]), so that one
//! arriving while tables load ends the session once they are loaded, with everything written.

use std::{
    task::{Context, Poll, Waker},
    time::Duration,
};

use super::launch::{self, Held};
use crate::manager::seam::alive;
use anyhow::{Context as _, bail};
use tokio::{
    process::Child,
    signal::unix::{Signal, SignalKind, signal},
    time::sleep,
};

pub struct Targets {
    pids: Vec<u32>,
    child: Option<Child>,
    /// The launched command, held at its entry point until [`Targets::release`].
    held: Option<Held>,
    /// Every process, including those started later.
    all: bool,
    /// What was found about the given pids that the summary explains (a thread id traced as
    /// its process, a kernel thread), one sentence each.
    pub notes: Vec<String>,
    /// The CPU time of each given pid at the start, in clock ticks, to tell at the end one that
    /// slept the whole time.
    pub cpu_at_start: Vec<(u32, u64)>,
}

/// How often exits of `--pid` processes are polled for where a pidfd cannot tell.
const EXIT_POLL: Duration = Duration::from_millis(100);

impl Targets {
    /// Every process running now (their pids; more are found while tracing).
    pub fn all() -> anyhow::Result<Targets> {
        let mut pids = Vec::new();
        for entry in std::fs::read_dir("/proc").context("listing /proc")? {
            if let Some(pid) = entry.ok().and_then(|e| e.file_name().to_str()?.parse().ok()) {
                pids.push(pid);
            }
        }
        pids.sort_unstable();
        Ok(Targets {
            pids,
            child: None,
            held: None,
            all: true,
            notes: Vec::new(),
            cpu_at_start: Vec::new(),
        })
    }

    /// Check the given pids exist, or launch the command and hold it at its entry point, its
    /// program and libraries mapped, until [`Targets::release`].
    pub fn start(pids: &[u32], command: &[std::ffi::OsString]) -> anyhow::Result<Targets> {
        if !command.is_empty() {
            let child = launch::spawn(command)?;
            let pid = child.id().context("the launched command exited at once")?;
            let held = Held::at_entry(pid)?;
            return Ok(Targets {
                pids: vec![pid],
                child: Some(child),
                held: Some(held),
                all: false,
                notes: Vec::new(),
                cpu_at_start: Vec::new(),
            });
        }
        let (mut processes, mut notes, mut cpu_at_start) = (Vec::new(), Vec::new(), Vec::new());
        for &pid in pids {
            if !alive(pid) {
                bail!("no process with pid {pid}");
            }
            let facts = super::inspect::facts(pid);
            // A thread id (from `top -H`): the kernel traces processes, so its process is.
            let process = match &facts {
                Some(facts) if facts.tgid != pid && facts.tgid != 0 => {
                    notes.push(format!(
                        "pid {pid} is a thread of process {} ({}): its whole process was traced (give --pid a \
                         process id; `top -H` and `ps -L` list thread ids)",
                        facts.tgid,
                        tracer_unwind::names::escaped(&facts.comm),
                    ));
                    facts.tgid
                }
                _ => pid,
            };
            if let Some(facts) = facts.as_ref().filter(|f| f.kernel_thread) {
                notes.push(format!(
                    "pid {pid} ({}) is a kernel thread: it has no user stack, and shows kernel frames only when it \
                     runs (to see where it waits, add -e offcpu)",
                    tracer_unwind::names::escaped(&facts.comm),
                ));
            }
            if !processes.contains(&process) {
                processes.push(process);
                cpu_at_start.push((process, super::inspect::cpu_ticks(process).unwrap_or(0)));
            }
        }
        Ok(Targets {
            pids: processes,
            child: None,
            held: None,
            all: false,
            notes,
            cpu_at_start,
        })
    }

    /// Let a held command run (once sampling is on).
    pub fn release(&mut self) {
        if let Some(held) = self.held.take() {
            held.release();
        }
    }

    pub fn is_all(&self) -> bool {
        self.all
    }

    pub fn pids(&self) -> &[u32] {
        &self.pids
    }

    /// "pid 12" / "pids 12, 13" / "`cmd` (pid 12)", for messages.
    pub fn describe(&self) -> String {
        let list = self.pids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        if self.all {
            return format!("every process ({} now)", self.pids.len());
        }
        match (&self.child, self.pids.len()) {
            (Some(_), _) => format!("the launched command (pid {list})"),
            (None, 1) => format!("pid {list}"),
            (None, _) => format!("pids {list}"),
        }
    }

    /// What a flame graph's title says was traced, and where: the command as given (its first
    /// 100 characters), `pid 12 (app), pid 13 (db)` (the first 8) or `every process`, then
    /// `on HOST`.
    pub fn title(&self, command: &[std::ffi::OsString]) -> String {
        const MAX_COMMAND: usize = 100;
        const MAX_PIDS: usize = 8;
        let what = if self.all {
            "every process".to_owned()
        } else if !command.is_empty() {
            let words: Vec<String> = command.iter().map(|w| w.to_string_lossy().into_owned()).collect();
            let text = words.join(" ");
            let mut shown: String = text.chars().take(MAX_COMMAND).collect();
            if shown.len() < text.len() {
                shown.push_str("...");
            }
            format!("`{shown}` (pid {})", self.pids.first().copied().unwrap_or(0))
        } else {
            let mut named: Vec<String> = self
                .pids
                .iter()
                .take(MAX_PIDS)
                .map(|&pid| match read_small(&format!("/proc/{pid}/comm")) {
                    Some(comm) => format!("pid {pid} ({comm})"),
                    None => format!("pid {pid}"),
                })
                .collect();
            if self.pids.len() > MAX_PIDS {
                named.push(format!("{} more", self.pids.len() - MAX_PIDS));
            }
            named.join(", ")
        };
        match read_small("/proc/sys/kernel/hostname") {
            Some(host) => format!("{what} on {host}"),
            None => what,
        }
    }

    /// The given pids that used no CPU time while traced (alive at the end, their CPU time
    /// what it was at the start).
    pub fn idle(&self) -> Vec<u32> {
        self.cpu_at_start
            .iter()
            .filter(|&&(pid, start)| super::inspect::cpu_ticks(pid) == Some(start))
            .map(|&(pid, _)| pid)
            .collect()
    }

    /// Resolves when tracing should stop, with the reason.
    pub async fn until_done(&mut self, duration: Option<Duration>, signals: &mut Signals) -> &'static str {
        let deadline = async {
            match duration {
                Some(d) => sleep(d).await,
                None => std::future::pending().await,
            }
        };
        let pids = self.pids.clone();
        let all = self.all;
        let exited = async {
            if all {
                return std::future::pending().await;
            }
            match self.child.as_mut() {
                Some(child) => {
                    let _ = child.wait().await;
                }
                None => {
                    for pid in pids {
                        exit_of(pid).await;
                    }
                }
            }
        };
        tokio::select! {
            why = signals.recv() => why,
            () = deadline => "the duration ended",
            () = exited => "the traced processes exited",
        }
    }

    /// Stop a launched command that is still running (SIGTERM) and reap it.
    pub async fn finish(&mut self) {
        if let Some(child) = self.child.as_mut() {
            if let (Ok(None), Some(pid)) = (child.try_wait(), child.id()) {
                // Our own child's pid, which cannot have been reused: it is not reaped yet.
                let _ = crate::sys::process::kill(pid as libc::pid_t, libc::SIGTERM);
            }
            let _ = child.wait().await;
        }
    }
}

/// The signals that end a session, each with the reason the summary gives: Ctrl-C (SIGINT),
/// SIGTERM, SIGHUP (the terminal or ssh session went away), SIGUSR1, and SIGPIPE (a pipe the
/// tracer writes to, stdout or stderr, lost its reader). Each ends the session like SIGTERM,
/// with everything collected written.
const STOPPING: [(libc::c_int, &str); 5] = [
    (libc::SIGINT, "interrupted"),
    (libc::SIGTERM, "terminated"),
    (libc::SIGHUP, "hung up"),
    (libc::SIGUSR1, "SIGUSR1"),
    (libc::SIGPIPE, "a pipe closed"),
];

/// The signals of [`STOPPING`], caught from when [`Signals::listen`] is called to the end of
/// the process (the handlers stay installed: a signal during the writing of the output is
/// ignored rather than fatal).
pub struct Signals {
    caught: Vec<(Signal, &'static str)>,
    received: Option<&'static str>,
}

impl Signals {
    /// Catch them from now on. Needs a tokio runtime.
    pub fn listen() -> anyhow::Result<Signals> {
        let caught = STOPPING
            .iter()
            .map(|&(number, why)| {
                let caught = signal(SignalKind::from_raw(number))
                    .with_context(|| format!("installing the handler of signal {number}"))?;
                Ok((caught, why))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Signals { caught, received: None })
    }

    /// The reason of the first signal that has arrived, if any (registering `context`'s waker
    /// with the others).
    fn poll(&mut self, context: &mut Context<'_>) -> Poll<&'static str> {
        for (signal, why) in &mut self.caught {
            if signal.poll_recv(context).is_ready() {
                return Poll::Ready(why);
            }
        }
        Poll::Pending
    }

    /// Why to stop, if a signal has arrived; does not wait (for loops that do not await).
    pub fn received(&mut self) -> Option<&'static str> {
        if self.received.is_none()
            && let Poll::Ready(why) = self.poll(&mut Context::from_waker(Waker::noop()))
        {
            self.received = Some(why);
        }
        self.received
    }

    /// Wait for a signal; at once if one has arrived already.
    pub async fn recv(&mut self) -> &'static str {
        if let Some(why) = self.received {
            return why;
        }
        let why = std::future::poll_fn(|context| self.poll(context)).await;
        self.received = Some(why);
        why
    }
}

/// Whether a process exists (zombies count as gone).
/// Resolves when process `pid` has exited (as a zombie or reaped): told by its pidfd (Linux
/// 5.3+), without waking up until then, or else polled every [`EXIT_POLL`].
async fn exit_of(pid: u32) {
    if let Ok(fd) = crate::sys::process::pidfd_open(pid as libc::pid_t) {
        // A pidfd is readable once the process has exited.
        if let Ok(fd) = crate::sys::poll::readable(fd) {
            let _ = fd.readable().await;
            return;
        }
    }
    while alive(pid) {
        sleep(EXIT_POLL).await;
    }
}

/// The first line of a small file of /proc (a name: at most 64 bytes read), trimmed; `None`
/// when it cannot be read or is empty.
fn read_small(path: &str) -> Option<String> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path).ok()?.take(64).read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let line = text.lines().next()?.trim();
    (!line.is_empty()).then(|| line.to_owned())
}
