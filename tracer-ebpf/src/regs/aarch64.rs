//! aarch64 registers: the kernel's `pt_regs` starts with `user_pt_regs` (`regs[31]`, `sp`,
//! `pc`, `pstate`), which is also what a perf_event context holds. The frame pointer is x29,
//! the link register x30 (the topmost frame's return address until its prologue saves it).
//! User mode is `pstate`'s mode field EL0t (0) with the AArch32 bit clear: 32-bit tasks have
//! other registers and no tables here, and count as having none.
//!
//! The link register is kept as it is: a function built with `pac-ret` signs it on entry, and
//! the walker strips the signature when the frame's rule says so (`FLAG_MANGLED_RA`).

use aya_ebpf::{
    bindings::{pt_regs, user_pt_regs},
    helpers::bpf_probe_read_kernel,
};
use tracer_common::{trace::WalkRegs, walk::Arch};

/// What the walker's frame-pointer fallback may assume of this architecture's frame records.
pub const ARCH: Arch = Arch::Aarch64;

/// `pstate` bits of the exception level and stack pointer selection, and of AArch32.
const MODE_MASK: u64 = 0x1f;
/// `PSR_MODE_EL0t`: AArch64 user mode.
const MODE_EL0T: u64 = 0;
/// The frame pointer, x29.
const FP: usize = 29;
/// The link register, x30.
const LR: usize = 30;

/// Whether `pstate` is AArch64 user mode.
#[inline(always)]
fn is_user(pstate: u64) -> bool {
    pstate & MODE_MASK == MODE_EL0T
}

/// The context's registers `regs` (a context pointer, see `user_regs`) and whether they are
/// user mode.
#[inline(always)]
pub fn context_regs(regs: *const pt_regs) -> (bool, WalkRegs) {
    let regs = regs.cast::<user_pt_regs>();
    // SAFETY: `regs` is the context, whose registers start with `user_pt_regs`; each read is
    // one 8-byte context load of a register field.
    let (pstate, pc, sp, fp, lr) = unsafe {
        (
            core::ptr::read_volatile(core::ptr::addr_of!((*regs).pstate)),
            core::ptr::read_volatile(core::ptr::addr_of!((*regs).pc)),
            core::ptr::read_volatile(core::ptr::addr_of!((*regs).sp)),
            core::ptr::read_volatile(core::ptr::addr_of!((*regs).regs[FP])),
            core::ptr::read_volatile(core::ptr::addr_of!((*regs).regs[LR])),
        )
    };
    (is_user(pstate), WalkRegs { pc, sp, fp, lr })
}

/// The registers saved at kernel entry at `saved` (kernel memory) and whether they are user
/// mode; `None` when a read fails.
#[inline(always)]
pub fn saved_regs(saved: *const pt_regs) -> Option<(bool, WalkRegs)> {
    let saved = saved.cast::<user_pt_regs>();
    // SAFETY: probe reads of kernel memory: a bad address fails the read instead of faulting;
    // `addr_of!` only computes field addresses.
    let (pstate, pc, sp, fp, lr) = unsafe {
        (
            bpf_probe_read_kernel(core::ptr::addr_of!((*saved).pstate)).ok()?,
            bpf_probe_read_kernel(core::ptr::addr_of!((*saved).pc)).ok()?,
            bpf_probe_read_kernel(core::ptr::addr_of!((*saved).sp)).ok()?,
            bpf_probe_read_kernel(core::ptr::addr_of!((*saved).regs[FP])).ok()?,
            bpf_probe_read_kernel(core::ptr::addr_of!((*saved).regs[LR])).ok()?,
        )
    };
    Some((is_user(pstate), WalkRegs { pc, sp, fp, lr }))
}
