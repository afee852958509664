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
//! the 3.11 layout: these structures do not change within a minor version). 3.13 to 3.15
//! publish them in `_Py_DebugOffsets`, the first bytes of `_PyRuntime`, which are initialized
//! data and so read from the file (`debug_offsets`, its layout per version there; `for_version`
//! picks).

use tracer_common::python::{IdentOffsets, NO_FIELD, PY_FRAME_OBJECT, PY_THREAD_PTHREAD, PyOffsets};

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

impl CodeLayout {
    /// Where the kernel and userspace read what a code object's identity is made of
    /// (`tracer_common::python::code_ident`).
    pub const fn ident_offsets(&self) -> IdentOffsets {
        IdentOffsets {
            qualname: self.qualname,
            filename: self.filename,
            linetable: self.linetable,
            firstlineno: self.firstlineno,
            str_length: self.str_length,
            str_data: self.str_ascii_size,
        }
    }
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
