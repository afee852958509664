//! The debug offsets of 3.14 and 3.15 as their interpreters' `_PyRuntime` starts (the words
//! after the cookie of Debian's 3.14.10 and 3.15.2, dumped from the files): the layouts they
//! give, pinned against the offsets walked in live processes, and forged ones refused.

use tracer_common::python::{NO_FIELD, PY_BASE_FRAME, PY_TAGGED_CODE};

use super::super::{
    PythonError,
    cold::jumps_into,
    debug_offsets::{DEBUG_COOKIE, V14, V15, from_debug_offsets},
    for_version,
    layout::Layout,
};

/// The words after `version` of Debian's 3.14.10, to the end of its `_Py_DebugOffsets`.
const WORDS_3_14: [u64; 93] = [
    0, 316616, 784, 808, 225864, 7280, 7272, 7344, 7360, 7408, 7688, 7672, 7680, 16, 7784, 0, 7800, 7792, 7992, 0, 832,
    0, 8, 16, 72, 152, 160, 232, 32, 88, 8, 0, 56, 80, 74, 64, 0, 216, 112, 120, 128, 136, 68, 52, 96, 104, 208, 0, 16,
    8, 416, 24, 88, 168, 40, 32, 16, 40, 24, 16, 200, 24, 40, 32, 48, 32, 40, 24, 16, 32, 16, 24, 40, 16, 32, 64, 32,
    16, 40, 264, 192, 160, 24, 72, 67, 0, 8, 24, 304, 8076, 0, 4, 512,
];

/// The words after `version` of Debian's 3.15.2, to the unicode object's offsets.
const WORDS_3_15: [u64; 91] = [
    0, 346568, 912, 936, 226240, 7272, 7264, 7336, 7352, 7400, 7592, 7576, 7584, 16, 7736, 0, 7752, 7744, 7944, 0, 888,
    0, 8, 16, 72, 80, 88, 96, 176, 184, 256, 32, 36, 40, 136, 288, 0, 88, 8, 0, 56, 80, 74, 64, 0, 216, 112, 120, 128,
    136, 68, 52, 96, 104, 208, 0, 16, 8, 424, 24, 88, 168, 32, 288, 944, 888, 40, 32, 16, 40, 24, 16, 200, 24, 40, 32,
    48, 32, 40, 24, 16, 32, 16, 24, 40, 16, 32, 64, 32, 16, 40,
];

/// Cookie, `version` (`PY_VERSION_HEX`) and `words`.
fn offsets(version: u64, words: &[u64]) -> Vec<u8> {
    let mut bytes = DEBUG_COOKIE.to_vec();
    bytes.extend(version.to_le_bytes());
    for w in words {
        bytes.extend(w.to_le_bytes());
    }
    bytes
}

pub(crate) fn debug_offsets_3_14() -> Vec<u8> {
    offsets(0x030e_0af0, &WORDS_3_14)
}

pub(crate) fn debug_offsets_3_15() -> Vec<u8> {
    offsets(0x030f_02f0, &WORDS_3_15)
}

/// The fields a layout gives the kernel and the code-object reader, in one tuple.
fn fields(l: &Layout) -> [u16; 21] {
    let (k, c) = (l.kernel, l.code);
    [
        k.runtime_interpreters_head,
        k.interp_threads_head,
        k.tstate_next,
        k.tstate_native_thread_id,
        k.tstate_frame,
        k.cframe_current_frame,
        k.frame_code,
        k.frame_previous,
        k.frame_instr,
        k.frame_owner,
        k.frame_is_entry,
        k.flags,
        c.filename,
        c.name,
        c.qualname,
        c.linetable,
        c.firstlineno,
        c.code_adaptive,
        c.str_length,
        c.str_state,
        c.str_ascii_size,
    ]
}

/// 3.14's layout comes from its debug offsets: the thread state's `current_frame` 72 and
/// `native_thread_id` 160, the frame's `f_executable` 0 (tagged), `previous` 8, `instr_ptr` 56,
/// `owner` 74, `co_code_adaptive` 208 (the offsets a live 3.14.10 was walked with).
#[test]
fn debug_offsets_give_the_3_14_layout() {
    let layout = for_version(3, 14, Some(&debug_offsets_3_14())).unwrap();
    assert_eq!(
        fields(&layout),
        [
            808,
            7344,
            8,
            160,
            72,
            NO_FIELD,
            0,
            8,
            56,
            74,
            NO_FIELD,
            PY_TAGGED_CODE,
            112,
            120,
            128,
            136,
            68,
            208,
            16,
            32,
            40
        ]
    );
    let c = layout.code;
    assert_eq!((c.str_compact_size, c.bytes_size, c.bytes_data), (56, 16, 32));
}

/// 3.15's layout: `native_thread_id` 184 (after `base_frame`, `last_profiled_frame` and
/// `thread_id` moved), the frame's and code object's offsets those of 3.14, and its chain
/// ends with a base frame.
#[test]
fn debug_offsets_give_the_3_15_layout() {
    let layout = for_version(3, 15, Some(&debug_offsets_3_15())).unwrap();
    assert_eq!(
        fields(&layout),
        [
            936,
            7336,
            8,
            184,
            72,
            NO_FIELD,
            0,
            8,
            56,
            74,
            NO_FIELD,
            PY_TAGGED_CODE | PY_BASE_FRAME,
            112,
            120,
            128,
            136,
            68,
            208,
            16,
            32,
            40
        ]
    );
    let c = layout.code;
    assert_eq!((c.str_compact_size, c.bytes_size, c.bytes_data), (56, 16, 32));
}

/// Forged 3.14 and 3.15 debug offsets are refused: one byte short of the fields read, another
/// version's (3.14's read as 3.15's and the reverse), free-threaded, a field past its
/// structure's size, a size and offset of 2^64 - 8 (in range of each other, not of 16 bits).
#[test]
fn forged_3_14_and_3_15_debug_offsets_are_refused() {
    let debug = |e: Result<Layout, PythonError>| matches!(e, Err(PythonError::DebugOffsets(_)));
    for (minor, good, p) in [(14, debug_offsets_3_14(), V14), (15, debug_offsets_3_15(), V15)] {
        assert!(from_debug_offsets(&good, 3, minor).is_ok(), "3.{minor}");
        assert!(
            debug(from_debug_offsets(&good[..p.len - 1], 3, minor)),
            "3.{minor} short"
        );
        let other = if minor == 14 { 15 } else { 14 };
        assert!(debug(from_debug_offsets(&good, 3, other)), "3.{minor} as 3.{other}");
        let mut free = good.clone();
        free[16] = 1;
        assert_eq!(
            from_debug_offsets(&free, 3, minor),
            Err(PythonError::FreeThreaded { major: 3, minor })
        );
        let set = |bytes: &mut Vec<u8>, at: usize, v: u64| bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
        let mut outside = good.clone();
        set(&mut outside, p.tstate_native_thread_id, 900);
        assert!(debug(from_debug_offsets(&outside, 3, minor)), "3.{minor} outside");
        let mut huge = good.clone();
        set(&mut huge, p.frame_size, u64::MAX);
        set(&mut huge, p.frame_executable, u64::MAX - 8);
        assert!(debug(from_debug_offsets(&huge, 3, minor)), "3.{minor} huge");
        let mut head = good.clone();
        set(&mut head, p.runtime_interpreters_head, 1 << 40);
        assert!(debug(from_debug_offsets(&head, 3, minor)), "3.{minor} runtime");
    }
}

/// The cold part's jumps: `jmp rel32` and `jcc rel32` into the range's inside are counted, one
/// to its first byte (a tail call to the function there) or outside it is not.
#[test]
fn jumps_into_the_cold_part_are_counted() {
    let at = 0x1000u64;
    // jmp to 0x800 (inside), jne to 0x900 (inside), jmp to 0x700 (the start), jmp to 0x2000.
    let mut code = Vec::new();
    let rel = |from: u64, to: u64| (to.wrapping_sub(from) as i64 as i32).to_le_bytes();
    code.push(0xe9);
    code.extend(rel(at + 5, 0x800));
    code.extend([0x0f, 0x85]);
    code.extend(rel(at + 11, 0x900));
    code.push(0xe9);
    code.extend(rel(at + 16, 0x700));
    code.push(0xe9);
    code.extend(rel(at + 21, 0x2000));
    assert_eq!(jumps_into(&code, at, (0x700, 0xa00)), 2);
    assert_eq!(jumps_into(&code, at, (0x700, 0x850)), 1);
    assert_eq!(jumps_into(&code[..3], at, (0x700, 0xa00)), 0, "a jump cut short");
}
