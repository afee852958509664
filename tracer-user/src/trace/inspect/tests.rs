//! Unit tests of `trace::inspect`; each test says what it proves.

use super::*;

/// A stat line's name may hold spaces and parentheses; the flags and CPU time are counted
/// from after its last `)`; a short or garbled line is `None`, never a panic.
#[test]
fn stat_lines_parse() {
    let line = "42 (a) b (c)) S 1 42 42 0 -1 2097216 0 0 0 0 7 5 0 0 20 0 1 0 100 0 0";
    assert_eq!(parse_stat(line), Some(("a) b (c)".to_owned(), 2_097_216, 12)));
    for bad in ["", "42 (x", "42 (x) S 1 2", "42 x) S", "(", ")("] {
        assert_eq!(parse_stat(bad), None, "{bad:?}");
    }
}

/// Issue 31 (Java and Node stacks came back cut or unnamed, silently): a runtime without its
/// flag, given neither as an argument nor in its options variable, gets one sentence naming
/// the flag; with it, none; other programs none.
#[test]
fn runtimes_without_their_flag_are_named() {
    let s = |v: &[&str]| v.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
    let java = runtime_note(7, "java", &s(&["java", "-jar", "app.jar"]), &[]).expect("a note");
    assert!(
        java.contains("-XX:+PreserveFramePointer") && java.contains("pid 7"),
        "{java}"
    );
    assert_eq!(
        runtime_note(7, "java", &s(&["java", "-XX:+PreserveFramePointer", "Main"]), &[]),
        None
    );
    assert_eq!(
        runtime_note(
            7,
            "java",
            &s(&["java", "Main"]),
            &s(&["JAVA_TOOL_OPTIONS=-XX:+PreserveFramePointer"])
        ),
        None
    );
    let node = runtime_note(
        8,
        "node",
        &s(&["node", "app.js"]),
        &s(&["NODE_OPTIONS=--max-old-space-size=1"]),
    )
    .expect("a note");
    assert!(node.contains("--perf-basic-prof"), "{node}");
    assert_eq!(
        runtime_note(8, "node", &s(&["node", "--perf-basic-prof", "app.js"]), &[]),
        None
    );
    assert_eq!(
        runtime_note(8, "node", &s(&["node", "app.js"]), &s(&["NODE_OPTIONS=--perf-prof"])),
        None
    );
    assert_eq!(runtime_note(9, "python3", &s(&["python3"]), &[]), None);
}
