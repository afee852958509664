//! Go stacks end where Go's runtime starts them: complete, not truncations.

use std::process::{Command, Stdio};

use crate::support::{SUMMARY_JSON, Summary, run, tracer_binary};

/// Issue 31 (a goroutine's stack, which ends at `runtime.goexit` with a zero return address
/// above it, was counted a `zero_ra` truncation): goroutine stacks of a Go program end at
/// `runtime.goexit` without a `[truncated: ...]` marker, and the summary counts them complete.
#[test]
fn goroutine_stacks_are_complete() {
    privileged_test!(paired);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("main.go"),
        "package main\n\nimport \"sync\"\n\n//go:noinline\nfunc spin(n int) int {\n\ts := 0\n\tfor i := 0; i < n; i++ {\n\
         \t\ts += i\n\t}\n\treturn s\n}\n\nfunc main() {\n\tvar wg sync.WaitGroup\n\tfor i := 0; i < 2; i++ {\n\
         \t\twg.Add(1)\n\t\tgo func() {\n\t\t\tdefer wg.Done()\n\t\t\tfor {\n\t\t\t\tspin(1 << 20)\n\t\t\t}\n\t\t}()\n\t}\n\
         \twg.Wait()\n}\n",
    )
    .expect("write main.go");
    let program = dir.path().join("gospin");
    run(Command::new("go")
        .env("GO111MODULE", "off")
        .current_dir(dir.path())
        .args(["build", "-o"])
        .arg(&program)
        .arg("main.go"));
    let folded = dir.path().join("out.folded");
    let out = Command::new(tracer_binary())
        .args(SUMMARY_JSON)
        .args(["-d", "2", "-o"])
        .arg(&folded)
        .arg("--")
        .arg(&program)
        .stdout(Stdio::null())
        .output()
        .expect("run sframe-trace");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let summary = Summary::of(&stderr);
    let text = std::fs::read_to_string(&folded).expect("read the stacks");
    let goroutines: Vec<&str> = text.lines().filter(|l| l.contains(";main.spin")).collect();
    assert!(!goroutines.is_empty(), "no stack of main.spin:\n{text}");
    for line in &goroutines {
        assert!(
            line.starts_with("gospin;runtime.goexit"),
            "not whole from goexit: {line}"
        );
    }
    assert!(!text.contains("[truncated: zero_ra]"), "{text}");
    assert_eq!(summary.count("stacks.truncated_by_reason.zero_ra"), 0, "{}", summary.0);
}
