//! The program that walks a thread's user stack as it enters `exit`, `exit_group`, `execve` or
//! `execveat` (`tracer_common::event::PROG_ON_CALL_ENTRY`): loading it with the tracepoint
//! walker it tail-calls, and attaching it to the calls' `syscalls` tracepoints. What becomes of
//! its records is `trace::entries`' business. It needs the task's saved user registers (Linux
//! 5.15+) and tracefs; without either the session traces as before, and the samples taken
//! inside those calls after the address space is gone keep their PC alone.

use anyhow::Context as _;
use aya::{Ebpf, maps::ProgramArray, programs::TracePoint};
use tracer_common::{
    event::{MAP_PROGS_TRACEPOINT, PROG_ON_CALL_ENTRY, PROG_WALK_TRACEPOINT, TRACEPOINTS_CALL_ENTRY},
    notice::TRACEPOINT_SYSCALLS,
    trace::PROG_WALK_SLOT,
};

use super::tracefs::Tracefs;

fn program<'a>(ebpf: &'a mut Ebpf, name: &str) -> anyhow::Result<&'a mut TracePoint> {
    ebpf.program_mut(name)
        .with_context(|| format!("program {name} missing from the eBPF object"))?
        .try_into()
        .with_context(|| format!("program {name} is not a tracepoint program"))
}

/// Load the program, and the tracepoint walker unless the events loaded it already. Returns
/// whether it is loaded; a kernel without the task's user registers or one that refuses the
/// programs is a warning.
pub(super) fn load(ebpf: &mut Ebpf, task_regs: bool) -> bool {
    if !task_regs {
        return false;
    }
    match try_load(ebpf) {
        Ok(()) => true,
        Err(err) => {
            log::warn!("stacks are not kept at exit and exec: {err:#}");
            false
        }
    }
}

fn try_load(ebpf: &mut Ebpf) -> anyhow::Result<()> {
    let walker = program(ebpf, PROG_WALK_TRACEPOINT)?;
    if walker.fd().is_err() {
        walker
            .load()
            .map_err(|err| super::runtime::rejected(PROG_WALK_TRACEPOINT, err))?;
        let fd = walker
            .fd()
            .and_then(|fd| fd.try_clone().map_err(Into::into))
            .with_context(|| format!("the file descriptor of {PROG_WALK_TRACEPOINT}"))?;
        ProgramArray::try_from(super::map_mut(ebpf, MAP_PROGS_TRACEPOINT)?)?
            .set(PROG_WALK_SLOT, &fd, 0)
            .with_context(|| format!("installing {PROG_WALK_TRACEPOINT} in {MAP_PROGS_TRACEPOINT}"))?;
    }
    program(ebpf, PROG_ON_CALL_ENTRY)?
        .load()
        .map_err(|err| super::runtime::rejected(PROG_ON_CALL_ENTRY, err))
}

/// Attach the loaded program to each call's tracepoint through `tracefs` (the session's); a
/// host without tracefs or a kernel without one of the tracepoints is a warning, and the
/// others stay attached.
pub(super) fn attach(ebpf: &mut Ebpf, tracefs: &Tracefs) -> anyhow::Result<()> {
    let warn = |tracepoint: &str, why: &dyn std::fmt::Display| {
        log::warn!(
            "cannot attach to the {TRACEPOINT_SYSCALLS}:{tracepoint} tracepoint ({why}): samples taken inside \
             that call once the process's memory is gone keep their PC alone"
        );
    };
    for tracepoint in TRACEPOINTS_CALL_ENTRY {
        if let Err(why) = tracefs {
            warn(tracepoint, why);
            continue;
        }
        if let Err(err) = program(ebpf, PROG_ON_CALL_ENTRY)?.attach(TRACEPOINT_SYSCALLS, tracepoint) {
            warn(tracepoint, &err);
        }
    }
    Ok(())
}
