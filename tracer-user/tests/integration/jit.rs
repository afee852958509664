//! JIT-compiled code: Debian's Node.js and OpenJDK 17 running a recursive `fib` with their perf
//! maps on, judged on the samples taken in compiled code (anonymous memory): at least 90 % must
//! carry the runtime's name for it (json `source` `jit`, object `[jit]`), and the stacks through
//! it must still reach the bottom of the thread. Hostile perf maps are refused and counted
//! (`hostile`). A map written only at exit is read, and a pid reused keeps each process's
//! names its own (`reuse`). Privileged; skipped loudly (or failed under CI) when a runtime is
//! missing.

pub(crate) mod forged_jvm;
mod forged_node;
pub(crate) mod hostile;
pub(crate) mod jitdump;
mod plain_node;
mod reuse;

use std::{
    io::BufRead as _,
    process::{Command, Stdio},
};

use crate::support::{Running, SUMMARY_JSON, Summary, Tracer, json_frames, json_samples, run, skipped};

/// The share of samples in compiled code that must be named.
const NAMED: f64 = 0.9;
/// Samples in compiled code a run must have for the share to mean something.
const ENOUGH: usize = 50;

/// `program` is installed (`cargo xtask setup` installs it), else the test is skipped, or
/// fails under CI.
fn have(test: &str, program: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: {program} is missing (cargo xtask setup installs it)"
        );
        skipped(test, &format!("{program} is not installed"));
    }
    found
}

/// One sample's user frames, innermost first: (symbol, object, source).
pub(crate) type Frames = Vec<(Option<String>, Option<String>, String)>;

/// The user frames of the json samples of `pid`.
pub(crate) fn user_stacks(json: &str, pid: u32) -> Vec<Frames> {
    json_samples(json, pid)
        .iter()
        .map(|s| {
            json_frames(s)
                .iter()
                .filter(|f| f["source"] != "kernel")
                .map(|f| {
                    (
                        f["symbol"].as_str().map(str::to_owned),
                        f["object"].as_str().map(str::to_owned),
                        f["source"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .collect()
}

/// Judge the samples of a runtime: those whose innermost user frame is in compiled code
/// (no object, or `[jit]`) are named at least [`NAMED`] of the time, named frames say
/// `source` `jit`, the recursive function is named `fib` in the runtime's way (`is_fib`),
/// and the samples in it reach `bottom` (the outermost frame of its thread).
fn judge(what: &str, stacks: &[Frames], is_fib: impl Fn(&str) -> bool, bottom: &[&str]) {
    // (Node.js's frames are named from V8's memory too, `[javascript]`: with its perf map on,
    // both name the compiled code, and must agree on `fib`.)
    let by_runtime =
        |f: &(Option<String>, Option<String>, String)| matches!(f.1.as_deref(), Some("[jit]") | Some("[javascript]"));
    let compiled: Vec<&Frames> = stacks
        .iter()
        .filter(|s| s.first().is_some_and(|f| f.1.is_none() || by_runtime(f)))
        .collect();
    let named = compiled.iter().filter(|s| by_runtime(&s[0])).count();
    let share = named as f64 / compiled.len().max(1) as f64;
    eprintln!(
        "{what}: {} samples, {} in compiled code, {named} named ({:.1} %)",
        stacks.len(),
        compiled.len(),
        share * 100.0
    );
    assert!(
        compiled.len() >= ENOUGH,
        "{what}: only {} samples in compiled code",
        compiled.len()
    );
    let unnamed: Vec<_> = compiled.iter().filter(|s| s[0].0.is_none()).take(3).collect();
    assert!(
        share >= NAMED,
        "{what}: {named} of {} named; unnamed: {unnamed:?}",
        compiled.len()
    );
    for frame in stacks.iter().flatten().filter(|f| f.1.as_deref() == Some("[jit]")) {
        assert_eq!(frame.2, "jit", "{what}: a frame named by the perf map: {frame:?}");
        assert!(frame.0.is_some(), "{what}: a [jit] frame without its name");
    }
    let in_fib: Vec<&Frames> = compiled
        .iter()
        .copied()
        .filter(|s| s[0].0.as_deref().is_some_and(&is_fib))
        .collect();
    assert!(
        in_fib.len() * 2 >= compiled.len(),
        "{what}: only {} of {} samples in compiled code are in fib",
        in_fib.len(),
        compiled.len()
    );
    let whole = in_fib
        .iter()
        .filter(|s| {
            s.last()
                .and_then(|f| f.0.as_deref())
                .is_some_and(|b| bottom.contains(&b))
        })
        .count();
    assert!(
        whole as f64 >= NAMED * in_fib.len() as f64,
        "{what}: {whole} of {} stacks in fib reach {bottom:?}; one: {:?}",
        in_fib.len(),
        in_fib.iter().find(|s| !s
            .last()
            .and_then(|f| f.0.as_deref())
            .is_some_and(|b| bottom.contains(&b)))
    );
}

/// The pid of the command a tracer launched, from its `sampling the launched command (pid N)`.
fn launched_pid(stderr: &str) -> u32 {
    stderr
        .split_once("launched command (pid ")
        .and_then(|(_, rest)| rest.split_once(')'))
        .and_then(|(pid, _)| pid.parse().ok())
        .unwrap_or_else(|| panic!("no launched pid in: {stderr}"))
}

#[test]
fn node_perf_map_names_compiled_javascript() {
    privileged_test!(paired, test);
    if !have(test, "node") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("fib.js");
    std::fs::write(
        &script,
        // Three seconds of its own CPU time, not of the wall clock: on a busy host the
        // compiler's warm-up would take most of a wall-clock budget.
        "function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\n\
         let s = 0;\n\
         while (process.cpuUsage().user < 3000000) s += fib(24);\n\
         console.log(s);\n",
    )
    .expect("write fib.js");
    let out = dir.path().join("node.json");
    let out_arg = out.to_str().expect("utf-8 path");
    let script_arg = script.to_str().expect("utf-8 path");
    let mut args = vec!["-F", "499", "-f", "json", "-o", out_arg];
    args.extend(SUMMARY_JSON);
    args.extend(["--", "node", "--perf-basic-prof", script_arg]);
    // In the test's directory: node writes a log file of its own beside the map.
    let mut command = Command::new(crate::support::tracer_binary());
    command.args(&args).current_dir(dir.path()).stdout(Stdio::null());
    let stderr = Tracer::spawn(command).finish();
    let pid = launched_pid(&stderr);
    let summary = Summary::of(&stderr);
    assert_eq!(summary.count("jit.perf_maps"), 1, "{stderr}");
    // Shown with a failed judgement: what the summary says of the perf map and the stacks.
    eprintln!("the tracer's stderr:\n{stderr}");
    let json = std::fs::read_to_string(&out).expect("read the json output");
    late_names(&json, pid);
    judge(
        "node",
        &user_stacks(&json, pid),
        |name| name == "fib" || (name.contains("fib ") && name.contains("fib.js")),
        &["_start"],
    );
    let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
}

/// Shown with a failed judgement: of the samples whose innermost frame is compiled code
/// left without a name, how many the perf map names at the end (its line was read too late)
/// and how many it never names, and when they were taken (seconds after the process's first
/// sample: a cluster tells a window without reads from names written late).
fn late_names(json: &str, pid: u32) {
    let text = std::fs::read(format!("/tmp/perf-{pid}.map")).unwrap_or_default();
    let mut map = sframe_trace::jit::perfmap::PerfMap::default();
    map.add_text(&text);
    let samples = json_samples(json, pid);
    let first = samples
        .iter()
        .filter_map(|s| s["time"].as_f64())
        .fold(f64::MAX, f64::min);
    let unnamed: Vec<(u64, f64)> = samples
        .iter()
        .filter_map(|s| {
            let f = json_frames(s).iter().find(|f| f["source"] != "kernel")?;
            f["object"].is_null().then_some(())?;
            let addr = u64::from_str_radix(f["addr"].as_str()?.trim_start_matches("0x"), 16).ok()?;
            Some((addr, s["time"].as_f64()? - first))
        })
        .collect();
    let late = unnamed.iter().filter(|&&(a, _)| map.name(a).is_some()).count();
    let times: Vec<String> = unnamed.iter().take(20).map(|(_, t)| format!("{t:.3}")).collect();
    eprintln!(
        "unnamed compiled-code samples: {}, of which the final perf map ({} names) names {late}; \
         taken at (s after the first sample): {}",
        unnamed.len(),
        map.len(),
        times.join(" ")
    );
}

/// `Fib` compiled into `dir` and started there with the JVM options `options` for 60 s,
/// returned once it printed `warm` (its first second of `fib` is over).
fn warm_fib(dir: &std::path::Path, options: &[&str]) -> Running {
    let mut java = Command::new("java");
    java.args(options);
    warm_fib_with(java, dir, dir.to_str().expect("utf-8 path"))
}

/// `Fib` compiled into `dir` (the host's `javac`) and run by `java` (a command to add the
/// class path and arguments to) with class path `classes` (`dir` as `java` sees it), once warm.
fn warm_fib_with(mut java: Command, dir: &std::path::Path, classes: &str) -> Running {
    std::fs::write(dir.join("Fib.java"), FIB_JAVA).expect("write Fib.java");
    run(Command::new("javac")
        .args(["--release", "17", "Fib.java"])
        .current_dir(dir));
    let mut child = java
        .args(["-cp", classes, "Fib", "60"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start java");
    let stdout = child.stdout.take().expect("stdout");
    let java = Running(child);
    let mut lines = std::io::BufReader::new(stdout).lines();
    assert_eq!(lines.next().and_then(Result::ok).as_deref(), Some("warm"));
    java
}

/// The Java program: `fib` for `seconds`, printing `warm` after the first second.
const FIB_JAVA: &str = "public class Fib {\n\
    static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\n\
    public static void main(String[] args) {\n\
        long start = System.currentTimeMillis(); long s = 0; boolean said = false;\n\
        long seconds = Long.parseLong(args[0]);\n\
        while (System.currentTimeMillis() < start + seconds * 1000) {\n\
            s += fib(24);\n\
            if (!said && System.currentTimeMillis() > start + 1000) { System.out.println(\"warm\"); said = true; }\n\
        }\n\
        System.out.println(s);\n\
    }\n\
}\n";

/// Java's compiled code, named from the perf map `jcmd PID Compiler.perfmap` writes while it
/// runs (traced with `--pid`), and from the one `-XX:+DumpPerfMapAtExit` writes as it exits
/// (read after the process is gone, through the root held since its first JIT sample).
#[test]
fn java_perf_map_names_compiled_java() {
    privileged_test!(paired, test);
    if !have(test, "javac") || !have(test, "jcmd") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let classes = dir.path().to_str().expect("utf-8 path");
    // Running, with the map written on request once fib is compiled.
    let java = warm_fib(dir.path(), &["-XX:+PreserveFramePointer"]);
    let pid = java.pid().to_string();
    run(Command::new("jcmd").args([&pid, "Compiler.perfmap"]));
    let out = dir.path().join("java.json");
    let out_arg = out.to_str().expect("utf-8 path");
    let mut args = vec!["--pid", &pid, "-d", "3", "-F", "499", "-f", "json", "-o", out_arg];
    args.extend(SUMMARY_JSON);
    let stderr = Tracer::start(&args).finish();
    let java_pid = java.pid();
    drop(java);
    let summary = Summary::of(&stderr);
    assert_eq!(summary.count("jit.perf_maps"), 1, "{stderr}");
    let json = std::fs::read_to_string(&out).expect("read the json output");
    let is_fib = |name: &str| name.contains("Fib.fib(");
    judge("java (jcmd)", &user_stacks(&json, java_pid), is_fib, JAVA_BOTTOM);
    let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));

    // Launched, with the map written at exit: the outputs written at the end are named.
    let folded = dir.path().join("java.folded");
    let folded_arg = folded.to_str().expect("utf-8 path");
    let mut args = vec!["-F", "499", "-o", folded_arg];
    args.extend(SUMMARY_JSON);
    args.extend([
        "--",
        "java",
        "-XX:+PreserveFramePointer",
        "-XX:+UnlockDiagnosticVMOptions",
        "-XX:+DumpPerfMapAtExit",
        "-cp",
        classes,
        "Fib",
        "3",
    ]);
    let stderr = Tracer::start(&args).finish();
    let launched = launched_pid(&stderr);
    let text = std::fs::read_to_string(&folded).expect("read the folded output");
    let count = |line: &&str| {
        line.rsplit_once(' ')
            .and_then(|(_, n)| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let in_fib: u64 = text
        .lines()
        .filter(|l| l.contains(";int Fib.fib(int)"))
        .map(|l| count(&l))
        .sum();
    eprintln!("java (at exit): {in_fib} samples in Fib.fib");
    assert!(
        in_fib >= ENOUGH as u64,
        "java (at exit): {in_fib} samples in Fib.fib:\n{stderr}"
    );
    let _ = std::fs::remove_file(format!("/tmp/perf-{launched}.map"));
}

/// A plain `java` (no flag at all), traced with `--pid` and with `-a`: its code heaps are read
/// (`jit::hotspot`), and its compiled frames unwound with their frame sizes and named
/// `Class.method`. Judged on the samples whose innermost frame is JIT or interpreted code: at
/// least 90 % in `Fib.fib`; every stack through it in the one order the program has (`Fib.fib`
/// frames, then `Fib.main` compiled or interpreted, then the call stub, then the JVM's
/// `JavaCalls::call_helper`), none other; at least 95 % whole down to the thread's start.
#[test]
fn plain_java_is_walked_and_named_from_its_code_heaps() {
    privileged_test!(paired, test);
    if !have(test, "javac") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let java = warm_fib(dir.path(), &[]);
    let pid = java.pid().to_string();
    for (what, scope) in [("--pid", vec!["--pid", pid.as_str()]), ("-a", vec!["-a"])] {
        trace_plain_java(what, &scope, dir.path(), java.pid(), true);
    }
}

/// A plain `java` launched by the tracer is read from its first moments: a JVM read as it
/// starts (its tables not set up yet) is read again, not refused, and its compiled `fib`
/// frames are named.
#[test]
fn plain_java_launched_is_read_from_its_start() {
    privileged_test!(paired, test);
    if !have(test, "javac") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("Fib.java"), FIB_JAVA).expect("write Fib.java");
    run(Command::new("javac")
        .args(["--release", "17", "Fib.java"])
        .current_dir(dir.path()));
    let classes = dir.path().to_str().expect("utf-8 path");
    let folded = dir.path().join("java.folded");
    let folded_arg = folded.to_str().expect("utf-8 path");
    let mut args = vec!["-F", "499", "-o", folded_arg];
    args.extend(SUMMARY_JSON);
    args.extend(["--", "java", "-cp", classes, "Fib", "4"]);
    let stderr = Tracer::start(&args).finish();
    let summary = Summary::of(&stderr);
    assert_eq!(summary.count("hotspot.processes"), 1, "{stderr}");
    for reason in ["malformed", "unreadable", "not_ready", "missing_field"] {
        assert_eq!(
            summary.count(&format!("hotspot.refused_by_reason.{reason}")),
            0,
            "refused as {reason}:\n{stderr}"
        );
    }
    let text = std::fs::read_to_string(&folded).expect("read the folded output");
    let in_fib: u64 = text
        .lines()
        .filter(|l| l.contains(";Fib.fib"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum();
    eprintln!("plain java launched: {in_fib} samples in Fib.fib");
    assert!(in_fib >= ENOUGH as u64, "{in_fib} samples in Fib.fib:\n{stderr}");
}

/// Trace `scope` (`--pid PID`, `-a`) until the JVM `pid` is loaded and has run 3 s of CPU
/// time more (however long loading every process takes on a busy host), and judge its
/// samples ([`judge_plain_java`]): its code heaps read, no advice to restart it.
/// With `lines`, the compiled frames' lines are judged too ([`judge_java_lines`]).
fn trace_plain_java(what: &str, scope: &[&str], dir: &std::path::Path, pid: u32, lines: bool) {
    let out = dir.join("java.json");
    let out_arg = out.to_str().expect("utf-8 path");
    let mut args = scope.to_vec();
    args.extend(["-F", "499", "-f", "json", "-o", out_arg]);
    args.extend(SUMMARY_JSON);
    let (stderr, loaded) = loaded_then_sampled(&args, pid, "the JVM loaded");
    let summary = Summary::of(&stderr);
    assert!(
        summary.count("hotspot.processes") >= 1,
        "{what}: the JVM was not read:\n{stderr}"
    );
    assert!(
        // (Only this JVM's: under `-a`, other JVMs on the host may well get it.)
        !stderr.contains(&format!("pid {pid} runs Java without")),
        "{what}: no advice to restart a JVM whose code was read:\n{stderr}"
    );
    let json = std::fs::read_to_string(&out).expect("read the json output");
    // Whether each sample was cut short, and taken once the JVM was loaded (before, a stack
    // copy walked in user space: an interpreted frame there is `Interpreter`, its `Method*`
    // not kept).
    let samples: Vec<Taken> = json_samples(&json, pid)
        .iter()
        .map(|s| Taken {
            truncated: !s["truncated"].is_null(),
            loaded: s["time"].as_f64().is_some_and(|t| t > loaded),
            uncopied: s["truncated"] == "no_mapping",
        })
        .collect();
    judge_plain_java(what, &user_stacks(&json, pid), &samples, &stderr);
    if lines {
        judge_java_lines(what, &json, pid, loaded);
    }
}

/// The lines of a plain JVM's Java frames, once it was loaded: every `Fib.fib` frame with a
/// line is at line 2 (its body), every `Fib.main` one calling `fib` at line 7 (the others at
/// its calls of the clock, 6 and 8), and at
/// least [`NAMED`] of the frames of each have one (a sampled PC of compiled code past the last
/// PC its method describes has none).
fn judge_java_lines(what: &str, json: &str, pid: u32, loaded: f64) {
    let (mut fib, mut fib_lined) = (0usize, 0usize);
    let (mut main, mut main_lined) = (0usize, 0usize);
    for sample in json_samples(json, pid) {
        if sample["time"].as_f64().is_none_or(|t| t <= loaded) {
            continue;
        }
        let mut callee = None;
        for frame in json_frames(&sample) {
            let (symbol, line) = (frame["symbol"].as_str(), frame["line"].as_u64());
            let want: &[u64] = match (symbol, callee) {
                (Some("Fib.fib"), _) => {
                    fib += 1;
                    fib_lined += usize::from(line.is_some());
                    &[2]
                }
                (Some("Fib.main"), called) => {
                    main += 1;
                    main_lined += usize::from(line.is_some());
                    // Its call of `fib` is at line 7; of `System.currentTimeMillis` at 6 and
                    // 8; of `println` at 8 too.
                    if called == Some("Fib.fib") { &[7] } else { &[6, 7, 8] }
                }
                _ => &[],
            };
            assert!(
                want.is_empty() || line.is_none_or(|l| want.contains(&l)),
                "{what}: {symbol:?} at line {line:?}, not {want:?}: {sample}"
            );
            callee = symbol;
        }
    }
    eprintln!(
        "plain java ({what}): {fib_lined} of {fib} Fib.fib frames and {main_lined} of {main} Fib.main frames with their line"
    );
    assert!(
        fib_lined as f64 >= NAMED * fib as f64 && fib > 0,
        "{what}: {fib_lined} of {fib} Fib.fib frames with a line"
    );
    assert!(
        main_lined as f64 >= NAMED * main as f64 && main > 0,
        "{what}: {main_lined} of {main} Fib.main frames with a line"
    );
}

/// Run the tracer with `args` until process `pid` is loaded (`what`: the moment awaited) and
/// has used 3 s of CPU time more; its stderr, and when the load was seen (seconds since the
/// epoch, the json samples' `time`: samples before it were taken before the tracer knew the
/// process).
pub(crate) fn loaded_then_sampled(args: &[&str], pid: u32, what: &str) -> (String, f64) {
    let mut tracer = Tracer::start_logging(args, sframe_trace::trace::LOAD_LOG);
    tracer.wait_loaded(pid, what);
    let loaded = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    (tracer.interrupt_after_cpu(pid, 300), loaded)
}

/// Unstable's OpenJDK 21 and 25 (run in their private root, as a container's JVM), plain:
/// walked and named from their code heaps like 17, judged the same way (`--pid`).
#[test]
fn plain_java_21_and_25_are_walked_and_named_from_their_code_heaps() {
    privileged_test!(paired, test);
    if !have(test, "javac") {
        return;
    }
    for release in ["21", "25"] {
        let Some((root, java)) =
            crate::support::required(test, crate::support::sid_java(release), crate::support::NO_JAVA_ROOT)
        else {
            return;
        };
        let dir = tempfile::tempdir_in(root.join("tmp")).expect("tempdir in the root");
        let inside = format!("/tmp/{}", dir.path().file_name().expect("name").to_string_lossy());
        let mut command = Command::new("chroot");
        command.arg(&root).arg(&java).env(
            "LD_LIBRARY_PATH",
            format!("/usr/lib/jvm/java-{release}-openjdk-amd64/lib"),
        );
        let running = warm_fib_with(command, dir.path(), &inside);
        let pid = running.pid().to_string();
        trace_plain_java(
            &format!("java {release}"),
            &["--pid", &pid],
            dir.path(),
            running.pid(),
            true,
        );
    }
}

/// How a sample of the JVM was taken.
#[derive(Clone, Copy, Debug)]
struct Taken {
    /// Cut short (any reason).
    truncated: bool,
    /// Taken once the JVM was loaded.
    loaded: bool,
    /// In code the kernel's mappings did not hold (compiled after the last read), at a moment
    /// the ring buffer had no room for a stack copy (the tracer behind): the frames walked
    /// before it, ended as `no_mapping`.
    uncopied: bool,
}

/// The judgement of [`plain_java_is_walked_and_named_from_its_code_heaps`].
fn judge_plain_java(what: &str, stacks: &[Frames], samples: &[Taken], stderr: &str) {
    let in_java = |f: &(Option<String>, Option<String>, String)| f.1.is_none() || f.1.as_deref() == Some("[hotspot]");
    let name = |f: &(Option<String>, Option<String>, String)| f.0.clone().unwrap_or_default();
    let compiled: Vec<(&Frames, Taken)> = stacks
        .iter()
        .zip(samples.iter().copied())
        .filter(|(s, _)| s.first().is_some_and(in_java))
        .collect();
    // Named and whole are counted among the samples taken once the JVM was loaded (before,
    // in `-a`, they are stack copies of code the tracer had not read); the order of the
    // frames is checked in all.
    let counted: Vec<&(&Frames, Taken)> = compiled.iter().filter(|(_, taken)| taken.loaded).collect();
    let named = counted.iter().filter(|(s, _)| name(&s[0]) == "Fib.fib").count();
    let mut whole = 0;
    for &(stack, Taken { truncated, loaded, .. }) in &compiled {
        let names: Vec<String> = stack.iter().map(name).collect();
        let fibs = names.iter().take_while(|n| *n == "Fib.fib").count();
        assert!(
            fibs <= 25,
            "{what}: {fibs} Fib.fib frames, deeper than fib(24): {names:?}"
        );
        if fibs > 0 && fibs < names.len() {
            // After the Fib.fib frames: main, then the call stub, then the JVM. A stack cut
            // at code compiled after the last read of the code heaps (unnamed, and the walk
            // ends there: truncated) is checked up to that frame.
            let rest: Vec<String> = if truncated {
                names[fibs..].iter().take_while(|n| !n.is_empty()).cloned().collect()
            } else {
                names[fibs..].to_vec()
            };
            // (The call stub's blob is `StubRoutines (1)` in 17, `StubRoutines (initial stubs)`
            // in 21, `StubRoutines (initialstubs)` in 25.)
            // (An interpreted `main` is named from its `Method*` as a compiled one is, once
            // the JVM is loaded.)
            let main = if loaded { "Fib.main" } else { "Fib.main|Interpreter" };
            let expected = [main, "StubRoutines (", "JavaCalls::call_helper"];
            for (n, want) in rest.iter().zip(expected) {
                assert!(
                    want.split('|').any(|w| n.starts_with(w)),
                    "{what}: a wrong stack ({n} where {want} belongs): {names:?}"
                );
            }
            assert!(
                !rest.iter().skip(1).any(|n| n.starts_with("Fib.")),
                "{what}: Java frames of the program below main: {names:?}"
            );
        }
        // Down to the thread's start: named, or (unstable's libc in a root has no symbols for
        // it) in libc below the launcher's thread function.
        let bottom = stack.last();
        let at_start = bottom.is_some_and(|b| JAVA_BOTTOM.contains(&name(b).as_str()))
            || (bottom.is_some_and(|b| b.1.as_deref().is_some_and(|o| o.ends_with("/libc.so.6")))
                && names.iter().any(|n| n == "ThreadJavaMain"));
        if loaded && !truncated && at_start {
            whole += 1;
        }
        for frame in stack.iter().filter(|f| f.1.as_deref() == Some("[hotspot]")) {
            assert_eq!(frame.2, "hotspot", "{what}: a frame of the code heaps: {frame:?}");
        }
    }
    eprintln!(
        "plain java ({what}): {} samples, {} in JIT or interpreted code ({} once loaded), {named} in Fib.fib, {whole} whole",
        stacks.len(),
        compiled.len(),
        counted.len()
    );
    assert!(
        counted.len() >= ENOUGH,
        "{what}: only {} samples in Java code:\n{stderr}",
        counted.len()
    );
    assert!(
        named as f64 >= NAMED * counted.len() as f64,
        "{what}: {named} of {} named Fib.fib; others: {:?}\n{stderr}",
        counted.len(),
        counted
            .iter()
            .filter(|(s, _)| name(&s[0]) != "Fib.fib")
            .take(3)
            .collect::<Vec<_>>()
    );
    // A sample taken in the interpreter itself ends there by design (its frame may be an
    // entry whose frame is not built yet: a frame-pointer step from it is not trusted); the
    // others must be whole, but for two kinds of samples in code compiled after the last read
    // of the code heaps, counted apart and bounded:
    // - cut there (an unnamed frame of `[hotspot]`, then the cut): the kernel was given that
    //   code's range as part of a piece around it (`jit::hotspot::pieces`, past its limit of
    //   pieces): none expected in this program, at most a twentieth;
    // - cut before it (`no_mapping`): the kernel had no room for a stack copy, the tracer
    //   being behind (a debug build loading and symbolizing every process in `-a`); the
    //   copies it had room for are walked whole once the heaps are read again. At most a
    //   fifth (none in most runs here).
    let in_interpreter = counted.iter().filter(|(s, _)| name(&s[0]) == "Interpreter").count();
    let late = counted
        .iter()
        .filter(|(s, taken)| {
            taken.truncated
                && !taken.uncopied
                && s.last()
                    .is_some_and(|f| f.0.is_none() && f.1.as_deref() == Some("[hotspot]"))
        })
        .count();
    let uncopied = counted.iter().filter(|(_, taken)| taken.uncopied).count();
    let judged = counted.len() - in_interpreter - late - uncopied;
    eprintln!(
        "plain java ({what}): {in_interpreter} samples in the interpreter itself, {late} cut at code compiled \
         after the last read, {uncopied} not copied: not judged whole"
    );
    assert!(
        late * 20 <= counted.len(),
        "{what}: {late} of {} cut at code not read yet\n{stderr}",
        counted.len()
    );
    assert!(
        uncopied * 5 <= counted.len(),
        "{what}: {uncopied} of {} not copied\n{stderr}",
        counted.len()
    );
    assert!(
        whole as f64 >= WHOLE * judged as f64,
        "{what}: {whole} of {judged} whole; one not: {:?}\n{stderr}",
        counted
            .iter()
            .find(|(s, taken)| taken.truncated && !taken.uncopied && name(&s[0]) != "Interpreter")
    );
}

/// The share of samples in Java code whose stack must be whole.
const WHOLE: f64 = 0.95;

/// Where the stacks of Java's threads start (the launcher runs `main` on a thread of its own).
const JAVA_BOTTOM: &[&str] = &["clone3", "__clone3", "start_thread", "_start"];
