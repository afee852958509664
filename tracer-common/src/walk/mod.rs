//! The walker's semantics, shared by the eBPF program and host tests: the search for a PC's
//! row inside one page, one unwind step (apply an [`UnwindRule`] to the registers of a frame)
//! and the frame-pointer fallback (`frame_pointer.rs`), each reading memory and rows through
//! closures so the kernel plugs in map lookups and `bpf_probe_read_user` and tests a fake stack. It owns
//! no loop over frames, no mapping lookup and no counters (the walker in `tracer-ebpf` does).
//!
//! Per frame, the walker:
//! 1. looks up the mapping of [`lookup_pc`] (`pc` in frame 0, `pc - 1` above it: a return
//!    address points after its call), else stops with [`StopReason::NoMapping`];
//! 2. finds the page `addr >> PAGE_SHIFT` and, with [`search_page`], the last row with
//!    `addr_lo <= addr & 0xffff` (binary search, at most [`PAGE_SEARCH_STEPS`] row reads);
//! 3. applies the row's rule with [`table_step`] ([`step`], and what a frame the fallback
//!    found cannot use) or, where there is no information, follows the frame record with
//!    [`frame_pointer_step`] (`frame_pointer.rs`: what a record proves on x86-64 and on
//!    aarch64), which gives the caller's registers or a [`StopReason`];
//! 4. stops at [`StopReason::MaxDepth`] frames.
//!
//! Verifier-friendliness: no recursion, no allocation, no indexing that can panic, every loop
//! bounded by a constant, all address arithmetic wrapping (nonsense addresses fail their read
//! or a sanity check instead of panicking).

use crate::unwind::{
    FLAG_FP_SAVED, FLAG_MANGLED_RA, FLAG_RA_SAVED, FLAG_SIGNAL, FLAG_TOPMOST_ONLY, KIND_CFA, KIND_CFA_DEREF,
    KIND_NO_INFO, KIND_OUTERMOST, PAGE_SEARCH_STEPS, REG_FP, REG_SP, UnwindRow, UnwindRule,
};

/// Bits of a return address kept when its pointer-authentication code is stripped
/// (`FLAG_MANGLED_RA`, aarch64): the low 48, the usual user virtual address size. (Kernels
/// with 52-bit user addresses would need the mask from `NT_ARM_PAC_MASK`; not handled.)
pub const PAC_MASK: u64 = (1 << 48) - 1;

/// The registers the walker tracks for one frame.
///
/// General registers are not tracked, so a CFA based on any register other than SP/FP
/// (`REG_DWARF_BASE + n`) stops with [`StopReason::CfaRegister`] even in frame 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Regs {
    pub pc: u64,
    pub sp: u64,
    pub fp: u64,
    /// aarch64 link register (x30): where the return address still is in frame 0 before the
    /// prologue saves it (a `FLAG_TOPMOST_ONLY` rule without `FLAG_RA_SAVED`). Meaningful in
    /// frame 0 only; the steps set it to 0 in the frames they produce. 0 on x86-64.
    pub lr: u64,
}

/// The outcome of one step: the caller's registers, or why the walk ends here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Next(Regs),
    Stop(StopReason),
}

/// Why a user stack walk ended: one per-CPU counter each in the kernel, printed by name.
///
/// Only [`StopReason::Outermost`] means a complete stack. Travels as its `u32` code;
/// [`StopReason::try_from`] is the typed twin.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StopReason {
    /// The rule marks the outermost frame (`_start`, thread entry), or a frame-pointer walk
    /// reached FP 0: the stack is complete.
    Outermost = 0,
    /// No unwind information covers the address (`KIND_NO_INFO`).
    NoInfo = 1,
    /// A signal trampoline (`FLAG_SIGNAL`): the caller's registers are in the signal frame,
    /// which the walker does not read yet.
    Signal = 2,
    /// A `FLAG_TOPMOST_ONLY` rule in a frame other than frame 0.
    TopmostOnlyRule = 3,
    /// The CFA is based on a register other than SP/FP, which [`Regs`] does not carry, or on
    /// an SP the walk does not know (an aarch64 frame found by the frame-pointer fallback:
    /// its frame record gives FP and the return address, not SP; [`table_step`]).
    CfaRegister = 4,
    /// A rule the walker cannot execute: unknown kind, or RA neither saved nor in the link
    /// register (the table builder never writes one: a corrupt or foreign table).
    BadRule = 5,
    /// A page's row or a rule could not be read from the maps ([`search_page`] found
    /// nothing): an inconsistent table.
    TableLookupFailed = 6,
    /// `KIND_CFA_DEREF`: reading `*(reg + offset)` failed.
    CfaReadFailed = 7,
    /// Reading the saved return address failed.
    RaReadFailed = 8,
    /// Reading the saved frame pointer failed.
    FpReadFailed = 9,
    /// The return address is 0.
    ZeroRa = 10,
    /// The caller's SP (the CFA) is not above this frame's SP, or `reg + cfa_offset`
    /// overflows: stacks grow down, so the table or the registers are wrong (and walking on
    /// could loop).
    SpNotAdvancing = 11,
    /// Frame-pointer fallback: FP misaligned, below SP, or the saved FP not above it. Also set
    /// by userspace for a caller the fallback found from JIT code that keeps no frame pointers
    /// (Java without `-XX:+PreserveFramePointer`): the stack ends at the JIT frame.
    BadFramePointer = 12,
    /// The walker's frame limit was reached (set by the walker loop).
    MaxDepth = 13,
    /// The PC is in no executable mapping of the process (set by the walker loop).
    NoMapping = 14,
    /// Set by the kernel only: the process (or the code at a PC) had no table yet, so the
    /// registers and a copy of the stack were shipped instead ([`crate::trace::StackSnapshot`]),
    /// for userspace to walk once the table is loaded; it then replaces this with how that
    /// walk ended.
    Snapshot = 15,
    /// Set by userspace only: the walk of a stack copy needed a word past the end of the copy.
    SnapshotEnd = 16,
    /// Set by the kernel only (where it looks PCs up in VMAs): the sampled PC is in no VMA of
    /// the process at all. Its registers belong to no code it has mapped: taken inside an
    /// exec (the address space is the new program's, the registers still the old one's) or an
    /// exit (its memory already freed). There is no stack of the process to walk; the sample
    /// keeps the PC alone.
    ExecOrExit = 17,
}

impl StopReason {
    /// Number of reasons (the size of the kernel's per-CPU counter array).
    pub const COUNT: u32 = 18;
    /// Every reason, in code order.
    pub const ALL: [StopReason; Self::COUNT as usize] = [
        StopReason::Outermost,
        StopReason::NoInfo,
        StopReason::Signal,
        StopReason::TopmostOnlyRule,
        StopReason::CfaRegister,
        StopReason::BadRule,
        StopReason::TableLookupFailed,
        StopReason::CfaReadFailed,
        StopReason::RaReadFailed,
        StopReason::FpReadFailed,
        StopReason::ZeroRa,
        StopReason::SpNotAdvancing,
        StopReason::BadFramePointer,
        StopReason::MaxDepth,
        StopReason::NoMapping,
        StopReason::Snapshot,
        StopReason::SnapshotEnd,
        StopReason::ExecOrExit,
    ];

    /// Stable name for summaries and logs.
    pub const fn name(self) -> &'static str {
        match self {
            StopReason::Outermost => "outermost",
            StopReason::NoInfo => "no_info",
            StopReason::Signal => "signal",
            StopReason::TopmostOnlyRule => "topmost_only_rule",
            StopReason::CfaRegister => "cfa_register",
            StopReason::BadRule => "bad_rule",
            StopReason::TableLookupFailed => "table_lookup_failed",
            StopReason::CfaReadFailed => "cfa_read_failed",
            StopReason::RaReadFailed => "ra_read_failed",
            StopReason::FpReadFailed => "fp_read_failed",
            StopReason::ZeroRa => "zero_ra",
            StopReason::SpNotAdvancing => "sp_not_advancing",
            StopReason::BadFramePointer => "bad_frame_pointer",
            StopReason::MaxDepth => "max_depth",
            StopReason::NoMapping => "no_mapping",
            StopReason::Snapshot => "snapshot",
            StopReason::SnapshotEnd => "snapshot_end",
            StopReason::ExecOrExit => "exec_or_exit",
        }
    }
}

impl TryFrom<u32> for StopReason {
    type Error = u32;
    fn try_from(v: u32) -> Result<Self, u32> {
        match v {
            0 => Ok(StopReason::Outermost),
            1 => Ok(StopReason::NoInfo),
            2 => Ok(StopReason::Signal),
            3 => Ok(StopReason::TopmostOnlyRule),
            4 => Ok(StopReason::CfaRegister),
            5 => Ok(StopReason::BadRule),
            6 => Ok(StopReason::TableLookupFailed),
            7 => Ok(StopReason::CfaReadFailed),
            8 => Ok(StopReason::RaReadFailed),
            9 => Ok(StopReason::FpReadFailed),
            10 => Ok(StopReason::ZeroRa),
            11 => Ok(StopReason::SpNotAdvancing),
            12 => Ok(StopReason::BadFramePointer),
            13 => Ok(StopReason::MaxDepth),
            14 => Ok(StopReason::NoMapping),
            15 => Ok(StopReason::Snapshot),
            16 => Ok(StopReason::SnapshotEnd),
            17 => Ok(StopReason::ExecOrExit),
            other => Err(other),
        }
    }
}

/// The address to look a frame's rule up at: `pc` in frame 0, `pc - 1` above it (a return
/// address points after the call, possibly at the next function or the next row).
pub const fn lookup_pc(regs: &Regs, topmost: bool) -> u64 {
    if topmost { regs.pc } else { regs.pc.wrapping_sub(1) }
}

/// The rule index of the last of `num_rows` rows (sorted by `addr_lo`, the first at 0) with
/// `addr_lo <= pc_lo`; `row_at(i)` reads row `i` of the page.
///
/// Binary search for the first row above `pc_lo` in at most [`PAGE_SEARCH_STEPS`] row reads
/// (enough for 65536 rows, the most a page can have), remembering the rule of the last row at
/// or below it, so no extra read at the end. `None` when `num_rows == 0`, a read fails, no row
/// is at or below `pc_lo`, or the search does not converge (more rows than a page can hold).
// Always inlined: the eBPF walkers call it from more than one global function, and an
// outlined copy would return its `Step` through a stack pointer, which the verifier refuses.
#[inline(always)]
pub fn search_page(num_rows: u32, pc_lo: u16, mut row_at: impl FnMut(u32) -> Option<UnwindRow>) -> Option<u16> {
    let (mut lo, mut hi) = (0u32, num_rows);
    let mut found = None;
    for _ in 0..PAGE_SEARCH_STEPS {
        if lo >= hi {
            break;
        }
        let mid = lo + (hi - lo) / 2;
        let row = row_at(mid)?;
        if row.addr_lo <= pc_lo {
            found = Some(row.rule);
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if lo < hi { None } else { found }
}

/// One unwind step: the caller's registers from `regs` and the rule of `regs.pc`'s row
/// (looked up at [`lookup_pc`]); `read(addr)` reads the user word at `addr`.
///
/// In order (`reg` is SP or FP as `cfa_reg` says):
/// 1. `FLAG_SIGNAL` -> `Signal` (checked first: the builder keeps it on every rule of a
///    trampoline); `KIND_OUTERMOST` -> `Outermost`; `KIND_NO_INFO` -> `NoInfo`;
///    `FLAG_TOPMOST_ONLY` outside frame 0 -> `TopmostOnlyRule`; a CFA register other than
///    SP/FP -> `CfaRegister`; an unknown kind -> `BadRule`.
/// 2. `KIND_CFA`: `cfa = reg + cfa_offset`; `KIND_CFA_DEREF`: `cfa = *(reg + cfa_offset)`
///    (`CfaReadFailed`); `reg + cfa_offset` overflowing -> `SpNotAdvancing`.
/// 3. `cfa > sp`, else `SpNotAdvancing` (frame 0 may have `cfa == sp`: an aarch64 leaf
///    without a frame, its RA still in LR; every later frame saved its RA on the stack).
/// 4. `ra = *(cfa + ra_offset)` with `FLAG_RA_SAVED`, else `ra = lr` in frame 0 with
///    `FLAG_TOPMOST_ONLY` (aarch64), else `BadRule`; `ra &= PAC_MASK` with `FLAG_MANGLED_RA`;
///    `ra == 0` -> `ZeroRa`.
/// 5. `fp = *(cfa + fp_offset)` with `FLAG_FP_SAVED`, else unchanged.
/// 6. `(pc, sp, fp, lr) = (ra, cfa, fp, 0)`.
// Always inlined: the eBPF walkers call it from more than one global function, and an
// outlined copy would return its `Step` through a stack pointer, which the verifier refuses.
#[inline(always)]
pub fn step(rule: &UnwindRule, regs: &Regs, topmost: bool, mut read: impl FnMut(u64) -> Option<u64>) -> Step {
    let flags = rule.flags;
    if flags & FLAG_SIGNAL != 0 {
        return Step::Stop(StopReason::Signal);
    }
    match rule.kind {
        KIND_OUTERMOST => return Step::Stop(StopReason::Outermost),
        KIND_NO_INFO => return Step::Stop(StopReason::NoInfo),
        KIND_CFA | KIND_CFA_DEREF => {}
        _ => return Step::Stop(StopReason::BadRule),
    }
    if flags & FLAG_TOPMOST_ONLY != 0 && !topmost {
        return Step::Stop(StopReason::TopmostOnlyRule);
    }
    let base = match rule.cfa_reg {
        REG_SP => regs.sp,
        REG_FP => regs.fp,
        _ => return Step::Stop(StopReason::CfaRegister),
    };
    let Some(mut cfa) = base.checked_add_signed(i64::from(rule.cfa_offset)) else {
        return Step::Stop(StopReason::SpNotAdvancing);
    };
    if rule.kind == KIND_CFA_DEREF {
        cfa = match read(cfa) {
            Some(v) => v,
            None => return Step::Stop(StopReason::CfaReadFailed),
        };
    }
    if cfa < regs.sp || (cfa == regs.sp && !topmost) {
        return Step::Stop(StopReason::SpNotAdvancing);
    }
    let mut ra = if flags & FLAG_RA_SAVED != 0 {
        match read(cfa.wrapping_add_signed(i64::from(rule.ra_offset))) {
            Some(v) => v,
            None => return Step::Stop(StopReason::RaReadFailed),
        }
    } else if flags & FLAG_TOPMOST_ONLY != 0 {
        regs.lr
    } else {
        return Step::Stop(StopReason::BadRule);
    };
    if flags & FLAG_MANGLED_RA != 0 {
        ra &= PAC_MASK;
    }
    if ra == 0 {
        return Step::Stop(StopReason::ZeroRa);
    }
    let fp = if flags & FLAG_FP_SAVED != 0 {
        match read(cfa.wrapping_add_signed(i64::from(rule.fp_offset))) {
            Some(v) => v,
            None => return Step::Stop(StopReason::FpReadFailed),
        }
    } else {
        regs.fp
    };
    Step::Next(Regs {
        pc: ra,
        sp: cfa,
        fp,
        lr: 0,
    })
}

mod frame_pointer;
#[cfg(test)]
mod tests;

pub use frame_pointer::{Arch, frame_pointer_step, table_step};
