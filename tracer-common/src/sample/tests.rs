//! Unit tests of `sample`; each test says what it proves.

use super::*;
use crate::trace::RECORD_FRAMES;

/// A record of `kernel` and `user` frames, the user frames in `fp` found by frame pointers.
fn record(kernel: &[u64], user: &[u64], fp: &[usize]) -> SampleRecord {
    let mut r = SampleRecord {
        header: SampleHeader {
            time_ns: 11,
            weight: 22,
            event: 3,
            snapshot: 0,
            tgid: 44,
            tid: 45,
            cpu: 1,
            stop: 0,
            num_user: user.len() as u32,
            num_kernel: kernel.len() as u32,
            vmas: 0,
            _pad: 0,
            comm: *b"worker\0\0\0\0\0\0\0\0\0\0",
        },
        // Stale frames past the ones in use must not leak into the sample.
        frames: [0xdead; RECORD_FRAMES],
    };
    r.frames[..kernel.len()].copy_from_slice(kernel);
    r.frames[kernel.len()..kernel.len() + user.len()].copy_from_slice(user);
    for &i in fp {
        r.frames[kernel.len() + i] |= FP_FRAME_BIT;
    }
    r
}

/// The bytes the kernel ships for `r`: its first `SampleRecord::len` bytes.
fn shipped(r: &SampleRecord) -> &[u8] {
    let len = SampleRecord::len_with(r.header.num_kernel, r.header.num_user, r.header.vmas);
    // SAFETY: `len` is at most the record's size; the record is plain data.
    unsafe { core::slice::from_raw_parts(core::ptr::from_ref(r).cast::<u8>(), len) }
}

/// Header, kernel frames, user frames and their sources come back where they were; slots
/// past the counts are zero, not whatever the record held there.
#[test]
fn decode_round_trips_the_frames_in_use() {
    let user: [u64; 70] = core::array::from_fn(|i| 0x40_0000 + i as u64);
    let r = record(&[0xffff_ffff_8100_0000, 0xffff_ffff_8200_0000], &user, &[3, 65]);
    let bytes = shipped(&r);
    assert_eq!(bytes.len(), RECORD_HEADER_BYTES + 8 * 72);
    let s = Sample::decode(bytes).expect("decodes");
    assert_eq!(
        (s.time_ns, s.weight, s.event, s.tgid, s.tid, s.cpu, s.stop),
        (11, 22, 3, 44, 45, 1, 0)
    );
    assert_eq!((s.num_kernel, s.num_user), (2, 70));
    assert_eq!(&s.comm[..7], b"worker\0");
    assert_eq!(&s.kernel[..3], &[0xffff_ffff_8100_0000, 0xffff_ffff_8200_0000, 0]);
    assert_eq!(&s.user[..70], &user[..]);
    assert_eq!(s.user[70], 0);
    for (i, source) in s.user_source.iter().enumerate() {
        let expected = if i == 3 || i == 65 { SOURCE_FP } else { SOURCE_TABLE };
        assert_eq!(*source, expected, "frame {i}");
    }
}

/// A sample decoded into again holds the new record's frames and sources, none of the
/// last one's (frame 3 was found by frame pointers before, by a table now).
#[test]
fn decode_into_a_used_sample_keeps_nothing_of_the_last() {
    let mut s = Sample::EMPTY;
    let deep: [u64; 70] = core::array::from_fn(|i| 0x40_0000 + i as u64);
    assert!(s.decode_into(shipped(&record(&[1, 2], &deep, &[3, 65]))));
    let user = [0x10, 0x20, 0x30, 0x40, 0x50];
    assert!(s.decode_into(shipped(&record(&[], &user, &[1]))));
    assert_eq!((s.num_kernel, s.num_user, s.time_ns), (0, 5, 11));
    assert_eq!(&s.user[..5], &user);
    assert_eq!(
        &s.user_source[..5],
        &[SOURCE_TABLE, SOURCE_FP, SOURCE_TABLE, SOURCE_TABLE, SOURCE_TABLE]
    );
    let short = record(&[], &user, &[]);
    let bytes = shipped(&short);
    assert!(!s.decode_into(&bytes[..bytes.len() - 1]));
}

/// The deepest record (every slot in use, every VMA mapping) is the whole record and decodes.
#[test]
fn decode_takes_the_deepest_record() {
    let kernel = [7u64; MAX_KERNEL_FRAMES];
    let user = [9u64; MAX_USER_FRAMES];
    let mut r = record(&kernel, &user, &[MAX_USER_FRAMES - 1]);
    r.header.vmas = MAX_VMAS as u32;
    assert_eq!(shipped(&r).len(), size_of::<SampleRecord>());
    let s = Sample::decode(shipped(&r)).expect("decodes");
    assert_eq!((s.kernel, s.user), (kernel, user));
    assert_eq!(s.user_source[MAX_USER_FRAMES - 1], SOURCE_FP);
}

/// Records shorter than their counts say, or with counts past the limits, are refused.
#[test]
fn decode_refuses_malformed_records() {
    let r = record(&[1], &[2, 3], &[]);
    let bytes = shipped(&r);
    assert!(Sample::decode(&bytes[..bytes.len() - 1]).is_none());
    assert!(Sample::decode(&bytes[..RECORD_HEADER_BYTES - 1]).is_none());
    // The whole record: bytes enough for any count, so only the counts are wrong.
    let whole = |r: &SampleRecord| -> Option<Sample> {
        // SAFETY: the whole record, plain data.
        let bytes =
            unsafe { core::slice::from_raw_parts(core::ptr::from_ref(r).cast::<u8>(), size_of::<SampleRecord>()) };
        Sample::decode(bytes)
    };
    let mut too_deep = record(&[], &[1], &[]);
    too_deep.header.num_user = MAX_USER_FRAMES as u32 + 1;
    assert!(whole(&too_deep).is_none());
    let mut too_deep_kernel = record(&[], &[1], &[]);
    too_deep_kernel.header.num_kernel = MAX_KERNEL_FRAMES as u32 + 1;
    assert!(whole(&too_deep_kernel).is_none());
    assert!(whole(&record(&[], &[1], &[])).is_some());
}

/// Mappings after the user frames (`crate::vma`) come back with the frames; a record whose
/// header announces more than `MAX_VMAS`, more than it holds, or mappings with a stack copy,
/// is not a record.
#[test]
fn vma_mappings_follow_the_user_frames() {
    let user = [0x40_1000, 0x40_2000, 0x7f00_0000_1234];
    let mut r = record(&[0xffff_ffff_8100_0000], &user, &[]);
    let m = ExecMapping {
        start: 0x7f00_0000_0000,
        end: 0x7f00_0001_0000,
        bias: 0x7eff_ffff_f000,
        object: 9,
        frame_word: 0,
    };
    let at = 1 + user.len();
    r.frames[at..at + VMA_WORDS].copy_from_slice(&[m.start, m.end, m.bias, 9]);
    r.header.vmas = 1;
    let len = SampleRecord::len_with(1, 3, 1);
    assert_eq!(len, RECORD_HEADER_BYTES + 8 * (4 + VMA_WORDS));
    // SAFETY: `len` is at most the record's size; the record is plain data.
    let bytes = unsafe { core::slice::from_raw_parts(core::ptr::from_ref(&r).cast::<u8>(), len) };
    let s = Sample::decode(bytes).expect("decodes");
    assert_eq!((s.vmas, s.num_user), (1, 3));
    assert_eq!(s.vma_mappings[0], m);
    assert_eq!(&s.user[..3], &user);
    assert!(Sample::decode(&bytes[..len - 8]).is_none(), "cut short");
    let mut bad = bytes.to_vec();
    let vmas = core::mem::offset_of!(SampleHeader, vmas);
    bad[vmas..vmas + 4].copy_from_slice(&(MAX_VMAS as u32 + 1).to_ne_bytes());
    assert!(Sample::decode(&bad).is_none(), "too many");
    let mut bad = bytes.to_vec();
    let snapshot = core::mem::offset_of!(SampleHeader, snapshot);
    bad[snapshot..snapshot + 4].copy_from_slice(&8u32.to_ne_bytes());
    assert!(Sample::decode(&bad).is_none(), "with a copy");
}

/// A frame word (`crate::frame_word`) is taken out of the frames and given to the frame before it; the
/// frames after it keep their sources, and the mappings after the words are still found.
#[test]
fn v8_words_belong_to_the_frame_before_them() {
    use crate::frame_word::FRAME_WORD_BIT;
    let sfi = 0x1234_5678_9ab1;
    let user = [
        0x7f00_0000_0100,
        0x7f00_0000_0200,
        FRAME_WORD_BIT | sfi,
        0x7f00_0000_0300,
    ];
    let mut r = record(&[0xffff_ffff_8100_0000], &user, &[1, 3]);
    r.header.vmas = 1;
    let at = 1 + user.len();
    r.frames[at..at + VMA_WORDS].copy_from_slice(&[0x7f00_0000_0000, 0x7f00_0001_0000, 0x10, 9]);
    let s = Sample::decode(shipped(&r)).expect("a record");
    assert_eq!(s.num_user, 3);
    assert_eq!(&s.user[..3], &[0x7f00_0000_0100, 0x7f00_0000_0200, 0x7f00_0000_0300]);
    assert_eq!(&s.user_word[..3], &[0, sfi, 0]);
    assert_eq!(&s.user_source[..3], &[SOURCE_TABLE, SOURCE_FP, SOURCE_FP]);
    assert_eq!(s.vma_mappings[0].object, 9);
}
