//! End-to-end accuracy of `sframe-trace` tracing: build the workloads of fixtures/workloads (each
//! spends all its time at one known call chain) with SFrame v1, v2 and v3, trace each one both
//! launched (`-- COMMAND`) and attached (`--pid`), and require at least 99% of the samples to be
//! exactly the known chain. Without SFrame, frame pointers must give the same chain, and with no
//! unwind information at all every stack must be a true innermost part of it. Privileged: they
//! need root (skip loudly without it, fail under CI=true); like every privileged test they run
//! one at a time, so the tracers never compete with each other for the CPUs of a small machine.

mod folded;

use std::{
    fs::File,
    path::{Path, PathBuf},
    process::{Command, ExitStatus, Stdio},
    time::Duration,
};

use folded::Verdict;

use crate::support::{Running, SUMMARY_JSON, Summary, Tracer, build_workloads as build, ticks_per_second};

/// The bar for SFrame and frame-pointer workloads: exactly the known chain.
const MIN_EXACT: f64 = 0.99;
/// Sampling frequency of every run.
const HZ: u32 = 499;
/// CPU time a launched workload runs for (`cpu:SECONDS`; the session ends with it).
const LAUNCH_SECS: u32 = 2;
/// The same in an emulated guest ([`EMULATED_VAR`]): there the dynamic loader and the exit
/// handlers, code run once and translated first, take as many samples as half a second of the
/// workload's loop, about 1.5 % of a 2-second run (true stacks, but not the chain); a longer
/// run leaves them their share on a real CPU.
const LAUNCH_SECS_EMULATED: u32 = 8;
/// CPU time of an attached workload the tracer samples before it is interrupted.
const ATTACH_SECS: u32 = 1;
/// The same in an emulated guest, where its timer gives fewer samples (see
/// [`MIN_SAMPLE_FRACTION_EMULATED`]).
const ATTACH_SECS_EMULATED: u32 = 3;
/// A run must give at least this fraction of the nominal HZ x seconds samples, so that a tracer
/// that samples nothing cannot pass. The seconds are the workload's CPU time, not the wall
/// time, so a host busy with other work gives as many.
const MIN_SAMPLE_FRACTION: f64 = 0.5;
/// The same in an emulated guest: its timer interrupts come late (each walk is emulated too),
/// and 40 to 50 % of the nominal samples were seen under qemu's software emulation on a busy
/// host.
const MIN_SAMPLE_FRACTION_EMULATED: f64 = 0.2;
/// Set (by `cargo xtask vm-test`) when the tests run in a guest under software emulation.
const EMULATED_VAR: &str = "SFRAME_TRACE_EMULATED";

/// Whether the tests run under software emulation (see [`EMULATED_VAR`]).
fn emulated() -> bool {
    std::env::var_os(EMULATED_VAR).is_some_and(|v| v == "1")
}

/// [`LAUNCH_SECS`], or [`LAUNCH_SECS_EMULATED`] under emulation.
fn launch_secs() -> u32 {
    if emulated() { LAUNCH_SECS_EMULATED } else { LAUNCH_SECS }
}

/// [`ATTACH_SECS`], or [`ATTACH_SECS_EMULATED`] under emulation.
fn attach_secs() -> u32 {
    if emulated() { ATTACH_SECS_EMULATED } else { ATTACH_SECS }
}

/// A workload program and the chain it spends its time at (outermost first, after `comm;`).
struct Workload {
    name: &'static str,
    chain: Vec<String>,
    max_depth: Option<u32>,
}

impl Workload {
    fn new(name: &'static str, chain: &[&str]) -> Workload {
        Workload {
            name,
            chain: chain.iter().map(|f| (*f).to_owned()).collect(),
            max_depth: None,
        }
    }

    /// `_start;main;run;recurse x depth;leaf` (fixtures/workloads/deep.c).
    fn deep(name: &'static str, depth: usize) -> Workload {
        let mut w = Workload::new(name, &["_start", "main", "run"]);
        w.chain.extend(std::iter::repeat_n("recurse".to_owned(), depth));
        w.chain.push("leaf".to_owned());
        w
    }
}

/// The SFrame workloads, built for each of v1, v2, v3.
fn sframe_workloads() -> Vec<Workload> {
    let mut deeper = Workload::deep("deeper", 300);
    deeper.max_depth = Some(512);
    // `_start` is the 104th frame, exactly the limit: the walks are complete, not `max_depth`
    // (`complete_walks` counts them).
    let mut deep_at_the_limit = Workload::deep("deep", 100);
    deep_at_the_limit.max_depth = Some(104);
    vec![
        Workload::deep("deep", 100),
        deep_at_the_limit,
        deeper,
        // With default options: a 2004-frame recursion is walked whole.
        Workload::deep("deepest", 2000),
        Workload::new("bigframe", &["_start", "main", "big", "spin"]),
        Workload::new("alloca", &["_start", "main", "dyn", "spin"]),
        Workload::new("plt", &["_start", "main", "lib_entry", "callback", "spin"]),
    ]
}

/// What one tracer run left: its exit status, the folded text and its stderr (progress, then
/// the summary as JSON).
struct Traced {
    command: String,
    status: ExitStatus,
    folded: String,
    stderr: String,
}

/// Run `sframe-trace ARGS` (its summary as JSON) with stdout and stderr in files under
/// `scratch`, until the command it launched ends; kill it if it is still running
/// [`PATIENCE`] after it started sampling (see `support::wait_tracer`).
fn sframe_trace(args: &[String], scratch: &Path, output: &Path) -> Traced {
    let stdout_path = scratch.join("stdout");
    let stderr_path = scratch.join("stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sframe-trace"))
        .args(SUMMARY_JSON)
        .args(args)
        .stdin(Stdio::null())
        .stdout(File::create(&stdout_path).expect("create stdout file"))
        .stderr(File::create(&stderr_path).expect("create stderr file"))
        .spawn()
        .expect("spawn sframe-trace");
    let status = crate::support::wait_tracer(&mut child, &stderr_path, PATIENCE);
    let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_else(|e| format!("<cannot read {path:?}: {e}>"));
    Traced {
        command: format!("sframe-trace {}", args.join(" ")),
        status,
        folded: read(output),
        stderr: read(&stderr_path),
    }
}

/// How long a run may take once sampling, however busy the host (the workloads give it the
/// CPU time it waits for).
const PATIENCE: Duration = Duration::from_secs(180);

/// The flags every run shares, its folded output going to `output`.
fn common_args(w: &Workload, output: &Path) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "-F".into(),
        HZ.to_string(),
        "--no-kernel".into(),
        "-o".into(),
        output.display().to_string(),
    ];
    if let Some(depth) = w.max_depth {
        args.extend(["--max-depth".into(), depth.to_string()]);
    }
    args
}

/// `sframe-trace ... -o FILE -- WORKLOAD cpu:2`: the tracer launches the workload, and ends
/// with it.
fn trace_launched(bin: &Path, w: &Workload) -> Traced {
    let scratch = tempfile::tempdir().expect("tempdir");
    let output = scratch.path().join("folded");
    let mut args = common_args(w, &output);
    args.extend(["--".into(), bin.display().to_string(), format!("cpu:{}", launch_secs())]);
    sframe_trace(&args, scratch.path(), &output)
}

/// `sframe-trace ... --pid PID` on a workload the test started, interrupted once the workload
/// has used [`attach_secs`] of CPU time.
fn trace_attached(bin: &Path, w: &Workload) -> Traced {
    let scratch = tempfile::tempdir().expect("tempdir");
    let output = scratch.path().join("folded");
    let mut running = Running(
        Command::new(bin)
            .arg("cpu:600")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display())),
    );
    running.wait_working(bin);
    let pid = running.0.id();
    let mut args = common_args(w, &output);
    args.extend(["--pid".into(), pid.to_string()]);
    let full: Vec<&str> = SUMMARY_JSON
        .iter()
        .copied()
        .chain(args.iter().map(String::as_str))
        .collect();
    let stderr = Tracer::start(&full).interrupt_after_cpu(pid, u64::from(attach_secs()) * ticks_per_second());
    Traced {
        command: format!("sframe-trace {}", args.join(" ")),
        status: std::os::unix::process::ExitStatusExt::from_raw(0),
        folded: std::fs::read_to_string(&output).unwrap_or_else(|e| format!("<cannot read {output:?}: {e}>")),
        stderr,
    }
}

/// How a run is judged: every sample exactly the chain, or an innermost part of it.
#[derive(Clone, Copy)]
enum Check {
    /// At least [`MIN_EXACT`] of the samples are exactly the chain.
    Exact,
    /// Every sample in the chain's code is a non-empty innermost part of the chain; at most
    /// 1 - [`MIN_EXACT`] of them were taken in code off it (see [`Verdict::innermost_part`]).
    InnermostPart,
}

/// An extra check of a run that passed the basic ones, given its verdict.
type Extra = fn(&Workload, &Traced, &Verdict) -> Result<(), String>;

/// Judge one run: `Ok` with the one-line result, or `Err` describing every problem (command,
/// accuracy, wrong stacks, the tracer's stderr).
fn judge(traced: &Traced, w: &Workload, secs: u32, check: Check, extra: Extra) -> Result<String, String> {
    let fail = |problems: &[String]| {
        Err(format!(
            "{}:\n    {}\n    stderr:\n{}",
            traced.command,
            problems.join("\n    "),
            indent(&traced.stderr)
        ))
    };
    if !traced.status.success() {
        return fail(&[format!("exited with {}", traced.status)]);
    }
    let stacks = match folded::parse(&traced.folded) {
        Ok(stacks) => stacks,
        Err(e) => return fail(&[e]),
    };
    let (verdict, passed, bar) = match check {
        Check::Exact => {
            let v = Verdict::exact(&stacks, w.name, &w.chain);
            let passed = v.accuracy() >= MIN_EXACT;
            (v, passed, format!("need >= {:.0}% exactly", MIN_EXACT * 100.0))
        }
        Check::InnermostPart => {
            let v = Verdict::innermost_part(&stacks, w.name, &w.chain);
            // Code run once (the loader, the exit's printing) may take a sample or two, as
            // the exact check allows; a stack in the chain's code must be a true part of it.
            let off_chain_allowed = (v.total as f64 * (1.0 - MIN_EXACT)).floor() as u64;
            let passed = v.wrong.is_empty() && v.outside <= off_chain_allowed;
            let bar = format!(
                "need every sample an innermost part of the chain (at most {off_chain_allowed} \
                 taken off it, in code run once) of"
            );
            (v, passed, bar)
        }
    };
    let mut problems = Vec::new();
    let fraction = if emulated() {
        MIN_SAMPLE_FRACTION_EMULATED
    } else {
        MIN_SAMPLE_FRACTION
    };
    let min_samples = (f64::from(HZ * secs) * fraction) as u64;
    if verdict.total < min_samples {
        problems.push(format!(
            "only {} samples, expected about {} (at least {min_samples})",
            verdict.total,
            HZ * secs
        ));
    }
    if !passed {
        problems.push(format!("{bar} `{};{}`", w.name, folded::compress(&w.chain)));
    }
    let repeated = folded::repeated_lines(&stacks);
    if !repeated.is_empty() {
        let list: Vec<String> = repeated
            .iter()
            .map(|(stack, n)| format!("`{stack}` on {n} lines"))
            .collect();
        problems.push(format!(
            "the folded format has one line per distinct stack, but {} stacks are repeated: {}",
            repeated.len(),
            list.join(", ")
        ));
    }
    if let Err(e) = extra(w, traced, &verdict) {
        problems.push(e);
    }
    if problems.is_empty() {
        Ok(format!("{}: {verdict}", traced.command))
    } else {
        problems.push(format!("accuracy: {verdict}"));
        fail(&problems)
    }
}

/// `text` indented for a failure message; a long one (a verifier log) cut to its first 10 and
/// last 20 lines.
fn indent(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let shown: Vec<String> = if lines.len() > 40 {
        let cut = format!("... {} lines cut ...", lines.len() - 30);
        lines[..10]
            .iter()
            .map(|l| (*l).to_owned())
            .chain([cut])
            .chain(lines[lines.len() - 20..].iter().map(|l| (*l).to_owned()))
            .collect()
    } else {
        lines.iter().map(|l| (*l).to_owned()).collect()
    };
    shown.iter().map(|l| format!("      | {l}\n")).collect()
}

/// Trace every workload of one set, launched and attached; collect every failure, then fail
/// once with all of them (one broken workload does not hide another).
fn trace_set(set: &str, workloads: &[Workload], check: Check, extra: Extra) {
    let out = build(&[set]);
    let mut failures = Vec::new();
    for w in workloads {
        let bin: PathBuf = out.path().join(set).join(w.name);
        for (traced, secs) in [
            (trace_launched(&bin, w), launch_secs()),
            (trace_attached(&bin, w), attach_secs()),
        ] {
            match judge(&traced, w, secs, check, extra) {
                Ok(result) => eprintln!("ok   {set}/{}: {result}", w.name),
                Err(e) => failures.push(format!("{set}/{}: {e}", w.name)),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} runs failed:\n{}",
        failures.len(),
        workloads.len() * 2,
        failures.join("\n")
    );
}

fn no_extra_check(_: &Workload, _: &Traced, _: &Verdict) -> Result<(), String> {
    Ok(())
}

/// nosframe: every exact sample took at least chain.len() - 1 frame-pointer steps, and the
/// summary must count them.
fn counts_frame_pointer_frames(w: &Workload, traced: &Traced, verdict: &Verdict) -> Result<(), String> {
    let want = verdict.good * (w.chain.len() as u64 - 1);
    let fp = Summary::of(&traced.stderr).count("user_frames.frame_pointers");
    if fp >= want {
        Ok(())
    } else {
        Err(format!(
            "the summary counts {fp} frame-pointer frames, expected at least {want}"
        ))
    }
}

/// The summary counts at least 99% of the walks as complete (ended at the outermost frame,
/// `_start`: marked in v3, the ELF entry point's function in v1/v2).
fn complete_walks(_: &Workload, traced: &Traced, _: &Verdict) -> Result<(), String> {
    let summary = Summary::of(&traced.stderr);
    let (complete, truncated) = (summary.count("stacks.complete"), summary.count("stacks.truncated"));
    if complete as f64 >= MIN_EXACT * (complete + truncated) as f64 {
        Ok(())
    } else {
        Err(format!("only {complete} complete walks, {truncated} truncated"))
    }
}

/// SFrame v1 (binutils 2.40): >= 99% of samples of every workload are exactly its chain.
#[test]
fn sframe_v1_workloads_unwind_exactly() {
    privileged_test!(paired);
    trace_set("v1", &sframe_workloads(), Check::Exact, complete_walks);
}

/// SFrame v2 (binutils 2.44): >= 99% of samples of every workload are exactly its chain.
#[test]
fn sframe_v2_workloads_unwind_exactly() {
    privileged_test!(paired);
    trace_set("v2", &sframe_workloads(), Check::Exact, complete_walks);
}

/// SFrame v3 (binutils 2.47.50, outermost markers): >= 99% of samples are exactly the chain.
#[test]
fn sframe_v3_workloads_unwind_exactly() {
    privileged_test!(paired);
    trace_set("v3", &sframe_workloads(), Check::Exact, complete_walks);
}

/// aarch64, SFrame v1 with return addresses signed (`-mbranch-protection=pac-ret`): the walker
/// strips the pointer-authentication bits of each return address a row says is mangled; the
/// same bar.
#[cfg(target_arch = "aarch64")]
#[test]
fn sframe_v1_pac_ret_workloads_unwind_exactly() {
    privileged_test!();
    trace_set("v1-pac", &sframe_workloads(), Check::Exact, complete_walks);
}

/// aarch64, SFrame v2 with signed return addresses: as v1.
#[cfg(target_arch = "aarch64")]
#[test]
fn sframe_v2_pac_ret_workloads_unwind_exactly() {
    privileged_test!();
    trace_set("v2-pac", &sframe_workloads(), Check::Exact, complete_walks);
}

/// aarch64, SFrame v3 with signed return addresses: as v1.
#[cfg(target_arch = "aarch64")]
#[test]
fn sframe_v3_pac_ret_workloads_unwind_exactly() {
    privileged_test!();
    trace_set("v3-pac", &sframe_workloads(), Check::Exact, complete_walks);
}

/// Without any unwind tables, frame pointers give >= 99% exact chains, and the summary counts
/// those frames as frame-pointer frames.
#[test]
fn frame_pointers_give_exact_chains_without_sframe() {
    privileged_test!(paired);
    trace_set(
        "none",
        &[Workload::deep("nosframe", 100)],
        Check::Exact,
        counts_frame_pointer_frames,
    );
}

/// Without unwind tables or frame pointers, stacks may be truncated but are never wrong: every
/// sample in the workload's loop is a non-empty innermost part of the true chain (a sample of
/// its exit's printing reads `main;__fprintf;...`, true and truncated at `main`).
#[test]
fn no_unwind_info_truncates_but_never_invents_frames() {
    privileged_test!(paired);
    trace_set(
        "none",
        &[Workload::deep("noinfo", 100)],
        Check::InnermostPart,
        no_extra_check,
    );
}
