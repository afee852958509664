//! `symbolize` ended by a signal. SIGINT (Ctrl-C), SIGTERM and SIGHUP (the terminal or ssh
//! session went away) stop the command at once, whatever it is doing (reading, naming through
//! debuginfod, writing): the work runs on a thread of its own with the signals blocked, and
//! the calling thread waits for them ([`until_signal`]). When one arrives, every temporary
//! output file is removed (`outfile::abandon_all`: what was at the output's path stays as it
//! was, and nothing is committed afterwards) and [`Stopped`] is returned; the process then
//! ends with status 2, the work's thread with it.

use std::time::Duration;

use crate::{outfile, sys};

/// The signals that stop `symbolize`, with the word the message uses.
pub const STOPPING: [(libc::c_int, &str, &str); 3] = [
    (libc::SIGINT, "SIGINT", "interrupted"),
    (libc::SIGTERM, "SIGTERM", "terminated"),
    (libc::SIGHUP, "SIGHUP", "hung up"),
];

/// How often the waiting thread looks whether the work is done (signals end the wait at once).
const POLL: Duration = Duration::from_millis(20);

/// The command was stopped by a signal before its output was complete.
#[derive(Debug, thiserror::Error, Clone, Copy, PartialEq, Eq)]
#[error("{why} ({name}): stopped before the output was complete; no output file was written")]
pub struct Stopped {
    pub signal: libc::c_int,
    pub name: &'static str,
    pub why: &'static str,
}

/// Run `work` on a thread of its own and return what it returns, unless one of [`STOPPING`]
/// arrives first: then the temporary output files are removed and [`Stopped`] is returned at
/// once (the work's thread is left to the end of the process).
pub fn until_signal<T: Send + 'static>(work: impl FnOnce() -> anyhow::Result<T> + Send + 'static) -> anyhow::Result<T> {
    // Blocked before the thread starts, so that it (and any thread it starts) inherits the
    // mask and only this thread takes them, with sigtimedwait.
    let blocked = match sys::signals::block(&STOPPING.map(|(signal, ..)| signal)) {
        Ok(blocked) => blocked,
        Err(err) => anyhow::bail!("cannot block signals: {err}"),
    };
    let worker = std::thread::Builder::new().name("symbolize".to_owned()).spawn(work);
    let worker = match worker {
        Ok(worker) => worker,
        Err(err) => {
            blocked.restore();
            return Err(anyhow::Error::new(err).context("cannot start the symbolizing thread"));
        }
    };
    loop {
        let got = blocked.wait(POLL);
        if let Some(&(signal, name, why)) = STOPPING.iter().find(|(s, ..)| *s == got) {
            outfile::abandon_all();
            return Err(Stopped { signal, name, why }.into());
        }
        if worker.is_finished() {
            break;
        }
    }
    blocked.restore();
    worker
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the symbolizing thread panicked")))
}
