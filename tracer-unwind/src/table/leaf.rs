//! Leaf functions of aarch64 objects without any unwind information (Debian's arm64 vDSO has
//! none: no `.eh_frame`, no `.sframe`), proven from their code. A function that calls nothing
//! and never writes SP, x29 or x30 (signing and authenticating x30 in place aside) has, at each
//! of its instructions, its caller's SP in SP, its return address in the link register and its
//! caller's frame pointer in x29: the rule gcc's CFI gives such a leaf, `CFA = SP`, RA in LR
//! (so frame 0 only), possibly signed. Every other function keeps `NO_INFO`.
//!
//! 1. The functions are the ELF symbol tables' (`.symtab`, `.dynsym`) function symbols with a
//!    size, 4-aligned, inside the file part of one executable segment; one per start address,
//!    and none overlapping one kept before it.
//! 2. A function is a leaf when every instruction word of it is [`harmless`] (a conservative
//!    decoder: a word is accepted only when its encoding class is known and it cannot write those
//!    registers) and it holds a return (`ret`, `retaa`, `retab`): a signal trampoline
//!    (`__kernel_rt_sigreturn`, which has none) is not a function to unwind through LR.
//! 3. Its range gets the leaf rule, the end `NO_INFO`.
//! 4. The kernel's signal trampoline (`__kernel_rt_sigreturn`, a symbol without a type whose
//!    code is exactly `mov x8, #139; svc #0`: the `rt_sigreturn` call) gets the signal rule
//!    (`FLAG_SIGNAL`, `NO_INFO`), so a walk that reaches it through a handler's return address
//!    stops there (`signal`) as it does at libc's trampoline on x86-64, instead of following
//!    frame pointers into the signal frame's record, whose return address skips the
//!    interrupted function. The rule starts at the `nop` the kernel puts before the trampoline,
//!    where a return address minus one is looked up.
//!
//! Checked against glibc 2.36's own CFI (bookworm arm64): each of the 642 functions with an FDE
//! this finds leaves has `CFA = SP`, nothing saved, in every row. Not checked: code elsewhere
//! jumping into the middle of a function with other registers (compilers do not; a hostile
//! object can only mislead the stacks of its own processes, as with a hostile `.eh_frame`).

use object::{Architecture, Object as _, ObjectKind, ObjectSymbol as _, SymbolKind};
use tracer_common::unwind::{FLAG_MANGLED_RA, FLAG_SIGNAL, FLAG_TOPMOST_ONLY, KIND_CFA, REG_SP, UnwindRule};

use super::{padding::Code, transitions::Flat};

/// The rule of a leaf: `CFA = SP`, RA in the link register (frame 0 only), signed or not.
pub(crate) const LEAF: UnwindRule = UnwindRule {
    kind: KIND_CFA,
    cfa_reg: REG_SP,
    flags: FLAG_TOPMOST_ONLY | FLAG_MANGLED_RA,
    ..UnwindRule::NO_INFO
};

/// The rule of the signal trampoline (step 4): no rule to unwind with, the walk stops.
pub(crate) const SIGNAL: UnwindRule = UnwindRule {
    flags: FLAG_SIGNAL,
    ..UnwindRule::NO_INFO
};

/// `mov x8, #139` (`rt_sigreturn`'s number) and `svc #0`: the whole signal trampoline.
const SIGRETURN: [u32; 2] = [0xd280_1168, 0xd400_0001];

/// `nop`.
const NOP: u32 = 0xd503_201f;

/// Largest function scanned, in bytes (a leaf is short; this bounds the work per symbol).
const MAX_FUNCTION: u64 = 1 << 20;

/// The leaf functions of `file` (steps 1-3) as a flat list, `None` when it is not an aarch64
/// executable or shared object or has none.
pub(crate) fn flatten(file: &[u8]) -> Option<Flat> {
    let obj = object::File::parse(file).ok()?;
    if obj.architecture() != Architecture::Aarch64
        || !matches!(obj.kind(), ObjectKind::Executable | ObjectKind::Dynamic)
    {
        return None;
    }
    let code = Code::of(file)?;
    // Functions, and symbols without a type (the trampoline's, step 4).
    let mut functions: Vec<(u64, u64)> = obj
        .symbols()
        .chain(obj.dynamic_symbols())
        .filter(|s| matches!(s.kind(), SymbolKind::Text | SymbolKind::Unknown))
        .filter(|s| s.size() > 0 && s.size() <= MAX_FUNCTION)
        .filter_map(|s| Some((s.address(), s.address().checked_add(s.size())?)))
        .filter(|&(start, end)| start.is_multiple_of(4) && end.is_multiple_of(4))
        .collect();
    functions.sort_unstable();
    let mut flat = Flat::default();
    let mut kept_end = 0;
    for (start, end) in functions {
        if start < kept_end {
            continue;
        }
        let Some(bytes) = code.bytes(start, end) else {
            continue;
        };
        let previous_end = std::mem::replace(&mut kept_end, end);
        if is_sigreturn(bytes) {
            let nop_before = start
                .checked_sub(4)
                .filter(|&before| before >= previous_end)
                .filter(|&before| code.bytes(before, start).is_some_and(|w| w == NOP.to_le_bytes()));
            let from = nop_before.unwrap_or(start);
            flat.push(from, SIGNAL);
            flat.push(end, UnwindRule::NO_INFO);
            flat.cover(from, end);
            flat.functions += 1;
        } else if is_leaf(bytes) {
            flat.push(start, LEAF);
            flat.push(end, UnwindRule::NO_INFO);
            flat.cover(start, end);
            flat.functions += 1;
        }
    }
    (flat.functions > 0).then_some(flat)
}

/// Step 2: every little-endian instruction word of `code` is [`harmless`], and one returns.
pub(crate) fn is_leaf(code: &[u8]) -> bool {
    let words = code
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
    code.len().is_multiple_of(4)
        && words.clone().all(harmless)
        && words.clone().any(|w| matches!(w, RET | RETAA | RETAB))
}

/// Step 4: `code` is the signal trampoline, word for word.
pub(crate) fn is_sigreturn(code: &[u8]) -> bool {
    code.len() == 8 && code[..4] == SIGRETURN[0].to_le_bytes() && code[4..] == SIGRETURN[1].to_le_bytes()
}

/// `ret` (x30), `retaa`, `retab`.
const RET: u32 = 0xd65f_03c0;
const RETAA: u32 = 0xd65f_0bff;
const RETAB: u32 = 0xd65f_0fff;

/// Register number 31: SP or the zero register, as the encoding says.
const R31: u32 = 31;

/// x29 (the frame pointer) or x30 (the link register).
fn frame_register(r: u32) -> bool {
    r == 29 || r == 30
}

/// Whether the instruction `w` cannot write SP, x29 or x30, nor call: by its encoding class
/// (bits 28:25), accepting only what is known not to:
/// - data processing, immediate: destination not x29/x30, and not SP (register 31 is SP for
///   `add`/`sub` without flags, `addg`/`subg`, and the logical ones but `ands`);
/// - branches, exceptions, system: `b`, `b.cond`, `cbz`/`cbnz`, `tbz`/`tbnz`, `br`, `ret` and
///   their authenticated forms, `svc` and the other exception calls, system instructions
///   (hints, `paciasp`/`autiasp` among them, barriers, `mrs`) not naming x29/x30; not `bl`,
///   `blr*` (calls), nor `eret`;
/// - loads and stores: no loaded or status register x29/x30 (nor stored: a leaf does not store
///   them), and no write-back to SP, x29 or x30 as base register (pre/post-index, pairs,
///   authenticated loads, structure loads); memory copy/set and tag instructions not at all;
/// - data processing, register: destination not x29/x30, not SP (`add`/`sub` extended);
/// - SIMD and floating point: destination not x29/x30 (general destinations there are never SP);
/// - anything else (SVE, SME, unallocated, data in the code): not accepted.
pub(crate) fn harmless(w: u32) -> bool {
    let rd = w & 31;
    let rn = (w >> 5) & 31;
    let rt2 = (w >> 10) & 31;
    let rs = (w >> 16) & 31;
    let bit = |n: u32| (w >> n) & 1 == 1;
    match (w >> 25) & 0xf {
        // Data processing, immediate.
        0b1000 | 0b1001 => {
            if frame_register(rd) {
                return false;
            }
            if rd != R31 {
                return true;
            }
            match (w >> 23) & 0x3f {
                0b100010 => bit(29),            // add/sub: with flags, XZR
                0b100011 => false,              // addg/subg: SP
                0b100100 => (w >> 29) & 3 == 3, // logical: ands writes XZR, the others SP
                _ => true,                      // adr/adrp, movz/movk/movn, bitfield, extract: XZR
            }
        }
        // Branches, exception generation, system.
        0b1010 | 0b1011 => {
            if w & 0xfc00_0000 == 0x9400_0000 {
                false // bl
            } else if w & 0xfc00_0000 == 0x1400_0000
                || w & 0x7e00_0000 == 0x3400_0000
                || w & 0x7e00_0000 == 0x3600_0000
                || w & 0xff00_0010 == 0x5400_0000
                || w & 0xff00_0000 == 0xd400_0000
            {
                true // b, cbz/cbnz, tbz/tbnz, b.cond, svc/hvc/smc/brk/hlt
            } else if w >> 25 == 0b110_1011 {
                // Branch to register: opc bit 0 set is a call (blr, blraa...), 0100/0101 eret/drps.
                let opc = (w >> 21) & 0xf;
                opc & 1 == 0 && opc != 0b0100
            } else if w >> 22 == 0b11_0101_0100 {
                !frame_register(rd) // system: Rt
            } else {
                false
            }
        }
        // Loads and stores (bit 27 set, bit 25 clear).
        op if op & 0b0101 == 0b0100 => {
            if frame_register(rd) {
                return false;
            }
            let base_written = rn == R31 || frame_register(rn);
            match (w >> 28) & 3 {
                // Exclusive, ordered, compare-and-swap (Rs, Rt2); SIMD structures (post-index
                // writes the base).
                0b00 => {
                    if bit(26) {
                        !(bit(23) && base_written)
                    } else {
                        // casp writes the pair Rs, Rs + 1: x28 names x29 too.
                        !frame_register(rt2) && !frame_register(rs) && rs != 28
                    }
                }
                // Load literal; memory copy/set, tags, and the rest of the group: no.
                0b01 => !bit(24),
                // Pairs: bit 23 set is post- or pre-index.
                0b10 => !(frame_register(rt2) || bit(23) && base_written),
                // Single registers: unsigned offset; imm9 (post/pre-index: bit 10); register
                // offset, atomics; authenticated loads (write-back: bit 11).
                _ => {
                    if bit(24) {
                        true
                    } else if !bit(21) {
                        !(bit(10) && base_written)
                    } else if !bit(10) {
                        true
                    } else {
                        !(bit(11) && base_written)
                    }
                }
            }
        }
        // Data processing, register: add/sub (extended register) without flags writes SP.
        op if op & 0b0111 == 0b0101 => {
            let sp_destination = rd == R31 && w & 0x1f20_0000 == 0x0b20_0000 && !bit(29);
            !(frame_register(rd) || sp_destination)
        }
        // SIMD and floating point.
        op if op & 0b0111 == 0b0111 => !frame_register(rd),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
