//! Stack copies: reads inside and outside the copy, and records carrying one decoded and
//! refused.

use super::*;
use crate::{
    sample::Sample,
    trace::{SampleHeader, SampleRecord},
    walk::StopReason,
};

/// A record of `kernel` frames, frame 0 `pc`, and a copy of `stack` starting at `base`.
fn record(kernel: &[u64], pc: u64, regs: [u64; 3], base: u64, stack: &[u64]) -> SampleRecord {
    let mut r = SampleRecord {
        header: SampleHeader {
            time_ns: 5,
            weight: 6,
            event: 0,
            snapshot: stack.len() as u32,
            tgid: 9,
            tid: 9,
            cpu: 0,
            stop: StopReason::Snapshot as u32,
            num_user: 1,
            num_kernel: kernel.len() as u32,
            vmas: 0,
            _pad: 0,
            comm: [0; 16],
        },
        frames: [0xdead; crate::trace::RECORD_FRAMES],
    };
    r.frames[..kernel.len()].copy_from_slice(kernel);
    r.frames[kernel.len()] = pc;
    r.frames[SNAPSHOT_SLOT..SNAPSHOT_SLOT + 3].copy_from_slice(&regs);
    r.frames[SNAPSHOT_SLOT + 3] = base;
    r.frames[SNAPSHOT_STACK_SLOT..SNAPSHOT_STACK_SLOT + stack.len()].copy_from_slice(stack);
    r
}

fn bytes(r: &SampleRecord, len: usize) -> &[u8] {
    // SAFETY: at most the whole record (checked by the slice below), which is plain data.
    let all = unsafe { core::slice::from_raw_parts(core::ptr::from_ref(r).cast::<u8>(), size_of::<SampleRecord>()) };
    &all[..len]
}

#[test]
fn a_copy_decodes_with_its_registers_and_words() {
    let stack: [u64; 70] = core::array::from_fn(|i| 0x1000 + i as u64);
    let r = record(
        &[0xffff_ffff_8100_0000],
        0x40_1234,
        [0x7ff0_0010, 0x7ff0_0100, 0],
        0x7ff0_0000,
        &stack,
    );
    let len = snapshot_record_len(70);
    assert_eq!(len, crate::trace::RECORD_HEADER_BYTES + 8 * (SNAPSHOT_STACK_SLOT + 70));
    let s = Sample::decode(bytes(&r, len)).expect("decodes");
    assert_eq!((s.num_kernel, s.num_user, s.user[0]), (1, 1, 0x40_1234));
    let c = &s.copy;
    assert_eq!(
        (c.regs.pc, c.regs.sp, c.regs.fp, c.regs.lr, c.base, c.len),
        (0x40_1234, 0x7ff0_0010, 0x7ff0_0100, 0, 0x7ff0_0000, 70)
    );
    assert_eq!(c.read(0x7ff0_0000), Some(0x1000));
    assert_eq!(c.read(0x7ff0_0000 + 69 * 8), Some(0x1000 + 69));
    assert_eq!(c.read(0x7ff0_0000 + 70 * 8), None, "one past the copy");
    assert!(c.beyond(0x7ff0_0000 + 70 * 8));
    assert_eq!(c.read(0x7ff0_0004), None, "unaligned");
    assert_eq!(c.read(0x7fef_fff8), None, "below the copy");
    assert!(!c.beyond(0x7fef_fff8));
    // One byte short of the words it announces.
    assert!(Sample::decode(bytes(&r, len - 1)).is_none());
}

#[test]
fn a_walked_record_after_a_copy_carries_none() {
    let mut s = Sample::EMPTY;
    let r = record(&[], 0x40_0000, [1, 2, 3], 0x1000, &[7; 10]);
    assert!(s.decode_into(bytes(&r, snapshot_record_len(10))));
    assert_eq!(s.copy.len, 10);
    let mut walked = record(&[], 0x40_0000, [0; 3], 0, &[]);
    walked.header.num_user = 2;
    walked.frames[1] = 0x40_0100;
    assert!(s.decode_into(bytes(&walked, SampleRecord::len(0, 2))));
    assert_eq!(s.copy.len, 0);
    assert_eq!(s.copy.read(0x1000), None);
}

#[test]
fn copies_too_long_or_overlapped_by_frames_are_refused() {
    let whole = size_of::<SampleRecord>();
    let mut r = record(&[], 1, [0; 3], 0, &[0; 8]);
    r.header.snapshot = SNAPSHOT_WORDS as u32 + 1;
    assert!(Sample::decode(bytes(&r, whole)).is_none());
    let mut r = record(&[], 1, [0; 3], 0, &[0; 8]);
    r.header.num_user = 2;
    r.header.num_kernel = crate::trace::MAX_KERNEL_FRAMES as u32;
    assert!(Sample::decode(bytes(&r, whole)).is_none(), "frames reach into the copy");
    r.header.num_user = 1;
    assert!(Sample::decode(bytes(&r, whole)).is_some());
}
