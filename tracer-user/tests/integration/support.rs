//! Helpers shared by the test modules: the gate of tests that need root (privileged), a child process that cannot
//! outlive its test, and the build of the tracing workloads.

#[cfg(feature = "ebpf")]
use std::{path::Path, process::Child};
use std::{
    process::Command,
    sync::{Mutex, MutexGuard},
};

/// Tests that need root (they load BPF and sample real processes) run one at a time, so that
/// none of them measures another's load on a small machine.
static PRIVILEGED: Mutex<()> = Mutex::new(());

/// The turn of a privileged test: `Some(guard)` when it may run (hold the guard for the whole
/// test), `None` after skipping loudly without root. Under `CI=true`, not being root fails.
pub fn privileged(test: &str) -> Option<MutexGuard<'static, ()>> {
    let uid = Command::new("id").arg("-u").output().expect("run id -u");
    if String::from_utf8_lossy(&uid.stdout).trim() == "0" {
        return Some(PRIVILEGED.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{test}: privileged tests must run under CI, but this is not root"
    );
    eprintln!("\n!!!!! SKIPPED {test}: needs root to load BPF (run the tests with sudo) !!!!!\n");
    None
}

/// A process started by a test; killed and reaped on drop, even when an assertion fails.
#[cfg(feature = "ebpf")]
pub struct Running(pub Child);

#[cfg(feature = "ebpf")]
impl Running {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

#[cfg(feature = "ebpf")]
impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(feature = "ebpf")]
/// A tracer running in the background; its stderr is collected line by line.
pub struct Tracer {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    pub stderr: Vec<String>,
}

#[cfg(feature = "ebpf")]
impl Tracer {
    /// Start `sframe-trace ARGS` and wait until it samples.
    pub fn start(args: &[&str]) -> Tracer {
        let mut child = Command::new(tracer_binary())
            .args(args)
            .stdout(std::process::Stdio::null())
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
        loop {
            match tracer.lines.recv_timeout(std::time::Duration::from_secs(120)) {
                Ok(line) => {
                    let sampling = line.contains(": sampling ");
                    tracer.stderr.push(line);
                    if sampling {
                        return tracer;
                    }
                }
                Err(_) => panic!("sframe-trace did not start sampling: {:?}", tracer.stderr),
            }
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stop it with SIGINT, as Ctrl-C does; its whole stderr.
    pub fn interrupt(self) -> String {
        // SAFETY: kill(2) on our own child, not reaped yet, so its pid cannot be reused.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        self.finish()
    }

    /// Wait for it to end by itself (its duration); its whole stderr.
    pub fn finish(mut self) -> String {
        let status = self.child.wait().expect("wait for sframe-trace");
        self.stderr.extend(self.lines.iter());
        let text = self.stderr.join("\n");
        assert!(status.success(), "sframe-trace failed: {text}");
        text
    }
}

/// The tracer to run: `SFRAME_TRACE_BIN` when set (`cargo xtask test` points the accuracy tests
/// on external programs at the release build users run), else this test build's.
#[cfg(feature = "ebpf")]
pub fn tracer_binary() -> std::path::PathBuf {
    std::env::var_os("SFRAME_TRACE_BIN").map_or_else(|| env!("CARGO_BIN_EXE_sframe-trace").into(), Into::into)
}

/// Compile `fixtures/SOURCE.c` into `out` without frame pointers, with SFrame, calls kept
/// calls, and `extra` flags.
#[cfg(feature = "ebpf")]
pub fn compile_fixture(source: &str, out: &Path, extra: &[&str]) -> std::path::PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../fixtures/{source}.c"));
    let status = Command::new("gcc")
        .args([
            "-O2",
            "-fomit-frame-pointer",
            "-fno-optimize-sibling-calls",
            "-Wa,--gsframe",
        ])
        .args(extra)
        .arg("-o")
        .arg(out)
        .arg(&src)
        .status()
        .expect("run gcc");
    assert!(status.success(), "gcc {source} failed");
    out.to_path_buf()
}

/// Build the tracing workloads of fixtures/workloads (sets `v1`, `v2`, `v3`, `none`) into a
/// fresh temporary directory.
#[cfg(feature = "ebpf")]
pub fn build_workloads(sets: &[&str]) -> tempfile::TempDir {
    let out = tempfile::tempdir().expect("tempdir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/workloads/build.sh");
    let build = Command::new(&script)
        .arg(out.path())
        .args(sets)
        .output()
        .expect("run fixtures/workloads/build.sh (needs bash, gcc, binutils)");
    assert!(
        build.status.success(),
        "fixtures/workloads/build.sh {} failed ({}):\n{}",
        sets.join(" "),
        build.status,
        String::from_utf8_lossy(&build.stderr)
    );
    out
}

/// xorshift64*: a deterministic stream of numbers for mutation tests, with no extra crate.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
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
