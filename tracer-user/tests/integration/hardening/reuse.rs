//! Addresses and pids that come back with other contents: one library loaded and unloaded
//! again and again at shifting addresses, one pid taken by a new process as soon as the last
//! one exited, and a program file replaced while it runs. A frame resolved through what was
//! there before shows as a foreign name, which the judges count as wrong.

use std::{
    collections::BTreeMap,
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use super::{
    Folded, ROOMY, Verdict, Verdicts, chain_by_comm, chain_of, chain_programs, comm, compile, free_pid, judge,
    read_folded,
};
use crate::support::{Running, SUMMARY_JSON, Summary, Tracer, ticks_per_second, wait_for_cpu};

/// fixtures/hardening/churn.c's stack in its plugin. churn_work calls churn_leaf (exported)
/// through the library's PLT: a sample in that stub ends in `churn_leaf@plt` instead.
const CHURN_CHAIN: [&str; 7] = [
    "_start",
    "__libc_start_main",
    "__libc_start_call_main",
    "main",
    "run_plugin",
    "churn_work",
    "churn_leaf",
];

/// One library loaded with dlopen, run for 20 ms and unloaded with dlclose, about 250 times,
/// at addresses that shift by a few pages so its code overlaps where it was before at another
/// bias, traced with `--pid`: every sample in the plugin is exact or truncated (a frame named
/// `churn_pad`, code that never runs, would be a PC resolved through a stale mapping).
#[test]
fn dlopen_dlclose_churn_is_never_wrong() {
    privileged_test!();
    let dir = tempfile::tempdir().expect("tempdir");
    let plugin = compile(dir.path(), "churn_plugin", "libchurn.so", &["-shared", "-fPIC"]);
    let churn = compile(dir.path(), "churn", "churn", &[]);
    let out = dir.path().join("stacks.folded");
    let report = dir.path().join("churn.out");
    let running = Running(
        Command::new(&churn)
            .args(["6", "20"])
            .env("PLUGIN", &plugin)
            .stdout(std::fs::File::create(&report).expect("create the report"))
            .spawn()
            .expect("start churn"),
    );
    let pid = running.pid().to_string();
    let stderr = Tracer::start(&[
        SUMMARY_JSON[0],
        SUMMARY_JSON[1],
        "-F",
        "999",
        "--no-kernel",
        "--pid",
        &pid,
        "-o",
        out.to_str().expect("path"),
    ])
    .finish();
    drop(running);
    let report = std::fs::read_to_string(&report).expect("read the report");
    eprintln!("{stderr}\n{report}");
    let chain: Vec<String> = CHURN_CHAIN.iter().map(|s| s.to_string()).collect();
    let mut through_stub = chain.clone();
    *through_stub.last_mut().expect("a chain") = "churn_leaf@plt".to_owned();
    let verdicts = Verdicts::of(&read_folded(&out), |line| {
        let in_stub = line.frames.last().is_some_and(|f| f == "churn_leaf@plt");
        line.frames
            .iter()
            .any(|f| f.starts_with("churn_") || f == "run_plugin")
            .then(|| if in_stub { through_stub.clone() } else { chain.clone() })
    });
    verdicts.assert_sound("plugin samples", 500);
    assert!(
        verdicts.get(Verdict::Exact) * 2 >= verdicts.total(),
        "most plugin samples should be exact: {verdicts:?}"
    );
    let distinct: u64 = report
        .rsplit(' ')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .expect("distinct addresses in the report");
    assert!(distinct >= 2, "the library should have moved: {report}");
    assert!(Summary::of(&stderr).count("processes.refreshed") >= 20, "{stderr}");
}

/// One pid taken again and again: fixtures/hardening/reuse.c starts each process with the pid
/// of the one before (clone3's set_tid, so no global setting changes), alternating `first` and
/// `second`, whose code sits at the same addresses; under a system-wide tracer the samples of
/// each are judged against its own chain, so a sample resolved through its predecessor's
/// mappings shows as wrong.
#[test]
fn reused_pids_are_told_apart() {
    privileged_test!();
    // An unprivileged user's busy and growing-jitdump programs beside it all along (issue 29:
    // they once left the tracer judging none of this test's samples).
    let _neighbours = crate::support::neighbours::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let programs = chain_programs(dir.path());
    let (first, second) = &programs;
    let reuse = compile(dir.path(), "reuse", "reuse", &[]);
    let out = dir.path().join("stacks.folded");
    let tracer = Tracer::start(
        &[
            &ROOMY[..],
            &SUMMARY_JSON[..],
            &["-a", "-F", "499", "--no-kernel", "-o", out.to_str().expect("path")],
        ]
        .concat(),
    );
    // 16 processes of 300 ms with one pid; a pid taken meanwhile by another process (exit 3)
    // makes it try another.
    let mut run = None;
    for _ in 0..5 {
        let pid = free_pid();
        let output = Command::new(&reuse)
            .args([pid.to_string().as_str(), "16"])
            .args([first, second])
            .args(["300", "2"])
            .output()
            .expect("run reuse");
        if output.status.code() != Some(3) {
            run = Some((pid, output));
            break;
        }
    }
    let (pid, output) = run.expect("a pid free long enough");
    let stderr = tracer.interrupt();
    let summary = Summary::of(&stderr);
    let (samples, lost) = (summary.count("samples"), summary.count("lost"));
    eprintln!(
        "{stderr}\n{}{}{samples} samples, {lost} lost",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "reuse with pid {pid} failed");
    let lines = read_folded(&out);
    let verdicts = Verdicts::of(&lines, chain_by_comm(&programs, 2));
    verdicts.assert_sound("processes with one pid", 200);
    for (name, program) in [("first", first), ("second", second)] {
        let comm = comm(program);
        let exact = Verdicts::of(&lines, |line| (line.comm == comm).then(|| chain_of(name, 2))).get(Verdict::Exact);
        assert!(exact >= 50, "{name}: only {exact} exact samples");
    }
}

/// The user frames of one `-f json` sample, outermost first, by symbol (unknown ones as
/// `[unknown]`), without inlined frames; and its pid.
fn json_sample(line: &str) -> (u32, Folded) {
    let sample: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    let frames = sample["frames"]
        .as_array()
        .expect("frames")
        .iter()
        .filter(|f| f["source"] != "kernel" && f["inlined"] != true)
        .map(|f| {
            f["symbol"]
                .as_str()
                .unwrap_or("[unknown]")
                .replace("__libc_start_main_impl", "__libc_start_main")
        })
        .rev()
        .collect();
    let folded = Folded {
        comm: sample["comm"].as_str().unwrap_or_default().to_owned(),
        frames,
        count: 1,
    };
    (sample["pid"].as_u64().expect("pid") as u32, folded)
}

/// A running program's file replaced (a new file renamed over it) while a system-wide tracer
/// traces it, then a second process started from the same path: the first keeps its own
/// stacks (its code is now a deleted file), the second gets the new file's.
#[test]
fn a_replaced_program_keeps_its_stacks() {
    privileged_test!();
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, second) = chain_programs(dir.path());
    let app = dir.path().join("app");
    std::fs::copy(&first, &app).expect("copy first to app");
    let old = Running(start_retrying(&app));
    let out = dir.path().join("samples.json");
    // The tracer tells each process it loads: the new process is judged once it is loaded,
    // however far behind a busy host keeps the tracer.
    let mut tracer = Tracer::start_logging(
        &[
            ROOMY[0],
            ROOMY[1],
            "-a",
            "-F",
            "499",
            "--no-kernel",
            "-f",
            "json",
            "-o",
            out.to_str().expect("path"),
        ],
        sframe_trace::trace::LOAD_LOG,
    );
    // A second and a half of the old process's CPU, then three of the new one's (each runs
    // until killed): hundreds of samples of each at 499 Hz, however busy the host.
    let ticks = ticks_per_second();
    wait_for_cpu(old.pid(), ticks * 3 / 2);
    let staged = dir.path().join("app.new");
    std::fs::copy(&second, &staged).expect("copy second");
    std::fs::rename(&staged, &app).expect("rename over app");
    let new = Running(start_retrying(&app));
    tracer.wait_loaded(new.pid(), "loaded the new process");
    wait_for_cpu(new.pid(), ticks * 3);
    let (old_pid, new_pid) = (old.pid(), new.pid());
    drop((old, new));
    let stderr = tracer.interrupt();
    eprintln!("{stderr}");
    let text = std::fs::read_to_string(&out).expect("read the samples");
    let (mut old_verdicts, mut new_verdicts) = (Verdicts::default(), Verdicts::default());
    // Every stack of the new process, to tell "not sampled" from "sampled but not named".
    let mut new_stacks: BTreeMap<String, u64> = BTreeMap::new();
    for line in text.lines() {
        let (pid, sample) = json_sample(line);
        if pid == new_pid {
            *new_stacks.entry(sample.frames.join(";")).or_default() += 1;
        }
        let (verdicts, chain) = match pid {
            p if p == old_pid => (&mut old_verdicts, chain_of("first", 1)),
            p if p == new_pid => (&mut new_verdicts, chain_of("second", 1)),
            _ => continue,
        };
        let frames: Vec<&str> = sample.frames.iter().map(String::as_str).collect();
        if !frames
            .iter()
            .any(|f| f.starts_with("first_") || f.starts_with("second_"))
        {
            continue;
        }
        let verdict = judge(&frames, &chain);
        *verdicts.counts.entry(verdict).or_default() += 1;
        if verdict == Verdict::Wrong {
            verdicts.wrong.push(sample.frames.join(";"));
        }
    }
    old_verdicts.assert_sound("the program whose file was replaced", 50);
    if new_verdicts.total() < 50 {
        eprintln!("every stack of the new process {new_pid}: {new_stacks:#?}");
    }
    new_verdicts.assert_sound("the program started from the new file", 50);
    assert!(Path::new(&app).exists());
}

/// Start `path`, retrying while another process holds it open for writing (ETXTBSY: a fork of
/// another test's process can hold the descriptor the copy wrote it through).
fn start_retrying(path: &Path) -> std::process::Child {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        match Command::new(path).spawn() {
            Ok(child) => return child,
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("start {}: {e}", path.display()),
        }
    }
}
