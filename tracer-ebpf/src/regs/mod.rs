//! The user registers (pc, sp, fp and, on aarch64, the link register) of the task a sample or
//! event interrupted. The architecture's register layout and user-mode test are in `x86_64.rs`
//! or `aarch64.rs`, chosen by the `bpf_target_arch` the program is built for (`tracer-user`'s
//! build.rs builds it for the architecture it is itself built for).
//!
//! 1. If the context's registers (perf_event, kprobe, uprobe) are user mode (a sample in user
//!    code, a uprobe), they are the user registers.
//! 2. Else the task was in the kernel (a syscall, a fault, an interrupt; every tracepoint and
//!    kprobe, whose contexts carry no user registers): its user registers
//!    are the `pt_regs` saved at kernel entry, `bpf_task_pt_regs(current)`, read with
//!    `bpf_probe_read_kernel`. Only where the kernel has those helpers (5.15+, the
//!    `TASK_REGS` global); elsewhere such samples have no user registers.
//! 3. Those saved registers must themselves be user mode: a kernel thread's are zeroed (no user
//!    context), which gives `None`, as does a failed read or a zero PC.
//!
//! It reads registers only: no maps, no counters (the caller counts `None`).

#[cfg_attr(bpf_target_arch = "aarch64", path = "aarch64.rs")]
#[cfg_attr(not(bpf_target_arch = "aarch64"), path = "x86_64.rs")]
mod arch;

pub use arch::ARCH;

use aya_ebpf::{
    bindings::pt_regs,
    helpers::generated::{bpf_get_current_task_btf, bpf_task_pt_regs},
};
use tracer_common::trace::WalkRegs;

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
/// field) or a kprobe-type context, so each read is a context load.
pub fn user_regs(regs: *const pt_regs, task_regs: bool) -> Option<UserRegs> {
    let (user, walk) = arch::context_regs(regs);
    if user {
        return Some(UserRegs {
            regs: walk,
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
    let (user, walk) = arch::saved_regs(saved)?;
    if !user || walk.pc == 0 {
        return None;
    }
    Some(UserRegs {
        regs: walk,
        in_user_mode: false,
    })
}
