//! Go's inline tree: the functions the compiler inlined at an address, named as Go's runtime
//! names them in its own tracebacks (`runtime.CallersFrames`), for Go 1.18 on.
//!
//! A function with inlined calls has a pc-value table (`pcdata[PCDATA_InlTreeIndex]`) giving,
//! at each address, the index of the innermost inlined call there in its inline tree (negative:
//! none), and a funcdata slot (`FUNCDATA_InlTree`) giving where that tree lies, as an offset
//! from `go:func.*` (the module's `gofunc`, see [`super::module`]). Each tree entry names the
//! inlined function and gives `parentPc`, an address of the caller (as an offset from the
//! physical function's entry) whose position is the call site: the next frame out is looked up
//! there, the same way, until the index is negative and the physical function is reached. The
//! innermost frame's file and line are the table's at the address, each caller's at its
//! `parentPc`.
//!
//! Entries are read through a second [`Bytes`], the object's image by virtual address (the
//! trees lie in `.rodata`, outside the table). Hostile input: every read is bounded by its
//! source, every `parentPc` must lie in the physical function, and the chain is cut at
//! [`MAX_INLINE_DEPTH`]. When any step fails, the inlined frames are dropped and the physical
//! function alone is given, never a partial chain.

use super::{Bytes, Func, Table, Version};

/// Inlined frames at one address at most (Go's compiler inlines a few levels deep).
pub const MAX_INLINE_DEPTH: usize = 32;
/// `abi.PCDATA_InlTreeIndex` and `abi.FUNCDATA_InlTree` (unchanged since Go 1.12).
const PCDATA_INL_TREE_INDEX: u32 = 2;
const FUNCDATA_INL_TREE: u32 = 3;

/// One function at an address: an inlined call, or the physical function holding them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub inlined: bool,
}

impl Table {
    /// The functions at `pc`, innermost first: the inlined calls, then the physical function
    /// (the last, `inlined: false`). `image` reads the object by virtual address; `gofunc` is
    /// the module's `go:func.*` address (`None`: the physical function alone). `None` when no
    /// function holds `pc`.
    pub fn calls<B: Bytes + ?Sized, I: Bytes + ?Sized>(
        &self,
        bytes: &B,
        image: &I,
        gofunc: Option<u64>,
        pc: u64,
    ) -> Option<Vec<Call>> {
        let func = self.func(bytes, pc)?;
        let name = self.string(bytes, self.funcnames.checked_add(u64::from(func.name_off))?)?;
        let (mut calls, at) = gofunc
            .and_then(|base| self.inlined(bytes, image, base, &func, pc))
            .unwrap_or((Vec::new(), pc));
        let (file, line) = self.position(bytes, &func, at);
        calls.push(Call {
            function: name,
            file,
            line,
            inlined: false,
        });
        Some(calls)
    }

    /// The inlined calls at `pc` in `func`, innermost first, and the address in the physical
    /// function where the outermost was called; `None` on any failed step.
    fn inlined<B: Bytes + ?Sized, I: Bytes + ?Sized>(
        &self,
        bytes: &B,
        image: &I,
        gofunc: u64,
        func: &Func,
        pc: u64,
    ) -> Option<(Vec<Call>, u64)> {
        // 1.16 and 1.17 keep funcdata as pointers, with another entry layout: not read.
        let entry_size: u64 = match self.version {
            Version::Go116 => return None,
            Version::Go118 => 20,
            Version::Go120 => 16,
        };
        let indexes = self.pcdata(bytes, func, PCDATA_INL_TREE_INDEX)?;
        let tree = gofunc.checked_add(u64::from(self.funcdata(bytes, func, FUNCDATA_INL_TREE)?))?;
        let mut calls = Vec::new();
        let mut at = pc;
        loop {
            let index = self.pcvalue(bytes, indexes, &func.range, at)?;
            let Ok(index) = u64::try_from(index) else {
                return Some((calls, at));
            };
            if calls.len() == MAX_INLINE_DEPTH {
                return None;
            }
            let mut entry = [0u8; 20];
            let entry = &mut entry[..entry_size as usize];
            if !image.read_at(tree.checked_add(index.checked_mul(entry_size)?)?, entry) {
                return None;
            }
            // 1.18-1.19: parent i16, funcID, pad, file i32, line i32, func_ i32, parentPc i32;
            // 1.20 on: funcID, 3 pad bytes, nameOff i32, parentPc i32, startLine i32.
            let (name_at, parent_at) = if entry_size == 20 { (12, 16) } else { (4, 8) };
            let name_off = self.u32_of(&entry[name_at..name_at + 4]);
            let parent_pc = self.u32_of(&entry[parent_at..parent_at + 4]);
            let function = self.string(bytes, self.funcnames.checked_add(u64::from(name_off))?)?;
            let (file, line) = self.position(bytes, func, at);
            calls.push(Call {
                function,
                file,
                line,
                inlined: true,
            });
            at = func.range.start.checked_add(u64::from(parent_pc))?;
            if !func.range.contains(&at) {
                return None;
            }
        }
    }

    /// The file and line the tables give `pc` in `func`.
    pub(super) fn position<B: Bytes + ?Sized>(&self, bytes: &B, func: &Func, pc: u64) -> (Option<String>, Option<u32>) {
        let file = self
            .pcvalue(bytes, func.pcfile, &func.range, pc)
            .and_then(|index| self.file(bytes, func.cu, index));
        let line = self
            .pcvalue(bytes, func.pcln, &func.range, pc)
            .and_then(|line| u32::try_from(line).ok())
            .filter(|&line| line > 0);
        (file, line)
    }

    /// The offset in `pctab` of `func`'s pc-value table `index` (`None`: it has none).
    fn pcdata<B: Bytes + ?Sized>(&self, bytes: &B, func: &Func, index: u32) -> Option<u32> {
        if index >= func.npcdata {
            return None;
        }
        let at = func.tail.checked_add(4 * u64::from(index))?;
        let table = self.uint(bytes, at, 4)? as u32;
        (table != 0).then_some(table)
    }

    /// `func`'s funcdata slot `index` (1.18 on: an offset from `gofunc`; `None`: none).
    fn funcdata<B: Bytes + ?Sized>(&self, bytes: &B, func: &Func, index: u32) -> Option<u32> {
        if index >= u32::from(func.nfuncdata) {
            return None;
        }
        let at = func
            .tail
            .checked_add(4 * u64::from(func.npcdata))?
            .checked_add(4 * u64::from(index))?;
        let offset = self.uint(bytes, at, 4)? as u32;
        (offset != u32::MAX).then_some(offset)
    }

    /// A 32-bit field of a tree entry, in the table's byte order.
    fn u32_of(&self, field: &[u8]) -> u32 {
        let field: [u8; 4] = [field[0], field[1], field[2], field[3]];
        if self.little {
            u32::from_le_bytes(field)
        } else {
            u32::from_be_bytes(field)
        }
    }
}
