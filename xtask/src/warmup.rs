//! The builds of the later stages of `cargo xtask test`, started in the background once the
//! workspace's tests are built, while they run: whatever CPU time the privileged tests leave
//! (little since they run two at a time: 98 % of both CPUs were busy in that stage of a
//! clean-clone run), these builds take instead of waiting for their own stage. They run at
//! the lowest priority (nice 19, so the tests keep the CPU they ask for) with their output in
//! [`LOG`]. Best effort: the stages run the same builds again
//! (then only checked), so a build that fails here fails, loudly, in its own stage.

use std::{
    fs::File,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    thread::JoinHandle,
    time::Instant,
};

/// Where the builds' output goes (relative to the repository).
pub const LOG: &str = "target/warmup.log";

/// Where the conformance corpus is built (relative to the repository), here and by the
/// `conformance` stage.
pub const CONFORMANCE_DIR: &str = "target/conformance";

/// The background builds, running until [`Warmup::finish`].
pub struct Warmup {
    thread: Option<JoinHandle<()>>,
    log: PathBuf,
}

/// Start the builds in the background: bash for `external`, the static executables of `dist`
/// (that of this machine's architecture is also the tracer of `external`), with `guests` the
/// integration-test binary the arm64 guest runs, then the pure readers' tests, the
/// conformance corpus and the fuzz targets.
pub fn start(root: &Path, guests: bool) -> Warmup {
    let log = root.join(LOG);
    let (dir, thread_log) = (root.to_owned(), log.clone());
    let thread = std::thread::spawn(move || builds(&dir, &thread_log, guests));
    println!("xtask: building the later stages' programs in the background (nice 19; log {LOG})");
    Warmup {
        thread: Some(thread),
        log,
    }
}

impl Warmup {
    /// Wait for the builds (before the stages that use them, so that two builds of one thing
    /// do not wait on each other's lock).
    pub fn finish(mut self) {
        if let Some(thread) = self.thread.take() {
            let since = Instant::now();
            let _ = thread.join();
            println!(
                "xtask: the background builds were waited for {} s (log {})",
                since.elapsed().as_secs(),
                self.log.display()
            );
        }
    }
}

/// The builds, in the order the stages need them; each failure is written to the log and the
/// next build goes on.
fn builds(root: &Path, log: &Path, guests: bool) {
    // SAFETY: setpriority on this thread's own id (Linux: nice is per thread, and the
    // processes it starts inherit it); no memory is passed.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19);
    }
    let Ok(file) = File::create(log) else {
        return;
    };
    let mut commands: Vec<Command> = Vec::new();
    let mut bash = Command::new("bash");
    bash.arg(root.join("fixtures/external/build.sh"))
        .arg(root.join("target/external"));
    commands.push(bash);
    // The host's release build only where no package is of this machine's architecture (the
    // static executable of it is the tracer of `external`).
    if crate::dist::build::host_arch().is_none() {
        commands.push(crate::cmd::release_build());
    }
    for arch in crate::dist::ARCHES {
        match crate::dist::build::static_build(arch) {
            Ok(command) => commands.push(command),
            Err(err) => log_line(&file, &format!("{}: {err:#}", arch.name)),
        }
    }
    if guests {
        // The x86-64 guests run the workspace's own test build; the arm64 one, its
        // cross-build (with the static executables as their tracer).
        commands.push(crate::vmtest::integration_build(
            crate::vmtest::arch::GuestArch::Aarch64,
            true,
        ));
    }
    // The later foreground stages' own builds: the pure readers alone, the conformance
    // corpus, the fuzz targets.
    let mut readers = crate::cmd::cargo();
    readers.args(["test", "--no-run", "--package", "tracer-unwind"]);
    commands.push(readers);
    let mut conformance = Command::new("bash");
    conformance
        .arg(root.join("fixtures/conformance.sh"))
        .arg(root.join(CONFORMANCE_DIR));
    commands.push(conformance);
    if crate::fuzz::available() {
        commands.push(crate::fuzz::build(root));
    }
    for mut command in commands {
        log_line(&file, &format!("+ {command:?}"));
        let (Ok(out), Ok(err)) = (file.try_clone(), file.try_clone()) else {
            return;
        };
        if command.get_current_dir().is_none() {
            command.current_dir(root);
        }
        let status = command.stdin(Stdio::null()).stdout(out).stderr(err).status();
        match status {
            Ok(status) if status.success() => {}
            Ok(status) => log_line(&file, &format!("failed ({status}); its stage builds it again")),
            Err(err) => log_line(&file, &format!("cannot run it: {err}")),
        }
    }
}

fn log_line(mut file: &File, line: &str) {
    let _ = std::io::Write::write_all(&mut file, format!("{line}\n").as_bytes());
}
