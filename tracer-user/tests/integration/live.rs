//! `sframe-trace --live`: the terminal view, run under a pseudo-terminal (`script` from
//! util-linux) and driven by keys written to it. The screen is read back from the escape
//! sequences the view draws with (each line starts with a cursor move to its row), the summary
//! from what follows the view. Privileged (loads BPF), except the refusal without a terminal.

use std::{
    collections::BTreeMap,
    io::{Read as _, Write as _},
    process::{Child, ChildStdin, Command, Stdio},
    sync::{Arc, Mutex},
    thread::sleep,
    time::{Duration, Instant},
};

use crate::support::build_workloads;

/// The pseudo-terminal's size.
const COLUMNS: u32 = 120;
const ROWS: u32 = 30;

/// A command running in a pseudo-terminal; everything it prints is collected.
pub(crate) struct Pty {
    child: Child,
    keys: ChildStdin,
    output: Arc<Mutex<Vec<u8>>>,
}

impl Pty {
    /// Run `shell` (a `sh -c` script) in a new pseudo-terminal of [`COLUMNS`] x [`ROWS`].
    pub(crate) fn run(shell: &str) -> Pty {
        let mut child = Command::new("script")
            .args(["--quiet", "--return", "--command"])
            .arg(format!("stty cols {COLUMNS} rows {ROWS}; {shell}"))
            .arg("/dev/null")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run script (util-linux)");
        let keys = child.stdin.take().expect("stdin");
        let mut stdout = child.stdout.take().expect("stdout");
        let output = Arc::new(Mutex::new(Vec::new()));
        std::thread::spawn({
            let output = Arc::clone(&output);
            move || {
                let mut buf = [0; 4096];
                while let Ok(n @ 1..) = stdout.read(&mut buf) {
                    output.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            }
        });
        Pty { child, keys, output }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().unwrap()).into_owned()
    }

    /// Wait up to `limit` for `done` to hold of the output so far.
    fn wait_until(&self, limit: Duration, done: impl Fn(&str) -> bool) -> bool {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if done(&self.text()) {
                return true;
            }
            sleep(Duration::from_millis(100));
        }
        false
    }

    fn press(&mut self, key: &str) {
        self.keys.write_all(key.as_bytes()).expect("write a key");
        self.keys.flush().expect("flush");
    }

    /// Wait for the end (killed after `limit`); whether `script` (the command's status) succeeded.
    pub(crate) fn finish(mut self, limit: Duration) -> (bool, String) {
        let end = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for script") {
                // Let the reader thread take the last output.
                sleep(Duration::from_millis(200));
                return (status.success(), self.text());
            }
            if Instant::now() > end {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("still running after {limit:?}: {}", printable(&self.text()));
            }
            sleep(Duration::from_millis(100));
        }
    }
}

/// The screens the view drew: for each frame (it starts at row 1), the text of each row, with
/// the escape sequences taken out.
fn frames(output: &str) -> Vec<BTreeMap<u32, String>> {
    let mut frames: Vec<BTreeMap<u32, String>> = Vec::new();
    for piece in output.split("\x1b[").skip(1) {
        // `ROW;1H` followed by the row's text (a style sequence comes as a piece of its own).
        let Some((row, text)) = piece.split_once(";1H") else {
            if let (Some(frame), Some(text)) = (frames.last_mut(), piece.strip_prefix("7m"))
                && let Some(row) = frame.keys().next_back().copied()
            {
                frame.insert(row, text.to_owned());
            }
            continue;
        };
        let Ok(row) = row.parse::<u32>() else { continue };
        if row == 1 {
            frames.push(BTreeMap::new());
        }
        if let Some(frame) = frames.last_mut() {
            frame.insert(row, text.to_owned());
        }
    }
    frames
}

/// The last frame whose heading (row 2) contains `heading` and whose first row is not empty.
fn last_frame(output: &str, heading: &str) -> Option<BTreeMap<u32, String>> {
    frames(output).into_iter().rev().find(|frame| {
        frame.get(&2).is_some_and(|h| h.contains(heading))
            && frame
                .get(&3)
                .is_some_and(|r| !r.trim().is_empty() && !r.contains("no samples yet"))
    })
}

/// The output with escape characters visible, for failure messages.
fn printable(output: &str) -> String {
    output.replace('\x1b', "^[")
}

/// A workload spending all its time in `spin`: the view's hottest function, by self, is
/// `spin`, its hottest stack the workload's chain; `f` switches to the stacks and `q` ends the
/// session, which exits 0, leaves the terminal as it found it (cooked mode, main screen), then
/// writes the --output file and prints its summary.
#[test]
fn live_view_shows_the_hottest_function_and_quits_on_q() {
    privileged_test!(shared);
    let workloads = build_workloads(&["v1"]);
    let folded = workloads.path().join("live.folded");
    let bin = workloads.path().join("v1/bigframe");
    let mut pty = Pty::run(&format!(
        "{} --live -F 499 --no-kernel -o {} -- {} 60; status=$?; stty -a; exit $status",
        env!("CARGO_BIN_EXE_sframe-trace"),
        folded.display(),
        bin.display()
    ));
    assert!(
        pty.wait_until(Duration::from_secs(120), |out| out.contains(": sampling ")),
        "the tracer did not start: {}",
        printable(&pty.text())
    );
    // About 3 s of the view, and until the samples show (a busy machine starts slowly).
    sleep(Duration::from_secs(3));
    let hottest = |out: &str| last_frame(out, "FUNCTION").is_some();
    assert!(
        pty.wait_until(Duration::from_secs(30), hottest),
        "no functions: {}",
        printable(&pty.text())
    );
    pty.press("f");
    let stacks = |out: &str| last_frame(out, "STACK").is_some();
    assert!(
        pty.wait_until(Duration::from_secs(10), stacks),
        "`f` showed no stacks: {}",
        printable(&pty.text())
    );
    pty.press("q");
    let (success, out) = pty.finish(Duration::from_secs(60));
    let shown = printable(&out);
    assert!(success, "the tracer failed: {shown}");

    let functions = last_frame(&out, "FUNCTION").expect("a functions screen");
    assert!(
        functions[&1].starts_with("sframe-trace: ")
            && functions[&1].contains(" samples/s, ")
            && functions[&1].contains(" lost, 1 process traced, "),
        "status line: {:?}",
        functions[&1]
    );
    assert!(
        functions[&3].trim_end().ends_with(" bigframe         spin"),
        "the hottest function by self is not spin: {functions:#?}"
    );
    let stacks = last_frame(&out, "STACK").expect("a stacks screen");
    assert!(
        stacks[&3].trim_end().ends_with("  bigframe;_start;main;big;spin"),
        "the hottest stack is not the workload's chain: {stacks:#?}"
    );

    let (_, after) = out
        .rsplit_once("\x1b[?1049l")
        .unwrap_or_else(|| panic!("the view never left the alternate screen: {shown}"));
    assert!(
        after.contains(" samples in ") && after.contains("(quit from the live view)"),
        "no summary after the view: {}",
        printable(after)
    );
    // `stty -a` after the tracer: raw mode is off again.
    let stty = after.split_whitespace().collect::<Vec<_>>();
    assert!(
        stty.contains(&"icanon") && stty.contains(&"echo"),
        "the terminal was left in raw mode: {}",
        printable(after)
    );
    let written = std::fs::read_to_string(&folded).expect("the --output file");
    assert!(
        written.contains("bigframe;_start;main;big;spin "),
        "--output: {written}"
    );
}

/// `--live` with stdout redirected is refused in one sentence, before anything is traced.
#[test]
fn live_needs_a_terminal() {
    let out = Command::new(env!("CARGO_BIN_EXE_sframe-trace"))
        .args(["--live", "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .output()
        .expect("run sframe-trace");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "sframe-trace: --live draws on the terminal, but stdout is not one (to save the stacks, use \
         --output FILE without --live)"
    );
}
