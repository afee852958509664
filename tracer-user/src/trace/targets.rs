//! The traced processes: given pids, a command launched for the purpose, or every process on
//! the host; and the moment to stop (they all exited, the duration ended, Ctrl-C, SIGTERM,
//! SIGHUP, SIGUSR1 or SIGPIPE).
//! The signals are listened for from the start of the session ([`Signals`]), so that one
//! arriving while tables load ends the session once they are loaded, with everything written.

use std::{
    os::fd::FromRawFd as _,
    task::{Context, Poll, Waker},
    time::Duration,
};

use super::launch::{self, Held};
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
            });
        }
        for &pid in pids {
            if !alive(pid) {
                bail!("no process with pid {pid}");
            }
        }
        Ok(Targets {
            pids: pids.to_vec(),
            child: None,
            held: None,
            all: false,
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
                // SAFETY: kill(2) on our own child's pid, which cannot have been reused: it is
                // not reaped yet.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
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
    // SAFETY: pidfd_open(2) takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd >= 0 {
        // SAFETY: a new fd that nothing else owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as std::os::fd::RawFd) };
        // A pidfd is readable once the process has exited.
        // SAFETY: the AsyncFd owns the OwnedFd, so the fd outlives the registration.
        let registered = unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) };
        if let Ok(fd) = registered {
            let _ = fd.readable().await;
            return;
        }
    }
    while alive(pid) {
        sleep(EXIT_POLL).await;
    }
}

pub(super) fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
}
