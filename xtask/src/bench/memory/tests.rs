//! Unit tests of `bench::memory`; each test says what it proves.

use super::*;

/// The exact line wins; the KiB of the tables line is the fallback.
#[test]
fn loaded_from_summary() {
    let old = "  tables: 1 with SFrame, 3 with .eh_frame (27527 rows, 129 KiB in kernel maps), 0 without\n";
    let l = loaded(old).unwrap();
    assert_eq!((l.rows, l.bytes, l.exact), (27527, 129 * 1024, false));
    let new = format!("{old}  table memory: 132000 bytes in kernel maps for 27527 rows, 4.80 bytes per row\n");
    let l = loaded(&new).unwrap();
    assert_eq!((l.rows, l.bytes, l.exact), (27527, 132000, true));
}
