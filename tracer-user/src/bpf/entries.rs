//! The programs that walk a thread's user stack as it enters `exit`, `exit_group`, `execve` or
//! `execveat` (`tracer_common::event::PROG_ON_CALL_ENTRY`) or is delivered a signal that ends
//! its process (`PROG_ON_FATAL_SIGNAL`): loading them with the tracepoint walker they
//! tail-call, and attaching them to the calls' `syscalls` tracepoints and `signal_deliver`. What becomes of
//! its records is `trace::entries`' business. It needs the task's saved user registers (Linux
//! 5.15+) and tracefs; without either the session traces as before, and the samples taken
//! inside those calls after the address space is gone keep their PC alone.

use aya::Ebpf;
use tracer_common::{
    event::{
        PROG_ON_CALL_ENTRY, PROG_ON_EXEC_ENTRY, PROG_ON_FATAL_SIGNAL, TRACEPOINT_SIGNAL_DELIVER,
        TRACEPOINTS_CALL_ENTRY, TRACEPOINTS_EXEC_ENTRY,
    },
    notice::TRACEPOINT_SYSCALLS,
};

use super::{tracefs::Tracefs, unmap::program};

/// Load the programs, and the tracepoint walker unless the events loaded it already (the one
/// that looks PCs up in VMAs with `lookups`: a process that has not been read yet, a child
/// sharing its parent's memory until its exec, is walked whole at its entry). Returns whether
/// they are loaded; a kernel without the task's user registers or one that refuses the
/// programs is a warning.
pub(super) fn load(ebpf: &mut Ebpf, task_regs: bool, lookups: bool) -> bool {
    if !task_regs {
        return false;
    }
    match try_load(ebpf, lookups) {
        Ok(()) => true,
        Err(err) => {
            log::warn!("stacks are not kept at exit and exec: {err:#}");
            false
        }
    }
}

fn try_load(ebpf: &mut Ebpf, lookups: bool) -> anyhow::Result<()> {
    super::probes::load_tracepoint_walker(ebpf, lookups)?;
    for name in PROGRAMS {
        program(ebpf, name)?
            .load()
            .map_err(|err| super::runtime::rejected(name, err))?;
    }
    Ok(())
}

/// The entry programs.
const PROGRAMS: [&str; 3] = [PROG_ON_CALL_ENTRY, PROG_ON_EXEC_ENTRY, PROG_ON_FATAL_SIGNAL];

/// Attach the loaded programs to their tracepoints through `tracefs` (the session's); a host
/// without tracefs or a kernel without one of the tracepoints is a warning, and the others
/// stay attached.
pub(super) fn attach(ebpf: &mut Ebpf, tracefs: &Tracefs) -> anyhow::Result<()> {
    let exits = TRACEPOINTS_CALL_ENTRY.map(|name| (PROG_ON_CALL_ENTRY, TRACEPOINT_SYSCALLS, name));
    let execs = TRACEPOINTS_EXEC_ENTRY.map(|name| (PROG_ON_EXEC_ENTRY, TRACEPOINT_SYSCALLS, name));
    let (category, name) = TRACEPOINT_SIGNAL_DELIVER;
    let signal = (PROG_ON_FATAL_SIGNAL, category, name);
    for (program_name, category, tracepoint) in exits.into_iter().chain(execs).chain([signal]) {
        let attached = match tracefs {
            Err(why) => Err(anyhow::anyhow!("{why}")),
            Ok(_) => program(ebpf, program_name)?
                .attach(category, tracepoint)
                .map(|_| ())
                .map_err(Into::into),
        };
        if let Err(why) = attached {
            log::warn!(
                "cannot attach to the {category}:{tracepoint} tracepoint ({why:#}): samples taken as a thread \
                 leaves through it once the process's memory is gone keep their PC alone"
            );
        }
    }
    Ok(())
}
