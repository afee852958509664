//! A code object read from a process: its qualified name, file, first line and line table
//! ([`read_code`]), and the line of a frame's instruction pointer in it ([`CodeInfo::line`]).
//! Memory comes through a closure (`/proc/PID/mem` in a session, a fake in tests) and every
//! read is bounded: strings to [`MAX_STR`] characters, line tables to [`MAX_LINETABLE`] bytes;
//! anything else is an error, never a guess.
//!
//! Strings (`PyUnicodeObject`) are read when compact (all code object strings are): the
//! characters follow the object, after `PyASCIIObject` when ASCII, after
//! `PyCompactUnicodeObject` otherwise, one to four bytes each (`state.kind`).

use super::{
    layout::{CodeFormat, CodeLayout},
    linetable::line_in,
};

/// The longest name or file name read, in characters.
pub const MAX_STR: u64 = 1024;
/// The longest line table read, in bytes.
pub const MAX_LINETABLE: u64 = 64 << 10;

/// What a code object says of itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeInfo {
    pub qualname: String,
    pub filename: String,
    pub first_line: i32,
    pub linetable: Vec<u8>,
    /// The words of the code object it was read from ([`read_header`]).
    pub header: CodeHeader,
}

/// The words of a code object that point at its qualified name, file name and line table, and
/// the word holding its first line.
pub type CodeHeader = [u64; 4];

/// Why a code object could not be read.
#[derive(Debug, thiserror::Error, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CodeError {
    #[error("memory of the code object or its strings could not be read")]
    Unreadable,
    #[error("a string of the code object is not a compact string, or is too long")]
    BadString,
    #[error("the line table is longer than {MAX_LINETABLE} bytes")]
    BadLineTable,
}

impl CodeInfo {
    /// The line of a frame of this code whose instruction pointer is `instr`, the code object
    /// being at `code`.
    pub fn line(&self, layout: &CodeLayout, code: u64, instr: u64) -> Option<i32> {
        line(layout, &self.linetable, self.first_line, code, instr)
    }
}

/// The line of a frame of the code object at `code` (line table `table`, first line
/// `first_line`) whose recorded instruction is `instr`.
pub fn line(layout: &CodeLayout, table: &[u8], first_line: i32, code: u64, instr: u64) -> Option<i32> {
    line_in(layout.format, table, first_line, instr_offset(layout, code, instr))
}

/// How many bytes into its code a frame of the code object at `code` is, its recorded
/// instruction being `instr` (negative before the first instruction: see
/// `linetable::line_of`): 3.11+ an instruction pointer, before an `f_lasti` (32 bits, -1 when
/// not started) counting code units (3.10) or bytes.
pub fn instr_offset(layout: &CodeLayout, code: u64, instr: u64) -> i64 {
    let lasti = i64::from(instr as u32 as i32);
    match layout.format {
        CodeFormat::Locations => instr.wrapping_sub(code.wrapping_add(u64::from(layout.code_adaptive))) as i64,
        CodeFormat::Linetable310 => lasti * 2,
        CodeFormat::Lnotab => lasti,
    }
}

/// The [`CodeHeader`] of the code object at `code`: one read of its first bytes.
pub fn read_header(
    layout: &CodeLayout,
    code: u64,
    read: &mut impl FnMut(u64, &mut [u8]) -> bool,
) -> Result<CodeHeader, CodeError> {
    let fields = [
        layout.qualname,
        layout.filename,
        layout.linetable,
        layout.firstlineno & !7,
    ];
    let end = fields.iter().map(|&f| usize::from(f) + 8).max().unwrap_or(8);
    let mut bytes = vec![0u8; end];
    if !read(code, &mut bytes) {
        return Err(CodeError::Unreadable);
    }
    Ok(fields.map(|f| {
        let at = usize::from(f);
        u64::from_ne_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
    }))
}

/// What a code object says of itself but its line table, and where that table is: the
/// table is read apart ([`read_table`]), once per table a process's code objects share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeMeta {
    pub qualname: String,
    pub filename: String,
    pub first_line: i32,
    pub header: CodeHeader,
    /// The line table's bytes: their address in the process, and their length (at most
    /// [`MAX_LINETABLE`]).
    pub table_at: u64,
    pub table_len: u64,
    /// Its identity (`tracer_common::python::code_ident`), as the kernel records it with
    /// the frames that run it.
    pub ident: u32,
}

/// Read the code object at `code`. `read(addr, buf)` fills `buf` from the process (false:
/// unreadable).
pub fn read_code(
    layout: &CodeLayout,
    code: u64,
    read: &mut impl FnMut(u64, &mut [u8]) -> bool,
) -> Result<CodeInfo, CodeError> {
    let meta = read_meta(layout, code, read)?;
    let linetable = read_table(meta.table_at, meta.table_len, read)?;
    Ok(CodeInfo {
        qualname: meta.qualname,
        filename: meta.filename,
        first_line: meta.first_line,
        linetable,
        header: meta.header,
    })
}

/// The code object at `code`, its line table's bytes not read (see [`CodeMeta`]).
pub fn read_meta(
    layout: &CodeLayout,
    code: u64,
    read: &mut impl FnMut(u64, &mut [u8]) -> bool,
) -> Result<CodeMeta, CodeError> {
    let header = read_header(layout, code, read)?;
    let [qualname, filename, linetable, first_line] = header;
    let first_line = (first_line >> (8 * u64::from(layout.firstlineno & 7))) as u32 as i32;
    let mut b = [0u8; 8];
    if !read(linetable.wrapping_add(u64::from(layout.bytes_size)), &mut b) {
        return Err(CodeError::Unreadable);
    }
    let table_len = u64::from_ne_bytes(b);
    if table_len > MAX_LINETABLE {
        return Err(CodeError::BadLineTable);
    }
    let ident = tracer_common::python::code_ident(&layout.ident_offsets(), code, |at| {
        let mut word = [0u8; 8];
        read(at, &mut word).then(|| u64::from_ne_bytes(word))
    });
    Ok(CodeMeta {
        ident,
        qualname: tracer_unwind::names::capped(read_str(layout, qualname, read)?),
        filename: tracer_unwind::names::capped(read_str(layout, filename, read)?),
        first_line,
        header,
        table_at: linetable.wrapping_add(u64::from(layout.bytes_data)),
        table_len,
    })
}

/// The `len` bytes of a line table at `at` (`len` at most [`MAX_LINETABLE`]).
pub fn read_table(at: u64, len: u64, read: &mut impl FnMut(u64, &mut [u8]) -> bool) -> Result<Vec<u8>, CodeError> {
    if len > MAX_LINETABLE {
        return Err(CodeError::BadLineTable);
    }
    let mut table = vec![0u8; len as usize];
    if !read(at, &mut table) {
        return Err(CodeError::Unreadable);
    }
    Ok(table)
}

/// The compact string at `s`.
fn read_str(layout: &CodeLayout, s: u64, read: &mut impl FnMut(u64, &mut [u8]) -> bool) -> Result<String, CodeError> {
    let mut head = [0u8; 8];
    if !read(s.wrapping_add(u64::from(layout.str_length)), &mut head) {
        return Err(CodeError::Unreadable);
    }
    let len = u64::from_ne_bytes(head);
    let mut state = [0u8; 4];
    if !read(s.wrapping_add(u64::from(layout.str_state)), &mut state) {
        return Err(CodeError::Unreadable);
    }
    let state = u32::from_ne_bytes(state);
    let (kind, compact, ascii) = ((state >> 2) & 7, (state >> 5) & 1 != 0, (state >> 6) & 1 != 0);
    if !compact || len > MAX_STR || !matches!(kind, 1 | 2 | 4) || (ascii && kind != 1) {
        return Err(CodeError::BadString);
    }
    let data = s.wrapping_add(u64::from(if ascii {
        layout.str_ascii_size
    } else {
        layout.str_compact_size
    }));
    let mut bytes = vec![0u8; (len * u64::from(kind)) as usize];
    if !read(data, &mut bytes) {
        return Err(CodeError::Unreadable);
    }
    let chars = bytes.chunks_exact(kind as usize).map(|c| {
        let mut v = [0u8; 4];
        v[..c.len()].copy_from_slice(c);
        char::from_u32(u32::from_ne_bytes(v)).unwrap_or(char::REPLACEMENT_CHARACTER)
    });
    Ok(chars.collect())
}
