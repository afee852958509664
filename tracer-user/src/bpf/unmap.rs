//! The programs that see a traced process unmap its code (`munmap` over an executable mapping,
//! as dlclose does) or map code (`mmap` with `PROT_EXEC`: the loader, dlopen): loading them, and attaching them to the `syscalls` tracepoints, which
//! need tracefs. Without it the session still traces, warned that code unmapped and replaced
//! by other code is noticed only when a walk meets an address outside every known mapping.

use anyhow::Context as _;
use aya::{Ebpf, programs::TracePoint};
use tracer_common::notice::{
    PROG_ON_MMAP, PROG_ON_MMAP_EXIT, PROG_ON_MMAP_EXIT_VMA, PROG_ON_MUNMAP, PROG_ON_MUNMAP_EXIT, TRACEPOINT_MMAP,
    TRACEPOINT_MMAP_EXIT, TRACEPOINT_MUNMAP, TRACEPOINT_MUNMAP_EXIT, TRACEPOINT_SYSCALLS,
};

use super::tracefs::Tracefs;

/// The munmap pair, then the mmap entry (code mapped by a traced process: read again at
/// once); the mmap return is one of two programs (see [`load`]).
const PROGRAMS: [(&str, &str); 3] = [
    (PROG_ON_MUNMAP, TRACEPOINT_MUNMAP),
    (PROG_ON_MUNMAP_EXIT, TRACEPOINT_MUNMAP_EXIT),
    (PROG_ON_MMAP, TRACEPOINT_MMAP),
];

/// The tracepoint program `name` of the object (also `entries`').
pub(super) fn program<'a>(ebpf: &'a mut Ebpf, name: &str) -> anyhow::Result<&'a mut TracePoint> {
    ebpf.program_mut(name)
        .with_context(|| format!("program {name} missing from the eBPF object"))?
        .try_into()
        .with_context(|| format!("program {name} is not a tracepoint program"))
}

fn load_one(ebpf: &mut Ebpf, name: &str) -> anyhow::Result<()> {
    program(ebpf, name)?
        .load()
        .map_err(|err| super::runtime::rejected(name, err))
}

/// Load the programs: with `lookups` (the cpu-clock walker looks PCs up in VMAs), the mmap
/// return that also looks the new code up, where the kernel takes it. Returns the name of the
/// mmap return program loaded.
pub(super) fn load(ebpf: &mut Ebpf, lookups: bool) -> anyhow::Result<&'static str> {
    for (name, _) in PROGRAMS {
        load_one(ebpf, name)?;
    }
    if lookups {
        match load_one(ebpf, PROG_ON_MMAP_EXIT_VMA) {
            Ok(()) => return Ok(PROG_ON_MMAP_EXIT_VMA),
            Err(err) => log::warn!("mapped code is not looked up when mapped: {err:#}"),
        }
    }
    load_one(ebpf, PROG_ON_MMAP_EXIT)?;
    Ok(PROG_ON_MMAP_EXIT)
}

/// Attach the programs through `tracefs` (the session's); a kernel or host without the
/// tracepoints or tracefs is a warning, not an error.
pub(super) fn attach(ebpf: &mut Ebpf, tracefs: &Tracefs, on_mmap_exit: &str) -> anyhow::Result<()> {
    let warn = |tracepoint: &str, why: &dyn std::fmt::Display| {
        log::warn!(
            "cannot attach to the {TRACEPOINT_SYSCALLS}:{tracepoint} tracepoint ({why}): code unmapped by a \
             traced process (dlclose) is noticed only when a walk meets an unknown address"
        );
    };
    if let Err(why) = tracefs {
        warn(TRACEPOINT_MUNMAP, why);
        return Ok(());
    }
    for (name, tracepoint) in PROGRAMS.into_iter().chain([(on_mmap_exit, TRACEPOINT_MMAP_EXIT)]) {
        if let Err(err) = program(ebpf, name)?.attach(TRACEPOINT_SYSCALLS, tracepoint) {
            warn(tracepoint, &err);
            return Ok(());
        }
    }
    Ok(())
}
