//! Following processes while tracing (fixtures/follow): a plugin loaded with dlopen after the
//! tracer attached, a process started after a system-wide tracer, a traced process that execs
//! a new image, a fork storm under a system-wide tracer whose exited processes are dropped
//! again, a process in its own root directory (as in a container), a program whose file was
//! deleted, and a table budget too small for everything. Stacks are judged against the call
//! chains the fixtures are written with.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::hardening::{Verdict, Verdicts, read_folded};
use crate::support::{
    Running, SUMMARY_JSON, Summary, Tracer, compile_fixture, own_name, ticks_per_second, tracer_binary,
};

/// Compile `fixtures/follow/NAME.c` without frame pointers, with SFrame, calls kept calls.
fn compile(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(if extra.contains(&"-shared") {
        format!("lib{name}.so")
    } else {
        name.to_owned()
    });
    compile_fixture(&format!("follow/{name}"), &out, extra)
}

/// Start `fixtures/follow/host` built at `host`: it loads `plugin` after `delay_ms`, and with
/// `cpu_ms` works for that much CPU time in it, then exits.
fn start_host(host: &Path, plugin: &Path, delay_ms: &str, cpu_ms: Option<&str>) -> Running {
    let mut command = Command::new(host);
    command.env("PLUGIN", plugin).env("DELAY_MS", delay_ms);
    if let Some(cpu_ms) = cpu_ms {
        command.env("CPU_MS", cpu_ms);
    }
    Running(command.spawn().expect("start the host"))
}

/// The folded lines of `path` whose stack contains `frame`, as (stack, count).
fn stacks_with(path: &Path, frame: &str) -> Vec<(String, u64)> {
    let text = std::fs::read_to_string(path).expect("read the folded output");
    text.lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(stack, _)| stack.split(';').any(|f| f == frame))
        .map(|(stack, n)| (stack.to_owned(), n.parse().expect("count")))
        .collect()
}

/// Samples of `stacks` whose user part ends with `chain` (kernel frames follow it only with
/// kernel stacks, which these runs do not take) and starts at `_start`, and all of them.
fn exact(stacks: &[(String, u64)], chain: &str) -> (u64, u64) {
    let total = stacks.iter().map(|(_, n)| n).sum();
    let good = stacks
        .iter()
        .filter(|(s, _)| {
            let frames: Vec<&str> = s.split(';').skip(1).collect();
            frames.join(";").replace("__libc_start_main_impl", "__libc_start_main") == chain
        })
        .map(|(_, n)| n)
        .sum();
    (good, total)
}

const PLUGIN_CHAIN: &str = "_start;__libc_start_main;__libc_start_call_main;main;run_plugin;plugin_work;plugin_leaf";

/// A plugin loaded with dlopen after `--pid` attached is unwound exactly: the walk meets
/// unknown code, the kernel asks for a refresh, and the plugin's table is loaded.
#[test]
fn dlopen_after_attach_is_unwound() {
    privileged_test!(paired);
    let dir = tempfile::tempdir().expect("tempdir");
    let plugin = compile(dir.path(), "plugin", &["-shared", "-fPIC"]);
    let host = compile(dir.path(), "host", &[]);
    let running = start_host(&host, &plugin, "1500", None);
    let (_out_dir, out, stderr) = trace_pid(running.pid(), 4, &[]);
    let (good, total) = exact(&stacks_with(&out, "plugin_leaf"), PLUGIN_CHAIN);
    eprintln!("{stderr}\nplugin samples: {good}/{total} exact");
    assert!(total >= 200, "too few samples in the plugin: {total}");
    assert!(good * 100 >= total * 99, "{good}/{total} exact");
    assert!(Summary::of(&stderr).count("processes.refreshed") >= 1, "{stderr}");
}

/// A system-wide tracer picks up a process started after it, with its plugin, and drops it
/// when it exits.
#[test]
fn system_wide_follows_a_later_process() {
    privileged_test!();
    // An unprivileged user's busy and growing-jitdump programs beside it all along (issue 29:
    // they once left the tracer judging none of this test's samples).
    let _neighbours = crate::support::neighbours::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let plugin = compile(dir.path(), "plugin", &["-shared", "-fPIC"]);
    // A command name no other program uses: the trace is system-wide.
    let comm = own_name(dir.path(), "host");
    let host = dir.path().join(&comm);
    std::fs::rename(compile(dir.path(), "host", &[]), &host).expect("rename the host");
    let out = dir.path().join("stacks.folded");
    let tracer = Tracer::start(&[
        SUMMARY_JSON[0],
        SUMMARY_JSON[1],
        "-a",
        "-F",
        "499",
        "--no-kernel",
        "-o",
        out.to_str().expect("path"),
    ]);
    // The later process works for 3 s of CPU time however busy the machine is, then exits; the
    // tracer is stopped after that.
    let mut later = start_host(&host, &plugin, "300", Some("3000"));
    let status = later.0.wait().expect("wait for the later process");
    assert!(status.success(), "the later process failed: {status}");
    let stderr = tracer.interrupt();
    // Samples taken before the process's tables are loaded (milliseconds, longer on a busy
    // host) are walked with frame pointers only: they come out short, never wrong.
    let chain: Vec<String> = PLUGIN_CHAIN.split(';').map(str::to_owned).collect();
    let verdicts = Verdicts::of(&read_folded(&out), |line| {
        (line.comm == comm && line.frames.iter().any(|f| f == "plugin_leaf")).then(|| chain.clone())
    });
    eprintln!("{stderr}");
    verdicts.assert_sound("plugin samples of the later process", 100);
    let (good, total) = (verdicts.get(Verdict::Exact), verdicts.total());
    assert!(good * 100 >= total * 90, "{good}/{total} exact");
    let summary = Summary::of(&stderr);
    assert!(summary.count("processes.loaded") >= 1, "{stderr}");
    assert!(summary.count("processes.exited") >= 1, "{stderr}");
}

/// Regression (a system-wide session interrupted right after a process exited said
/// `"exited": 0`: the end was taken before the exit notice waiting beside it, and the notices
/// left at the end were never read): the notices sent before the end are taken at the end.
/// The tracer is stopped (SIGSTOP) while its process is killed, then given SIGINT and SIGCONT:
/// the end and the exit notice are ready together, and the end goes first.
#[test]
fn an_exit_just_before_the_end_is_counted() {
    privileged_test!();
    let dir = tempfile::tempdir().expect("tempdir");
    let host = compile(dir.path(), "host", &[]);
    let out = dir.path().join("stacks.folded");
    let mut tracer = Tracer::start_logging(
        &[
            SUMMARY_JSON[0],
            SUMMARY_JSON[1],
            "-a",
            "-F",
            "99",
            "--no-kernel",
            "-o",
            out.to_str().expect("path"),
        ],
        sframe_trace::manager::LOAD_LOG,
    );
    // Without its plugin (`after`: no dlopen), so that nothing it maps once it works leaves a
    // notice to act on when the tracer is stopped.
    let mut victim = Running(
        Command::new(&host)
            .arg("after")
            .env("CPU_MS", "600000")
            .spawn()
            .expect("start the host"),
    );
    victim.wait_working(&host);
    tracer.wait_loaded(victim.pid(), "loaded the process");
    let kill = |pid: u32, signal| {
        sframe_trace::sys::process::kill(pid as libc::pid_t, signal).expect("signal");
    };
    kill(tracer.pid(), libc::SIGSTOP);
    victim.0.kill().expect("kill the process");
    victim.0.wait().expect("reap it");
    kill(tracer.pid(), libc::SIGINT);
    let (status, stderr) = tracer.stop(libc::SIGCONT);
    assert!(status.success(), "{stderr}");
    assert!(Summary::of(&stderr).count("processes.exited") >= 1, "{stderr}");
}

/// A traced process that execs a new image is reloaded: the new image's stacks are exact.
#[test]
fn exec_reloads_the_process() {
    privileged_test!(paired);
    let dir = tempfile::tempdir().expect("tempdir");
    let host = compile(dir.path(), "host", &[]);
    let out = dir.path().join("stacks.folded");
    // Launched by the tracer, the program spins 1.5 s of CPU time before its exec and 3 s after
    // it, then exits and the session ends: as many samples on a busy machine as on an idle one.
    let mut command = Command::new(tracer_binary());
    command
        .args(SUMMARY_JSON)
        .args(["-F", "499", "--no-kernel", "-o"])
        .arg(&out)
        .arg("--")
        .arg(&host)
        .arg("exec")
        .env("DELAY_MS", "1500")
        .env("CPU_MS", "4500");
    let stderr = Tracer::spawn(command).finish();
    let chain = "_start;__libc_start_main;__libc_start_call_main;main;after_exec;spin";
    let (good, total) = exact(&stacks_with(&out, "after_exec"), chain);
    let (before, _) = exact(
        &stacks_with(&out, "before_exec"),
        "_start;__libc_start_main;__libc_start_call_main;main;before_exec;spin",
    );
    eprintln!("{stderr}\nafter exec: {good}/{total} exact; before: {before}");
    assert!(before >= 50, "too few samples before the exec: {before}");
    assert!(total >= 200, "too few samples after the exec: {total}");
    assert!(good * 100 >= total * 99, "{good}/{total} exact");
    assert!(Summary::of(&stderr).count("processes.loaded") >= 1, "{stderr}");
}

/// Hundreds of short-lived processes under a system-wide tracer: it survives, they are seen
/// exiting, and the processes it keeps at the end are no more than at the start.
#[test]
fn fork_storm_is_survived_and_cleaned_up() {
    privileged_test!(paired);
    let mut tracer = Tracer::start_sweeping(&[
        SUMMARY_JSON[0],
        SUMMARY_JSON[1],
        "-a",
        "-F",
        "999",
        "--no-kernel",
        "-o",
        "/dev/null",
    ]);
    let at_start: u64 = tracer
        .stderr
        .iter()
        .find_map(|l| l.split("every process (").nth(1)?.split(' ').next()?.parse().ok())
        .expect("process count at start");
    let storm = Command::new("bash")
        .args([
            "-c",
            "for i in $(seq 400); do /bin/true; sh -c 'i=0; while [ $i -lt 300 ]; do i=$((i+1)); done'; done",
        ])
        .status()
        .expect("run the storm");
    assert!(storm.success());
    tracer.wait_forgotten();
    let stderr = tracer.interrupt();
    eprintln!("{stderr}");
    // Most storm processes are gone before they can be loaded; those loaded exit again.
    let summary = Summary::of(&stderr);
    let seen = summary.count("processes.loaded") + summary.count("processes.vanished");
    assert!(seen >= 100, "{stderr}");
    assert!(summary.count("processes.exited") >= 1, "{stderr}");
    assert!(
        summary.count("processes.traced_at_end") <= at_start + 20,
        "{at_start} processes at the start: {stderr}"
    );
}

const CHAIN: &str = "_start;__libc_start_main;__libc_start_call_main;main;a;b;c";

/// Trace `pid` at 499 Hz with `extra` flags until it has used `cpu_secs` seconds of CPU time:
/// the folded output (in a directory removed with the returned guard) and the tracer's stderr.
fn trace_pid(pid: u32, cpu_secs: u64, extra: &[&str]) -> (tempfile::TempDir, PathBuf, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("stacks.folded");
    let target = pid.to_string();
    let mut args = vec![
        SUMMARY_JSON[0],
        SUMMARY_JSON[1],
        "-F",
        "499",
        "--no-kernel",
        "--pid",
        &target,
        "-o",
        out.to_str().expect("path"),
    ];
    args.extend(extra);
    let stderr = Tracer::start(&args).interrupt_after_cpu(pid, cpu_secs * ticks_per_second());
    (dir, out, stderr)
}

/// Trace `pid` for 3 s of its CPU time with `extra` flags; the exact and total samples in `c`,
/// and stderr.
fn trace_chain(pid: u32, extra: &[&str]) -> (u64, u64, String) {
    let (_dir, out, stderr) = trace_pid(pid, 3, extra);
    let (good, total) = exact(&stacks_with(&out, "c"), CHAIN);
    eprintln!("{stderr}\n{good}/{total} exact");
    (good, total, stderr)
}

/// A process whose root is another directory (a container's view) has its files read through
/// `/proc/PID/root`: the program exists only inside that root.
#[test]
fn a_process_in_its_own_root_is_unwound() {
    privileged_test!(paired);
    let root = tempfile::tempdir().expect("tempdir");
    // A static program needs no libraries inside the root.
    let app = compile(root.path(), "chain", &["-static"]);
    let mut running = Running(
        Command::new("chroot")
            .arg(root.path())
            .arg("/chain")
            .spawn()
            .expect("chroot"),
    );
    running.wait_working(&app);
    assert!(
        !Path::new("/chain").exists(),
        "the program must exist only inside the root"
    );
    let (good, total, _) = trace_chain(running.pid(), &[]);
    drop(app);
    assert!(total >= 200, "too few samples: {total}");
    assert!(good * 100 >= total * 99, "{good}/{total} exact");
}

/// A program whose file was deleted after it started is read through `/proc/PID/map_files`.
#[test]
fn a_deleted_program_is_unwound() {
    privileged_test!(paired);
    let dir = tempfile::tempdir().expect("tempdir");
    let app = compile(dir.path(), "chain", &[]);
    let mut running = Running(Command::new(&app).spawn().expect("start"));
    running.wait_working(&app);
    std::fs::remove_file(&app).expect("delete the program");
    let (good, total, _) = trace_chain(running.pid(), &[]);
    assert!(total >= 200, "too few samples: {total}");
    assert!(good * 100 >= total * 99, "{good}/{total} exact");
}

/// With a table budget too small for libc, what does not fit is reported, never silently
/// dropped, and the program's own table still loads.
#[test]
fn a_small_table_budget_is_reported() {
    privileged_test!(paired);
    let dir = tempfile::tempdir().expect("tempdir");
    let app = compile(dir.path(), "chain", &[]);
    let mut running = Running(Command::new(&app).spawn().expect("start"));
    running.wait_working(&app);
    let (_, total, stderr) = trace_chain(running.pid(), &["--max-table-memory", "64K"]);
    assert!(total >= 200, "too few samples: {total}");
    let summary = Summary::of(&stderr);
    assert!(summary.count("tables.without_by_reason.no_room") > 0, "{stderr}");
    assert!(
        summary.count("tables.sframe") >= 1,
        "the program's own table fits: {stderr}"
    );
}
