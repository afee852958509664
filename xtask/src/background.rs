//! Stages of `cargo xtask test` that run beside the others: the guests under qemu, which need
//! no privileged turn on this host (their tests run in their own kernel) and one CPU, while the
//! stages after them mostly wait on the privileged tests' turns. Each stage is a child process
//! (this xtask, with the task's arguments) with its output in its own log under `target/`,
//! one after the other; [`Lane::finish`] waits for them, prints what failed with the end of its
//! log, and gives each stage's time for the report.

use std::{
    fs::File,
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    thread::JoinHandle,
    time::{Duration, Instant},
};

/// A stage to run in the background: its name (one of `times::STAGES`) and command.
pub struct Job {
    pub name: &'static str,
    pub command: Command,
}

/// How a background stage ended.
pub struct Ended {
    pub name: &'static str,
    pub took: Duration,
    pub ok: bool,
    pub log: PathBuf,
}

/// The stages running in the background, until [`Lane::finish`].
pub struct Lane {
    thread: JoinHandle<Vec<Ended>>,
}

/// Lines of a failed stage's log printed when it is waited for.
const TAIL: usize = 80;

/// Start `jobs` one after the other in a thread, each one's output in
/// `target/background-NAME.log`.
pub fn start(root: &Path, jobs: Vec<Job>) -> Lane {
    let dir = root.join("target");
    for job in &jobs {
        println!(
            "xtask: stage {} runs in the background (log {})",
            job.name,
            log_path(&dir, job.name).display()
        );
    }
    let thread = std::thread::spawn(move || jobs.into_iter().map(|job| run(&dir, job)).collect());
    Lane { thread }
}

fn log_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("background-{name}.log"))
}

fn run(dir: &Path, mut job: Job) -> Ended {
    let log = log_path(dir, job.name);
    let started = Instant::now();
    let ok = match File::create(&log).and_then(|out| Ok((out.try_clone()?, out))) {
        Ok((out, err)) => job
            .command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .status()
            .is_ok_and(|status| status.success()),
        Err(err) => {
            eprintln!("xtask: cannot create {}: {err}", log.display());
            false
        }
    };
    Ended {
        name: job.name,
        took: started.elapsed(),
        ok,
        log,
    }
}

impl Lane {
    /// Wait for the stages; print each one's verdict, and the last [`TAIL`] lines of the log
    /// of each that failed.
    pub fn finish(self) -> Vec<Ended> {
        let since = Instant::now();
        let ended = self.thread.join().unwrap_or_default();
        println!(
            "xtask: the background stages were waited for {} s",
            since.elapsed().as_secs()
        );
        for stage in &ended {
            if stage.ok {
                println!(
                    "xtask: stage {} (background) passed in {} s (log {})",
                    stage.name,
                    stage.took.as_secs(),
                    stage.log.display()
                );
                // A guest's rows of the kernel table: each kernel's result and tests.
                for row in tail(&stage.log, TAIL).iter().filter(|l| is_table_row(l)) {
                    println!("  {row}");
                }
                continue;
            }
            println!(
                "xtask: stage {} (background) FAILED after {} s; the end of {}:",
                stage.name,
                stage.took.as_secs(),
                stage.log.display()
            );
            for line in tail(&stage.log, TAIL) {
                println!("  | {line}");
            }
        }
        ended
    }
}

/// A row of a Markdown table (`| … |`), its header's rule (`|---|`) aside.
fn is_table_row(line: &str) -> bool {
    line.starts_with("| ") && line.ends_with(" |")
}

/// The last `n` lines of the file at `path` (none when it cannot be read).
fn tail(path: &Path, n: usize) -> Vec<String> {
    let Ok(file) = File::open(path) else {
        return Vec::new();
    };
    let mut lines = std::collections::VecDeque::with_capacity(n);
    for line in BufReader::new(file).split(b'\n').map_while(Result::ok) {
        if lines.len() == n {
            lines.pop_front();
        }
        lines.push_back(String::from_utf8_lossy(&line).into_owned());
    }
    lines.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new directory of this test (created, never reused: a planted one fails the test),
    /// with a `target/` in it.
    fn scratch(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-background-{test}-{}", std::process::id()));
        std::fs::create_dir(&dir).expect("a new scratch directory");
        std::fs::create_dir(dir.join("target")).expect("target");
        dir
    }

    #[test]
    fn stages_run_in_order_with_their_logs_and_verdicts() {
        let dir = scratch("order");
        let mut first = Command::new("sh");
        first.args(["-c", "echo one; echo two >&2"]);
        let mut second = Command::new("sh");
        second.args(["-c", "seq 1 200; exit 3"]);
        assert!(is_table_row("| 5.10 (bullseye) | pass | 5 passed |"));
        assert!(!is_table_row("|---|---|") && !is_table_row("xtask: | x |"));
        let lane = start(
            &dir,
            vec![
                Job {
                    name: "x86-64-guests",
                    command: first,
                },
                Job {
                    name: "arm64-guest",
                    command: second,
                },
            ],
        );
        let ended = lane.finish();
        let verdicts: Vec<(&str, bool)> = ended.iter().map(|e| (e.name, e.ok)).collect();
        assert_eq!(verdicts, [("x86-64-guests", true), ("arm64-guest", false)]);
        let first_log = std::fs::read_to_string(&ended[0].log).expect("first log");
        assert!(
            first_log.contains("one\n") && first_log.contains("two\n"),
            "{first_log:?}"
        );
        let last = tail(&ended[1].log, 3);
        assert_eq!(last, ["198", "199", "200"]);
        std::fs::remove_dir_all(dir).expect("remove the scratch directory");
    }

    #[test]
    fn a_stage_that_cannot_start_fails() {
        let dir = scratch("missing");
        let ended = start(
            &dir,
            vec![Job {
                name: "fuzz",
                command: Command::new("/nonexistent/program"),
            }],
        )
        .finish();
        assert!(!ended[0].ok);
        std::fs::remove_dir_all(dir).expect("remove the scratch directory");
    }
}
