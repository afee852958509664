//! The command `sframe-trace -- COMMAND` traces, launched and held at its program's entry
//! point until the tables are loaded and sampling is on, so that none of its own code runs
//! untraced: it starts under `PTRACE_TRACEME`, stops at exec, runs the dynamic loader (which
//! maps the libraries it needs) up to a breakpoint at the entry point (`AT_ENTRY`), and waits
//! there, its instruction restored, until [`Held::release`] detaches.
//!
//! ptrace requests must come from the thread that launched the command: the session's
//! future runs on the thread that started the runtime, and everything here is called from it.

use std::{time::Duration, time::Instant};

use crate::sys::process as sys;

use anyhow::{Context as _, bail};
use tokio::process::{Child, Command};

/// How long the dynamic loader may take to reach the entry point (longer under emulation).
const LOADER_TIMEOUT: Duration = Duration::from_secs(30);
/// `AT_ENTRY` in the auxiliary vector: the program's entry point.
const AT_ENTRY: u64 = 9;

/// A launched command stopped at its entry point (or, where that failed, at exec).
pub struct Held {
    pid: libc::pid_t,
}

/// Launch `command` (program and arguments, any bytes) so that it stops when its program is
/// exec'ed.
pub fn spawn(command: &[std::ffi::OsString]) -> anyhow::Result<Child> {
    let program = command.first().context("no command to launch")?;
    let mut launch = std::process::Command::new(program);
    launch.args(&command[1..]);
    sys::trace_me_on_exec(&mut launch);
    Command::from(launch)
        .spawn()
        .with_context(|| format!("cannot launch `{}`", program.to_string_lossy()))
}

impl Held {
    /// Wait for the launched process `pid` to stop at exec, then let it run to its entry point
    /// and hold it there. When the entry point cannot be reached (an unknown architecture, a
    /// loader that never gets there), it is held where it stopped and a warning says so.
    pub fn at_entry(pid: u32) -> anyhow::Result<Held> {
        let pid = pid as libc::pid_t;
        match wait_stop(pid)? {
            libc::SIGTRAP => {}
            other => bail!("the launched command stopped with signal {other} instead of starting"),
        }
        let held = Held { pid };
        match run_to_entry(pid) {
            Ok(()) => {}
            Err(Failed::Before(err)) => super::say(format_args!(
                "sframe-trace: warning: the launched command is held at exec, not at its entry point ({err:#}): \
                 its first samples may be short\n"
            )),
            Err(Failed::After(err)) => {
                // Its entry point may still hold the breakpoint: it must not run on.
                // Our own, unreaped child.
                let _ = sys::kill(pid, libc::SIGKILL);
                return Err(err.context("running the launched command to its entry point"));
            }
        }
        Ok(held)
    }

    /// Let the process run (detach).
    pub fn release(self) {
        // Our own stopped tracee; a failure (it was killed) is harmless.
        let _ = sys::ptrace_detach(self.pid);
        std::mem::forget(self);
    }
}

impl Drop for Held {
    /// A command still held when the session gives up before sampling (tables or programs
    /// that fail to load) is killed: it was launched to be traced, not to run untraced.
    fn drop(&mut self) {
        // Our own, unreaped child.
        let _ = sys::kill(self.pid, libc::SIGKILL);
    }
}

/// Wait until `pid` stops (with a timeout); its stop signal.
fn wait_stop(pid: libc::pid_t) -> anyhow::Result<i32> {
    let started = Instant::now();
    loop {
        // Our own child.
        if let Some(status) = sys::wait_nohang(pid).context("waiting for the launched command")? {
            if libc::WIFSTOPPED(status) {
                return Ok(libc::WSTOPSIG(status));
            }
            bail!("the launched command exited before it started");
        }
        if started.elapsed() > LOADER_TIMEOUT {
            bail!("it did not stop within {} s", LOADER_TIMEOUT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Why the entry point was not reached: before anything was changed (the process is still
/// stopped at exec and can run as it is), or after the breakpoint was written.
enum Failed {
    Before(anyhow::Error),
    After(anyhow::Error),
}

/// Run the stopped process to its entry point: a breakpoint there, the loader runs, the
/// instruction is restored and the PC put back on it. Signals on the way are delivered.
fn run_to_entry(pid: libc::pid_t) -> Result<(), Failed> {
    let entry = entry_point(pid).map_err(Failed::Before)?;
    let original = peek(pid, entry).map_err(Failed::Before)?;
    let patched = arch::with_breakpoint(original)
        .ok_or_else(|| Failed::Before(anyhow::anyhow!("no entry-point breakpoint on this architecture")))?;
    poke(pid, entry, patched).map_err(Failed::Before)?;
    let mut deliver = 0;
    let reached = loop {
        // Our own stopped tracee.
        if let Err(err) = sys::ptrace_cont(pid, deliver) {
            break Err(err).context("PTRACE_CONT");
        }
        match wait_stop(pid) {
            Ok(libc::SIGTRAP) if arch::stopped_at_breakpoint(pid, entry).unwrap_or(false) => break Ok(()),
            Ok(signal) => deliver = signal as usize,
            Err(err) => break Err(err),
        }
    };
    reached.map_err(Failed::After)?;
    poke(pid, entry, original).map_err(Failed::After)?;
    arch::back_to(pid, entry).map_err(Failed::After)
}

/// `AT_ENTRY` of the process's auxiliary vector.
fn entry_point(pid: libc::pid_t) -> anyhow::Result<u64> {
    let auxv = std::fs::read(format!("/proc/{pid}/auxv")).context("reading its auxiliary vector")?;
    auxv.chunks_exact(16)
        .map(|pair| {
            let word = |b: &[u8]| u64::from_ne_bytes(b.try_into().unwrap_or_default());
            (word(&pair[..8]), word(&pair[8..]))
        })
        .find_map(|(key, value)| (key == AT_ENTRY).then_some(value))
        .context("no AT_ENTRY in its auxiliary vector")
}

fn peek(pid: libc::pid_t, addr: u64) -> anyhow::Result<u64> {
    sys::ptrace_peek(pid, addr).context("reading its entry point")
}

fn poke(pid: libc::pid_t, addr: u64, word: u64) -> anyhow::Result<()> {
    sys::ptrace_poke(pid, addr, word).context("writing its entry point")
}

#[cfg(target_arch = "x86_64")]
mod arch {
    use anyhow::Context as _;

    /// `int3` in the first byte of the (little-endian) word.
    pub fn with_breakpoint(word: u64) -> Option<u64> {
        Some((word & !0xff) | 0xcc)
    }

    fn regs(pid: libc::pid_t) -> anyhow::Result<libc::user_regs_struct> {
        crate::sys::process::ptrace_regs(pid).context("PTRACE_GETREGS")
    }

    /// `int3` leaves the PC after itself.
    pub fn stopped_at_breakpoint(pid: libc::pid_t, entry: u64) -> anyhow::Result<bool> {
        Ok(regs(pid)?.rip == entry + 1)
    }

    pub fn back_to(pid: libc::pid_t, entry: u64) -> anyhow::Result<()> {
        let mut regs = regs(pid)?;
        regs.rip = entry;
        crate::sys::process::ptrace_set_regs(pid, &regs).context("PTRACE_SETREGS")
    }
}

#[cfg(target_arch = "aarch64")]
mod arch {
    use anyhow::Context as _;

    /// `brk #0` as the first (little-endian) instruction of the word.
    pub fn with_breakpoint(word: u64) -> Option<u64> {
        Some((word & !0xffff_ffff) | 0xd420_0000)
    }

    /// `brk` leaves the PC on itself.
    pub fn stopped_at_breakpoint(pid: libc::pid_t, entry: u64) -> anyhow::Result<bool> {
        let regs = crate::sys::process::ptrace_regs(pid).context("PTRACE_GETREGSET")?;
        Ok(regs.pc == entry)
    }

    pub fn back_to(_pid: libc::pid_t, _entry: u64) -> anyhow::Result<()> {
        Ok(())
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod arch {
    pub fn with_breakpoint(_word: u64) -> Option<u64> {
        None
    }

    pub fn stopped_at_breakpoint(_pid: libc::pid_t, _entry: u64) -> anyhow::Result<bool> {
        Ok(false)
    }

    pub fn back_to(_pid: libc::pid_t, _entry: u64) -> anyhow::Result<()> {
        Ok(())
    }
}
