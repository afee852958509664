//! Unit tests of `bench::report`; each test says what it proves.

use super::*;

/// The median of an odd count is the middle value, of an even count the mean of the two.
#[test]
fn spread_median_and_range() {
    let s = Spread::of([3.0, 1.0, 2.0]).unwrap();
    assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
    assert_eq!(Spread::of([4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
    assert_eq!(Spread::of([f64::NAN]), None);
}
