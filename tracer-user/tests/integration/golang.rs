//! Go programs, built normally and stripped (`-ldflags=-s -w`) by every Go toolchain the host
//! has (`tracer_unwind::testing::go`), traced with `--`: Go keeps frame pointers, so the walk is
//! the kernel's usual one; what is judged here is what the tracer makes of it. Each sample must
//! be complete (a goroutine's stack ends at `runtime.goexit`, a system stack at
//! `runtime.mstart`: the summary counts neither as cut), every frame named as `go tool nm`
//! names the function at its address in the unstripped build (the stripped one is named from
//! `.gopclntab` alone), and every caller frame's return address must follow a call instruction
//! of its function that calls the callee, as `go tool objdump` decodes them (or an indirect
//! call). The pprof, its names taken out, is named again off-host by `sframe-trace symbolize`
//! into the same folded stacks. Under `CI=true` a missing `go` fails the test.

use std::{
    collections::{BTreeMap, HashMap},
    path::Path,
    process::Command,
};

use prost::Message as _;
use tracer_unwind::testing::go;

use crate::support::{SUMMARY_JSON, Summary, json_frames, json_samples, read_pprof, skipped, tracer_binary};

/// Go's name for an assembly function drops the ABI suffix its symbol table carries.
fn plain(name: &str) -> &str {
    name.strip_suffix(".abi0").unwrap_or(name)
}

/// Where Go's runtime starts its stacks: a goroutine's, the system stack's, a new thread's, a
/// signal handler's.
const BASES: [&str; 9] = [
    "runtime.goexit",
    "runtime.main",
    "runtime.mstart",
    "runtime.systemstack",
    "runtime.rt0_go",
    "runtime.clone",
    "runtime.mcall",
    "runtime.morestack",
    "runtime.sigtramp",
];

/// What the Go tools say of one binary: every function's start and name, and every call
/// instruction by its end (a return address) with its function and what it calls.
struct Reference {
    functions: Vec<(u64, String)>,
    calls: HashMap<u64, (String, Option<String>)>,
}

impl Reference {
    fn of(toolchain: &Path, binary: &Path) -> Reference {
        // Not functions: the linker's marks of the text's bounds and of the build id, which
        // share an address with the first function (`runtime.text` with
        // `internal/cpu.Initialize`).
        const MARKS: [&str; 4] = ["runtime.text", "runtime.etext", "go:buildid", "go.buildid"];
        let mut functions: Vec<(u64, String)> = go::nm(toolchain, binary)
            .into_iter()
            .map(|(a, n)| (a, plain(&n).to_owned()))
            .filter(|(_, n)| !MARKS.contains(&n.as_str()))
            .collect();
        functions.sort();
        let calls = go::objdump(toolchain, binary, ".")
            .into_iter()
            .filter_map(|i| {
                let call = i.call?;
                // `main.outer(SB)` is direct; `AX`, `0x10(DX)` are not.
                let target = call.strip_suffix("(SB)").map(|t| plain(t).to_owned());
                Some((i.addr + i.len, (plain(&i.function).to_owned(), target)))
            })
            .collect();
        Reference { functions, calls }
    }

    /// The function `go tool nm` places at `addr` (the last symbol at or below it).
    fn function(&self, addr: u64) -> Option<&str> {
        let i = self.functions.partition_point(|(a, _)| *a <= addr).checked_sub(1)?;
        Some(&self.functions[i].1)
    }
}

/// How the samples of one run were judged.
#[derive(Debug, Default)]
struct Verdict {
    samples: u64,
    /// Not cut, every frame named, down to one of [`BASES`].
    complete: u64,
    /// Complete, and every caller at a call site of its callee.
    exact: u64,
    /// In `main.leaf`, under `main.outer` and `main.middle`.
    in_leaf: u64,
    /// In `main.mix`, named from the inline tree as inlined into `main.leaf`.
    in_mix: u64,
    wrong_names: Vec<String>,
    incomplete: Vec<String>,
    not_exact: Vec<String>,
}

/// Judge the json samples of `pid` against `reference`, the tools' view of `binary` (frames
/// in other objects, the vDSO, are judged complete and named, not against it).
fn judge(text: &str, pid: u32, binary: &Path, reference: &Reference) -> Verdict {
    let mut verdict = Verdict::default();
    let hex = |f: &serde_json::Value, key: &str| {
        u64::from_str_radix(f[key].as_str().unwrap_or("0x0").trim_start_matches("0x"), 16).unwrap_or(0)
    };
    let inlined = |f: &serde_json::Value| f["inlined"].as_bool() == Some(true);
    for sample in json_samples(text, pid) {
        verdict.samples += 1;
        let all = json_frames(&sample);
        // Each inlined frame (from the inline tree) comes before the function it was inlined
        // into, at its address; the rest of the judgement is of those functions.
        for (i, frame) in all.iter().enumerate().filter(|(_, f)| inlined(f)) {
            let holder = all[i + 1..].iter().find(|f| !inlined(f));
            if holder.map(|h| (hex(h, "offset"), &h["object"])) != Some((hex(frame, "offset"), &frame["object"]))
                && verdict.wrong_names.len() < 10
            {
                verdict
                    .wrong_names
                    .push(format!("inlined {frame} not before its function"));
            }
        }
        if all
            .windows(2)
            .any(|w| inlined(&w[0]) && w[0]["symbol"] == "main.mix" && w[1]["symbol"] == "main.leaf")
        {
            verdict.in_mix += 1;
        }
        let frames: Vec<serde_json::Value> = all.iter().filter(|f| !inlined(f)).cloned().collect();
        let names: Vec<&str> = frames
            .iter()
            .map(|f| plain(f["symbol"].as_str().unwrap_or("?")))
            .collect();
        let ours = |f: &serde_json::Value| f["object"].as_str() == binary.to_str();
        for (frame, name) in frames.iter().zip(&names).filter(|(f, _)| ours(f)) {
            let offset = hex(frame, "offset");
            if reference.function(offset) != Some(name) && verdict.wrong_names.len() < 10 {
                verdict
                    .wrong_names
                    .push(format!("{offset:#x}: {name} (nm: {:?})", reference.function(offset)));
            }
        }
        let named = names.iter().all(|n| *n != "?");
        let outermost = names.last().copied().unwrap_or_default();
        if !(sample["truncated"].is_null() && named && BASES.contains(&outermost)) {
            if verdict.incomplete.len() < 10 {
                verdict
                    .incomplete
                    .push(format!("{} ({})", names.join(";"), sample["truncated"]));
            }
            continue;
        }
        verdict.complete += 1;
        if names
            .windows(3)
            .any(|w| w == ["main.leaf", "main.middle", "main.outer"])
        {
            verdict.in_leaf += 1;
        }
        // Every caller (frames 1..) at the end of a call from its function to its callee; a
        // goroutine's first function returns to `runtime.goexit`'s entry plus one (the
        // runtime's `newproc` plants that return address: no call precedes it).
        let exact = (1..frames.len()).filter(|&i| ours(&frames[i])).all(|i| {
            let ra = hex(&frames[i], "offset") + 1;
            let at_base = names[i] == "runtime.goexit"
                && i == frames.len() - 1
                && reference
                    .functions
                    .iter()
                    .any(|(a, n)| *a + 1 == ra && n == "runtime.goexit");
            // A frame interrupted to run `runtime.asyncPreempt` (its "call" is planted by the
            // signal handler) returns to the interrupted instruction, after no call.
            let preempted = names[i - 1] == "runtime.asyncPreempt" && reference.function(ra) == Some(names[i]);
            at_base
                || preempted
                || reference.calls.get(&ra).is_some_and(|(function, target)| {
                    function == names[i] && target.as_deref().is_none_or(|t| t == names[i - 1])
                })
        });
        if exact {
            verdict.exact += 1;
        } else if verdict.not_exact.len() < 10 {
            verdict.not_exact.push(names.join(";"));
        }
    }
    verdict
}

/// Folded stacks with their counts.
fn folded(path: &Path) -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(path).expect("read folded");
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let (stack, count) = line.rsplit_once(' ').expect("a folded line");
        *out.entry(stack.to_owned()).or_default() += count.parse::<u64>().expect("count");
    }
    out
}

/// Trace `binary` for 3 s into json, folded and pprof in `dir`; the json text, the traced pid
/// and the summary.
fn trace(binary: &Path, dir: &Path) -> (String, u32, Summary) {
    let out = |format: &str| dir.join(format!("on.{format}")).to_str().expect("path").to_owned();
    let run = Command::new(tracer_binary())
        .args(SUMMARY_JSON)
        .args(["-F", "499", "--no-kernel"])
        .args(["-f", "json", "-o", &out("json"), "-f", "folded", "-o", &out("folded")])
        .args(["-f", "pprof", "-o", &out("pprof"), "--"])
        .arg(binary)
        .arg("3")
        .env_remove("DEBUGINFOD_URLS")
        .output()
        .expect("run sframe-trace");
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "{stderr}");
    let text = std::fs::read_to_string(out("json")).expect("read json");
    let pid = text
        .lines()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["pid"].as_u64())
        .expect("a sample") as u32;
    (text, pid, Summary::of(&stderr))
}

/// The on-host pprof of `dir`, its names taken out, named again off-host into folded stacks:
/// those in `main.leaf` the same as the on-host folded ones.
fn check_offline(dir: &Path) {
    let mut unnamed = read_pprof(&dir.join("on.pprof"));
    for l in &mut unnamed.location {
        l.line.clear();
    }
    let unnamed_path = dir.join("unnamed.pb");
    std::fs::write(&unnamed_path, unnamed.encode_to_vec()).expect("write");
    let off = dir.join("off.folded");
    let run = Command::new(tracer_binary())
        .arg("symbolize")
        .arg(&unnamed_path)
        .args(["-f", "folded", "-o"])
        .arg(&off)
        .arg("--offline")
        .output()
        .expect("run sframe-trace symbolize");
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    // Stacks in the program's own code (`main.mix` inlined in it named alike): off-host, the
    // vDSO (read from the process) is unnamed.
    let own = |stacks: BTreeMap<String, u64>| -> BTreeMap<String, u64> {
        stacks
            .into_iter()
            .filter(|(k, _)| k.ends_with(";main.leaf") || k.ends_with(";main.leaf;main.mix"))
            .collect()
    };
    let expected = own(folded(&dir.join("on.folded")));
    assert!(expected.values().sum::<u64>() >= 100, "{expected:?}");
    assert_eq!(own(folded(&off)), expected, "off-host stacks differ");
}

#[test]
/// With each Go toolchain, a program built normally and stripped: at least 99 % of samples
/// complete and named down to `runtime.goexit` or `runtime.main` (or a system stack's base),
/// every frame named as the unstripped build's symbols name it, at least 99 % of complete
/// stacks exact against objdump's call sites, and the summary counting the goroutine stacks
/// complete (they end at a zero return address: `zero_ra` before).
fn go_programs_stripped_or_not_are_complete_named_and_exact() {
    privileged_test!(paired);
    for toolchain in go::toolchains() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (normal, stripped) = match go::build_spin(&toolchain, dir.path()) {
            Ok(built) => built,
            Err(e) => {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "no Go toolchain under CI: {e}"
                );
                skipped("go_programs_stripped_or_not_are_complete_named_and_exact", &e);
                return;
            }
        };
        let version = go::version(&toolchain).expect("version");
        let reference = Reference::of(&toolchain, &normal);
        for binary in [&normal, &stripped] {
            let run_dir = tempfile::tempdir().expect("tempdir");
            let (text, pid, summary) = trace(binary, run_dir.path());
            let verdict = judge(&text, pid, binary, &reference);
            let what = format!("{version} {}: {verdict:?}", binary.display());
            eprintln!("{what}\nsummary stacks: {}", summary.0["stacks"]);
            assert!(verdict.samples >= 300, "too few samples: {what}");
            assert!(verdict.wrong_names.is_empty(), "names differ from go tool nm: {what}");
            assert!(verdict.complete * 100 >= verdict.samples * 99, "not complete: {what}");
            assert!(verdict.exact * 100 >= verdict.complete * 99, "not exact: {what}");
            assert!(verdict.in_leaf * 2 >= verdict.samples, "too few in main.leaf: {what}");
            // `main.mix`'s multiply and add are a good part of `main.leaf`'s loop.
            assert!(verdict.in_mix * 10 >= verdict.in_leaf, "too few in main.mix: {what}");
            let (complete, truncated) = (summary.count("stacks.complete"), summary.count("stacks.truncated"));
            assert!(
                complete * 100 >= (complete + truncated) * 99,
                "summary: {:?} ({what})",
                summary.0["stacks"]
            );
            {
                // Go's own deltas walked it, with or without call-frame information.
                assert!(summary.count("tables.gopclntab") >= 1, "{:?}", summary.0["tables"]);
                assert!(
                    summary.count("user_frames.gopclntab") >= verdict.exact,
                    "{:?}",
                    summary.0["user_frames"]
                );
            }
            check_offline(run_dir.path());
        }
    }
}
