//! Where CPython keeps what the tracer reads, per version: the offsets the kernel walk uses
//! (`PyOffsets`) and those userspace reads code objects and strings with ([`CodeLayout`]).
//!
//! 3.6 to 3.10 keep their frames in `PyFrameObject`s (`tstate->frame`, `f_back`, `f_code`,
//! `int f_lasti`) and their threads by `pthread_self()` (`PyThreadState.thread_id`): tables
//! here, from the DWARF of pyenv's 3.6.15, 3.7.16, 3.8.18, 3.9.18 and 3.10.13 (`ptype /o` of
//! `struct _is`, `struct _ts`, `struct _frame`, `PyCodeObject`, `_PyRuntimeState`; the
//! strings' and bytes' layout is 3.11's). 3.6 has no `_PyRuntime`: its list of interpreters
//! is the static `interp_head` (read from `.symtab`). Their code objects have no qualified
//! name: frames are named by `co_name`.
//!
//! 3.11 and 3.12 publish nothing, so their offsets are tables here, taken from the DWARF of
//! the interpreters (`ptype /o` of `PyThreadState`, `_PyCFrame`, `_PyInterpreterFrame`,
//! `PyCodeObject`, `PyASCIIObject`, `PyCompactUnicodeObject`, `PyBytesObject` in 3.11.7 and
//! 3.12.1; Debian's 3.11.2 has
//! the 3.11 layout: these structures do not change within a minor version). 3.13 publishes
//! them in `_Py_DebugOffsets`, the first bytes of `_PyRuntime`, which are initialized data
//! and so read from the file ([`from_debug_offsets`]); its own layout is that of 3.13.

use tracer_common::python::{NO_FIELD, PY_FRAME_OBJECT, PY_THREAD_PTHREAD, PyOffsets};

use super::PythonError;

/// How userspace reads a code object and the strings it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeLayout {
    /// `PyCodeObject.co_filename`, `.co_name`, `.co_qualname`, `.co_linetable` (pointers).
    pub filename: u16,
    pub name: u16,
    pub qualname: u16,
    pub linetable: u16,
    /// `PyCodeObject.co_firstlineno` (an `int`).
    pub firstlineno: u16,
    /// `PyCodeObject.co_code_adaptive`: where the code units start, in the code object.
    pub code_adaptive: u16,
    /// `PyASCIIObject.length`, `.state` and its size (where a compact ASCII string's
    /// characters start).
    pub str_length: u16,
    pub str_state: u16,
    pub str_ascii_size: u16,
    /// The size of `PyCompactUnicodeObject` (where a compact non-ASCII string's characters
    /// start).
    pub str_compact_size: u16,
    /// `PyBytesObject.ob_size` and `.ob_sval`.
    pub bytes_size: u16,
    pub bytes_data: u16,
    /// What a frame's recorded instruction is and how the line table reads.
    pub format: CodeFormat,
}

/// How a frame's instruction is recorded and its code object's line table is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeFormat {
    /// 3.11+: a pointer into `co_code_adaptive`; `co_linetable` of locations.
    Locations,
    /// 3.10: `f_lasti` in code units (two bytes); `co_linetable` of byte and line deltas.
    Linetable310,
    /// 3.6-3.9: `f_lasti` in bytes; `co_lnotab`.
    Lnotab,
}

/// One version's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub kernel: PyOffsets,
    pub code: CodeLayout,
}

/// 3.11 (3.11.7's DWARF; `_PyRuntime.interpreters` at 32, `.head` 8 into it; the thread
/// list head 8 into `PyInterpreterState.threads` at 8).
pub const V3_11: Layout = Layout {
    kernel: PyOffsets {
        runtime_interpreters_head: 40,
        interp_threads_head: 16,
        tstate_next: 8,
        tstate_native_thread_id: 160,
        tstate_frame: 56,
        cframe_current_frame: 8,
        frame_code: 32,
        frame_previous: 48,
        frame_instr: 56,
        frame_owner: 69,
        frame_is_entry: 68,
        flags: 0,
    },
    code: CodeLayout {
        filename: 112,
        name: 120,
        qualname: 128,
        linetable: 136,
        firstlineno: 72,
        code_adaptive: 184,
        str_length: 16,
        str_state: 32,
        str_ascii_size: 48,
        str_compact_size: 72,
        bytes_size: 16,
        bytes_data: 32,
        format: CodeFormat::Locations,
    },
};

/// 3.12 (3.12.1's DWARF; `PyInterpreterState.threads` at 64; `_PyCFrame.current_frame` at 0).
pub const V3_12: Layout = Layout {
    kernel: PyOffsets {
        runtime_interpreters_head: 40,
        interp_threads_head: 72,
        tstate_next: 8,
        tstate_native_thread_id: 144,
        tstate_frame: 56,
        cframe_current_frame: 0,
        frame_code: 0,
        frame_previous: 8,
        frame_instr: 56,
        frame_owner: 70,
        frame_is_entry: NO_FIELD,
        flags: 0,
    },
    code: CodeLayout {
        filename: 112,
        name: 120,
        qualname: 128,
        linetable: 136,
        firstlineno: 68,
        code_adaptive: 192,
        str_length: 16,
        str_state: 32,
        str_ascii_size: 40,
        str_compact_size: 56,
        bytes_size: 16,
        bytes_data: 32,
        format: CodeFormat::Locations,
    },
};

/// A `PyFrameObject` version (3.6-3.10): `interpreters_head` (in `_PyRuntime`, or 0 from
/// 3.6's `interp_head`), `PyThreadState.thread_id`, `PyFrameObject.f_lasti`, and the code
/// object's `co_firstlineno` and `co_filename` (`co_name` and the line table follow it).
const fn frame_object(
    interpreters_head: u16,
    thread_id: u16,
    lasti: u16,
    first: u16,
    file: u16,
    format: CodeFormat,
) -> Layout {
    Layout {
        kernel: PyOffsets {
            runtime_interpreters_head: interpreters_head,
            interp_threads_head: 8,
            tstate_next: 8,
            tstate_native_thread_id: thread_id,
            tstate_frame: 24,
            cframe_current_frame: NO_FIELD,
            frame_code: 32,
            frame_previous: 24,
            frame_instr: lasti,
            frame_owner: NO_FIELD,
            frame_is_entry: NO_FIELD,
            flags: PY_FRAME_OBJECT | PY_THREAD_PTHREAD,
        },
        code: CodeLayout {
            filename: file,
            name: file + 8,
            qualname: file + 8,
            linetable: file + 16,
            firstlineno: first,
            code_adaptive: 0,
            str_length: 16,
            str_state: 32,
            str_ascii_size: 48,
            str_compact_size: 72,
            bytes_size: 16,
            bytes_data: 32,
            format,
        },
    }
}

/// 3.6 (3.6.15's DWARF; `long thread_id` at 152).
pub const V3_6: Layout = frame_object(0, 152, 120, 36, 96, CodeFormat::Lnotab);
/// 3.7 (3.7.16's DWARF; `_PyRuntime.interpreters` at 16).
pub const V3_7: Layout = frame_object(24, 176, 104, 36, 96, CodeFormat::Lnotab);
/// 3.8 (3.8.18's DWARF; `_PyRuntime.interpreters` at 24).
pub const V3_8: Layout = frame_object(32, 176, 104, 40, 104, CodeFormat::Lnotab);
/// 3.9 (3.9.18's DWARF: 3.8's offsets).
pub const V3_9: Layout = V3_8;
/// 3.10 (3.10.13's DWARF; `f_lasti` at 96).
pub const V3_10: Layout = frame_object(32, 176, 96, 40, 104, CodeFormat::Linetable310);

/// `_Py_DebugOffsets.cookie`.
pub const DEBUG_COOKIE: &[u8; 8] = b"xdebugpy";
/// Bytes of 3.13's `_Py_DebugOffsets`.
pub const DEBUG_OFFSETS_SIZE: usize = 584;

/// Byte positions of the fields read from 3.13's `_Py_DebugOffsets` (each a `uint64_t`).
mod debug {
    pub const VERSION: usize = 8;
    pub const FREE_THREADED: usize = 16;
    pub const RUNTIME_INTERPRETERS_HEAD: usize = 40;
    pub const INTERP_SIZE: usize = 48;
    pub const INTERP_THREADS_HEAD: usize = 72;
    pub const TSTATE_SIZE: usize = 152;
    pub const TSTATE_NEXT: usize = 168;
    pub const TSTATE_CURRENT_FRAME: usize = 184;
    pub const TSTATE_NATIVE_THREAD_ID: usize = 200;
    pub const FRAME_SIZE: usize = 224;
    pub const FRAME_PREVIOUS: usize = 232;
    pub const FRAME_EXECUTABLE: usize = 240;
    pub const FRAME_INSTR_PTR: usize = 248;
    pub const FRAME_OWNER: usize = 264;
    pub const CODE_SIZE: usize = 272;
    pub const CODE_FILENAME: usize = 280;
    pub const CODE_NAME: usize = 288;
    pub const CODE_QUALNAME: usize = 296;
    pub const CODE_LINETABLE: usize = 304;
    pub const CODE_FIRSTLINENO: usize = 312;
    pub const CODE_ADAPTIVE: usize = 344;
    pub const BYTES_SIZE: usize = 512;
    pub const BYTES_OB_SIZE: usize = 520;
    pub const BYTES_SVAL: usize = 528;
    pub const STR_SIZE: usize = 536;
    pub const STR_STATE: usize = 544;
    pub const STR_LENGTH: usize = 552;
    pub const STR_ASCII_SIZE: usize = 560;
}

/// The layout of CPython `major.minor`; `runtime` is the start of `_PyRuntime`'s initialized
/// bytes (needed from 3.13 on).
pub fn for_version(major: u8, minor: u8, runtime: Option<&[u8]>) -> Result<Layout, PythonError> {
    match (major, minor) {
        (3, 6) => Ok(V3_6),
        (3, 7) => Ok(V3_7),
        (3, 8) => Ok(V3_8),
        (3, 9) => Ok(V3_9),
        (3, 10) => Ok(V3_10),
        (3, 11) => Ok(V3_11),
        (3, 12) => Ok(V3_12),
        (3, 13) => {
            let bytes = runtime.ok_or(PythonError::Unreadable("_PyRuntime"))?;
            from_debug_offsets(bytes, major, minor)
        }
        _ => Err(PythonError::Unsupported { major, minor }),
    }
}

/// The layout 3.13's `_Py_DebugOffsets` (the first bytes of `_PyRuntime`) describes: checked
/// to be one (cookie, version `major.minor`, not free-threaded) and every field offset to lie
/// inside its structure's published size, so a hostile file cannot point reads elsewhere.
pub fn from_debug_offsets(bytes: &[u8], major: u8, minor: u8) -> Result<Layout, PythonError> {
    let bytes = bytes
        .get(..DEBUG_OFFSETS_SIZE)
        .ok_or(PythonError::DebugOffsets("shorter than 3.13's"))?;
    if &bytes[..8] != DEBUG_COOKIE {
        return Err(PythonError::DebugOffsets("no xdebugpy cookie"));
    }
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let version = word(debug::VERSION);
    if version >> 24 != u64::from(major) || (version >> 16) & 0xff != u64::from(minor) {
        return Err(PythonError::DebugOffsets("version differs from Py_Version"));
    }
    if word(debug::FREE_THREADED) != 0 {
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
    use debug::*;
    // `_PyRuntimeState`'s size is not bounded by anything the tracer knows; its one field read
    // is bounded like the others, by the sizes of 16 bits.
    let head = word(RUNTIME_INTERPRETERS_HEAD);
    if head >= u64::from(NO_FIELD) {
        return Err(PythonError::DebugOffsets("a field offset outside its structure"));
    }
    Ok(Layout {
        kernel: PyOffsets {
            runtime_interpreters_head: head as u16,
            interp_threads_head: field(INTERP_THREADS_HEAD, INTERP_SIZE, 8)?,
            tstate_next: field(TSTATE_NEXT, TSTATE_SIZE, 8)?,
            tstate_native_thread_id: field(TSTATE_NATIVE_THREAD_ID, TSTATE_SIZE, 8)?,
            tstate_frame: field(TSTATE_CURRENT_FRAME, TSTATE_SIZE, 8)?,
            cframe_current_frame: NO_FIELD,
            frame_code: field(FRAME_EXECUTABLE, FRAME_SIZE, 8)?,
            frame_previous: field(FRAME_PREVIOUS, FRAME_SIZE, 8)?,
            frame_instr: field(FRAME_INSTR_PTR, FRAME_SIZE, 8)?,
            frame_owner: field(FRAME_OWNER, FRAME_SIZE, 1)?,
            frame_is_entry: NO_FIELD,
            flags: 0,
        },
        code: CodeLayout {
            filename: field(CODE_FILENAME, CODE_SIZE, 8)?,
            name: field(CODE_NAME, CODE_SIZE, 8)?,
            qualname: field(CODE_QUALNAME, CODE_SIZE, 8)?,
            linetable: field(CODE_LINETABLE, CODE_SIZE, 8)?,
            firstlineno: field(CODE_FIRSTLINENO, CODE_SIZE, 4)?,
            code_adaptive: field(CODE_ADAPTIVE, CODE_SIZE, 0)?,
            str_length: field(STR_LENGTH, STR_SIZE, 8)?,
            str_state: field(STR_STATE, STR_SIZE, 4)?,
            str_ascii_size: field(STR_ASCII_SIZE, STR_SIZE, 0)?,
            // Not published: `PyASCIIObject` and the two words of `utf8_length` and `utf8`.
            str_compact_size: field(STR_ASCII_SIZE, STR_SIZE, 0)?.saturating_add(16),
            bytes_size: field(BYTES_OB_SIZE, BYTES_SIZE, 8)?,
            bytes_data: field(BYTES_SVAL, BYTES_SIZE, 0)?,
            format: CodeFormat::Locations,
        },
    })
}
