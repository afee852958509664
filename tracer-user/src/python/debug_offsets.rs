//! The layouts 3.13, 3.14 and 3.15 publish in `_Py_DebugOffsets`, the first bytes of
//! `_PyRuntime` (initialized data, read from the file). The structure grows with each version
//! (3.14 added `threads_main`, the generation counters, the frame's `stackpointer` and
//! `tlbc_index`, `co_tlbc`, the set, generator, list-node and debugger offsets; 3.15 added
//! `base_frame`, `last_profiled_frame` and more to the thread state and fields to the type
//! object): where each field read sits is a table per version ([`V13`], [`V14`], [`V15`]),
//! from CPython's `pycore_debug_offsets.h` and checked against the bytes of Debian's 3.13.5,
//! 3.14.10 and 3.15.2 (`_PyRuntime` dumped, the offsets walked in a live process).
//!
//! Hostile input: only the bytes up to the last field read are read (a bounded slice); the
//! cookie, the version (`major.minor` of `Py_Version`) and the free-threaded flag are
//! checked; every offset must lie, with its field's width, inside its structure's published
//! size, and below 2^16, so a forged structure cannot point the kernel's reads elsewhere.

use tracer_common::python::{NO_FIELD, PY_BASE_FRAME, PY_TAGGED_CODE, PyOffsets};

use super::PythonError;
use super::layout::{CodeFormat, CodeLayout, Layout};

/// `_Py_DebugOffsets.cookie`.
pub const DEBUG_COOKIE: &[u8; 8] = b"xdebugpy";

/// Byte positions, in one version's `_Py_DebugOffsets`, of the `uint64_t`s read.
#[derive(Clone, Copy, Debug)]
pub struct Positions {
    /// Bytes read: past the last field read (the structure may be longer).
    pub len: usize,
    pub runtime_interpreters_head: usize,
    pub interp_size: usize,
    pub interp_threads_head: usize,
    pub tstate_size: usize,
    pub tstate_next: usize,
    pub tstate_current_frame: usize,
    pub tstate_native_thread_id: usize,
    pub frame_size: usize,
    pub frame_previous: usize,
    pub frame_executable: usize,
    pub frame_instr_ptr: usize,
    pub frame_owner: usize,
    pub code_size: usize,
    pub code_filename: usize,
    pub code_name: usize,
    pub code_qualname: usize,
    pub code_linetable: usize,
    pub code_firstlineno: usize,
    pub code_adaptive: usize,
    pub bytes_size: usize,
    pub bytes_ob_size: usize,
    pub bytes_sval: usize,
    pub str_size: usize,
    pub str_state: usize,
    pub str_length: usize,
    pub str_ascii_size: usize,
    /// `PyOffsets::flags` of the version.
    pub flags: u16,
}

/// 3.13: 584 bytes.
pub const V13: Positions = Positions {
    len: 568,
    runtime_interpreters_head: 40,
    interp_size: 48,
    interp_threads_head: 72,
    tstate_size: 152,
    tstate_next: 168,
    tstate_current_frame: 184,
    tstate_native_thread_id: 200,
    frame_size: 224,
    frame_previous: 232,
    frame_executable: 240,
    frame_instr_ptr: 248,
    frame_owner: 264,
    code_size: 272,
    code_filename: 280,
    code_name: 288,
    code_qualname: 296,
    code_linetable: 304,
    code_firstlineno: 312,
    code_adaptive: 344,
    bytes_size: 512,
    bytes_ob_size: 520,
    bytes_sval: 528,
    str_size: 536,
    str_state: 544,
    str_length: 552,
    str_ascii_size: 560,
    flags: 0,
};

/// 3.14: 760 bytes; `f_executable` is a tagged `_PyStackRef`.
pub const V14: Positions = Positions {
    len: 648,
    runtime_interpreters_head: 40,
    interp_size: 48,
    interp_threads_head: 72,
    tstate_size: 176,
    tstate_next: 192,
    tstate_current_frame: 208,
    tstate_native_thread_id: 224,
    frame_size: 248,
    frame_previous: 256,
    frame_executable: 264,
    frame_instr_ptr: 272,
    frame_owner: 288,
    code_size: 312,
    code_filename: 320,
    code_name: 328,
    code_qualname: 336,
    code_linetable: 344,
    code_firstlineno: 352,
    code_adaptive: 384,
    bytes_size: 592,
    bytes_ob_size: 600,
    bytes_sval: 608,
    str_size: 616,
    str_state: 624,
    str_length: 632,
    str_ascii_size: 640,
    flags: PY_TAGGED_CODE,
};

/// 3.15: the thread state's offsets are 17 words (`base_frame` and more), the type object's
/// 6; the chain ends with the thread's base frame.
pub const V15: Positions = Positions {
    len: 744,
    runtime_interpreters_head: 40,
    interp_size: 48,
    interp_threads_head: 72,
    tstate_size: 176,
    tstate_next: 192,
    tstate_current_frame: 208,
    tstate_native_thread_id: 248,
    frame_size: 312,
    frame_previous: 320,
    frame_executable: 328,
    frame_instr_ptr: 336,
    frame_owner: 352,
    code_size: 376,
    code_filename: 384,
    code_name: 392,
    code_qualname: 400,
    code_linetable: 408,
    code_firstlineno: 416,
    code_adaptive: 448,
    bytes_size: 688,
    bytes_ob_size: 696,
    bytes_sval: 704,
    str_size: 712,
    str_state: 720,
    str_length: 728,
    str_ascii_size: 736,
    flags: PY_TAGGED_CODE | PY_BASE_FRAME,
};

/// Bytes of `_PyRuntime` read: the most any version's [`Positions::len`] asks.
pub const DEBUG_OFFSETS_SIZE: usize = V15.len;

/// Where `major.minor` keeps its debug offsets, if it publishes them (as the tracer knows).
pub fn positions(major: u8, minor: u8) -> Option<&'static Positions> {
    match (major, minor) {
        (3, 13) => Some(&V13),
        (3, 14) => Some(&V14),
        (3, 15) => Some(&V15),
        _ => None,
    }
}

/// The layout the `_Py_DebugOffsets` of `major.minor` (the first bytes of `_PyRuntime`)
/// describes: checked to be one (cookie, version `major.minor`, not free-threaded) and every
/// field offset to lie inside its structure's published size.
pub fn from_debug_offsets(bytes: &[u8], major: u8, minor: u8) -> Result<Layout, PythonError> {
    let p = positions(major, minor).ok_or(PythonError::Unsupported { major, minor })?;
    let bytes = bytes
        .get(..p.len)
        .ok_or(PythonError::DebugOffsets("shorter than its version's"))?;
    if &bytes[..8] != DEBUG_COOKIE {
        return Err(PythonError::DebugOffsets("no xdebugpy cookie"));
    }
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let version = word(8);
    if version >> 24 != u64::from(major) || (version >> 16) & 0xff != u64::from(minor) {
        return Err(PythonError::DebugOffsets("version differs from Py_Version"));
    }
    if word(16) != 0 {
        return Err(PythonError::FreeThreaded { major, minor });
    }
    // An offset of a `width`-byte field inside a structure of the size at `size_at`.
    let field = |at: usize, size_at: usize, width: u64| -> Result<u16, PythonError> {
        let (offset, size) = (word(at), word(size_at));
        if offset.checked_add(width).is_none_or(|end| end > size) || offset >= u64::from(NO_FIELD) {
            return Err(PythonError::DebugOffsets("a field offset outside its structure"));
        }
        Ok(offset as u16)
    };
    // `_PyRuntimeState`'s size is not bounded by anything the tracer knows; its one field read
    // is bounded like the others, by the sizes of 16 bits.
    let head = word(p.runtime_interpreters_head);
    if head >= u64::from(NO_FIELD) {
        return Err(PythonError::DebugOffsets("a field offset outside its structure"));
    }
    Ok(Layout {
        kernel: PyOffsets {
            runtime_interpreters_head: head as u16,
            interp_threads_head: field(p.interp_threads_head, p.interp_size, 8)?,
            tstate_next: field(p.tstate_next, p.tstate_size, 8)?,
            tstate_native_thread_id: field(p.tstate_native_thread_id, p.tstate_size, 8)?,
            tstate_frame: field(p.tstate_current_frame, p.tstate_size, 8)?,
            cframe_current_frame: NO_FIELD,
            frame_code: field(p.frame_executable, p.frame_size, 8)?,
            frame_previous: field(p.frame_previous, p.frame_size, 8)?,
            frame_instr: field(p.frame_instr_ptr, p.frame_size, 8)?,
            frame_owner: field(p.frame_owner, p.frame_size, 1)?,
            frame_is_entry: NO_FIELD,
            flags: p.flags,
        },
        code: CodeLayout {
            filename: field(p.code_filename, p.code_size, 8)?,
            name: field(p.code_name, p.code_size, 8)?,
            qualname: field(p.code_qualname, p.code_size, 8)?,
            linetable: field(p.code_linetable, p.code_size, 8)?,
            firstlineno: field(p.code_firstlineno, p.code_size, 4)?,
            code_adaptive: field(p.code_adaptive, p.code_size, 0)?,
            str_length: field(p.str_length, p.str_size, 8)?,
            str_state: field(p.str_state, p.str_size, 4)?,
            str_ascii_size: field(p.str_ascii_size, p.str_size, 0)?,
            // Not published: `PyASCIIObject` and the two words of `utf8_length` and `utf8`.
            str_compact_size: field(p.str_ascii_size, p.str_size, 0)?.saturating_add(16),
            bytes_size: field(p.bytes_ob_size, p.bytes_size, 8)?,
            bytes_data: field(p.bytes_sval, p.bytes_size, 0)?,
            format: CodeFormat::Locations,
        },
    })
}
