//! Decompression within bounds: each codec round-trips, and every way a section can lie about
//! its size (or be corrupt) is refused with the section's name, without producing more than the
//! cap (or the stated size) plus one byte.

use std::io::Write as _;

use super::{Codec, DecompressError, decompress, measure};

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).expect("compress");
    enc.finish().expect("compress")
}

fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::stream::encode_all(data, 3).expect("compress")
}

fn xz(data: &[u8]) -> Vec<u8> {
    let mut enc = xz2::write::XzEncoder::new(Vec::new(), 6);
    enc.write_all(data).expect("compress");
    enc.finish().expect("compress")
}

/// Bytes that are not all alike (so a wrong decoder or offset shows).
fn sample(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

#[test]
fn each_codec_round_trips_with_and_without_a_stated_size() {
    let data = sample(100_000);
    for (codec, packed) in [
        (Codec::Zlib, zlib(&data)),
        (Codec::Zstd, zstd(&data)),
        (Codec::Xz, xz(&data)),
    ] {
        assert!(packed.len() < data.len(), "{codec:?} did not compress");
        let out = decompress(codec, &packed, Some(data.len() as u64), 1 << 20, ".debug_frame");
        assert_eq!(out.as_deref(), Ok(data.as_slice()), "{codec:?}");
        assert_eq!(
            decompress(codec, &packed, None, 1 << 20, "s").as_deref(),
            Ok(data.as_slice())
        );
        assert_eq!(
            measure(codec, &packed, Some(data.len() as u64), 1 << 20, "s"),
            Ok(100_000)
        );
    }
}

#[test]
fn a_stated_size_over_the_cap_is_refused_before_decoding() {
    // Not even valid data: the header's claim alone is refused.
    let out = decompress(Codec::Zlib, b"junk", Some(1 << 40), 1 << 20, ".debug_info");
    assert_eq!(
        out,
        Err(DecompressError::TooLarge {
            section: ".debug_info".into(),
            stated: 1 << 40,
            cap: 1 << 20
        })
    );
}

#[test]
fn a_bomb_that_understates_its_size_is_refused() {
    // 64 MiB of zeros in a few dozen KiB, claiming 4 KiB.
    let zeros = vec![0u8; 64 << 20];
    for (codec, packed) in [(Codec::Zlib, zlib(&zeros)), (Codec::Zstd, zstd(&zeros))] {
        assert!(packed.len() < 1 << 20, "{codec:?}: {} bytes", packed.len());
        for result in [
            decompress(codec, &packed, Some(4096), 1 << 30, ".debug_frame").map(|v| v.len() as u64),
            measure(codec, &packed, Some(4096), 1 << 30, ".debug_frame"),
        ] {
            assert_eq!(
                result,
                Err(DecompressError::LongerThanStated {
                    section: ".debug_frame".into(),
                    stated: 4096
                }),
                "{codec:?}"
            );
        }
    }
    // Unstated (MiniDebugInfo): the cap is the limit.
    let out = decompress(Codec::Xz, &xz(&zeros), None, 1 << 20, ".gnu_debugdata");
    assert_eq!(
        out,
        Err(DecompressError::Unbounded {
            section: ".gnu_debugdata".into(),
            cap: 1 << 20
        })
    );
}

#[test]
fn short_and_corrupt_data_are_refused() {
    let data = sample(10_000);
    let packed = zlib(&data);
    let out = decompress(Codec::Zlib, &packed, Some(20_000), 1 << 20, ".debug_line");
    assert_eq!(
        out,
        Err(DecompressError::ShorterThanStated {
            section: ".debug_line".into(),
            stated: 20_000,
            actual: 10_000
        })
    );
    for codec in [Codec::Zlib, Codec::Zstd, Codec::Xz] {
        let mut garbage = sample(300);
        garbage[0] = 0xff;
        match decompress(codec, &garbage, Some(300), 1 << 20, ".debug_str") {
            Err(DecompressError::Corrupt { section, .. } | DecompressError::ShorterThanStated { section, .. }) => {
                assert_eq!(section, ".debug_str");
            }
            other => panic!("{codec:?}: {other:?}"),
        }
    }
    // Cut short: the stream ends early.
    let truncated = &packed[..packed.len() / 2];
    assert!(decompress(Codec::Zlib, truncated, Some(10_000), 1 << 20, "s").is_err());
}
