//! Unit tests of `cli`; each test says what it proves.

use super::*;

/// Addresses parse as hex with a 0x prefix or as decimal, and garbage is refused.
#[test]
fn addresses_parse() {
    assert_eq!(parse_address("0x401000"), Ok(0x401000));
    assert_eq!(parse_address("4198400"), Ok(0x401000));
    assert!(parse_address("0xzz").is_err());
    assert!(parse_address("").is_err());
}

/// Sizes take K/M/G suffixes, and tiny or malformed sizes are refused.
#[test]
fn sizes_parse() {
    assert_eq!(parse_size("256M"), Ok(256 << 20));
    assert_eq!(parse_size("1g"), Ok(1 << 30));
    assert_eq!(parse_size("2097152"), Ok(2 << 20));
    assert!(parse_size("12K").is_err(), "below 64K");
    assert!(parse_size("M").is_err());
    assert!(parse_size("5T").is_err());
    assert!(parse_size("-64K").is_err());
    assert_eq!(
        parse_size("18014398509481984K"),
        Err("`18014398509481984K`: give at least 64K and less than 16 EiB".to_owned())
    );
}

/// Sizes are strict: whitespace (ASCII or not) and signs are refused, never misread (a
/// leading space once made `100K` read as 10K) and never a panic.
#[test]
fn sizes_are_strict() {
    for bad in [
        " 100K",
        "100K ",
        "\u{a0}100K",
        "100\u{2003}K",
        "1 00K",
        "+100K",
        "100KK",
        "K",
        "",
        "１００K",
    ] {
        assert!(parse_size(bad).is_err(), "{bad:?} accepted");
        assert!(parse_ring_buffer_size(bad).is_err(), "{bad:?} accepted");
    }
}

/// Seconds are positive, finite and at most MAX_SECS; huge, negative, NaN and infinite
/// values are refused in a sentence instead of panicking.
#[test]
fn seconds_parse() {
    assert_eq!(parse_secs("1.5"), Ok(Duration::from_millis(1500)));
    assert_eq!(parse_secs("1e3"), Ok(Duration::from_secs(1000)));
    for bad in ["0", "-1", "-0.5", "1e20", "inf", "NaN", "1e400", "", "ten", " 1"] {
        let err = parse_secs(bad).expect_err(bad);
        assert!(!err.contains('\n'), "{err}");
    }
    assert!(parse_secs("-1").unwrap_err().contains("positive"));
    assert!(parse_secs("1e20").unwrap_err().contains("at most 1000000000 seconds"));
}

/// Regression (`-d 1m` and `-d 500ms` were refused): a duration takes a unit, `ms`, `s`, `m`
/// or `h`, and a bare number stays seconds; a unit on a signed, spaced or empty number is
/// refused.
#[test]
fn durations_take_units() {
    assert_eq!(parse_secs("30"), Ok(Duration::from_secs(30)));
    assert_eq!(parse_secs("30s"), Ok(Duration::from_secs(30)));
    assert_eq!(parse_secs("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_secs("1m"), Ok(Duration::from_secs(60)));
    assert_eq!(parse_secs("1.5h"), Ok(Duration::from_secs(5400)));
    for bad in ["ms", "s", "-1m", " 1s", "1 s", "1e3s", "infs", "0ms", "5d", "1mm"] {
        let err = parse_secs(bad).expect_err(bad);
        assert!(!err.contains('\n'), "{err}");
    }
    assert!(parse_secs("5d").unwrap_err().contains("500ms"));
    assert!(parse_secs("99999999999h").unwrap_err().contains("at most"));
}

/// Ring buffer sizes are powers of two from 4K to 1G.
#[test]
fn ring_buffer_sizes_parse() {
    assert_eq!(parse_ring_buffer_size("8M"), Ok(8 << 20));
    assert_eq!(parse_ring_buffer_size("4k"), Ok(4096));
    assert!(parse_ring_buffer_size("2K").is_err(), "below 4K");
    assert!(parse_ring_buffer_size("12K").is_err(), "not a power of two");
    assert!(parse_ring_buffer_size("2G").is_err(), "above 1G");
}

/// `--max-symbol-memory` defaults to what the symbol cache documents as its default.
#[test]
fn symbol_memory_defaults_to_the_caches_default() {
    let cli = Cli::try_parse_from(["sframe-trace"]).unwrap();
    assert_eq!(
        cli.trace.max_symbol_memory,
        sframe_trace::symbolize::DEFAULT_MAX_SYMBOL_MEMORY
    );
    let cli = Cli::try_parse_from(["sframe-trace", "--max-symbol-memory", "16M"]).unwrap();
    assert_eq!(cli.trace.max_symbol_memory, 16 << 20);
}
