//! Where a JavaScript frame is in its function: the running line, and the functions V8
//! inlined into compiled code, read from the process's memory.
//!
//! V8 keeps a *source position table* for each function's bytecode and for its optimized
//! (Maglev, TurboFan) code: entries of an offset in the code and a position in the source,
//! each a difference from the last, zig-zag and 7 bits a byte ([`decode_positions`]). A
//! position ([`script_offset`], [`inlining_id`]) is a character offset in the script and, in
//! optimized code, which inlined function it is in: the deoptimization data lists them, each
//! with where it was called ([`CompiledCode::chain`]).
//!
//! - An interpreted frame: the kernel gives the frame's bytecode offset
//!   (`tracer_common::frame_word::v8_config`); its function's bytecode array has the table
//!   ([`bytecode_positions`]).
//! - A compiled frame: its code is found from the PC alone ([`code_at`]): instructions start
//!   64-byte aligned just after their `InstructionStream`'s header, whose map says what it is
//!   and which points to its `Code`, which says where its instructions start and how many
//!   there are; the candidate is taken only when all of that agrees.
//!
//! Baseline (Sparkplug) code maps its instructions to bytecodes, not positions: its frames are
//! at the line of their bytecode ([`baseline_map`]) where its bytecodes' sizes are known
//! (`super::bytecodes`), without a line elsewhere. Every length read is bounded, every object's
//! type checked.

use super::{V8Error, layout::Layout, read::Read, read::Reader};

/// Bytes of a position table read at most.
pub const MAX_TABLE: u64 = 512 << 10;
/// Bytes searched back from a PC for the start of its code.
pub const MAX_CODE_SEARCH: u64 = 512 << 10;
/// Functions inlined into one code object at most, and inlining depth followed at most.
const MAX_INLINED: u64 = 4096;
const MAX_DEPTH: usize = 64;
/// Instructions start aligned to this (V8's `kCodeAlignment` on x86-64 and arm64).
const CODE_ALIGNMENT: u64 = 64;
/// Bytes of an `InliningPosition`: its position (64 bits), the inlined function's index in
/// the literals (32 bits), padding.
const INLINING_POSITION: u64 = 16;
/// Where a byte array's (and a fixed array's) elements start, after its map and length.
const ARRAY_DATA: u64 = 16;
/// Bytes read at once when searching back for the start of code.
const SEARCH_CHUNK: u64 = 4096;

/// A source position table: (code offset, source position), by ascending code offset.
pub type Positions = Vec<(u32, u64)>;

/// The unsigned number at `*at` in `bytes` (7 bits a byte, low first, the high bit set on all
/// but the last), `at` moved past it; `None` past the end or after ten bytes.
fn unsigned(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// The entries of source position table `bytes`; an error when it ends inside an entry or an
/// entry's offset overflows.
pub fn decode_positions(bytes: &[u8]) -> Result<Positions, V8Error> {
    // Zig-zag: the sign in the lowest bit.
    let number = |bytes: &[u8], at: &mut usize| -> Result<i64, V8Error> {
        let value = unsigned(bytes, at).ok_or(V8Error::Table)?;
        Ok((value >> 1) as i64 ^ -((value & 1) as i64))
    };
    let (mut at, mut offset, mut position) = (0, 0i64, 0i64);
    let mut out = Vec::new();
    while at < bytes.len() {
        // The sign of the offset's step says whether it is a statement's (not used here).
        let step = number(bytes, &mut at)?;
        let step = if step >= 0 { step } else { -(step + 1) };
        offset = offset.checked_add(step).ok_or(V8Error::Table)?;
        position = position.wrapping_add(number(bytes, &mut at)?);
        let offset = u32::try_from(offset).map_err(|_| V8Error::Table)?;
        out.push((offset, position as u64));
    }
    Ok(out)
}

/// The position of the last entry of `table` at or before code offset `offset`.
pub fn position_at(table: &[(u32, u64)], offset: u64) -> Option<u64> {
    let after = table.partition_point(|&(o, _)| u64::from(o) <= offset);
    after.checked_sub(1).map(|i| table[i].1)
}

/// The character offset in its script of position `position`, `None` for an unknown one (or
/// an external one: a line in another file, which JavaScript's are not).
pub fn script_offset(position: u64) -> Option<u64> {
    if position & 1 != 0 {
        return None;
    }
    (position >> 1 & ((1 << 30) - 1)).checked_sub(1)
}

/// Which inlined function position `position` is in, `None` when in the code's own.
pub fn inlining_id(position: u64) -> Option<u64> {
    (position >> 31 & 0xffff).checked_sub(1)
}

/// A compiled function's code, as read from the process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompiledCode {
    /// Its `Code` (tagged).
    pub code: u64,
    /// Its instructions.
    pub start: u64,
    pub end: u64,
    /// Baseline code: no positions, but (when its bytecodes' sizes are known and agree) its
    /// instructions per bytecode ([`baseline_map`]).
    pub baseline: bool,
    pub baseline_map: Option<Vec<(u64, u32)>>,
    /// Its function's shared info (0 for baseline code, which does not say).
    pub shared: u64,
    pub positions: Positions,
    /// Per inlined function: the position of its call, and its shared info.
    pub inlined: Vec<(u64, u64)>,
}

impl CompiledCode {
    /// The functions running at code offset `offset`, innermost first: each one's shared info
    /// and character offset in its script (`None`: not known). Its own function comes last;
    /// `None` when the code has no positions or they are inconsistent.
    pub fn chain(&self, offset: u64) -> Option<Vec<(u64, Option<u64>)>> {
        let mut position = position_at(&self.positions, offset)?;
        let mut out = Vec::new();
        while let Some(id) = inlining_id(position) {
            let &(call, shared) = self.inlined.get(usize::try_from(id).ok()?)?;
            if out.len() >= MAX_DEPTH {
                return None;
            }
            out.push((shared, script_offset(position)));
            position = call;
        }
        out.push((self.shared, script_offset(position)));
        Some(out)
    }
}

/// Baseline code's instructions per bytecode: `table` gives the size of the instructions of
/// the function's entry, then of each bytecode in turn (unsigned, 7 bits a byte);
/// `bytecodes` are the function's, each sized by `sizes` (three rows: operand scales 1, 2 and
/// 4; bytecodes 0 to 3 are the prefixes that scale the next one's operands, by 2 for 0 and 2,
/// by 4 for 1 and 3). The map: where the instructions of the entry end (no bytecode,
/// `u32::MAX`), then where each bytecode's end and its offset. `None` unless the bytecodes,
/// so sized, end exactly at their end and are as many as the sizes in the table (sizes of
/// another V8 would not).
pub fn baseline_map(table: &[u8], bytecodes: &[u8], sizes: &[u8]) -> Option<Vec<(u64, u32)>> {
    let count = sizes.len() / 3;
    let size = |scale: usize, bytecode: u8| -> Option<usize> {
        let s = *sizes
            .get(scale * count + usize::from(bytecode))
            .filter(|_| usize::from(bytecode) < count)?;
        (s > 0).then_some(usize::from(s))
    };
    let mut at = 0;
    let mut end = unsigned(table, &mut at)?;
    let mut map = vec![(end, u32::MAX)];
    let mut bytecode = 0usize;
    while bytecode < bytecodes.len() {
        end = end.checked_add(unsigned(table, &mut at)?)?;
        map.push((end, u32::try_from(bytecode).ok()?));
        let first = bytecodes[bytecode];
        bytecode += match first {
            0..=3 => {
                let scale = if first.is_multiple_of(2) { 1 } else { 2 };
                1 + size(scale, *bytecodes.get(bytecode + 1)?)?
            }
            _ => size(0, first)?,
        };
    }
    (bytecode == bytecodes.len() && at == table.len()).then_some(map)
}

/// The bytecode (its offset) whose instructions hold code offset `offset`, in a
/// [`baseline_map`]: `None` in the function's entry or past the last bytecode's.
pub fn baseline_offset(map: &[(u64, u32)], offset: u64) -> Option<u64> {
    let &(_, bytecode) = map.get(map.partition_point(|&(end, _)| end <= offset))?;
    (bytecode != u32::MAX).then_some(u64::from(bytecode))
}

/// The code whose instructions hold `pc` (module docs), an error when none is found within
/// [`MAX_CODE_SEARCH`] bytes before it or what is found does not check out.
pub fn code_at(layout: &Layout, pc: u64, read: Read<'_>) -> Result<CompiledCode, V8Error> {
    let mut r = Reader { layout, read };
    let header = layout.istream_header;
    // Map words already looked at: whether each is an instruction stream's.
    let mut maps: Vec<(u64, bool)> = Vec::new();
    let mut chunk = vec![0u8; SEARCH_CHUNK as usize];
    // Candidates for the instructions' start, from the PC back, each checked in the chunk
    // read that holds its header's map word; one that does not check out (code whose bytes
    // look like a header) is passed over.
    let first = pc & !(CODE_ALIGNMENT - 1);
    let mut chunk_at = u64::MAX;
    let mut searched = 0;
    while searched <= MAX_CODE_SEARCH {
        let start = first.checked_sub(searched).ok_or(V8Error::NotCode)?;
        searched += CODE_ALIGNMENT;
        let object = start.checked_sub(header).ok_or(V8Error::NotCode)?;
        if !(chunk_at..chunk_at.saturating_add(SEARCH_CHUNK - 8)).contains(&object) {
            // The chunk ending with this word; where it cannot be read whole (it would
            // begin before the mapping), the word alone.
            chunk_at = (object + 8).saturating_sub(SEARCH_CHUNK);
            if !(r.read)(chunk_at, &mut chunk) {
                chunk_at = u64::MAX;
            }
        }
        let map = if chunk_at == u64::MAX {
            r.u64(object)?
        } else {
            let at = (object - chunk_at) as usize;
            u64::from_le_bytes(chunk[at..at + 8].try_into().expect("8 bytes"))
        };
        if map & 3 != 1 || map >> 48 != 0 {
            continue;
        }
        let is_istream = match maps.iter().find(|(m, _)| *m == map) {
            Some(&(_, known)) => known,
            None => {
                let mut kind = [0; 2];
                let known = (r.read)(map - 1 + layout.map_instance_type, &mut kind)
                    && u16::from_le_bytes(kind) == layout.istream_type;
                if maps.len() < 64 {
                    maps.push((map, known));
                }
                known
            }
        };
        if !is_istream {
            continue;
        }
        match compiled(&mut r, object + 1, start, pc) {
            // Bytes that look like a header, not one: further back.
            Err(V8Error::NotCode) => continue,
            // Code, but not holding the PC (which is past its instructions): none does.
            Ok(None) => return Err(V8Error::NotCode),
            other => return other.map(|c| c.expect("found")),
        }
    }
    Err(V8Error::NotCode)
}

/// The code of instruction stream `istream` (tagged) whose instructions start at `start`, if
/// they hold `pc` (`None`: they do not); `NotCode` when there is no such code.
fn compiled(r: &mut Reader<'_, '_>, istream: u64, start: u64, pc: u64) -> Result<Option<CompiledCode>, V8Error> {
    let l = r.layout;
    let c = l.code;
    let code = r.field(istream, c.istream_code)?;
    if r.kind(code)? != Some(l.code_type) || r.field(code, c.code_start)? != start {
        return Err(V8Error::NotCode);
    }
    let mut b = [0; 4];
    if !(r.read)(code - 1 + c.code_flags, &mut b) {
        return Err(V8Error::Unreadable);
    }
    let kind = u32::from_le_bytes(b) & l.kind_mask;
    if !(r.read)(code - 1 + c.code_size, &mut b) {
        return Err(V8Error::Unreadable);
    }
    let end = start + u64::from(u32::from_le_bytes(b));
    if pc >= end {
        return Ok(None);
    }
    let mut out = CompiledCode {
        code,
        start,
        end,
        baseline: kind == u32::from(l.kind_baseline),
        ..CompiledCode::default()
    };
    if out.baseline {
        // Its bytecode array, and the sizes of its bytecodes' instructions.
        if let Some(sizes) = &l.bytecode_sizes {
            let table = r.field(code, c.code_positions)?;
            let table = byte_array(r, table, MAX_TABLE)?;
            let bytecode = r.field(code, c.code_data)?;
            if r.kind(bytecode)? != Some(l.bytecode_array_type) {
                return Err(V8Error::NoBytecode);
            }
            let bytecodes = counted_bytes(r, bytecode, l.bytecode_data, MAX_TABLE)?;
            out.baseline_map = baseline_map(&table, &bytecodes, sizes);
        }
        return Ok(Some(out));
    }
    let table = r.field(code, c.code_positions)?;
    out.positions = decode_positions(&byte_array(r, table, MAX_TABLE)?)?;
    // The deoptimization data: the function's own shared info, the inlined ones, and where
    // each was called.
    let data = r.field(code, c.code_data)?;
    // (Past here the code is code: what does not check out is not passed over.)
    let element = |r: &mut Reader<'_, '_>, array: u64, i: u64| -> Result<u64, V8Error> {
        let length = r.field(array, 8)?;
        match r.smi(length) {
            Some(n) if (i as i64) < n => r.field(array, ARRAY_DATA + 8 * i),
            _ => Err(V8Error::NotShared),
        }
    };
    let mut shared = element(r, data, l.deopt_shared)?;
    if c.shared_wrapped {
        shared = r.field(shared, 8)?;
    }
    if r.kind(shared)? != Some(l.shared_type) {
        return Err(V8Error::NotShared);
    }
    out.shared = shared;
    let literals = element(r, data, l.deopt_literals)?;
    let inlining = element(r, data, l.deopt_inlining)?;
    let inlining = byte_array(r, inlining, MAX_INLINED * INLINING_POSITION)?;
    for entry in inlining.chunks_exact(INLINING_POSITION as usize) {
        let position = u64::from_le_bytes(entry[..8].try_into().expect("8 bytes"));
        let index = u32::from_le_bytes(entry[8..12].try_into().expect("4 bytes"));
        // A weak reference has its low two bits set.
        let function = element(r, literals, u64::from(index))? & !2;
        if r.kind(function)? != Some(l.shared_type) {
            return Err(V8Error::NotShared);
        }
        out.inlined.push((position, function));
    }
    Ok(Some(out))
}

/// The bytes of byte array `array` (a tagged pointer), at most `max` of them.
fn byte_array(r: &mut Reader<'_, '_>, array: u64, max: u64) -> Result<Vec<u8>, V8Error> {
    // (A table not made yet is `undefined`.)
    if r.kind(array)? != Some(r.layout.byte_array_type) {
        return Err(V8Error::Table);
    }
    counted_bytes(r, array, ARRAY_DATA, max)
}

/// The bytes of heap object `object` (a tagged pointer, checked by the caller) that keeps
/// their count as a Smi after its map and the bytes from byte `data` on, at most `max`.
fn counted_bytes(r: &mut Reader<'_, '_>, object: u64, data: u64, max: u64) -> Result<Vec<u8>, V8Error> {
    let length = r.field(object, 8)?;
    let length = r
        .smi(length)
        .and_then(|n| u64::try_from(n).ok())
        .filter(|&n| n <= max)
        .ok_or(V8Error::Table)?;
    let mut bytes = vec![0; length as usize];
    if !(r.read)(object.wrapping_sub(1).wrapping_add(data), &mut bytes) {
        return Err(V8Error::Unreadable);
    }
    Ok(bytes)
}

/// The source position table of the bytecode of the function whose shared info is `shared`:
/// its bytecode array's, or its baseline code's bytecode array's; and the function's data word
/// (its bytecode array, or its baseline code).
pub fn bytecode_positions(layout: &Layout, shared: u64, read: Read<'_>) -> Result<(Positions, u64), V8Error> {
    let mut r = Reader { layout, read };
    let c = layout.code;
    if r.kind(shared)? != Some(layout.shared_type) {
        return Err(V8Error::NotShared);
    }
    let function_data = r.field(shared, c.shared_function_data)?;
    let mut data = function_data;
    if r.kind(data)? == Some(layout.code_type) {
        data = r.field(data, c.code_data)?;
    }
    if r.kind(data)? != Some(layout.bytecode_array_type) {
        return Err(V8Error::NoBytecode);
    }
    let table = r.field(data, c.bytecode_positions)?;
    Ok((decode_positions(&byte_array(&mut r, table, MAX_TABLE)?)?, function_data))
}

/// Where an interpreted frame whose slot held `smi_value` is, as its function's position
/// table keys it, `None` when before the bytecodes. Measured on Node.js 20 and 24: the table
/// keys each bytecode one past its index from the first bytecode (its entries fall on the
/// bytecodes' boundaries plus one, the function's entry at 0), and a calling frame's slot
/// holds that key plus the array's header less two (so read, each calling frame lands on its
/// call's own entry; one more or one less would be the entry before or none).
pub fn bytecode_offset(layout: &Layout, smi_value: u64) -> Option<u64> {
    smi_value.checked_sub(layout.bytecode_data.checked_sub(2)?)
}

/// Where each line of script `script`'s source starts (character offsets; the first line at
/// 0), then the source's length: `None` when its source is not a flat one-byte string of at
/// most [`super::read::MAX_SOURCE`] characters (lines of others are not known).
pub fn line_starts(layout: &Layout, script: u64, read: Read<'_>) -> Result<Option<Vec<u32>>, V8Error> {
    let mut r = Reader { layout, read };
    if r.kind(script)? != Some(layout.script_type) {
        return Ok(None);
    }
    let source = r.field(script, layout.script_source)?;
    let Some(bytes) = r.flat_source(source)? else {
        return Ok(None);
    };
    let newlines = bytes.iter().enumerate().filter(|&(_, &b)| b == b'\n');
    let starts = std::iter::once(0).chain(newlines.map(|(i, _)| i as u32 + 1));
    Ok(Some(starts.chain([bytes.len() as u32]).collect()))
}

/// The line (1-based) of character `offset` in a script whose lines start at `lines` (as
/// [`line_starts`] gives them: the source's length last), `None` past its end.
pub fn line_of(lines: &[u32], offset: u64) -> Option<u32> {
    let (&length, starts) = lines.split_last()?;
    if offset >= u64::from(length) {
        return None;
    }
    u32::try_from(starts.partition_point(|&s| u64::from(s) <= offset)).ok()
}

#[cfg(test)]
mod tests;
