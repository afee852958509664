//! The tracing session's life cycle as a user meets it: Ctrl-C and SIGTERM flush everything
//! collected (also when they arrive while the tables load or while the output is written), the
//! session ends by itself when the traced processes exit, and bad targets, a kernel without
//! BTF or a locked-memory limit too low get one clear sentence and status 2.

use std::{
    process::{Command, Output, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

use crate::support::{Progress, Rng, Running, SILENCE, SUMMARY_JSON, Summary, Tracer, build_workloads, wait_for_cpu};

fn sframe_trace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sframe-trace"))
}

/// Start a tracer with the folded stacks going to a file, wait until it samples (following its
/// progress, see `support::Tracer`), let it sample until the target (`target`, else the
/// command the tracer launched) has used half a second of CPU more (about 100 samples at
/// 199 Hz, however busy the machine), send it `signal`, and return what it wrote (the stacks
/// as stdout) and printed.
fn interrupted(args: &[&str], target: Option<u32>, signal: libc::c_int) -> Output {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("stacks.folded");
    // Before `args`, which may end with `-- COMMAND`.
    let full = [&["-o", out.to_str().expect("path")][..], args].concat();
    let tracer = Tracer::start(&full);
    let target = target.unwrap_or_else(|| {
        let children =
            std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", tracer.pid())).unwrap_or_default();
        children
            .split_whitespace()
            .next()
            .and_then(|p| p.parse().ok())
            .expect("the launched command")
    });
    wait_for_cpu(target, 50);
    let (status, stderr) = tracer.stop(signal);
    Output {
        status,
        stdout: std::fs::read(&out).expect("read the stacks"),
        stderr: stderr.into_bytes(),
    }
}

/// Every folded line, as (stack, count).
fn stacks(out: &Output) -> Vec<(String, u64)> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            l.rsplit_once(' ')
                .and_then(|(s, n)| Some((s.to_owned(), n.parse().ok()?)))
        })
        .collect()
}

fn assert_flushed(out: &Output, why: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    assert!(stderr.contains(why), "the summary should say `{why}`: {stderr}");
    let stacks = stacks(out);
    let deep: u64 = stacks
        .iter()
        .filter(|(s, _)| s.contains(";recurse;recurse;"))
        .map(|(_, n)| n)
        .sum();
    assert!(
        deep >= 50,
        "expected the samples taken before the signal, got {deep}: {stacks:?}"
    );
}

/// SIGINT (Ctrl-C) stops a launched trace and still writes all stacks and the summary.
#[test]
fn sigint_flushes_the_stacks() {
    privileged_test!();
    let dir = build_workloads(&["v1"]);
    let deep = dir.path().join("v1/deep");
    let out = interrupted(
        &["-F", "199", "--", deep.to_str().expect("path"), "600"],
        None,
        libc::SIGINT,
    );
    assert_flushed(&out, "interrupted");
}

/// SIGTERM stops a `--pid` trace and still writes all stacks; the traced process keeps running.
#[test]
fn sigterm_flushes_the_stacks_and_spares_the_target() {
    privileged_test!();
    let dir = build_workloads(&["v1"]);
    let target = Running(
        Command::new(dir.path().join("v1/deep"))
            .arg("600")
            .spawn()
            .expect("spawn"),
    );
    let pid = target.pid().to_string();
    let out = interrupted(&["-F", "199", "--pid", &pid], Some(target.pid()), libc::SIGTERM);
    assert_flushed(&out, "terminated");
    assert!(
        std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "a --pid target must survive the tracer"
    );
}

/// A trace without --duration ends when the traced process exits.
#[test]
fn the_session_ends_when_the_target_exits() {
    privileged_test!();
    let dir = build_workloads(&["v1"]);
    let started = Instant::now();
    let out = sframe_trace()
        .args([
            "-F",
            "199",
            "--",
            dir.path().join("v1/deep").to_str().expect("path"),
            // A second of its own CPU (about 200 samples), however busy the machine.
            "cpu:1",
        ])
        .output()
        .expect("run");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the tracer outlived its target"
    );
    assert_flushed(&out, "the traced processes exited");
}

/// Bad targets and bad flags are one sentence with status 2.
#[test]
fn bad_targets_are_one_clear_sentence() {
    privileged_test!();
    for (args, says) in [
        (&["--pid", "999999999"][..], "no process with pid 999999999"),
        (
            &["--all", "--", "true"][..],
            "give either --all or a command after --, not both",
        ),
        (
            &["--max-depth", "9999", "--pid", "1"][..],
            "--max-depth must be between 1 and 2048",
        ),
        (
            &["--", "/nonexistent/program"][..],
            "cannot launch `/nonexistent/program`",
        ),
    ] {
        crate::support::assert_refused(args, says);
    }
}

/// When a signal is sent to a tracer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Moment {
    /// Before it says it samples: while it reads the processes and builds their tables.
    Loading,
    /// While it samples.
    Sampling,
}

/// Start `sframe-trace ARGS`, whose output goes to `out`, send it `first` at a random point of
/// `moment`, then the other of SIGINT and SIGTERM every few milliseconds until it exits (so that
/// some arrive while it symbolizes and writes); its stderr, and the moment the first signal
/// really fell in.
fn signalled(
    args: &[&str],
    out: &str,
    moment: Moment,
    first: libc::c_int,
    rng: &mut Rng,
) -> (std::process::ExitStatus, String, Moment) {
    let mut child = sframe_trace()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let reader = {
        let lines = lines.clone();
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
                lines.lock().expect("lines").push(line);
            }
        })
    };
    let sampling = || lines.lock().expect("lines").iter().any(|l| l.contains(": sampling "));
    match moment {
        Moment::Loading => {
            // The output's temporary file is created beside it once the signals are caught,
            // right before the tables load (a signal before that ends any process, as it would
            // a shell).
            let until = Instant::now() + SILENCE;
            while crate::security::temporaries_of(std::path::Path::new(out)).is_empty() {
                assert!(Instant::now() < until, "the tracer did not create its output");
                assert!(
                    child.try_wait().expect("try_wait").is_none(),
                    "the tracer ended before it created its output: {:?}",
                    lines.lock().expect("lines")
                );
                sleep(Duration::from_millis(1));
            }
            sleep(Duration::from_millis(rng.below(150) as u64));
        }
        Moment::Sampling => {
            // As long as it makes progress (lines, CPU time: see `support::Progress`).
            let mut progress = Progress::new(child.id());
            while !sampling() {
                let printed = lines.lock().expect("lines").len();
                assert!(
                    !progress.stuck(printed),
                    "the tracer made no progress for {} s before it sampled",
                    SILENCE.as_secs()
                );
                assert!(
                    child.try_wait().expect("try_wait").is_none(),
                    "the tracer ended before it sampled: {:?}",
                    lines.lock().expect("lines")
                );
                sleep(Duration::from_millis(20));
            }
            sleep(Duration::from_millis(100 + rng.below(1100) as u64));
        }
    }
    let fell_in = if sampling() { Moment::Sampling } else { Moment::Loading };
    let second = if first == libc::SIGINT {
        libc::SIGTERM
    } else {
        libc::SIGINT
    };
    let sent = Instant::now();
    let mut signal = first;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(90),
            "the tracer did not end after a signal"
        );
        // Our own child, not reaped yet (try_wait said so).
        let _ = sframe_trace::sys::process::kill(child.id() as libc::pid_t, signal);
        signal = second;
        sleep(Duration::from_millis(2 + rng.below(10) as u64));
    };
    reader.join().expect("stderr reader");
    let text = lines.lock().expect("lines").join("\n");
    (status, text, fell_in)
}

/// The samples in a complete output file: every folded line parses and its counts add up, or
/// every JSON line is a whole sample.
fn samples_written(path: &std::path::Path, format: &str) -> u64 {
    let text = std::fs::read_to_string(path).expect("read the output");
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "the output ends in the middle of a line"
    );
    text.lines()
        .map(|line| match format {
            "json" => {
                let sample: serde_json::Value =
                    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: not a whole sample: {line:?}"));
                assert!(sample["frames"].is_array(), "{line}");
                1
            }
            _ => line
                .rsplit_once(' ')
                .and_then(|(_, n)| n.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("not a folded line: {line:?}")),
        })
        .sum()
}

/// SIGINT and SIGTERM at random moments — while the tables load, while sampling (system-wide
/// and `--pid`), and, as more follow the first, while the output is symbolized and written —
/// always end with complete output (every line whole, as many samples as the summary says)
/// and the summary.
#[test]
fn signals_at_any_moment_flush_complete_output() {
    privileged_test!();
    let dir = build_workloads(&["v1"]);
    let target = Running(
        Command::new(dir.path().join("v1/deep"))
            .arg("600")
            .spawn()
            .expect("spawn"),
    );
    let pid = target.pid().to_string();
    let out = dir.path().join("out");
    let out = out.to_str().expect("path");
    let mut rng = Rng(0x7369_676e);
    // This test's own process maps a large program: its tables take a while to build.
    let this = std::process::id().to_string();
    let runs: [(&[&str], Moment, &str, libc::c_int); 6] = [
        (&["-a", "-F", "499"], Moment::Loading, "folded", libc::SIGINT),
        (&["--pid", &this, "-F", "499"], Moment::Loading, "json", libc::SIGTERM),
        (&["--pid", &pid, "-F", "999"], Moment::Sampling, "folded", libc::SIGTERM),
        (&["--pid", &pid, "-F", "999"], Moment::Sampling, "json", libc::SIGINT),
        (&["--pid", &pid, "-F", "999"], Moment::Sampling, "folded", libc::SIGINT),
        (&["-a", "-F", "499"], Moment::Sampling, "folded", libc::SIGTERM),
    ];
    let mut moments = Vec::new();
    for (args, moment, format, first) in runs {
        let mut args = args.to_vec();
        args.extend(["--no-kernel", "-f", format, "-o", out]);
        args.extend(SUMMARY_JSON);
        let started = Instant::now();
        let _ = std::fs::remove_file(out);
        let (status, stderr, fell_in) = signalled(&args, out, moment, first, &mut rng);
        eprintln!(
            "{args:?}, {} during {fell_in:?}: {status} after {:.1} s\n{stderr}",
            if first == libc::SIGINT { "SIGINT" } else { "SIGTERM" },
            started.elapsed().as_secs_f64()
        );
        assert!(status.success(), "{args:?}: {status}: {stderr}");
        // The other signal follows within milliseconds: either may be the one acted on.
        let summary = Summary::of(&stderr);
        assert!(
            summary.0["ended"] == "interrupted" || summary.0["ended"] == "terminated",
            "{args:?}: the summary should say the session was stopped: {stderr}"
        );
        let samples = summary.count("samples");
        let written = samples_written(std::path::Path::new(out), format);
        assert_eq!(
            written, samples,
            "{args:?}: the output holds every sample the summary counts"
        );
        if moment == Moment::Sampling {
            assert!(samples > 0, "{args:?}: samples before the signal: {stderr}");
        }
        moments.push(fell_in);
    }
    assert!(
        moments.contains(&Moment::Loading),
        "no signal fell while the tables loaded"
    );
}

/// A kernel without BTF (here: `/sys/kernel/btf` hidden by an empty mount, in a mount
/// namespace of the test's own) is one sentence with status 2, for tracing (on stderr) and for
/// the doctor (its verdict, on stdout).
#[test]
fn missing_btf_is_one_clear_sentence() {
    privileged_test!();
    let script = format!(
        "mount -t tmpfs none /sys/kernel/btf && exec {} \"$@\"",
        env!("CARGO_BIN_EXE_sframe-trace")
    );
    for args in [&["--pid", "1"][..], &["doctor"][..]] {
        let out = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", &script, "sh"])
            .args(args)
            .output()
            .expect("run unshare");
        let said = String::from_utf8_lossy(if args[0] == "doctor" { &out.stdout } else { &out.stderr });
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        assert!(said.contains("this kernel has no BTF"), "{args:?}: {said}");
        assert_eq!(said.lines().count(), 1, "{args:?}: one sentence expected: {said}");
    }
}

/// A locked-memory limit of 64 KiB: as root the tracer lifts it and traces; without
/// CAP_SYS_RESOURCE it cannot, and then it traces anyway where the kernel charges BPF memory
/// to the cgroup (5.11+), or says so in one sentence with status 2 where it charges the limit.
#[test]
fn low_memlock_limit_is_lifted_or_one_sentence() {
    privileged_test!(paired);
    // This test's own process is the target: nothing to build (the kernel matrix runs it too).
    let pid = std::process::id().to_string();
    let tracer = env!("CARGO_BIN_EXE_sframe-trace");
    let trace = ["--pid", pid.as_str(), "-F", "199", "-d", "1", "-o", "/dev/null"];
    let lifted = Command::new("prlimit")
        .args(["--memlock=65536:65536", tracer])
        .args(trace)
        .output()
        .expect("run prlimit");
    let stderr = String::from_utf8_lossy(&lifted.stderr);
    assert!(lifted.status.success(), "{stderr}");
    assert!(stderr.contains(" samples in "), "{stderr}");
    let limited = Command::new("prlimit")
        .args([
            "--memlock=65536:65536",
            "setpriv",
            "--inh-caps=-sys_resource",
            "--bounding-set=-sys_resource",
        ])
        .arg(tracer)
        .args(trace)
        .output()
        .expect("run prlimit and setpriv");
    let stderr = String::from_utf8_lossy(&limited.stderr);
    eprintln!("without CAP_SYS_RESOURCE: {}\n{stderr}", limited.status);
    if limited.status.success() {
        assert!(stderr.contains(" samples in "), "{stderr}");
    } else {
        assert_eq!(limited.status.code(), Some(2), "{stderr}");
        // Kernels this old also get a warning about the helpers they lack.
        let said: Vec<&str> = stderr.lines().filter(|l| !l.contains(" WARN ")).collect();
        assert_eq!(said.len(), 1, "one sentence expected: {stderr}");
        assert!(said[0].contains("locked-memory limit"), "{stderr}");
    }
}

/// A launched command is held at its entry point while the tables load: a program that spends
/// its first ~40 ms in `early` and the next ~40 ms in `late`, far less than loading takes, is
/// sampled in both in proportion to the CPU time each took (the program measures it), and every
/// stack through them is complete down to `_start`.
#[test]
fn a_launched_command_is_traced_from_its_entry_point() {
    privileged_test!();
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = crate::support::compile_fixture("launch/early", &dir.path().join("launched"), &[]);
    let out = sframe_trace()
        .args(["-F", "999", "--no-kernel", "--"])
        .arg(&bin)
        .output()
        .expect("run sframe-trace");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let (mut early, mut late) = (0u64, 0u64);
    for (stack, n) in stacks(&out) {
        let frames: Vec<&str> = stack.split(';').collect();
        if !frames[1..].contains(&"early") && !frames[1..].contains(&"late") {
            // The loader's or exit's own code (a few samples, slower under emulation).
            continue;
        }
        let [
            _,
            "_start",
            "__libc_start_main_impl",
            "__libc_start_call_main",
            "main",
            function,
            ..,
        ] = frames[..]
        else {
            panic!("a stack through early or late that is not complete: {stack} {n}\n{stderr}");
        };
        match function {
            "early" => early += n,
            "late" => late += n,
            _ => panic!("an unexpected stack: {stack} {n}\n{stderr}"),
        }
    }
    assert!(late >= 10, "only {late} samples in late:\n{stderr}");
    // Sampling is by CPU time: `early` gets late * early_ns / late_ns samples when traced from
    // its first instruction, half of that at the least (a tracer that lets the program run
    // while it loads gets none: loading takes longer than `early`).
    let phases = stderr
        .lines()
        .find_map(|l| l.strip_prefix("phases: early "))
        .and_then(|l| l.split_once(" late "))
        .and_then(|(e, l)| Some((e.trim().parse::<u64>().ok()?, l.trim().parse::<u64>().ok()?)))
        .unwrap_or_else(|| panic!("the program did not print its phases' CPU times:\n{stderr}"));
    let (early_ns, late_ns) = (u128::from(phases.0), u128::from(phases.1.max(1)));
    let expected = u128::from(late) * early_ns / late_ns;
    assert!(
        u128::from(early) * 2 >= expected,
        "{early} samples in early, {late} in late, for {early_ns} and {late_ns} ns of CPU time \
         ({expected} expected in early): the start of the program ran untraced\n{stderr}"
    );
}
