//! A reader of Go's `.gopclntab`, the table its runtime names and walks its own code with, and
//! which stays in a binary stripped of its symbols and DWARF (`-ldflags=-s -w`). Pure: bytes in
//! (through [`Bytes`], a slice or a file read on demand), functions, files and lines out; no
//! ELF parsing here, no I/O of its own.
//!
//! Formats (Go's `runtime/symtab.go` and `debug/gosym/pclntab.go`): a header
//! (magic `0xfffffffa` for Go 1.16-1.17, `0xfffffff0` for 1.18-1.19, `0xfffffff1` for 1.20 on)
//! giving the function count and the offsets of five sub-tables: function names, the per
//! compilation unit file index (`cutab`), file names, pc-value tables, and the function table
//! (`functab`: sorted `(entry, _func offset)` pairs, absolute addresses before 1.18, offsets from
//! `textStart` after, closed by the end of the last function). A lookup:
//!
//! 1. binary search of `functab` for the last entry at or below the address, which must be
//!    below the next entry;
//! 2. the `_func` record it points at: name offset, the `pcfile` and `pcln` pc-value tables, its
//!    compilation unit;
//! 3. each pc-value table decoded from the function's entry (zig-zag value deltas, pc deltas
//!    in units of the instruction quantum) to the address.
//!
//! Every offset is checked against the table's size before it is read, every loop is bounded
//! (binary search by the count, pc-value decoding by [`MAX_PCVALUE_STEPS`] and by the function's
//! end), names by [`crate::names::MAX_NAME_BYTES`]: a hostile table gives an error or no name,
//! never a panic, a hang or a read out of it.

use std::ops::Range;

use cursor::{Cursor, Runs};

/// Pc-value steps decoded at most for one lookup (a function of 64 KiB of code has fewer).
pub const MAX_PCVALUE_STEPS: usize = 1 << 16;
/// The largest table read (the largest Go programs in use have tables of a few tens of MiB).
pub const MAX_TABLE_SIZE: u64 = 1 << 30;

/// Where a table's bytes come from: a slice, or a file section read on demand.
pub trait Bytes {
    /// Fill `buf` from offset `at` of the table; `false` when that is past its end or unreadable.
    fn read_at(&self, at: u64, buf: &mut [u8]) -> bool;
}

impl Bytes for [u8] {
    fn read_at(&self, at: u64, buf: &mut [u8]) -> bool {
        let Ok(at) = usize::try_from(at) else { return false };
        match at.checked_add(buf.len()).and_then(|end| self.get(at..end)) {
            Some(src) => {
                buf.copy_from_slice(src);
                true
            }
            None => false,
        }
    }
}

/// Why a table was not read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum GoTableError {
    #[error("not a Go 1.16+ pclntab (magic {magic:#x})")]
    Magic { magic: u32 },
    #[error("malformed pclntab header: {what}")]
    Header { what: &'static str },
    #[error("pclntab of {size} bytes, more than the {cap}-byte limit")]
    TooLarge { size: u64, cap: u64 },
}

/// The layout of a table, by Go release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// Go 1.16 and 1.17: absolute entries, pointer-sized `functab` fields.
    Go116,
    /// Go 1.18 and 1.19: entries as 32-bit offsets from `textStart`.
    Go118,
    /// Go 1.20 on: as 1.18, with `startLine` in `_func`.
    Go120,
}

/// A parsed header: where each sub-table is, as offsets in the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub version: Version,
    size: u64,
    little: bool,
    quantum: u8,
    ptr: u8,
    nfunc: u64,
    /// What function entries are offsets from (1.18 on).
    text_start: u64,
    funcnames: u64,
    cutab: u64,
    filetab: u64,
    pctab: u64,
    /// `pclntab`: the function table, then the `_func` records its offsets point at.
    pcln: u64,
}

/// The function holding an address, and where in its source the address is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// Its name as Go's runtime gives it (`main.work`, `runtime.goexit`).
    pub function: String,
    /// The address range of the function.
    pub range: Range<u64>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// One function's frame as Go's runtime unwinds it (see [`Table::frame`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub range: Range<u64>,
    pub sp_deltas: Vec<(u64, i32)>,
    /// Go's runtime ends its own tracebacks here (`TOPFRAME`: `runtime.goexit`,
    /// `runtime.mstart`, `runtime.rt0_go`, `runtime.sigtramp`): nothing above it is a frame.
    pub top: bool,
    /// It writes SP in ways its deltas do not say (`SPWRITE`: a switch to another stack, as
    /// in `runtime.mcall`, `runtime.systemstack`, `time.now`): Go's runtime unwinds it only as
    /// the innermost frame.
    pub sp_write: bool,
}

/// `abi.FuncFlagTopFrame` and `abi.FuncFlagSPWrite` (Go 1.17 on, unchanged since).
const FUNC_FLAG_TOP_FRAME: u64 = 1;
const FUNC_FLAG_SP_WRITE: u64 = 2;

/// One `_func` record, as much of it as naming and unwinding need.
struct Func {
    /// Where its `flag` byte is.
    flag_at: u64,
    range: Range<u64>,
    name_off: u32,
    pcsp: u32,
    pcfile: u32,
    pcln: u32,
    cu: u32,
    /// How many pc-value tables (`pcdata`) and funcdata slots follow the record, and where
    /// the first follows it.
    npcdata: u32,
    nfuncdata: u8,
    tail: u64,
}

impl Table {
    /// The header of the `size`-byte table in `bytes`.
    pub fn parse<B: Bytes + ?Sized>(bytes: &B, size: u64) -> Result<Table, GoTableError> {
        if size > MAX_TABLE_SIZE {
            return Err(GoTableError::TooLarge {
                size,
                cap: MAX_TABLE_SIZE,
            });
        }
        let mut head = [0u8; 8];
        if size < 8 || !bytes.read_at(0, &mut head) {
            return Err(GoTableError::Header {
                what: "shorter than its header",
            });
        }
        let le = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let be = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let (little, version) = match (version_of(le), version_of(be)) {
            (Some(v), _) => (true, v),
            (None, Some(v)) => (false, v),
            (None, None) => return Err(GoTableError::Magic { magic: le }),
        };
        let (quantum, ptr) = (head[6], head[7]);
        if head[4] != 0 || head[5] != 0 || ![1, 2, 4].contains(&quantum) || ![4, 8].contains(&ptr) {
            return Err(GoTableError::Header {
                what: "quantum or pointer size",
            });
        }
        let mut table = Table {
            version,
            size,
            little,
            quantum,
            ptr,
            nfunc: 0,
            text_start: 0,
            funcnames: 0,
            cutab: 0,
            filetab: 0,
            pctab: 0,
            pcln: 0,
        };
        // The header's words, read before the table's fields are known.
        let probe = table.clone();
        let word = |i: u64| {
            probe
                .uint(bytes, 8 + i * u64::from(ptr), ptr)
                .ok_or(GoTableError::Header { what: "truncated" })
        };
        table.nfunc = word(0)?;
        let mut next = 2;
        if version != Version::Go116 {
            table.text_start = word(2)?;
            next = 3;
        }
        let offset = |i: u64| -> Result<u64, GoTableError> {
            let at = word(i)?;
            (at < size).then_some(at).ok_or(GoTableError::Header {
                what: "offset past the end",
            })
        };
        table.funcnames = offset(next)?;
        table.cutab = offset(next + 1)?;
        table.filetab = offset(next + 2)?;
        table.pctab = offset(next + 3)?;
        table.pcln = offset(next + 4)?;
        // The function table, its closing entry included, lies within the table.
        let ftab = (table.nfunc.checked_mul(2).and_then(|n| n.checked_add(1)))
            .and_then(|n| n.checked_mul(table.field()))
            .and_then(|len| len.checked_add(table.pcln));
        if table.nfunc == 0 || ftab.is_none_or(|end| end > size) {
            return Err(GoTableError::Header { what: "function table" });
        }
        Ok(table)
    }

    /// The table's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// What function entries are offsets from (1.18 on; the header's until relocated).
    pub fn text_start(&self) -> u64 {
        self.text_start
    }

    /// Take function entries to be offsets from `text_start` (1.18 on), in place of the
    /// header's own, which a position-independent binary leaves to a relocation.
    pub fn relocate(&mut self, text_start: u64) {
        self.text_start = text_start;
    }

    /// The addresses its functions cover: the first function's entry to the last one's end.
    pub fn text<B: Bytes + ?Sized>(&self, bytes: &B) -> Option<Range<u64>> {
        let start = self.entry(bytes, 0)?;
        let end = self.entry(bytes, self.nfunc)?;
        (start < end).then_some(start..end)
    }

    /// The function holding `pc`, with the file and line of `pc` when its tables give them.
    pub fn locate<B: Bytes + ?Sized>(&self, bytes: &B, pc: u64) -> Option<Location> {
        let func = self.func(bytes, pc)?;
        let function = self.string(bytes, self.funcnames.checked_add(u64::from(func.name_off))?)?;
        let (file, line) = self.position(bytes, &func, pc);
        Some(Location {
            function,
            range: func.range,
            file,
            line,
        })
    }

    /// How many functions the table lists.
    pub fn functions(&self) -> u64 {
        self.nfunc
    }

    /// Function `i`'s address range, its stack-pointer deltas (`pcsp`: bytes the function
    /// has pushed since its entry, the return address not counted) as runs `(start, delta)`,
    /// ascending, the first at the entry, and whether it is a top frame; at most `budget` steps
    /// decoded, taken off it. `None` when the record or its table cannot be read, or the
    /// budget runs out.
    pub fn frame<B: Bytes + ?Sized>(&self, bytes: &B, i: u64, budget: &mut usize) -> Option<Frame> {
        if i >= self.nfunc {
            return None;
        }
        let func = self.func_at(bytes, i)?;
        if func.range.start >= func.range.end || func.pcsp == 0 {
            return None;
        }
        let cursor = Cursor::new(bytes, self.pctab.checked_add(u64::from(func.pcsp))?, self.size);
        let mut steps = Runs::new(cursor, func.range.start, func.range.end, self.quantum);
        let runs: Vec<(u64, i32)> = steps.by_ref().take(*budget).map(|(start, _, d)| (start, d)).collect();
        *budget = budget.checked_sub(steps.steps).filter(|&left| left > 0)?;
        if steps.failed {
            return None;
        }
        let flag = self.uint(bytes, func.flag_at, 1).unwrap_or(0);
        Some(Frame {
            range: func.range,
            sp_deltas: runs,
            top: flag & FUNC_FLAG_TOP_FRAME != 0,
            sp_write: flag & FUNC_FLAG_SP_WRITE != 0,
        })
    }

    /// Bytes of one `functab` field.
    fn field(&self) -> u64 {
        match self.version {
            Version::Go116 => u64::from(self.ptr),
            Version::Go118 | Version::Go120 => 4,
        }
    }

    /// Entry address of function `i` (`i == nfunc`: the end of the last one).
    fn entry<B: Bytes + ?Sized>(&self, bytes: &B, i: u64) -> Option<u64> {
        let at = self.pcln.checked_add(i.checked_mul(2 * self.field())?)?;
        let raw = self.uint(bytes, at, u8::try_from(self.field()).ok()?)?;
        match self.version {
            Version::Go116 => Some(raw),
            Version::Go118 | Version::Go120 => self.text_start.checked_add(raw),
        }
    }

    /// Step 1 and 2 of the lookup (module docs).
    fn func<B: Bytes + ?Sized>(&self, bytes: &B, pc: u64) -> Option<Func> {
        // The last entry at or below `pc`: entries are sorted in a well-formed table; in a
        // hostile one the search still ends (by the count) and the range check below holds.
        let (mut lo, mut hi) = (0u64, self.nfunc);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.entry(bytes, mid)? <= pc {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let func = self.func_at(bytes, lo.checked_sub(1)?)?;
        func.range.contains(&pc).then_some(func)
    }

    /// Function `i` of the function table.
    fn func_at<B: Bytes + ?Sized>(&self, bytes: &B, i: u64) -> Option<Func> {
        let range = self.entry(bytes, i)?..self.entry(bytes, i.checked_add(1)?)?;
        let field = self.field();
        // Hostile offsets and counts: every sum checked (regression: found by fuzzing, an add
        // overflow here).
        let slot = i.checked_mul(2 * field)?.checked_add(field)?;
        let funcoff = self.uint(bytes, self.pcln.checked_add(slot)?, u8::try_from(field).ok()?)?;
        let func = self.pcln.checked_add(funcoff)?;
        // `_func`: the entry (pointer-sized before 1.18, a 32-bit offset after), then 32-bit
        // fields: name, args, deferreturn, pcsp, pcfile, pcln, npcdata, cuOffset.
        let fields = func.checked_add(match self.version {
            Version::Go116 => u64::from(self.ptr),
            Version::Go118 | Version::Go120 => 4,
        })?;
        let u32_at = |i: u64| self.uint(bytes, fields.checked_add(4 * i)?, 4).map(|v| v as u32);
        // After the eight 32-bit fields (and 1.20's `startLine`): `funcID`, then `flag` (1.17
        // on; a zero pad byte in 1.16).
        let flag_at = fields.checked_add(4 * 8 + if self.version == Version::Go120 { 4 } else { 0 } + 1)?;
        // Then a pad byte and `nfuncdata`; the `pcdata` offsets follow.
        let nfuncdata = self.uint(bytes, flag_at.checked_add(2)?, 1)? as u8;
        Some(Func {
            flag_at,
            npcdata: u32_at(6)?,
            nfuncdata,
            tail: flag_at.checked_add(3)?,
            range,
            name_off: u32_at(0)?,
            pcsp: u32_at(3)?,
            pcfile: u32_at(4)?,
            pcln: u32_at(5)?,
            cu: u32_at(7)?,
        })
    }

    /// Step 3: the value pc-value table `table` (an offset in `pctab`; 0: none) of the function
    /// over `range` gives `pc`.
    fn pcvalue<B: Bytes + ?Sized>(&self, bytes: &B, table: u32, range: &Range<u64>, pc: u64) -> Option<i32> {
        if table == 0 {
            return None;
        }
        let cursor = Cursor::new(bytes, self.pctab.checked_add(u64::from(table))?, self.size);
        Runs::new(cursor, range.start, range.end, self.quantum)
            .find(|&(_, end, _)| pc < end)
            .map(|(_, _, value)| value)
    }

    /// The name of file `index` of compilation unit `cu`.
    fn file<B: Bytes + ?Sized>(&self, bytes: &B, cu: u32, index: i32) -> Option<String> {
        let slot = u64::from(cu).checked_add(u64::try_from(index).ok()?)?;
        let off = self.uint(bytes, self.cutab.checked_add(slot.checked_mul(4)?)?, 4)?;
        // `u32::MAX` marks a file the unit does not use.
        if off == u64::from(u32::MAX) {
            return None;
        }
        self.string(bytes, self.filetab.checked_add(off)?)
    }

    /// The NUL-terminated string at `at`, at most [`crate::names::MAX_NAME_BYTES`] of it read
    /// (a longer one is cut and marked so), `None` if empty or out of the table.
    fn string<B: Bytes + ?Sized>(&self, bytes: &B, at: u64) -> Option<String> {
        let mut cursor = Cursor::new(bytes, at, self.size);
        let mut text = Vec::new();
        while text.len() <= crate::names::MAX_NAME_BYTES {
            match cursor.byte() {
                Some(0) | None => break,
                Some(b) => text.push(b),
            }
        }
        (!text.is_empty()).then(|| crate::names::capped_lossy(&text))
    }

    /// The `width`-byte unsigned integer at `at`, in the table's byte order.
    fn uint<B: Bytes + ?Sized>(&self, bytes: &B, at: u64, width: u8) -> Option<u64> {
        let mut buf = [0u8; 8];
        let buf = &mut buf[..usize::from(width).min(8)];
        if at.checked_add(buf.len() as u64)? > self.size || !bytes.read_at(at, buf) {
            return None;
        }
        if self.little {
            buf.reverse();
        }
        Some(buf.iter().fold(0u64, |value, &b| value << 8 | u64::from(b)))
    }
}

/// The version a header's magic (read in one byte order) names.
fn version_of(magic: u32) -> Option<Version> {
    match magic {
        0xffff_fffa => Some(Version::Go116),
        0xffff_fff0 => Some(Version::Go118),
        0xffff_fff1 => Some(Version::Go120),
        _ => None,
    }
}

mod cursor;
mod elf;
mod inline;
mod module;
#[cfg(test)]
mod tests;

pub use elf::{Loaded, Part, Section};
pub use inline::{Call, MAX_INLINE_DEPTH};
