//! The traced processes: given pids, a command launched for the purpose, or every process on
//! the host; and the moment to stop (they all exited, the duration ended, Ctrl-C or SIGTERM).
//! The signals are listened for from the start of the session ([`Signals`]), so that one
//! arriving while tables load ends the session once they are loaded, with everything written.

use std::{
    task::{Context, Poll, Waker},
    time::Duration,
};

use anyhow::{Context as _, bail};
use tokio::{
    process::{Child, Command},
    signal::unix::{Signal, SignalKind, signal},
    time::sleep,
};

pub struct Targets {
    pids: Vec<u32>,
    child: Option<Child>,
    /// Every process, including those started later.
    all: bool,
}

/// How often exits of `--pid` processes are polled for.
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
            all: true,
        })
    }

    /// Check the given pids exist, or launch the command and wait until its program and
    /// libraries are mapped.
    pub async fn start(pids: &[u32], command: &[String]) -> anyhow::Result<Targets> {
        if let Some(program) = command.first() {
            let child = Command::new(program)
                .args(&command[1..])
                .spawn()
                .with_context(|| format!("cannot launch `{program}`"))?;
            let pid = child.id().context("the launched command exited at once")?;
            wait_until_mapped(pid).await;
            return Ok(Targets {
                pids: vec![pid],
                child: Some(child),
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
            all: false,
        })
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
                    while pids.iter().any(|&pid| alive(pid)) {
                        sleep(EXIT_POLL).await;
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

/// Ctrl-C (SIGINT) and SIGTERM, caught from when [`Signals::listen`] is called to the end of
/// the process (the handlers stay installed: a signal during the writing of the output is
/// ignored rather than fatal).
pub struct Signals {
    interrupt: Signal,
    terminate: Signal,
    received: Option<&'static str>,
}

impl Signals {
    /// Catch both signals from now on. Needs a tokio runtime.
    pub fn listen() -> anyhow::Result<Signals> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
            terminate: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
            received: None,
        })
    }

    /// Why to stop, if a signal has arrived; does not wait (for loops that do not await).
    pub fn received(&mut self) -> Option<&'static str> {
        if self.received.is_none() {
            let mut context = Context::from_waker(Waker::noop());
            if self.interrupt.poll_recv(&mut context).is_ready() {
                self.received = Some("interrupted");
            } else if self.terminate.poll_recv(&mut context).is_ready() {
                self.received = Some("terminated");
            }
        }
        self.received
    }

    /// Wait for a signal; at once if one has arrived already.
    pub async fn recv(&mut self) -> &'static str {
        if let Some(why) = self.received {
            return why;
        }
        let why = std::future::poll_fn(|context| {
            if self.interrupt.poll_recv(context).is_ready() {
                return Poll::Ready("interrupted");
            }
            self.terminate.poll_recv(context).map(|_| "terminated")
        })
        .await;
        self.received = Some(why);
        why
    }
}

/// Whether a process exists (zombies count as gone).
pub(super) fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
}

/// Wait until a freshly launched process has exec'ed its program and its mappings stop
/// changing (the dynamic loader has mapped the libraries), at most one second. Samples
/// taken before are not traced: the tables of its code are not known yet.
async fn wait_until_mapped(pid: u32) {
    let ours = std::fs::read_link("/proc/self/exe").ok();
    let mut last = String::new();
    let mut stable = 0;
    for _ in 0..200 {
        sleep(Duration::from_millis(5)).await;
        if std::fs::read_link(format!("/proc/{pid}/exe")).ok() == ours {
            continue;
        }
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            return;
        };
        let exec: String = maps
            .lines()
            .filter(|l| l.split_whitespace().nth(1).is_some_and(|p| p.contains('x')))
            .collect();
        if exec == last {
            stable += 1;
            if stable >= 3 {
                return;
            }
        } else {
            stable = 0;
            last = exec;
        }
    }
}
