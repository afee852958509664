//! Unit tests of `table::rowspace`; each test says what it proves.

use super::*;

/// First fit takes the lowest free range large enough, splits it, and goes to the top when
/// no range is large enough.
#[test]
fn first_fit() {
    let mut space = RowSpace::new(100);
    for n in [10, 5, 20, 5] {
        let start = space.find(n).expect("room");
        space.take(start, n);
    }
    assert_eq!(space.end(), 40);
    space.release(0..10);
    space.release(15..35);
    assert_eq!(space.free_ranges(), [0..10, 15..35]);
    assert_eq!(space.find(12), Some(15), "0..10 is too small");
    assert_eq!(space.find(4), Some(0));
    space.take(0, 4);
    assert_eq!(space.free_ranges(), [4..10, 15..35]);
    assert_eq!(space.find(21), Some(40), "no free range holds 21");
    assert_eq!(space.live(), 40 - 6 - 20);
    assert_eq!(space.free(), 60 + 6 + 20);
    assert_eq!(space.find(61), None, "60 rows above the mark, the rest fragmented");
}

/// Releasing coalesces with both neighbours, and a free range reaching the mark lowers it.
#[test]
fn release_coalesces_and_lowers_the_mark() {
    let mut space = RowSpace::new(u32::MAX);
    for n in [10, 10, 10, 10] {
        let start = space.find(n).expect("room");
        space.take(start, n);
    }
    space.release(0..10);
    space.release(20..30);
    space.release(10..20);
    assert_eq!(space.free_ranges(), &[Range { start: 0, end: 30 }]);
    assert_eq!(space.live(), 10);
    space.release(30..40);
    assert_eq!(space.free_ranges(), [] as [Range<u32>; 0]);
    assert_eq!(space.end(), 0);
    assert_eq!(space.free(), u32::MAX);
}

/// A limit lowered below rows already taken refuses everything past it, free ranges
/// included, and counts only the free rows below it.
#[test]
fn lowered_limit() {
    let mut space = RowSpace::new(100);
    for n in [10; 5] {
        let start = space.find(n).expect("room");
        space.take(start, n);
    }
    space.release(0..10);
    space.release(20..40);
    space.set_limit(30);
    assert_eq!(space.free(), 10 + 10);
    assert_eq!(space.find(15), None, "20..40 passes the limit, so does the top");
    assert_eq!(space.find(10), Some(0));
    space.set_limit(100);
    assert_eq!(space.find(15), Some(20));
}
