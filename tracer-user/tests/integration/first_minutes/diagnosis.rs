//! An empty or broken profile says why, in one sentence naming the next step, in the text
//! summary and in the JSON summary's `diagnosis`.

use std::{
    path::Path,
    process::{Command, Stdio},
};

use crate::support::{Running, SUMMARY_JSON, Summary, gcc, tracer_binary};

/// Trace with `args` and the JSON summary: its `diagnosis` sentences and the summary.
fn diagnosed(args: &[&str]) -> (Vec<String>, Summary) {
    let out = Command::new(tracer_binary())
        .args(SUMMARY_JSON)
        .args(args)
        .env_remove("DEBUGINFOD_URLS")
        .stdout(Stdio::null())
        .output()
        .expect("run sframe-trace");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    let summary = Summary::of(&stderr);
    let said = summary.0["diagnosis"]
        .as_array()
        .unwrap_or_else(|| panic!("no diagnosis list: {}", summary.0))
        .iter()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect();
    (said, summary)
}

/// A C program that spins, built into `dir`.
fn spinner(dir: &Path, threads: bool, extra: &[&str]) -> std::path::PathBuf {
    let source = dir.join("spin.c");
    std::fs::write(
        &source,
        r#"
#include <pthread.h>
static volatile unsigned long n;
__attribute__((noinline)) static void spin(void) { for (;;) n++; }
static void *run(void *arg) { (void)arg; spin(); return 0; }
int main(int argc, char **argv) {
    (void)argv;
    if (argc > 1) { pthread_t t; pthread_create(&t, 0, run, 0); pthread_join(t, 0); }
    spin();
}
"#,
    )
    .expect("write the source");
    let out = dir.join(if threads { "spin-threads" } else { "spin" });
    gcc(&source, &out, &[&["-O2", "-pthread"][..], extra].concat())
}

/// Issue 31 (`--pid` given a thread id from `top -H` traced nothing, silently): the thread's
/// process is traced, its samples come back, and the summary says so.
#[test]
fn a_thread_id_traces_its_process_and_says_so() {
    privileged_test!(shared);
    let dir = tempfile::tempdir().expect("tempdir");
    let program = spinner(dir.path(), true, &[]);
    let mut target = Running(Command::new(&program).arg("threads").spawn().expect("start"));
    target.wait_working(&program);
    let pid = target.pid();
    let tid = loop {
        let tids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .expect("tasks")
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|&t| t != pid)
            .collect();
        if let Some(&tid) = tids.first() {
            break tid;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let (said, summary) = diagnosed(&["--pid", &tid.to_string(), "-d", "1"]);
    assert!(
        summary.count("samples") > 0,
        "the process was not traced: {}",
        summary.0
    );
    assert!(
        said.iter()
            .any(|s| s.contains(&format!("pid {tid} is a thread of process {pid}"))),
        "{said:?}"
    );
}

/// Issue 31 (a process that slept the whole time gave an empty profile, silently): no samples,
/// and the diagnosis says it used no CPU and names `-e offcpu`.
#[test]
fn a_sleeping_process_is_told_to_use_offcpu() {
    privileged_test!(shared);
    let mut target = Running(Command::new("sleep").arg("600").spawn().expect("start sleep"));
    // Traced from its start-up, it would have used CPU time (and maybe been sampled).
    target.wait_asleep();
    let pid = target.pid().to_string();
    let (said, summary) = diagnosed(&["--pid", &pid, "-d", "500ms"]);
    assert_eq!(summary.count("samples"), 0, "{}", summary.0);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains("used no CPU time") && said[0].contains("-e offcpu"),
        "{said:?}"
    );
}

/// Issue 31 (a kernel thread given to --pid gave an empty profile, silently): the summary
/// says it is a kernel thread, without user stacks.
#[test]
fn a_kernel_thread_is_named_one() {
    privileged_test!(shared);
    // A kernel thread: no command line, `PF_KTHREAD` in its flags.
    let kthread = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                let rest = stat.rsplit_once(") ").map(|r| r.1).unwrap_or_default();
                rest.split(' ')
                    .nth(6)
                    .and_then(|f| f.parse::<u64>().ok())
                    .is_some_and(|f| f & 0x0020_0000 != 0)
            })
        })
        .expect("a kernel thread");
    let (said, _) = diagnosed(&["--pid", &kthread.to_string(), "-d", "300ms"]);
    assert!(
        said.iter()
            .any(|s| s.contains(&format!("pid {kthread} (")) && s.contains("is a kernel thread")),
        "{said:?}"
    );
}

/// Issue 31 (frames of a stripped program came back as bare addresses, silently): the
/// diagnosis names the object and DEBUGINFOD_URLS.
#[test]
fn frames_of_a_stripped_program_name_debuginfod() {
    privileged_test!(shared);
    let dir = tempfile::tempdir().expect("tempdir");
    let program = spinner(dir.path(), false, &["-s"]);
    let program = program.to_str().expect("a UTF-8 path");
    let (said, summary) = diagnosed(&["-d", "1", "--", program]);
    assert!(summary.count("samples") > 0, "{}", summary.0);
    assert!(
        said.iter()
            .any(|s| s.contains("without symbols") && s.contains(program) && s.contains("DEBUGINFOD_URLS")),
        "{said:?}"
    );
}

/// Issue 31 (the advice for a stripped program of a Debian package named no package): gzip,
/// stripped as Debian ships it and busy compressing, is named in the diagnosis with the
/// debug package dpkg's lists give for it, `gzip-dbgsym`.
#[test]
fn a_stripped_debian_program_names_its_debug_package() {
    privileged_test!(shared);
    let owned = Command::new("dpkg").args(["-S", "/bin/gzip"]).output();
    if !owned.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).starts_with("gzip:")) {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "no dpkg-owned /bin/gzip under CI"
        );
        crate::support::skipped(
            "a_stripped_debian_program_names_its_debug_package",
            "no dpkg-owned gzip",
        );
        return;
    }
    // 48 MiB that compress slowly (a linear congruential sequence): gzip -9 takes seconds.
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("input");
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let bytes: Vec<u8> = (0..48 << 20)
        .map(|_| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (state >> 56) as u8
        })
        .collect();
    std::fs::write(&input, bytes).expect("write the input");
    let input = input.to_str().expect("a UTF-8 path");
    let (said, _) = diagnosed(&["-d", "2", "--", "/bin/gzip", "-9", "-c", input]);
    assert!(
        said.iter()
            .any(|s| s.contains("without symbols") && s.contains("gzip") && s.contains("install gzip-dbgsym")),
        "{said:?}"
    );
}

/// Issue 31 (Node without --perf-basic-prof and Java without -XX:+PreserveFramePointer gave
/// unnamed or cut stacks, silently): the diagnosis names the flag; given the flag, it does not.
/// A node whose V8 was read has its frames named without it (`v8`) and gets no advice.
/// A JVM whose code heaps were read walks whole without it (`jit::hotspot`) and gets no advice;
/// one that cannot be read (here a forged one, of a version the walk does not know) does.
#[test]
fn runtimes_without_their_flag_name_it() {
    privileged_test!(shared);
    let spin = "const t = Date.now(); while (Date.now() - t < 1500) {}";
    // A node whose JavaScript frames are named from V8's memory (`v8/`) needs no flag: advice
    // exactly when its V8 was not read, and always when it is not to be (`--no-javascript`).
    let node_advised = |said: &[String]| said.iter().any(|s| s.contains("Node.js without --perf-basic-prof"));
    let (said, summary) = diagnosed(&["--", "node", "-e", spin]);
    assert_eq!(
        node_advised(&said),
        summary.count("v8.processes") == 0,
        "advice exactly when the V8 was not read: {said:?} {}",
        summary.0["v8"]
    );
    let (said, _) = diagnosed(&["--no-javascript", "--", "node", "-e", spin]);
    assert!(node_advised(&said), "{said:?}");
    let (said, _) = diagnosed(&["--", "node", "--perf-basic-prof", "-e", spin]);
    assert!(!said.iter().any(|s| s.contains("--perf-basic-prof")), "{said:?}");
    let dir = tempfile::tempdir().expect("tempdir");
    let java = dir.path().join("Spin.java");
    std::fs::write(
        &java,
        "public class Spin { public static void main(String[] a) { long t = System.currentTimeMillis(); \
         long n = 0; while (System.currentTimeMillis() - t < 1500) n++; System.out.println(n); } }",
    )
    .expect("write Spin.java");
    let java = java.to_str().expect("a UTF-8 path");
    let advised = |said: &[String]| {
        said.iter()
            .any(|s| s.contains("Java without -XX:+PreserveFramePointer"))
    };
    let (said, summary) = diagnosed(&["--", "java", java]);
    assert_eq!(
        advised(&said),
        summary.count("hotspot.processes") == 0,
        "advice exactly when the JVM was not read: {said:?} {}",
        summary.0["hotspot"]
    );
    let forged = crate::jit::forged_jvm::build(dir.path());
    let (said, summary) = diagnosed(&["--", forged.to_str().expect("a UTF-8 path"), "2"]);
    assert!(advised(&said), "{said:?}");
    assert_eq!(summary.count("hotspot.refused_by_reason.unknown_version"), 1);
    let (said, _) = diagnosed(&["--", "java", "-XX:+PreserveFramePointer", java]);
    assert!(!said.iter().any(|s| s.contains("PreserveFramePointer")), "{said:?}");
}
