//! Unit tests of `notice`; each test says what it proves.

use super::*;

/// Every kind round-trips through its `u32`, and other values are refused.
#[test]
fn kinds_round_trip() {
    for kind in [
        NoticeKind::Exec,
        NoticeKind::Exit,
        NoticeKind::NewProcess,
        NoticeKind::UnknownPc,
        NoticeKind::Unmapped,
    ] {
        assert_eq!(NoticeKind::try_from(kind as u32), Ok(kind));
    }
    assert_eq!(NoticeKind::try_from(0), Err(0));
    assert_eq!(NoticeKind::try_from(6), Err(6));
}
