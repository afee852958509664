//! The frame-pointer fallback, for frames no table covers: the caller is read from the frame
//! record FP points at, two words `[saved FP, return address]`. x86-64 (`push rbp; mov rbp,
//! rsp`) and aarch64 (`stp x29, x30, [sp, #-N]!; mov x29, sp`) lay the record out alike, but
//! what it proves differs:
//!
//! - x86-64: a `call` pushes the return address, so a function with a frame pointer has its
//!   own record once its prologue ran, and the caller's SP is exactly `fp + 16`.
//! - aarch64: a call leaves the return address in the link register (x30), and GCC gives leaf
//!   functions no record at all (`-momit-leaf-frame-pointer`, its default): in such a leaf x29
//!   still points at the *caller's* record, whose return address is the caller's caller.
//!   Following it in frame 0 skips the caller; taking LR instead would invent a frame where
//!   the function does have a record and LR is a return address into itself, left by a call
//!   it made. Nothing in the registers tells the two apart, except when both agree: so in
//!   frame 0 the record is followed only when its saved return address *is* LR (signatures
//!   stripped from both), i.e. the function saved the LR it was called with into the record
//!   x29 points at; otherwise the walk stops there ([`StopReason::NoInfo`]: truncated, never
//!   wrong). Above frame 0 every function has made a call, so one built with frame pointers
//!   has its own record, as on x86-64. (The one case the agreement does not settle: a
//!   function that calls itself through an indirect call site and, through the same site, a
//!   leaf; the leaf's caller is then taken for a second copy of that function.)
//!   The record sits at the bottom of an aarch64 frame, so `fp + 16` is only a lower bound of
//!   the caller's SP: a frame found by the fallback whose table puts its CFA on SP cannot be
//!   unwound by it ([`table_step`]). Return addresses saved by `pac-ret` code are signed and
//!   are stripped ([`PAC_MASK`]).

use super::{PAC_MASK, Regs, Step, StopReason, step};
use crate::unwind::{FLAG_SIGNAL, KIND_CFA, KIND_CFA_DEREF, REG_SP, UnwindRule};

/// The architecture of the walked code: what a frame record proves (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    X86_64,
    Aarch64,
}

impl Arch {
    /// The architecture this crate is compiled for, in userspace (the eBPF program, compiled
    /// for the `bpf` target, names the one it reads registers of itself).
    pub const HOST: Arch = if cfg!(target_arch = "aarch64") {
        Arch::Aarch64
    } else {
        Arch::X86_64
    };
}

/// The frame-pointer fallback: `(pc, sp, fp) = (*(fp + 8), fp + 16, *fp)`, on `arch` (module
/// docs for aarch64's frame 0, `topmost`, and its signed return addresses).
///
/// `chained` says that `fp` itself was read from a frame-pointer chain (the frame was found by
/// this fallback): only then does `fp == 0` mean the end of the chain (`_start` zeroes it)
/// -> `Outermost`; an FP of 0 in a register nothing saved says nothing -> `NoInfo`.
///
/// Checks instead of inventing a frame: `fp` not 8-aligned or below `sp`, or `fp + 16`
/// overflowing -> `BadFramePointer`; failed reads -> `RaReadFailed`/`FpReadFailed`; `ra == 0`
/// -> `ZeroRa`; a saved FP that is neither 0 (the caller is the outermost frame) nor above `fp`
/// -> `BadFramePointer`; on aarch64 in frame 0, a saved return address other than LR ->
/// `NoInfo`. On x86-64 a PC in frame 0 inside a prologue or epilogue makes this skip the real
/// caller; only the rules know better.
// Always inlined: the eBPF walkers call it from more than one global function, and an
// outlined copy would return its `Step` through a stack pointer, which the verifier refuses.
#[inline(always)]
pub fn frame_pointer_step(
    regs: &Regs,
    arch: Arch,
    chained: bool,
    topmost: bool,
    mut read: impl FnMut(u64) -> Option<u64>,
) -> Step {
    let fp = regs.fp;
    if fp == 0 {
        return Step::Stop(if chained {
            StopReason::Outermost
        } else {
            StopReason::NoInfo
        });
    }
    if !fp.is_multiple_of(8) || fp < regs.sp {
        return Step::Stop(StopReason::BadFramePointer);
    }
    let Some(sp) = fp.checked_add(16) else {
        return Step::Stop(StopReason::BadFramePointer);
    };
    let Some(mut ra) = read(fp.wrapping_add(8)) else {
        return Step::Stop(StopReason::RaReadFailed);
    };
    let Some(saved_fp) = read(fp) else {
        return Step::Stop(StopReason::FpReadFailed);
    };
    if arch == Arch::Aarch64 {
        ra &= PAC_MASK;
        if topmost && ra != regs.lr & PAC_MASK {
            return Step::Stop(StopReason::NoInfo);
        }
    }
    if ra == 0 {
        return Step::Stop(StopReason::ZeroRa);
    }
    if saved_fp != 0 && saved_fp <= fp {
        return Step::Stop(StopReason::BadFramePointer);
    }
    Step::Next(Regs {
        pc: ra,
        sp,
        fp: saved_fp,
        lr: 0,
    })
}

/// [`step`] for a frame with a table rule, `chained` when the frame-pointer fallback found the
/// frame: on aarch64 its SP is then only a lower bound (module docs), so a CFA on SP (not a
/// signal trampoline, outermost or no-information rule, which read no SP) stops with
/// [`StopReason::CfaRegister`] instead of reading the return address from a wrong slot.
// Always inlined, as `step`.
#[inline(always)]
pub fn table_step(
    arch: Arch,
    chained: bool,
    rule: &UnwindRule,
    regs: &Regs,
    topmost: bool,
    read: impl FnMut(u64) -> Option<u64>,
) -> Step {
    if arch == Arch::Aarch64
        && chained
        && rule.cfa_reg == REG_SP
        && (rule.kind == KIND_CFA || rule.kind == KIND_CFA_DEREF)
        && rule.flags & FLAG_SIGNAL == 0
    {
        return Step::Stop(StopReason::CfaRegister);
    }
    step(rule, regs, topmost, read)
}

#[cfg(test)]
mod tests;
