//! Alignment padding between functions: the rule before such a gap runs on through it instead of
//! a `NO_INFO` row there and a new row after it, which saves two of the 4-byte rows per function
//! (the padding's and, when the next function starts with the same rule, its start).
//!
//! Why that is safe: the walker looks a caller up at `RA - 1`, which is inside the calling
//! instruction, so only a sampled frame-0 PC can ever be looked up inside padding, and padding
//! is never executed: the function before it ends with a `ret` or a jump, and nothing jumps into
//! it. Extending the previous rule over it therefore changes nothing a real walk sees. A gap
//! holding anything else (a small hand-written stub without unwind information, a `ret`, data)
//! keeps its `NO_INFO`, so frames in code without unwind information are never invented.
//!
//! A gap is filled only when all of these hold:
//! 1. No function of any source (SFrame functions, FDEs) covers any of its bytes, one ends where
//!    it starts and one starts where it ends ([`Flat::covered`], merged over the sources).
//! 2. It is at most [`MAX_PADDING`] bytes: alignment padding is shorter than the largest
//!    alignment compilers ask for between functions.
//! 3. The object is an executable or shared object (in a `.o` every text section starts at 0)
//!    of x86-64 or aarch64, and the gap lies inside the file part of one executable `PT_LOAD`
//!    segment; its bytes are read from there.
//! 4. Its bytes are nothing but padding instructions, decoded from the gap's start to its end
//!    ([`is_padding`]).
//! 5. The flat list has `NO_INFO` exactly from its start to its end, after a row of another
//!    rule (there is something to extend).

use object::{Architecture, Object as _, ObjectKind, ObjectSegment as _, SegmentFlags, elf};
use tracer_common::unwind::UnwindRule;

use super::transitions::Flat;
use crate::cfi::Arch;

/// Longest gap filled, in bytes.
pub(crate) const MAX_PADDING: u64 = 64;
/// The x86-64 limit on the length of one instruction (longer ones fault).
const X86_MAX_INSN: usize = 15;
/// aarch64 `nop` (`hint #0`), as the little-endian word every aarch64 instruction is stored as.
const AARCH64_NOP: [u8; 4] = 0xd503_201f_u32.to_le_bytes();
/// aarch64 `udf #0`: the zero fill lld and ld leave between sections; it traps if executed.
const AARCH64_UDF0: [u8; 4] = [0; 4];

/// The executable bytes of an object, by virtual address.
pub(crate) struct Code<'a> {
    arch: Arch,
    /// `(p_vaddr, bytes in the file)` of each executable `PT_LOAD` segment.
    segments: Vec<(u64, &'a [u8])>,
}

impl<'a> Code<'a> {
    /// Step 3: `None` for anything but an x86-64 or aarch64 executable or shared object, or a
    /// file the `object` crate cannot read.
    pub(crate) fn of(file: &'a [u8]) -> Option<Code<'a>> {
        let obj = object::File::parse(file).ok()?;
        let arch = match obj.architecture() {
            Architecture::X86_64 => Arch::X86_64,
            Architecture::Aarch64 => Arch::Aarch64,
            _ => return None,
        };
        if !matches!(obj.kind(), ObjectKind::Executable | ObjectKind::Dynamic) {
            return None;
        }
        let segments = obj
            .segments()
            .filter(|s| matches!(s.flags(), SegmentFlags::Elf { p_type, p_flags } if p_type == elf::PT_LOAD && p_flags.0 & elf::PF_X.0 != 0))
            .filter_map(|s| Some((s.address(), s.data().ok()?)))
            .collect();
        Some(Code { arch, segments })
    }

    /// The bytes of `[start, end)`, when one executable segment's file part holds all of them.
    pub(crate) fn bytes(&self, start: u64, end: u64) -> Option<&'a [u8]> {
        self.segments.iter().find_map(|&(base, data)| {
            let from = usize::try_from(start.checked_sub(base)?).ok()?;
            let to = usize::try_from(end.checked_sub(base)?).ok()?;
            data.get(from..to)
        })
    }

    /// Steps 2-4 for the gap `[start, end)`.
    pub(crate) fn is_padding_gap(&self, start: u64, end: u64) -> bool {
        start < end
            && end - start <= MAX_PADDING
            && self
                .bytes(start, end)
                .is_some_and(|bytes| is_padding(self.arch, start, bytes))
    }
}

/// Step 4: `bytes`, loaded at `addr`, are padding instructions of `arch` and nothing else:
/// - x86-64: `nop` (`90`), `xchg %ax,%ax` (`66 90`, any number of `66`), `nopw/nopl`
///   (`0f 1f /0` with any ModRM, SIB and displacement, any number of `66` and at most one `2e`
///   prefix, 15 bytes at most), and `int3` (`cc`, lld's fill). Zero bytes are not padding
///   there: `00 00` is `add %al,(%rax)`, and neither gas nor the linkers fill code with it.
/// - aarch64: aligned `nop` and `udf #0` (zero) words.
/// - any other architecture: never.
pub(crate) fn is_padding(arch: Arch, addr: u64, bytes: &[u8]) -> bool {
    match arch {
        Arch::X86_64 => {
            let mut rest = bytes;
            while !rest.is_empty() {
                match x86_padding_len(rest) {
                    Some(n) => rest = &rest[n..],
                    None => return false,
                }
            }
            true
        }
        Arch::Aarch64 => {
            addr.is_multiple_of(4)
                && bytes.len().is_multiple_of(4)
                && bytes
                    .chunks_exact(4)
                    .all(|word| word == AARCH64_NOP || word == AARCH64_UDF0)
        }
        Arch::S390x => false,
    }
}

/// Length of the x86-64 padding instruction `code` starts with, `None` if it starts with
/// anything else or is cut short.
fn x86_padding_len(code: &[u8]) -> Option<usize> {
    if code.first() == Some(&0xcc) {
        return Some(1);
    }
    let (mut at, mut cs) = (0, false);
    loop {
        match *code.get(at)? {
            0x66 => {}
            0x2e if !cs => cs = true,
            _ => break,
        }
        at += 1;
    }
    let len = match *code.get(at)? {
        0x90 if !cs => at + 1,
        0x0f if code.get(at + 1) == Some(&0x1f) => at + 3 + modrm_operand_len(*code.get(at + 2)?, code.get(at + 3))?,
        _ => return None,
    };
    (len <= X86_MAX_INSN && len <= code.len()).then_some(len)
}

/// Bytes after a `0f 1f` ModRM byte (SIB and displacement); `None` unless its reg field is 0
/// (`/0`, the NOP) or when the SIB byte it needs is missing.
fn modrm_operand_len(modrm: u8, sib: Option<&u8>) -> Option<usize> {
    if (modrm >> 3) & 7 != 0 {
        return None;
    }
    let (mode, rm) = (modrm >> 6, modrm & 7);
    Some(match (mode, rm) {
        (3, _) => 0,
        (0, 4) if sib? & 7 == 5 => 1 + 4,
        (0, 4) => 1,
        (0, 5) => 4,
        (0, _) => 0,
        (1, 4) => 1 + 1,
        (1, _) => 1,
        (_, 4) => 1 + 4,
        _ => 4,
    })
}

/// Steps 1 and 5 over a whole flat list (its `covered` runs merged over every source): drop
/// the `NO_INFO` transition of each accepted gap, and the transition after it when it repeats
/// the rule before the gap. Returns how many gaps were filled.
pub(crate) fn fill(flat: &mut Flat, code: &Code<'_>) -> u64 {
    let t = &flat.transitions;
    let mut drop = vec![false; t.len()];
    let (mut filled, mut i) = (0, 0);
    for gap in flat.covered.windows(2) {
        let (start, end) = (gap[0].1, gap[1].0);
        // Gaps and transitions are both ascending: one forward walk, no search per gap.
        while t.get(i).is_some_and(|&(at, _)| at < start) {
            i += 1;
        }
        let (Some(before), Some(&(at, rule)), Some(&(next_at, next_rule))) =
            (i.checked_sub(1).and_then(|b| t.get(b)), t.get(i), t.get(i + 1))
        else {
            continue;
        };
        if at != start || rule != UnwindRule::NO_INFO || next_at != end || !code.is_padding_gap(start, end) {
            continue;
        }
        drop[i] = true;
        // Only repeats of the rule in effect are ever dropped, so `before.1` is still in effect.
        if next_rule == before.1 {
            drop[i + 1] = true;
        }
        filled += 1;
    }
    let mut keep = drop.iter().map(|d| !d);
    flat.transitions.retain(|_| keep.next().unwrap_or(true));
    filled
}

#[cfg(test)]
mod tests;
