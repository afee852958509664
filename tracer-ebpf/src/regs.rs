//! The user registers (pc, sp, fp) of the task a sample or event interrupted, on x86-64.
//!
//! 1. If the context's registers (perf_event, kprobe, uprobe) are user mode (`regs.cs & 3 ==
//!    3`: a sample in user code, a uprobe), they are the user registers.
//! 2. Else the task was in the kernel (a syscall, a fault, an interrupt; every tracepoint and
//!    kprobe, whose contexts carry no user registers): its user registers
//!    are the `pt_regs` saved at kernel entry, `bpf_task_pt_regs(current)`, read with
//!    `bpf_probe_read_kernel`. Only where the kernel has those helpers (5.15+, the
//!    `TASK_REGS` global); elsewhere such samples have no user registers.
//! 3. Those saved registers must themselves be user mode: a kernel thread's are zeroed (no user
//!    context), which gives `None`, as does a failed read or a zero PC.
//!
//! It reads registers only: no maps, no counters (the caller counts `None`). aarch64 would need
//! its own `pt_regs` fields and `pstate` check; not done.

use aya_ebpf::{
    bindings::pt_regs,
    helpers::{
        bpf_probe_read_kernel,
        generated::{bpf_get_current_task_btf, bpf_task_pt_regs},
    },
};
use tracer_common::trace::WalkRegs;

/// The privilege level bits of `cs`: 3 is user mode.
const CPL_MASK: u64 = 3;

/// A sample's user registers and whether the sample hit user mode (step 1) or the kernel.
pub struct UserRegs {
    pub regs: WalkRegs,
    pub in_user_mode: bool,
}

/// The user registers of the current task at this sample or event (module docs), from the
/// context's registers `regs`, or `None` when it has none (kernel thread, idle), they cannot be
/// read, or the context is kernel mode and `task_regs` (the kernel has `bpf_task_pt_regs`) is
/// false.
///
/// `regs` must be the program's context registers: `bpf_perf_event_data::regs` (its first
/// field) or a kprobe-type context, so each read below is a context load.
pub fn user_regs(regs: *const pt_regs, task_regs: bool) -> Option<UserRegs> {
    // SAFETY: `regs` is the context (see above); each read is one 8-byte context load of a
    // register field, which the verifier accepts (and rewrites for perf_event contexts).
    let (cs, ip, sp, bp) = unsafe {
        (
            core::ptr::read_volatile(core::ptr::addr_of!((*regs).cs)),
            core::ptr::read_volatile(core::ptr::addr_of!((*regs).rip)),
            core::ptr::read_volatile(core::ptr::addr_of!((*regs).rsp)),
            core::ptr::read_volatile(core::ptr::addr_of!((*regs).rbp)),
        )
    };
    if cs & CPL_MASK == CPL_MASK {
        return Some(UserRegs {
            regs: WalkRegs {
                pc: ip,
                sp,
                fp: bp,
                lr: 0,
            },
            in_user_mode: true,
        });
    }
    task_user_regs(task_regs)
}

/// The user registers saved when the current task entered the kernel (step 2), for contexts
/// without registers of their own (tracepoints) or with kernel-mode ones; `None` as for
/// [`user_regs`].
pub fn task_user_regs(task_regs: bool) -> Option<UserRegs> {
    if !task_regs {
        return None;
    }
    // SAFETY: helpers without preconditions beyond a task pointer, which the first returns.
    let saved = unsafe { bpf_task_pt_regs(bpf_get_current_task_btf()) } as *const pt_regs;
    if saved.is_null() {
        return None;
    }
    // SAFETY: probe reads of kernel memory: a bad address fails the read instead of faulting;
    // `addr_of!` only computes field addresses.
    let (cs, ip, sp, bp) = unsafe {
        (
            bpf_probe_read_kernel(core::ptr::addr_of!((*saved).cs)).ok()?,
            bpf_probe_read_kernel(core::ptr::addr_of!((*saved).rip)).ok()?,
            bpf_probe_read_kernel(core::ptr::addr_of!((*saved).rsp)).ok()?,
            bpf_probe_read_kernel(core::ptr::addr_of!((*saved).rbp)).ok()?,
        )
    };
    if cs & CPL_MASK != CPL_MASK || ip == 0 {
        return None;
    }
    Some(UserRegs {
        regs: WalkRegs {
            pc: ip,
            sp,
            fp: bp,
            lr: 0,
        },
        in_user_mode: false,
    })
}
