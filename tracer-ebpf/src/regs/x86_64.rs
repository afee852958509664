//! x86-64 registers: `pt_regs` with `rip`, `rsp`, `rbp`; user mode when the privilege level
//! of `cs` is 3. There is no link register (`lr` is 0).

use aya_ebpf::{bindings::pt_regs, helpers::bpf_probe_read_kernel};
use tracer_common::{trace::WalkRegs, walk::Arch};

/// What the walker's frame-pointer fallback may assume of this architecture's frame records.
pub const ARCH: Arch = Arch::X86_64;

/// The privilege level bits of `cs`: 3 is user mode.
const CPL_MASK: u64 = 3;

/// Whether `cs` is a user-mode code segment.
#[inline(always)]
fn is_user(cs: u64) -> bool {
    cs & CPL_MASK == CPL_MASK
}

/// The context's registers `regs` (a context pointer, see `user_regs`) and whether they are
/// user mode.
#[inline(always)]
pub fn context_regs(regs: *const pt_regs) -> (bool, WalkRegs) {
    // SAFETY: `regs` is the context; each read is one 8-byte context load of a register field,
    // which the verifier accepts (and rewrites for perf_event contexts).
    let (cs, pc, sp, fp) = unsafe {
        (
            core::ptr::read_volatile(core::ptr::addr_of!((*regs).cs)),
            core::ptr::read_volatile(core::ptr::addr_of!((*regs).rip)),
            core::ptr::read_volatile(core::ptr::addr_of!((*regs).rsp)),
            core::ptr::read_volatile(core::ptr::addr_of!((*regs).rbp)),
        )
    };
    (is_user(cs), WalkRegs { pc, sp, fp, lr: 0 })
}

/// The registers saved at kernel entry at `saved` (kernel memory) and whether they are user
/// mode; `None` when a read fails.
#[inline(always)]
pub fn saved_regs(saved: *const pt_regs) -> Option<(bool, WalkRegs)> {
    // SAFETY: probe reads of kernel memory: a bad address fails the read instead of faulting;
    // `addr_of!` only computes field addresses.
    let (cs, pc, sp, fp) = unsafe {
        (
            bpf_probe_read_kernel(core::ptr::addr_of!((*saved).cs)).ok()?,
            bpf_probe_read_kernel(core::ptr::addr_of!((*saved).rip)).ok()?,
            bpf_probe_read_kernel(core::ptr::addr_of!((*saved).rsp)).ok()?,
            bpf_probe_read_kernel(core::ptr::addr_of!((*saved).rbp)).ok()?,
        )
    };
    Some((is_user(cs), WalkRegs { pc, sp, fp, lr: 0 }))
}
