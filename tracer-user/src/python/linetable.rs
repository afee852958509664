//! CPython's line tables: which source line an instruction offset of a code object is on.
//! [`line_of`] reads 3.11+'s location table, [`line_of_310`] 3.10's `co_linetable`,
//! [`line_of_lnotab`] the `co_lnotab` of 3.6 to 3.9 ([`line_in`] picks by [`CodeFormat`]).
//!
//! 3.11+ (`co_linetable`, described in the interpreter's `Objects/locations.md`):
//! The table is a run of entries, each covering `1..=8` code units (two bytes each) from where
//! the one before it ended. An entry's first byte has bit 7 set, the kind in bits 3-6 and the
//! units minus one in bits 0-2; kinds 0-9 are on the line of the entry before, 10-12 one to
//! two lines past it (two column bytes follow), 13 carries a signed line delta (no columns),
//! 14 a signed line delta and three more numbers (end line, columns), 15 no location. Numbers
//! are varints of 6-bit groups, low group first, bit 6 meaning "more"; a signed one keeps its
//! sign in bit 0. Lines start at `co_firstlineno`.

use super::layout::CodeFormat;

/// The line of the instruction `offset` bytes into the code (its code units start at 0), in
/// a code object whose first line is `first_line`; `None` where the table gives no location,
/// or does not reach `offset`, or is malformed. A negative offset (a frame that has not run
/// its first instruction yet, 3.11/3.12 `prev_instr` before the code) is on `first_line`.
pub fn line_of(table: &[u8], first_line: i32, offset: i64) -> Option<i32> {
    if offset < 0 {
        return Some(first_line);
    }
    let offset = offset as u64;
    let mut line = i64::from(first_line);
    let mut start = 0u64;
    let mut at = 0usize;
    while at < table.len() {
        let head = table[at];
        if head & 0x80 == 0 {
            return None;
        }
        at += 1;
        let kind = (head >> 3) & 15;
        let end = start + 2 * (u64::from(head & 7) + 1);
        let delta = match kind {
            15 => 0,
            14 => {
                let delta = signed(table, &mut at)?;
                for _ in 0..3 {
                    varint(table, &mut at)?;
                }
                delta
            }
            13 => signed(table, &mut at)?,
            10..=12 => {
                at += 2;
                i64::from(kind - 10)
            }
            _ => {
                at += 1;
                0
            }
        };
        line += delta;
        if offset < end {
            return if kind == 15 { None } else { i32::try_from(line).ok() };
        }
        start = end;
    }
    None
}

/// An unsigned varint at `*at`, advancing past it; `None` when the table ends inside it or
/// it does not fit 64 bits.
fn varint(table: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    let mut shift = 0u32;
    loop {
        let byte = *table.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 63).checked_shl(shift)?;
        if byte & 64 == 0 {
            return Some(value);
        }
        shift += 6;
        if shift >= 64 {
            return None;
        }
    }
}

/// The line of the instruction `offset` bytes into the code, by the table of `format`.
pub fn line_in(format: CodeFormat, table: &[u8], first_line: i32, offset: i64) -> Option<i32> {
    match format {
        CodeFormat::Locations => line_of(table, first_line, offset),
        CodeFormat::Linetable310 => line_of_310(table, first_line, offset),
        CodeFormat::Lnotab => line_of_lnotab(table, first_line, offset),
    }
}

/// 3.10's `co_linetable` (its `Objects/lnotab_notes.txt`): pairs of an unsigned byte count
/// and a signed line delta, -128 meaning no line; each pair covers the bytes from where the
/// one before it ended, on the line the deltas so far add up to. `None` past the table's end
/// or where it gives no line; a negative offset (a frame not started) is on `first_line`, as
/// the interpreter's `PyCode_Addr2Line` says.
pub fn line_of_310(table: &[u8], first_line: i32, offset: i64) -> Option<i32> {
    if offset < 0 {
        return Some(first_line);
    }
    let (mut line, mut end) = (i64::from(first_line), 0i64);
    for pair in table.chunks_exact(2) {
        end += i64::from(pair[0]);
        let delta = pair[1] as i8;
        let here = (delta != i8::MIN).then(|| {
            line += i64::from(delta);
            line
        });
        if offset < end {
            return here.and_then(|l| i32::try_from(l).ok());
        }
    }
    None
}

/// 3.6-3.9's `co_lnotab`: pairs of an unsigned byte increment and a signed line increment;
/// the line of `offset` is `first_line` plus the line increments of the pairs whose bytes add
/// up to at most `offset` (`PyCode_Addr2Line`; past the table, its last line).
pub fn line_of_lnotab(table: &[u8], first_line: i32, offset: i64) -> Option<i32> {
    let (mut line, mut addr) = (i64::from(first_line), 0i64);
    for pair in table.chunks_exact(2) {
        addr += i64::from(pair[0]);
        if addr > offset {
            break;
        }
        line += i64::from(pair[1] as i8);
    }
    i32::try_from(line).ok()
}

/// A signed varint (sign in bit 0).
fn signed(table: &[u8], at: &mut usize) -> Option<i64> {
    let v = varint(table, at)?;
    let magnitude = (v >> 1) as i64;
    Some(if v & 1 != 0 { -magnitude } else { magnitude })
}
