//! JIT files as an attacker writes them, as nobody (fixtures/jit/jit.c), beside an honest JIT
//! process (the same program, with its jitdump, run by root): a jitdump within the size limits
//! that never stops growing must not stall the session (its duration and signals keep their
//! time, and only what is appended is read, so its new records get named), and perf maps far
//! larger than the JIT-name budget must not take the tracer past it, nor take the honest
//! process's names.

use std::{
    ffi::OsStr,
    path::Path,
    process::{Child, Command},
    time::{Duration, Instant},
};

use super::{as_nobody, sticky_dir, tracer, until_sampling};
use crate::{
    jit::{
        hostile::{build_jit, ready},
        jitdump::exact_through,
        user_stacks,
    },
    support::{Running, SUMMARY_JSON, Summary},
};

/// The size the attacker's jitdump is filled to before it starts growing, in MiB.
const FILL_MIB: &str = "32";

/// The honest JIT process: the program with its jitdump, by root, in `dir`.
fn honest(program: &Path, dir: &Path) -> Running {
    let mut command = Command::new(program);
    command.args(["120", "dump"]).current_dir(dir);
    ready(command).0
}

/// `VmHWM` of `pid`, in KiB (0 once it is gone).
fn peak_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Wait for `child` to end (at most `limit`), noting its peak memory meanwhile: its status
/// and how long it took, and the peak in KiB.
fn wait_noting_peak(child: &mut Child, limit: Duration) -> (std::process::ExitStatus, Duration, u64) {
    let started = Instant::now();
    let mut peak = 0;
    loop {
        peak = peak.max(peak_kib(child.id()));
        if let Some(status) = child.try_wait().expect("try_wait") {
            return (status, started.elapsed(), peak);
        }
        assert!(started.elapsed() < limit, "sframe-trace still ran after {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Regression (a jitdump growing by a record every 100 ms was read whole again every 500 ms
/// on the session's loop: SIGTERM took 75 s, `-d 8` lasted 81 s, 1.05 GB resident): beside
/// nobody's jitdump, filled to 32 MiB and growing, a `-d 6` session of it and of an honest
/// JIT process ends within 6 + 2 s of its start of sampling, in bounded memory, and keeps the
/// honest process's stacks exact; a second session names the code whose records were
/// appended after it began (the dump read incrementally) and honours SIGTERM within 2 s.
#[test]
fn a_growing_jitdump_stalls_neither_the_duration_nor_signals() {
    privileged_test!();
    let shared = sticky_dir();
    let program = build_jit(shared.path());
    let mut attack = as_nobody(&[program.as_os_str(), "120".as_ref(), "grow".as_ref(), FILL_MIB.as_ref()]);
    attack.current_dir(shared.path());
    let (attacker, _) = ready(attack);
    let ready_at = Instant::now();
    let own = tempfile::tempdir().expect("tempdir");
    let honest = honest(&program, own.path());
    let pids = format!("{},{}", attacker.pid(), honest.pid());
    let out = own.path().join("out.json");

    let args: Vec<&OsStr> = [
        "--pid",
        &pids,
        "-F",
        "499",
        "-d",
        "6",
        "-f",
        "json",
        "-o",
        out.to_str().expect("utf-8"),
    ]
    .into_iter()
    .chain(SUMMARY_JSON)
    .map(OsStr::new)
    .collect();
    let (mut child, stderr, said) = until_sampling(tracer(&args));
    let reader = std::thread::spawn(move || said + &std::io::read_to_string(stderr).unwrap_or_default());
    let (status, took, peak) = wait_noting_peak(&mut child.0, super::LIMIT);
    let stderr = reader.join().expect("stderr reader");
    eprintln!("{stderr}\n-d 6 took {took:?} from its sampling, peak {peak} KiB");
    assert!(status.success(), "{status}: {stderr}");
    assert!(took <= Duration::from_secs(8), "-d 6 took {took:?}\n{stderr}");
    assert!(peak < 400 << 10, "the tracer's peak RSS was {peak} KiB");
    let summary = Summary::of(&stderr);
    assert!(summary.count("jit.budget.peak_bytes") <= summary.count("jit.budget.limit_bytes"));

    let json = std::fs::read_to_string(&out).expect("read the json output");
    let (exact, _) = exact_through(&user_stacks(&json, honest.pid()), "jit_outer");
    assert!(exact >= 50, "only {exact} exact stacks of the honest process\n{stderr}");

    // A second session, streaming json, until the attacker's code compiled after it began
    // sampling is named (from records appended to the dump after it was first read), then
    // SIGTERM.
    let args: Vec<&OsStr> = [
        "--pid",
        &pids,
        "-F",
        "499",
        "-f",
        "json",
        "-o",
        out.to_str().expect("utf-8"),
    ]
    .into_iter()
    .map(OsStr::new)
    .collect();
    let (mut child, stderr, _) = until_sampling(tracer(&args));
    // A record every 100 ms since the attacker was ready: those past this one came later.
    let appended_after = (ready_at.elapsed().as_millis() / 100 + 2) as u64;
    let started = Instant::now();
    let newest = loop {
        let streamed = super::temporaries_of(&out)
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .collect::<String>();
        let newest = streamed
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|s| s["pid"].as_u64() == Some(u64::from(attacker.pid())))
            .flat_map(|s| s["frames"].as_array().cloned().unwrap_or_default())
            .filter_map(|f| f["symbol"].as_str()?.strip_prefix("grown_")?.parse::<u64>().ok())
            .max();
        if newest.is_some_and(|n| n > appended_after) {
            break newest;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "no code compiled after sampling began named in 90 s (newest: {newest:?}, wanted past {appended_after})"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!("grown_{newest:?} named (appended after grown_{appended_after})");
    let sent = Instant::now();
    // Our own child, not reaped yet.
    let _ = sframe_trace::sys::process::kill(child.pid() as libc::pid_t, libc::SIGTERM);
    let (status, _, _) = wait_noting_peak(&mut child.0, super::LIMIT);
    let took = sent.elapsed();
    drop(stderr);
    assert!(took <= Duration::from_secs(2), "SIGTERM took effect after {took:?}");
    assert!(status.success(), "{status}");
    drop((attacker, honest));
}

/// Write nobody's perf map for `pid`: `lines` names of code nowhere, 30 bytes or so each.
fn big_perf_map(pid: u32, lines: u64) -> crate::jit::hostile::Placed {
    let path = std::path::PathBuf::from(format!("/tmp/perf-{pid}.map"));
    let placed = crate::jit::hostile::Placed(path.clone());
    let mut text = String::with_capacity((lines * 32) as usize);
    for i in 0..lines {
        text.push_str(&format!(
            "{:x} 10 attacker_name_{i:08}\n",
            0x1000_0000_0000u64 + i * 0x10
        ));
    }
    std::fs::write(&path, text).expect("write the perf map");
    std::os::unix::fs::chown(&path, Some(65534), Some(65534)).expect("give it to nobody");
    placed
}

/// Regression (three processes with perf maps of a million lines each put 577 MB in the
/// tracer): three of nobody's JIT processes, each with a perf map of 400,000 lines (inside
/// the per-process limits, each far past a 2 MiB `--max-jit-memory`), beside an honest JIT
/// process with a map of its own: the tracer holds no more than the budget, counts the lines
/// dropped for it by name, stays small, and names the honest process's JIT code.
#[test]
fn perf_maps_past_the_jit_budget_are_cut_and_the_honest_process_is_named() {
    privileged_test!();
    let shared = sticky_dir();
    let program = build_jit(shared.path());
    let mut attackers = Vec::new();
    let mut maps = Vec::new();
    for _ in 0..3 {
        let (attacker, _) = ready(as_nobody(&[program.as_os_str(), "120".as_ref()]));
        maps.push(big_perf_map(attacker.pid(), 400_000));
        attackers.push(attacker);
    }
    let mut command = Command::new(&program);
    command.arg("120");
    let (honest, addr) = ready(command);
    let honest_map = crate::jit::hostile::Placed(format!("/tmp/perf-{}.map", honest.pid()).into());
    std::fs::write(&honest_map.0, format!("{addr:x} 13 honest_jit\n")).expect("write the honest map");

    let pids: Vec<String> = attackers.iter().chain([&honest]).map(|p| p.pid().to_string()).collect();
    let pids = pids.join(",");
    let own = tempfile::tempdir().expect("tempdir");
    let out = own.path().join("out.json");
    let args: Vec<&OsStr> = [
        "--pid",
        &pids,
        "-F",
        "499",
        "-d",
        "6",
        "--max-jit-memory",
        "2M",
        "-f",
        "json",
        "-o",
        out.to_str().expect("utf-8"),
    ]
    .into_iter()
    .chain(SUMMARY_JSON)
    .map(OsStr::new)
    .collect();
    let (mut child, stderr, said) = until_sampling(tracer(&args));
    let reader = std::thread::spawn(move || said + &std::io::read_to_string(stderr).unwrap_or_default());
    let (status, took, peak) = wait_noting_peak(&mut child.0, super::LIMIT);
    let stderr = reader.join().expect("stderr reader");
    eprintln!("{stderr}\ntook {took:?} from its sampling, peak {peak} KiB");
    assert!(status.success(), "{status}: {stderr}");
    let summary = Summary::of(&stderr);
    assert_eq!(summary.count("jit.budget.limit_bytes"), 2 << 20);
    assert!(summary.count("jit.budget.peak_bytes") <= 2 << 20, "{stderr}");
    assert!(summary.count("jit.budget.perf_map_lines_over_budget") > 0, "{stderr}");
    // Each attacker's map would hold about 40 MiB whole: the three, 120 MiB more than the
    // tracer's 60 MiB or so.
    assert!(peak < 128 << 10, "the tracer's peak RSS was {peak} KiB");
    assert!(took <= Duration::from_secs(8), "-d 6 took {took:?}\n{stderr}");

    let json = std::fs::read_to_string(&out).expect("read the json output");
    let stacks = user_stacks(&json, honest.pid());
    let named = stacks
        .iter()
        .filter(|s| s.iter().any(|f| f.0.as_deref() == Some("honest_jit")))
        .count();
    assert!(
        named >= 50,
        "only {named} of {} honest stacks named\n{stderr}",
        stacks.len()
    );
    drop((attackers, maps, honest_map));
}
