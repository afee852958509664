//! The walk of stack copies against fake tables: a whole chain, the copy's end, frame
//! pointers only where nothing else covers a PC, the depth limit and unmapped callers.

use tracer_common::{
    snapshot::StackSnapshot,
    trace::{SOURCE_FP, SOURCE_TABLE, WalkRegs},
    unwind::{FLAG_FP_SAVED, FLAG_RA_SAVED, KIND_CFA, KIND_OUTERMOST, REG_SP, UnwindRule},
    walk::StopReason,
};

use super::{Covering, walk_copy};

/// Where the fake copies start.
const BASE: u64 = 0x7fff_0000;

fn copy(pc: u64, sp: u64, fp: u64, words: &[u64]) -> StackSnapshot {
    let mut c = StackSnapshot::EMPTY;
    c.regs = WalkRegs { pc, sp, fp, lr: 0 };
    c.base = BASE;
    c.len = words.len() as u32;
    c.words[..words.len()].copy_from_slice(words);
    c
}

fn rule(kind: u8, cfa_offset: i32, flags: u8, fp_offset: i32) -> UnwindRule {
    UnwindRule {
        kind,
        cfa_reg: REG_SP,
        flags,
        _pad: 0,
        cfa_offset,
        fp_offset,
        ra_offset: -8,
    }
}

/// A leaf (`CFA = SP + 8`), a middle function saving FP (`CFA = SP + 16`), an outermost one;
/// 0x5000.. is mapped without a table; anything else is unmapped.
fn table(pc: u64) -> Covering {
    match pc {
        0x1000..0x1100 => Some(Some(rule(KIND_CFA, 8, FLAG_RA_SAVED, 0))),
        0x2000..0x2100 => Some(Some(rule(KIND_CFA, 16, FLAG_RA_SAVED | FLAG_FP_SAVED, -16))),
        0x3000..0x3100 => Some(Some(rule(KIND_OUTERMOST, 0, 0, 0))),
        0x5000..0x5100 => Some(None),
        _ => None,
    }
}

#[test]
fn a_whole_chain_reaches_the_outermost_frame() {
    // Frame 0 at SP = BASE + 16: the copy starts below SP, as the kernel's rounded one does.
    let c = copy(0x1010, BASE + 16, 0x1234, &[0xaaaa, 0xbbbb, 0x2100, 0xf00d, 0x3010, 0]);
    let walked = walk_copy(&c, 2048, table);
    assert_eq!(walked.stop, StopReason::Outermost);
    assert_eq!(
        walked.frames,
        [(0x1010, SOURCE_TABLE), (0x2100, SOURCE_TABLE), (0x3010, SOURCE_TABLE)]
    );
}

#[test]
fn a_stack_deeper_than_its_copy_ends_as_snapshot_end() {
    // The middle frame's return address would be the word after the copy.
    let c = copy(0x1010, BASE, 0, &[0x2100, 0xf00d]);
    let walked = walk_copy(&c, 2048, table);
    assert_eq!(walked.stop, StopReason::SnapshotEnd);
    assert_eq!(walked.frames, [(0x1010, SOURCE_TABLE), (0x2100, SOURCE_TABLE)]);
    // A read below the copy is a bad address, not the copy's end.
    let c = copy(0x5010, BASE - 64, BASE - 32, &[0; 4]);
    assert_eq!(walk_copy(&c, 2048, table).stop, StopReason::RaReadFailed);
}

#[test]
fn frame_pointers_only_where_no_table_covers_the_pc() {
    // 0x5010 has no table: FP = BASE + 16 holds (saved FP 0, RA 0x3010), the caller is found by
    // frame pointers and marked so.
    let c = copy(0x5010, BASE, BASE + 16, &[0, 0, 0, 0x3010]);
    let walked = walk_copy(&c, 2048, table);
    assert_eq!(walked.frames, [(0x5010, SOURCE_TABLE), (0x3010, SOURCE_FP)]);
    assert_eq!(walked.stop, StopReason::Outermost);
    // The same words under a table are walked by the table: the leaf's RA is at SP.
    let c = copy(0x1010, BASE, BASE + 16, &[0x3010, 0, 0, 0]);
    assert_eq!(
        walk_copy(&c, 2048, table).frames,
        [(0x1010, SOURCE_TABLE), (0x3010, SOURCE_TABLE)]
    );
}

#[test]
fn unmapped_pcs_and_the_depth_limit_stop_without_recording() {
    // A return address in no mapping is not recorded.
    let c = copy(0x1010, BASE, 0, &[0x9000]);
    let walked = walk_copy(&c, 2048, table);
    assert_eq!((walked.frames.len(), walked.stop), (1, StopReason::NoMapping));
    // Frame 0 itself unmapped: the sampled PC alone.
    let c = copy(0x9000, BASE, 0, &[0x2100]);
    assert_eq!(walk_copy(&c, 2048, table).stop, StopReason::NoMapping);
    // Depth 1: the leaf's caller is found, but not recorded.
    let c = copy(0x1010, BASE, 0, &[0x2100, 0xf00d, 0x3010, 0]);
    let walked = walk_copy(&c, 1, table);
    assert_eq!((walked.frames.len(), walked.stop), (1, StopReason::MaxDepth));
    // Depth 3 with `_start` third: complete, not cut.
    assert_eq!(walk_copy(&c, 3, table).stop, StopReason::Outermost);
}
