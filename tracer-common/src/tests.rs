//! Unit tests of the counters shared by the kernel and userspace; each test says what it proves.

use super::*;

/// `ALL` lists every counter exactly once, at its own index, and round-trips through u32.
#[test]
fn counters_are_dense_and_round_trip() {
    for (i, c) in Counter::ALL.iter().enumerate() {
        assert_eq!(*c as u32, i as u32);
        assert_eq!(Counter::try_from(i as u32), Ok(*c));
    }
    assert_eq!(Counter::try_from(Counter::COUNT), Err(Counter::COUNT));
}
