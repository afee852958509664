//! The rules of each consumer, name by name.

use super::*;

/// Control characters, C0, DEL and C1, become `\xHH`; everything else, other Unicode included,
/// stays as it is (and is borrowed when nothing changes).
#[test]
fn control_characters_are_escaped() {
    assert_eq!(
        escaped("a\nb\r\t\x1b]0;x\x07\x7f\u{85}\u{9b}é€"),
        "a\\x0ab\\x0d\\x09\\x1b]0;x\\x07\\x7f\\x85\\x9bé€"
    );
    assert!(matches!(escaped("std::vector<int>::push_back"), Cow::Borrowed(_)));
    assert_eq!(escaped("\u{a0}\u{fffd}"), "\u{a0}\u{fffd}");
}

/// Folded names hold no separator, no line break, no whitespace at their ends and never end in
/// a word that reads as a count; spaces inside (C++ names) are kept.
#[test]
fn folded_names_cannot_forge_frames_or_counts() {
    assert_eq!(folded("main;evil"), "main_evil");
    assert_eq!(folded("f\n[x] 9"), "f\\x0a[x]_9");
    assert_eq!(folded("evil 12"), "evil_12");
    assert_eq!(folded("evil 1.5"), "evil_1.5");
    assert_eq!(folded("evil 1 2"), "evil 1_2");
    assert_eq!(folded(" padded "), "_padded_");
    assert_eq!(folded("tail\u{3000}"), "tail_");
    assert_eq!(folded("ns::run(int, char)"), "ns::run(int, char)");
    assert_eq!(folded("operator 2x"), "operator 2x");
    assert!(matches!(folded("plain"), Cow::Borrowed(_)));
}

/// perf-script command names are one field that never starts a comment; object paths are one
/// field too.
#[test]
fn perf_script_fields_stay_fields() {
    assert_eq!(perf_script_comm("V8 Worker 12/13"), "V8_Worker_12/13");
    assert_eq!(perf_script_comm("#comment"), "_comment");
    assert_eq!(perf_script_comm("a\nb"), "a\\x0ab");
    assert_eq!(perf_script_object("/tmp/my lib.so"), "/tmp/my\\x20lib.so");
    assert_eq!(perf_script_object("/tmp/x\n(y)"), "/tmp/x\\x0a(y)");
}

/// Regression (a 4 MiB symbol made `-f json` write 2.3 GB in 2 s): a name past the bound is cut
/// to exactly the bound, marker included, on a character boundary; a name at the bound is kept
/// whole (and borrowed).
#[test]
fn names_are_cut_to_the_bound_and_marked() {
    let at_bound = "a".repeat(MAX_NAME_BYTES);
    assert_eq!(capped(at_bound.clone()), at_bound);
    assert!(matches!(capped_str(&at_bound), Cow::Borrowed(_)));
    let long = "b".repeat(4 << 20);
    let cut = capped(long.clone());
    assert_eq!(cut.len(), MAX_NAME_BYTES);
    assert!(cut.ends_with(CUT_MARKER), "{cut}");
    assert!(cut.starts_with(&"b".repeat(MAX_NAME_BYTES - CUT_MARKER.len())));
    assert_eq!(capped_str(&long), cut);
    assert_eq!(capped_lossy(long.as_bytes()), cut);
    // Multi-byte characters are never split: 'é' is 2 bytes, '€' 3.
    for c in ['é', '€', '𝄞'] {
        let long: String = std::iter::repeat_n(c, MAX_NAME_BYTES).collect();
        let cut = capped(long);
        assert!(cut.len() <= MAX_NAME_BYTES && cut.len() > MAX_NAME_BYTES - CUT_MARKER.len() - 4);
        assert!(cut.ends_with(CUT_MARKER));
        assert!(cut.trim_end_matches(CUT_MARKER).chars().all(|x| x == c));
    }
    // Invalid UTF-8 grows when made valid (one byte, three of U+FFFD): still cut to the bound.
    let invalid = vec![0xffu8; MAX_NAME_BYTES];
    let cut = capped_lossy(&invalid);
    assert!(cut.len() <= MAX_NAME_BYTES && cut.ends_with(CUT_MARKER));
    assert_eq!(capped_lossy(b"short"), "short");
}
