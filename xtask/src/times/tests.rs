//! The report of the slowest tests reads what the tests wrote.

use super::slowest;

/// The longest come first, at most `n` of them; a line that is not `SECONDS NAME` is skipped.
#[test]
fn the_slowest_tests_come_first_and_garbage_is_skipped() {
    let text = "12.5 trace::a\nnot a time\n3.0 walker::b\n40.2 python_session::c\nNaN x\n7 golang::d\n";
    assert_eq!(
        slowest(text, 3),
        [(40.2, "python_session::c"), (12.5, "trace::a"), (7.0, "golang::d")]
    );
    assert!(slowest("", 3).is_empty());
}

/// `--from` takes the stages by name, skips those before it (not the toolchains'), and names
/// the stages when it is given another word.
#[test]
fn from_skips_the_stages_before_it() {
    // Where no earlier run's times are: nothing to forget.
    let dir = std::env::temp_dir().join(format!("xtask-stages-{}", std::process::id()));
    assert!(super::Stages::new(&dir, Some("nope")).is_err());
    let mut stages = super::Stages::new(&dir, Some("external")).expect("a stage");
    let mut ran = Vec::new();
    for name in super::STAGES {
        stages
            .run(name, || {
                ran.push(name);
                Ok(())
            })
            .expect("runs");
    }
    assert_eq!(ran[0], "toolchains");
    assert_eq!(&ran[1..], ["external", "dist-tests", "fuzz"]);
    assert!(stages.skipped("x86-64-guests") && stages.skipped("clippy") && !stages.skipped("fuzz"));
}
