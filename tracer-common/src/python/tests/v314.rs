//! The walk of 3.14's and 3.15's chains: tagged code references, frames owned by the C stack
//! (3.14's owner 4) and 3.15's base frame at the end of the chain.

use std::vec;

use super::*;

/// 3.14's offsets (from its debug offsets): `owner` 74, tagged `f_executable`.
const V14: PyOffsets = PyOffsets {
    frame_owner: 74,
    flags: PY_TAGGED_CODE,
    ..CSTACK
};

/// 3.15's: 3.14's, and a base frame.
const V15: PyOffsets = PyOffsets {
    flags: PY_TAGGED_CODE | PY_BASE_FRAME,
    ..V14
};

/// Frame `i` of [`process`].
fn frame_at(i: usize) -> u64 {
    0x10000 + 0x100 * i as u64
}

/// 3.14: a frame's code reference has its tag bits set (a borrowed reference, 1); the code
/// object recorded is the reference with them cleared. The entry frame's (`None | 1`) is not
/// read as a code object.
#[test]
fn tagged_code_references_are_cleared() {
    let frames = [py(0xa0), py(0xb0), C];
    let (info, mut m) = process(&V14, &[5], 5, &frames);
    m.word(frame_at(0) + u64::from(V14.frame_code), 0xa0 | 1);
    m.word(frame_at(1) + u64::from(V14.frame_code), 0xb0 | 3);
    m.word(frame_at(2) + u64::from(V14.frame_code), 0x7777 | 1);
    let (got, stop) = walk(&info, &m, 5);
    assert_eq!(got, [vec![0xa0, 0xb0]]);
    assert_eq!(stop, None);
    // Without the flag (3.13) the word is the code object, as read.
    let (info, _) = process(&CSTACK, &[5], 5, &frames);
    let info = PyProcInfo {
        offsets: PyOffsets {
            frame_owner: 74,
            ..CSTACK
        },
        ..info
    };
    let (got, _) = walk(&info, &m, 5);
    assert_eq!(got, [vec![0xa1, 0xb3]]);
}

/// 3.14's frames owned by the C stack (owner 4, above the interpreter's 3) are no Python frame
/// and end no run.
#[test]
fn frames_owned_by_the_c_stack_are_skipped() {
    let frames = [py(0xa0), py(0xa8), py(0xb0), C];
    let (info, mut m) = process(&V14, &[5], 5, &frames);
    m.byte(frame_at(1) + u64::from(V14.frame_owner), 4);
    let (got, stop) = walk(&info, &m, 5);
    assert_eq!(got, [vec![0xa0, 0xb0]]);
    assert_eq!(stop, None);
}

/// 3.15: the last frame of the chain, owned by the interpreter with no frame before it, is the
/// thread's base frame: it ends no run (the chain is whole after the last call's C-stack
/// frame). Without the flag (3.14) it would be one more, empty, run.
#[test]
fn the_base_frame_ends_no_run() {
    let frames = [py(0xa0), C, py(0xb0), C, C];
    let (info, m) = process(&V15, &[5], 5, &frames);
    let (got, stop) = walk(&info, &m, 5);
    assert_eq!(got, [vec![0xa0], vec![0xb0]]);
    assert_eq!(stop, None);
    let (info, m) = process(&V14, &[5], 5, &frames);
    let (got, _) = walk(&info, &m, 5);
    assert_eq!(got, [vec![0xa0], vec![0xb0], vec![]]);
}
