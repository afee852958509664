use super::*;

const OLD: Coding = Coding { excluded: 0 };
const NEW: Coding = Coding { excluded: 1 };

/// `value` coded as a JVM with `coding` writes it (HotSpot's `UNSIGNED5::write_uint`).
fn code(mut value: u32, coding: Coding) -> Vec<u8> {
    let x = u32::from(coding.excluded);
    let low = 256 - x - HIGH;
    let mut out = Vec::new();
    for i in 0..MAX_BYTES {
        if value < low || i == MAX_BYTES - 1 {
            out.push((value + x) as u8);
            return out;
        }
        value -= low;
        out.push((low + x + (value % HIGH)) as u8);
        value >>= LOG_HIGH;
    }
    out
}

fn signed(value: i32, coding: Coding) -> Vec<u8> {
    code(((value << 1) ^ (value >> 31)) as u32, coding)
}

/// Every size of number reads back as written, in both codings; a truncated or excluded byte
/// is no number.
#[test]
fn numbers_read_back_in_both_codings() {
    for coding in [OLD, NEW] {
        for value in [0, 1, 190, 191, 192, 255, 256, 12_345, 1 << 20, u32::MAX >> 1, u32::MAX] {
            let bytes = code(value, coding);
            let mut s = Stream {
                bytes: &bytes,
                at: 0,
                coding,
            };
            assert_eq!(s.unsigned(), Some(value), "{value} in {coding:?}: {bytes:?}");
            assert_eq!(s.at, bytes.len());
            if bytes.len() > 1 {
                let cut = &bytes[..bytes.len() - 1];
                let mut s = Stream {
                    bytes: cut,
                    at: 0,
                    coding,
                };
                assert_eq!(s.unsigned(), None, "{value} cut short");
            }
        }
        for value in [0, -1, 1, -200, 70_000, i32::MIN, i32::MAX] {
            let bytes = signed(value, coding);
            let mut s = Stream {
                bytes: &bytes,
                at: 0,
                coding,
            };
            assert_eq!(s.signed(), Some(value));
        }
    }
    // The new coding never writes a 0 byte, and reads none.
    assert!(code(0, NEW) == vec![1]);
    let mut s = Stream {
        bytes: &[0],
        at: 0,
        coding: NEW,
    };
    assert_eq!(s.unsigned(), None);
}

/// A line table of one-byte pairs and escaped ones: the line of a bytecode index is its
/// entry's, or that of the last entry before it.
#[test]
fn lines_are_found_by_bytecode_index() {
    for coding in [OLD, NEW] {
        // (bci 0, line 2), (bci 4, line 3), (bci 60, line 40), (bci 61, line 38).
        let mut table = vec![2, (4 << 3) | 1, 0xff];
        table.extend(signed(56, coding));
        table.extend(signed(37, coding));
        table.push(0xff);
        table.extend(signed(1, coding));
        table.extend(signed(-2, coding));
        table.push(0);
        assert_eq!(line_at(&table, 0, coding), Some(2));
        assert_eq!(line_at(&table, 3, coding), Some(2));
        assert_eq!(line_at(&table, 4, coding), Some(3));
        assert_eq!(line_at(&table, 59, coding), Some(3));
        assert_eq!(line_at(&table, 60, coding), Some(40));
        assert_eq!(line_at(&table, 500, coding), Some(38));
        // (A synchronization entry, -1, is the method's first line.)
        assert_eq!(line_at(&table, -1, coding), Some(2));
    }
    assert_eq!(line_at(&[0], 3, OLD), None);
    assert_eq!(line_at(&[], 3, OLD), None);
    // Cut inside an escaped pair: what was read before it stands for nothing.
    assert_eq!(line_at(&[2, 0xff], 3, OLD), None);
}

/// Scope descriptions as HotSpot's recorder writes them: a leading null byte, then each scope
/// (its caller's offset, its method's metadata index, its bytecode index + 1) after the
/// scopes it was inlined into.
fn scopes(coding: Coding, records: &[(usize, u32, i32)]) -> (Vec<u8>, Vec<usize>) {
    let mut bytes = vec![0u8];
    let mut offsets = Vec::new();
    for &(sender, index, bci) in records {
        offsets.push(bytes.len());
        let sender = if sender == 0 { 0 } else { offsets[sender - 1] };
        bytes.extend(code(sender as u32, coding));
        bytes.extend(code(index, coding));
        bytes.extend(code((bci + 1) as u32, coding));
        // The rest of a scope (locals, expressions, monitors), skipped.
        bytes.extend(code(0, coding));
    }
    (bytes, offsets)
}

fn pc_desc(pc: i32, scope: usize) -> Vec<u8> {
    let mut d = Vec::new();
    for v in [pc, scope as i32, 0, 0] {
        d.extend(v.to_le_bytes());
    }
    d
}

/// Each PC's scopes, innermost first, through the methods of the metadata; a PC without a
/// scope, or whose scope reads past the stream, a method index out of the metadata, or a
/// caller described after its callee (a loop), is left out.
#[test]
fn each_pc_has_its_inlined_scopes() {
    for coding in [OLD, NEW] {
        // 1: main at bci 7; 2: fib inlined into main at bci 3; 3: fib inlined into that at 9.
        let (bytes, at) = scopes(coding, &[(0, 1, 7), (1, 2, 3), (2, 2, 9)]);
        let metadata = [0x1000, 0x2000];
        let mut pcs = Vec::new();
        pcs.extend(pc_desc(0x40, at[2]));
        pcs.extend(pc_desc(0x10, at[0]));
        pcs.extend(pc_desc(0x20, 0));
        pcs.extend(pc_desc(0x30, bytes.len() + 5));
        let decoded = decode(&pcs, 16, (0, 4), &bytes, &metadata, coding);
        assert_eq!(
            decoded,
            vec![
                PcScopes {
                    pc_offset: 0x10,
                    scopes: vec![(0x1000, 7)]
                },
                PcScopes {
                    pc_offset: 0x40,
                    scopes: vec![(0x2000, 9), (0x2000, 3), (0x1000, 7)]
                },
            ]
        );
        // A method index past the metadata.
        let (bytes, at) = scopes(coding, &[(0, 3, 7)]);
        assert!(decode(&pc_desc(0x10, at[0]), 16, (0, 4), &bytes, &metadata, coding).is_empty());
    }
    // A scope naming itself as its caller.
    let mut bytes = vec![0u8];
    bytes.extend([1, 1, 8, 0]);
    assert!(decode(&pc_desc(0x10, 1), 16, (0, 4), &bytes, &[0x1000], OLD).is_empty());
    // A PcDesc cut short, and a size of 0.
    assert!(decode(&[0; 6], 16, (0, 4), &bytes, &[0x1000], OLD).is_empty());
    assert!(decode(&[0; 16], 0, (0, 4), &bytes, &[0x1000], OLD).is_empty());
}

/// Each PC's frames with their methods' indexes and lines; a PC whose method has no index is
/// left out; a sampled PC takes the frames of the next PC described.
#[test]
fn compiled_frames_are_found_by_pc() {
    let pcs = vec![
        PcScopes {
            pc_offset: 0x10,
            scopes: vec![(0x1000, 0)],
        },
        PcScopes {
            pc_offset: 0x40,
            scopes: vec![(0x2000, 4), (0x1000, 7)],
        },
        PcScopes {
            pc_offset: 0x50,
            scopes: vec![(0x3000, 0)],
        },
    ];
    // fib: bci 0 line 2, bci 4 line 3; main: bci 0 line 10.
    let fib = [2u8, (4 << 3) | 1, 0];
    let mut main = vec![0xffu8];
    main.extend(signed(0, OLD));
    main.extend(signed(10, OLD));
    main.push(0);
    let frames = CompiledFrames::new(
        &pcs,
        |m| match m {
            0x1000 => Some(1),
            0x2000 => Some(2),
            _ => None,
        },
        |m| match m {
            0x2000 => Some(&fib[..]),
            0x1000 => Some(&main[..]),
            _ => None,
        },
        OLD,
    );
    assert_eq!(frames.at(0x10), Some(&[(1, 10)][..]));
    assert_eq!(frames.at(0x11), Some(&[(2, 3), (1, 10)][..]));
    assert_eq!(frames.at(0x40), Some(&[(2, 3), (1, 10)][..]));
    assert_eq!(frames.at(0x41), None, "the PC at 0x50 was left out");
    assert!(!frames.is_empty());
}
