//! The README's "Quick start" and "Recipes" commands, taken from its `sh` code blocks and run
//! as written with this build's tracer, each judged on what it produced. Only these
//! substitutions are made (documented in the README as placeholders or obvious to a reader):
//! - `sudo` is dropped (the tests run as root) and `sframe-trace` is this build's tracer;
//! - `N` / `PID` is the pid of a C program the test started (`readme_work` calling
//!   `readme_spin` and `readme_nap`, without frame pointers, with SFrame);
//! - `-d 30` becomes `-d 2` ([`DURATION`]);
//! - `http://localhost:4317` becomes the test OTLP receiver's gRPC endpoint (tests/otlp).
//!
//! Every command runs in a directory holding the files its recipe names: `./app` (the same C
//! program, ending after a second of CPU time), `app.py`, `app.js` and `App.class`. Its result
//! must name that program's functions: the svg or folded file it writes, or the profiles the
//! receiver decoded; the off-CPU recipe's output must also hold blocked stacks of `readme_nap`,
//! and the OTLP recipe must export OTLP. A command without `-d` is either a launched command
//! that ends by itself or the OTLP recipe, which is stopped with SIGTERM once the receiver holds
//! the program's stacks. Privileged; node, java and javac are required (`cargo xtask setup`
//! installs them).

use std::{
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use crate::{
    otlp::Receiver,
    support::{Running, SFRAME_CFLAGS, Tracer, gcc, run, skipped, tracer_binary},
};

/// What `-d 30` becomes: long enough for samples of a busy program, short for a test.
const DURATION: &str = "2";
/// The README's collector endpoint, replaced by the test receiver's.
const ENDPOINT: &str = "http://localhost:4317";
/// How long the OTLP recipe may run before the receiver has the program's stacks: a generous
/// ceiling (the first export comes after the default 10 s interval, on a busy machine).
const OTLP_CEILING: Duration = Duration::from_secs(300);

/// The C program: `readme_work` spins in `readme_spin` and naps in `readme_nap`, forever, or
/// until one second of CPU time when built with `-DONCE` (the recipe's `./app`).
const APP_C: &str = r#"#include <time.h>
volatile unsigned long sink;
__attribute__((noinline)) void readme_spin(void) { for (unsigned long i = 0; i < 3000000; i++) sink += i; }
__attribute__((noinline)) void readme_nap(void) { struct timespec t = {0, 5000000}; nanosleep(&t, 0); }
__attribute__((noinline)) void readme_work(void) { readme_spin(); readme_nap(); }
int main(void) {
#ifdef ONCE
    while (clock() < CLOCKS_PER_SEC) readme_work();
#else
    for (;;) readme_work();
#endif
    return 0;
}
"#;
/// Python: `readme_python` calls a recursive `readme_fib` for one second of CPU time.
const APP_PY: &str = "import time\n\
def readme_fib(n):\n    return n if n < 2 else readme_fib(n - 1) + readme_fib(n - 2)\n\
def readme_python():\n    end = time.process_time() + 1\n    while time.process_time() < end:\n        readme_fib(18)\n\
readme_python()\n";
/// Node.js: a recursive `readmeFib` for two seconds of CPU time (compiled by then).
const APP_JS: &str = "function readmeFib(n) { return n < 2 ? n : readmeFib(n - 1) + readmeFib(n - 2); }\n\
let s = 0;\nwhile (process.cpuUsage().user < 2000000) s += readmeFib(22);\nconsole.log(s);\n";
/// Java: a recursive `App.readmeFib` for three seconds (the JIT compiles it early on).
const APP_JAVA: &str = "public class App {\n\
  static int readmeFib(int n) { return n < 2 ? n : readmeFib(n - 1) + readmeFib(n - 2); }\n\
  public static void main(String[] args) {\n\
    long end = System.nanoTime() + 3_000_000_000L; long s = 0;\n\
    while (System.nanoTime() < end) s += readmeFib(22);\n\
    System.out.println(s);\n  }\n}\n";

/// One command of the README, with the heading it is under.
struct Recipe {
    heading: String,
    line: String,
}

/// The commands of the `sh` blocks under `## Quick start` and `## Recipes` (and its `###`
/// headings), comments removed.
fn recipes(readme: &str) -> Vec<Recipe> {
    let (mut section, mut heading, mut fence) = (String::new(), String::new(), None::<String>);
    let mut found = Vec::new();
    for line in readme.lines() {
        if let Some(lang) = line.strip_prefix("```") {
            fence = match fence {
                None => Some(lang.trim().to_owned()),
                Some(_) => None,
            };
            continue;
        }
        match &fence {
            None if line.starts_with("## ") => (section, heading) = (line[3..].to_owned(), line[3..].to_owned()),
            None if line.starts_with("### ") => heading = line[4..].to_owned(),
            Some(lang) if lang == "sh" && (section == "Quick start" || section == "Recipes") => {
                let command = line.split(" #").next().unwrap_or_default().trim();
                if !command.is_empty() && !command.starts_with('#') {
                    found.push(Recipe {
                        heading: heading.clone(),
                        line: command.to_owned(),
                    });
                }
            }
            _ => {}
        }
    }
    found
}

/// `line`'s arguments to the tracer, after the substitutions of this module's contract.
fn arguments(line: &str, pid: u32, endpoint: &str) -> Vec<String> {
    assert!(
        !line.contains(['\'', '"', '$', '|', '>', '<', '&', ';', '\\']),
        "`{line}`: a README command is plain words, no shell syntax"
    );
    let words: Vec<&str> = line.split_whitespace().collect();
    assert!(
        words.starts_with(&["sudo", "sframe-trace"]),
        "`{line}`: a README recipe runs `sudo sframe-trace`"
    );
    let mut args = Vec::new();
    for (i, word) in words.iter().enumerate().skip(2) {
        let arg = match *word {
            "N" | "PID" => pid.to_string(),
            "30" if words[i - 1] == "-d" => DURATION.to_owned(),
            ENDPOINT => endpoint.to_owned(),
            other => other.to_owned(),
        };
        args.push(arg);
    }
    args
}

/// The function names `args`' result must hold: those of the program it traces.
fn expected_names(args: &[String]) -> &'static [&'static str] {
    let launched = args.iter().position(|a| a == "--").map(|at| args[at + 1].as_str());
    match launched {
        Some("python3") => &["readme_python", "readme_fib"],
        Some("node") => &["readmeFib"],
        Some("java") => &["App.readmeFib"],
        Some("./app") | None => &["readme_work", "readme_spin"],
        Some(other) => panic!("a recipe launches `{other}`: teach this test what it must show"),
    }
}

/// The value of the flag `flag` in `args`.
fn flag<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let before = args.iter().position(|a| a == "--").unwrap_or(args.len());
    args[..before]
        .iter()
        .position(|a| a == flag)
        .map(|at| args[at + 1].as_str())
}

/// Write and build the files the recipes name into `dir`, and the pid target (`target`).
fn prepare(dir: &Path) -> std::path::PathBuf {
    let source = dir.join("app.c");
    std::fs::write(&source, APP_C).expect("write app.c");
    let target = gcc(&source, &dir.join("readme-target"), &SFRAME_CFLAGS);
    gcc(
        &source,
        &dir.join("app"),
        &[&SFRAME_CFLAGS[..], &["-DONCE"][..]].concat(),
    );
    std::fs::write(dir.join("app.py"), APP_PY).expect("write app.py");
    std::fs::write(dir.join("app.js"), APP_JS).expect("write app.js");
    std::fs::write(dir.join("App.java"), APP_JAVA).expect("write App.java");
    run(Command::new("javac").arg("App.java").current_dir(dir));
    target
}

/// The pid of the command a tracer launched (`sampling the launched command (pid N)`), if any.
fn launched_pid(stderr: &str) -> Option<u32> {
    let (_, rest) = stderr.split_once("launched command (pid ")?;
    rest.split_once(')')?.0.parse().ok()
}

/// Run the OTLP recipe (`args`, no `-d`) until `receiver` holds profiles naming `names`, then
/// stop it as a service manager does; what it sent, as text.
fn run_until_exported(mut command: Command, receiver: &Receiver, names: &[&str]) -> String {
    command.stdout(Stdio::null());
    let tracer = Tracer::spawn(command);
    let started = Instant::now();
    loop {
        let sent = serde_json::to_string(&receiver.requests()).expect("requests as text");
        if names.iter().all(|n| sent.contains(n)) {
            let (status, stderr) = tracer.stop(libc::SIGTERM);
            assert!(
                status.success(),
                "the OTLP recipe ended with {status} on SIGTERM:\n{stderr}"
            );
            return sent;
        }
        assert!(
            started.elapsed() < OTLP_CEILING,
            "the receiver got no profile naming {names:?} within {} s ({} requests)",
            OTLP_CEILING.as_secs(),
            receiver.requests().len()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The runtimes the recipes launch are installed (`cargo xtask setup` installs them); else the
/// test is skipped loudly, or fails under CI.
fn runtimes_installed(test: &str) -> bool {
    let missing: Vec<&str> = ["python3", "node", "java", "javac"]
        .into_iter()
        .filter(|program| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {program}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{test}: {missing:?} missing under CI"
    );
    skipped(test, &format!("{missing:?} not installed"));
    false
}

/// The README's quick start and six recipes, run as written (see the module's contract), each
/// give a result that names the functions of the program it traced.
#[test]
fn readme_commands_work_as_written() {
    privileged_test!(shared);
    if !runtimes_installed("readme_commands_work_as_written") {
        return;
    }
    let found = recipes(&super::readme());
    let headings: std::collections::BTreeSet<&str> = found.iter().map(|r| r.heading.as_str()).collect();
    assert!(
        found
            .first()
            .is_some_and(|r| r.heading == "Quick start" && r.line.contains("-f svg")),
        "the quick start's first command writes a flame graph"
    );
    assert!(headings.len() > 6, "the quick start and six recipes: {headings:?}");
    let dir = tempfile::tempdir().expect("tempdir");
    let target = prepare(dir.path());
    let mut program = Running(Command::new(&target).spawn().expect("start the pid target"));
    program.wait_working(&target);
    let receiver = Receiver::start("grpc", false);
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    for recipe in &found {
        let args = arguments(&recipe.line, program.pid(), &endpoint);
        let names = expected_names(&args);
        let what = format!("{}: `{}`", recipe.heading, recipe.line);
        eprintln!("running {what}");
        let mut command = Command::new(tracer_binary());
        command.args(&args).current_dir(dir.path());
        if recipe.heading.contains("OTLP") {
            assert_eq!(flag(&args, "-f"), Some("otlp"), "{what}: exports OTLP");
        }
        if flag(&args, "-f") == Some("otlp") {
            assert!(flag(&args, "-d").is_none(), "{what}: runs until stopped");
            let sent = run_until_exported(command, &receiver, names);
            assert!(
                sent.contains(&program.pid().to_string()),
                "{what}: the pid target's profile was sent"
            );
            continue;
        }
        command.stdout(Stdio::null());
        let stderr = Tracer::spawn(command).finish();
        if let Some(pid) = launched_pid(&stderr) {
            let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
        }
        let out = flag(&args, "-o").unwrap_or_else(|| panic!("{what}: writes a file"));
        let text = std::fs::read_to_string(dir.path().join(out)).unwrap_or_else(|e| panic!("{what}: {out}: {e}"));
        match flag(&args, "-f").unwrap_or("folded") {
            "svg" => assert!(
                text.starts_with("<?xml") && text.contains("<svg"),
                "{what}: an SVG file"
            ),
            "folded" => assert!(
                text.lines()
                    .all(|l| l.rsplit_once(' ').is_some_and(|(_, n)| n.parse::<u64>().is_ok())),
                "{what}: folded lines end in a count"
            ),
            other => panic!("{what}: teach this test to read `-f {other}`"),
        }
        for name in names {
            assert!(text.contains(name), "{what}: {out} names {name}:\n{stderr}");
        }
        if recipe.heading.contains("Off-CPU") || args.iter().any(|a| a == "offcpu") {
            let blocked = text.lines().filter(|l| l.starts_with("offcpu;"));
            assert!(
                blocked.clone().any(|l| l.contains("readme_work;readme_nap")),
                "{what}: blocked stacks of readme_nap:\n{}",
                blocked.collect::<Vec<_>>().join("\n")
            );
        }
    }
}

/// The extraction reads the blocks under the two headings only, drops comments, and the
/// substitutions touch placeholders only.
#[test]
fn recipes_are_extracted_and_substituted() {
    let text = "## Install\n```sh\nsudo sframe-trace --pid N\n```\n## Quick start\n```sh\n\
                sudo sframe-trace --pid N -d 30 -o x.folded   # a comment\n```\n```text\nnot a command\n```\n\
                ## Recipes\n### OTLP\n```sh\nsudo sframe-trace -f otlp --otlp-endpoint http://localhost:4317\n```\n";
    let found = recipes(text);
    let lines: Vec<(&str, &str)> = found.iter().map(|r| (r.heading.as_str(), r.line.as_str())).collect();
    assert_eq!(
        lines,
        [
            ("Quick start", "sudo sframe-trace --pid N -d 30 -o x.folded"),
            (
                "OTLP",
                "sudo sframe-trace -f otlp --otlp-endpoint http://localhost:4317"
            ),
        ]
    );
    assert_eq!(
        arguments(&found[0].line, 42, "E"),
        ["--pid", "42", "-d", "2", "-o", "x.folded"]
    );
    assert_eq!(
        arguments(&found[1].line, 42, "E"),
        ["-f", "otlp", "--otlp-endpoint", "E"]
    );
}
