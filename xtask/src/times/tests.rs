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
