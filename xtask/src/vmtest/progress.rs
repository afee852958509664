//! What the guest's tests are doing, read from the test binary's output as it arrives
//! (`guest::boot` copies `output.log` to stdout and feeds it here): each test's time, as
//! libtest measured it in the guest (`ok <12.345s>`: `--report-time`), else taken on the host
//! from the moment libtest names it (`test NAME ... `) to its result (`ok`, `FAILED`,
//! `ignored`; the shared file reaches the host in bursts, so that is coarse), and the watchdog: a guest that prints nothing for the watchdog's time
//! is stuck, in the test named last (or before any test: the boot or the guest's set-up).
//! Pure: text and instants in, lines to print out; the caller reads the file and keeps time.

use std::time::{Duration, Instant};

/// How long a guest may print nothing before the watchdog stops it (`VMTEST_WATCHDOG`, in
/// seconds, overrides): longer than any one test of the lists takes under emulation (an SFrame
/// accuracy set: about 4 minutes on arm64), far shorter than the guest's time limit.
pub const WATCHDOG: Duration = Duration::from_secs(600);

/// The test running, and since when (host time, when libtest named it).
struct Running {
    name: String,
    since: Instant,
}

/// The state of the output read so far.
pub struct Progress {
    /// The last, unterminated line.
    partial: String,
    running: Option<Running>,
    last_output: Instant,
}

impl Progress {
    /// Nothing read yet, at `now` (the guest's start).
    pub fn new(now: Instant) -> Progress {
        Progress {
            partial: String::new(),
            running: None,
            last_output: now,
        }
    }

    /// Read `text`, the output that arrived at `now`; return the lines to print: one per test
    /// that ended, `vm-test: NAME: RESULT in N s`.
    pub fn feed(&mut self, text: &str, now: Instant) -> Vec<String> {
        let mut done = Vec::new();
        if text.is_empty() {
            return done;
        }
        self.last_output = now;
        self.partial.push_str(text);
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            self.line(line.trim_end_matches('\n'), now, &mut done);
        }
        // libtest names a test before it runs it, without a newline until its result.
        if self.running.is_none()
            && let Some((name, _)) = started(&self.partial)
        {
            self.running = Some(Running {
                name: name.to_owned(),
                since: now,
            });
        }
        done
    }

    fn line(&mut self, line: &str, now: Instant, done: &mut Vec<String>) {
        let rest = match started(line) {
            Some((name, rest)) => {
                if self.running.as_ref().is_none_or(|r| r.name != name) {
                    self.running = Some(Running {
                        name: name.to_owned(),
                        since: now,
                    });
                }
                rest
            }
            None => line,
        };
        if let (Some((result, reported)), Some(running)) = (result(rest), &self.running) {
            let took = match reported {
                Some(secs) => format!("{secs} s"),
                None => format!("{} s", now.saturating_duration_since(running.since).as_secs()),
            };
            done.push(format!("vm-test: {}: {result} in {took}", running.name));
            self.running = None;
        }
    }

    /// Whether the guest has printed nothing for `limit` at `now`, and if so what it is stuck
    /// in: `test NAME` (running for so long), or the boot or set-up before any test.
    pub fn stuck(&self, now: Instant, limit: Duration) -> Option<String> {
        let quiet = now.saturating_duration_since(self.last_output);
        if quiet < limit {
            return None;
        }
        Some(match &self.running {
            Some(running) => format!(
                "test {} printed nothing for {} s (running for {} s)",
                running.name,
                quiet.as_secs(),
                now.saturating_duration_since(running.since).as_secs()
            ),
            None => format!(
                "the guest printed nothing for {} s, with no test running (boot, set-up or between tests)",
                quiet.as_secs()
            ),
        })
    }
}

/// The test a libtest line starts (`test NAME ... `), and what follows the dots.
fn started(line: &str) -> Option<(&str, &str)> {
    let (name, rest) = line.strip_prefix("test ")?.split_once(" ... ")?;
    (!name.is_empty() && !name.contains(' ')).then_some((name, rest))
}

/// The result a line (or the text after a test's dots) gives, if it is one, and the seconds
/// libtest measured in the guest when it reports them (`ok <12.345s>`, `--report-time`).
fn result(text: &str) -> Option<(&str, Option<&str>)> {
    let text = text.trim();
    let (text, reported) = match text.strip_suffix("s>").and_then(|t| t.rsplit_once(" <")) {
        Some((text, secs)) if secs.parse::<f64>().is_ok() => (text, Some(secs)),
        _ => (text, None),
    };
    (text == "ok" || text == "FAILED" || text.starts_with("ignored")).then_some((text, reported))
}
