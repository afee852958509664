//! The perf map parser on well-formed, overlapping, growing and hostile text.

use super::*;

#[test]
fn names_ranges_with_and_without_prefix() {
    let mut map = PerfMap::default();
    let text = b"7f00 10 LazyCompile:*fib /x/fib.js:1\n0x7f40 0x20 Interpreted  spaced name \n";
    assert_eq!(map.add_text(text), text.len());
    assert_eq!(map.name(0x7f00), Some("LazyCompile:*fib /x/fib.js:1"));
    assert_eq!(map.name(0x7f0f), Some("LazyCompile:*fib /x/fib.js:1"));
    assert_eq!(map.name(0x7f10), None);
    assert_eq!(map.name(0x7eff), None);
    assert_eq!(map.name(0x7f5f), Some("Interpreted  spaced name"));
    assert_eq!(map.len(), 2);
    assert_eq!(map.malformed, 0);
}

#[test]
fn a_later_line_replaces_what_it_overlaps() {
    let mut map = PerfMap::default();
    map.add_text(b"1000 100 old_a\n1100 100 old_b\n1200 100 kept\n10f0 20 new\n");
    assert_eq!(map.name(0x1000), None, "old_a overlapped and dropped");
    assert_eq!(map.name(0x10f0), Some("new"));
    assert_eq!(map.name(0x1150), None, "old_b overlapped and dropped");
    assert_eq!(map.name(0x1250), Some("kept"));
}

#[test]
fn malformed_lines_are_counted_and_skipped() {
    let mut map = PerfMap::default();
    let text =
        b"zz 10 bad_hex\n1000\n1000 10\n1000 0 empty\nffffffffffffffff 2 wraps\n2000 10 \xff\xfe\n3000 10 good\n\n";
    map.add_text(text);
    assert_eq!(map.malformed, 6);
    assert_eq!(map.len(), 1);
    assert_eq!(map.name(0x3005), Some("good"));
}

#[test]
fn only_whole_lines_are_taken_from_a_growing_file() {
    let mut map = PerfMap::default();
    let text = b"1000 10 first\n2000 10 sec";
    let used = map.add_text(text);
    assert_eq!(used, 14);
    assert_eq!(map.name(0x2000), None);
    let mut rest = text[used..].to_vec();
    rest.extend_from_slice(b"ond\n");
    assert_eq!(map.add_text(&rest), rest.len());
    assert_eq!(map.name(0x2000), Some("second"));
}

#[test]
fn an_overlong_line_is_skipped_whole_even_across_reads() {
    let mut map = PerfMap::default();
    let mut skipping = false;
    let mut first = b"1000 10 ".to_vec();
    first.resize(MAX_LINE + 10, b'x');
    assert_eq!(map.add_text_from(&first, &mut skipping), first.len());
    assert!(skipping);
    assert_eq!(map.malformed, 1);
    // The rest of the same line, then a good one: the tail is not read as a line of its own.
    let second = b"xxxx 10 tail\n2000 10 good\n";
    assert_eq!(map.add_text_from(second, &mut skipping), second.len());
    assert!(!skipping);
    assert_eq!(map.malformed, 1);
    assert_eq!(map.name(0x1000), None);
    assert_eq!(map.name(0x2000), Some("good"));
}

#[test]
fn many_entries_look_up_by_address() {
    let mut map = PerfMap::default();
    let text: String = (0..10_000u64)
        .map(|i| format!("{:x} 10 f{i}\n", 0x10_0000 + i * 0x20))
        .collect();
    map.add_text(text.as_bytes());
    assert_eq!(map.len(), 10_000);
    assert_eq!(map.name(0x10_0000 + 1234 * 0x20 + 5), Some("f1234"));
    assert_eq!(map.name(0x10_0000 + 1234 * 0x20 + 0x15), None, "the gap after f1234");
}

#[test]
fn lines_after_an_overlong_one_in_the_same_text_are_read() {
    let mut map = PerfMap::default();
    let text = format!("1000 10 {}\n2000 10 after\n", "x".repeat(MAX_LINE * 3));
    assert_eq!(map.add_text(text.as_bytes()), text.len());
    assert_eq!(map.malformed, 1);
    assert_eq!(map.name(0x2000), Some("after"));
    assert_eq!(map.name(0x1000), None);
}

/// A map given room for two entries keeps two and counts the rest as over the budget; a line
/// that replaces a kept one gives its room back first.
#[test]
fn a_map_keeps_no_more_than_its_room() {
    let mut map = PerfMap::default();
    map.set_room(2 * (ENTRY_COST + 3));
    map.add_text(b"1000 10 one\n2000 10 two\n3000 10 six\n");
    assert_eq!(map.len(), 2);
    assert_eq!(map.over_budget, 1);
    assert_eq!(map.bytes(), 2 * (ENTRY_COST + 3));
    assert_eq!(map.name(0x3000), None);
    // The same address again: the old range goes, the new one fits.
    map.add_text(b"1000 10 new\n");
    assert_eq!(map.name(0x1000), Some("new"));
    assert_eq!(map.over_budget, 1);
    assert_eq!(map.bytes(), 2 * (ENTRY_COST + 3));
}
