//! Unit tests of `bpf::procs`; each test says what it proves.

use super::*;

fn mapping(start: u64, end: u64) -> ExecMapping {
    ExecMapping {
        start,
        end,
        bias: start,
        object: 7,
        frame_word: 0,
    }
}

/// Mappings come out sorted; empty, overlapping and surplus ones are counted as left out.
#[test]
fn prepare_sorts_and_drops() {
    let (info, dropped) = prepare(&[
        mapping(0x3000, 0x4000),
        mapping(0x1000, 0x2000),
        mapping(0x1800, 0x2800),
        mapping(5, 5),
    ]);
    assert_eq!(dropped, 2);
    assert_eq!(info.num_mappings, 2);
    assert_eq!(info.mappings[0], mapping(0x1000, 0x2000));
    assert_eq!(info.mappings[1], mapping(0x3000, 0x4000));

    let many: Vec<_> = (0..MAX_MAPPINGS as u64 + 3)
        .map(|i| mapping(i * 16, i * 16 + 8))
        .collect();
    let (info, dropped) = prepare(&many);
    assert_eq!((info.num_mappings as usize, dropped), (MAX_MAPPINGS, 3));
}
