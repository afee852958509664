//! The programs of the `-e` events other than cpu-clock: which entry programs and walker copies
//! an event set needs, loading them (and wiring each walker into its program array), attaching
//! them to their probes, tracepoints and `sched_switch`, and detaching. Only what is asked for
//! is loaded, so a kernel that cannot load one of them still traces the rest. Specs are parsed
//! and uprobe targets resolved before (`crate::event`); nothing here reads unwind tables.

use std::path::Path;

use anyhow::{Context as _, bail};
use aya::{
    Ebpf,
    maps::ProgramArray,
    programs::{
        KProbe, Program, RawTracePoint, TracePoint, UProbe,
        kprobe::KProbeLinkId,
        raw_trace_point::RawTracePointLinkId,
        trace_point::TracePointLinkId,
        uprobe::{UProbeAttachLocation, UProbeLinkId, UProbeScope},
    },
};
use tracer_common::{
    event::{
        EventKind, MAP_PROGS_PROBE, MAP_PROGS_SWITCH, MAP_PROGS_TRACEPOINT, PROG_KPROBES, PROG_ON_SWITCH,
        PROG_TRACEPOINTS, PROG_UPROBES, PROG_URETPROBES, PROG_WALK_PROBE, PROG_WALK_SWITCH, PROG_WALK_TRACEPOINT,
        PROG_WALK_TRACEPOINT_VMA, TRACEPOINT_SWITCH,
    },
    trace::PROG_WALK_SLOT,
};

use super::{
    map_mut,
    tracefs::{self, Tracefs},
};
use crate::event::{Event, EventSet, EventSpec};

/// The kprobe PMU, which kernels with kprobes have.
const KPROBE_PMU: &str = "/sys/bus/event_source/devices/kprobe";

/// An attached event, to detach.
pub(super) enum Link {
    KProbe(&'static str, KProbeLinkId),
    UProbe(&'static str, UProbeLinkId),
    TracePoint(&'static str, TracePointLinkId),
    RawTracePoint(&'static str, RawTracePointLinkId),
}

/// The entry program of `event` (none for cpu-clock, whose programs `super` owns).
fn entry_program(event: &Event) -> Option<&'static str> {
    match event.spec.kind() {
        EventKind::CpuClock => None,
        EventKind::Offcpu => Some(PROG_ON_SWITCH),
        EventKind::Kprobe => PROG_KPROBES.get(event.slot).copied(),
        EventKind::Uprobe => PROG_UPROBES.get(event.slot).copied(),
        EventKind::Uretprobe => PROG_URETPROBES.get(event.slot).copied(),
        EventKind::Tracepoint => PROG_TRACEPOINTS.get(event.slot).copied(),
    }
}

/// The walker copies `events` need, with their program arrays.
fn walkers(events: &EventSet) -> Vec<(&'static str, &'static str)> {
    let probes = [EventKind::Kprobe, EventKind::Uprobe, EventKind::Uretprobe];
    let mut walkers = Vec::new();
    if probes.iter().any(|&kind| events.has(kind)) {
        walkers.push((PROG_WALK_PROBE, MAP_PROGS_PROBE));
    }
    if events.has(EventKind::Tracepoint) {
        walkers.push((PROG_WALK_TRACEPOINT, MAP_PROGS_TRACEPOINT));
    }
    if events.has(EventKind::Offcpu) {
        walkers.push((PROG_WALK_SWITCH, MAP_PROGS_SWITCH));
    }
    walkers
}

/// Every program [`load`] loads for `events`, walkers first.
pub(super) fn programs(events: &EventSet) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = walkers(events).into_iter().map(|(walker, _)| walker).collect();
    names.extend(events.events().iter().filter_map(entry_program));
    names
}

/// Load the walkers and entry programs of `events` and install each walker in its array; the
/// tracepoint walker is the one that looks PCs up in VMAs where the cpu-clock walker does
/// (`lookups`, see [`load_tracepoint_walker`]).
pub(super) fn load(ebpf: &mut Ebpf, events: &EventSet, lookups: bool) -> anyhow::Result<()> {
    for (walker, array) in walkers(events) {
        if walker == PROG_WALK_TRACEPOINT {
            load_tracepoint_walker(ebpf, lookups)?;
            continue;
        }
        load_one(program_mut(ebpf, walker)?, walker)?;
        install(ebpf, walker, array)?;
    }
    for event in events.events() {
        if let Some(name) = entry_program(event) {
            load_one(program_mut(ebpf, name)?, name)
                .with_context(|| format!("loading the program of `{}`", event.name))?;
        }
    }
    Ok(())
}

/// Load the tracepoint walker and install it in its program array, once for the session (the
/// tracepoint events and the stacks at exit and exec share it): with `lookups`, the one that
/// looks PCs up in VMAs (`PROG_WALK_TRACEPOINT_VMA`), or the other where the kernel refuses it
/// (a warning). Returns the one installed.
pub(super) fn load_tracepoint_walker(ebpf: &mut Ebpf, lookups: bool) -> anyhow::Result<&'static str> {
    for name in [PROG_WALK_TRACEPOINT_VMA, PROG_WALK_TRACEPOINT] {
        if program_mut(ebpf, name)?.fd().is_ok() {
            return Ok(name);
        }
    }
    let mut walker = PROG_WALK_TRACEPOINT;
    if lookups {
        match load_one(program_mut(ebpf, PROG_WALK_TRACEPOINT_VMA)?, PROG_WALK_TRACEPOINT_VMA) {
            Ok(()) => walker = PROG_WALK_TRACEPOINT_VMA,
            Err(err) => log::warn!("stacks at tracepoints, exits and execs do not look PCs up in VMAs: {err:#}"),
        }
    }
    if walker == PROG_WALK_TRACEPOINT {
        load_one(program_mut(ebpf, walker)?, walker)?;
    }
    install(ebpf, walker, MAP_PROGS_TRACEPOINT)?;
    Ok(walker)
}

/// Put the loaded walker `walker` in the walker slot of its program array `array`.
fn install(ebpf: &mut Ebpf, walker: &str, array: &str) -> anyhow::Result<()> {
    let fd = program_mut(ebpf, walker)?
        .fd()
        .and_then(|fd| fd.try_clone().map_err(Into::into))
        .with_context(|| format!("the file descriptor of {walker}"))?;
    ProgramArray::try_from(map_mut(ebpf, array)?)?
        .set(PROG_WALK_SLOT, &fd, 0)
        .with_context(|| format!("installing {walker} in {array}"))
}

fn load_one(program: &mut Program, name: &str) -> anyhow::Result<()> {
    let loaded = match program {
        Program::KProbe(p) => p.load(),
        Program::UProbe(p) => p.load(),
        Program::TracePoint(p) => p.load(),
        Program::RawTracePoint(p) => p.load(),
        _ => bail!("program {name} is not of an event's program type"),
    };
    loaded.map_err(|err| super::runtime::rejected(name, err))
}

fn program_mut<'a>(ebpf: &'a mut Ebpf, name: &str) -> anyhow::Result<&'a mut Program> {
    ebpf.program_mut(name)
        .with_context(|| format!("program {name} missing from the eBPF object"))
}

/// Attach every loaded event program (not cpu-clock); tracepoints through `tracefs`, the
/// session's.
pub(super) fn attach(ebpf: &mut Ebpf, events: &EventSet, tracefs: &Tracefs) -> anyhow::Result<Vec<Link>> {
    let mut links = Vec::new();
    for event in events.events() {
        let Some(name) = entry_program(event) else {
            continue;
        };
        let what = || format!("attaching `{}`", event.name);
        let program = program_mut(ebpf, name)?;
        let link = match (&event.spec, program) {
            (EventSpec::Kprobe { .. }, _) if !Path::new(KPROBE_PMU).exists() => {
                bail!("`{}`: this kernel has no kprobes (it was built without CONFIG_KPROBES)", event.name)
            }
            (EventSpec::Kprobe { symbol }, Program::KProbe(p)) => Link::KProbe(
                name,
                p.attach(symbol, 0).with_context(|| {
                    format!(
                        "attaching `{}` (is {symbol} a kernel function that can be probed? see available_filter_functions in tracefs)",
                        event.name
                    )
                })?,
            ),
            (EventSpec::Uprobe { .. } | EventSpec::Uretprobe { .. }, Program::UProbe(p)) => {
                let site = event
                    .site
                    .as_ref()
                    .with_context(|| format!("`{}` was not resolved to a file offset", event.name))?;
                let location = UProbeAttachLocation::AbsoluteOffset(site.file_offset);
                Link::UProbe(
                    name,
                    p.attach(location, &site.path, UProbeScope::AllProcesses)
                        .with_context(what)?,
                )
            }
            (EventSpec::Tracepoint { category, name: tracepoint }, Program::TracePoint(p)) => {
                check_tracepoint(tracefs, &event.name, category, tracepoint)?;
                Link::TracePoint(name, p.attach(category, tracepoint).with_context(what)?)
            }
            (EventSpec::Offcpu, Program::RawTracePoint(p)) => {
                Link::RawTracePoint(name, p.attach(TRACEPOINT_SWITCH).with_context(what)?)
            }
            _ => bail!("program {name} does not fit `{}`", event.name),
        };
        links.push(link);
    }
    Ok(links)
}

/// Detach `links` (failures are logged: detaching happens on the way out).
pub(super) fn detach(ebpf: &mut Ebpf, links: Vec<Link>) {
    for link in links {
        let (name, detached) = match link {
            Link::KProbe(name, id) => (name, typed::<KProbe>(ebpf, name).map(|p| p.detach(id))),
            Link::UProbe(name, id) => (name, typed::<UProbe>(ebpf, name).map(|p| p.detach(id))),
            Link::TracePoint(name, id) => (name, typed::<TracePoint>(ebpf, name).map(|p| p.detach(id))),
            Link::RawTracePoint(name, id) => (name, typed::<RawTracePoint>(ebpf, name).map(|p| p.detach(id))),
        };
        match detached {
            Some(Ok(())) => {}
            Some(Err(err)) => log::warn!("detaching {name}: {err}"),
            None => log::warn!("detaching {name}: program missing"),
        }
    }
}

fn typed<'a, P>(ebpf: &'a mut Ebpf, name: &str) -> Option<&'a mut P>
where
    &'a mut P: TryFrom<&'a mut Program>,
{
    ebpf.program_mut(name)?.try_into().ok()
}

/// A clear error for a tracepoint the kernel does not have.
fn check_tracepoint(tracefs: &Tracefs, spec: &str, category: &str, name: &str) -> anyhow::Result<()> {
    let root = match tracefs {
        Ok(root) => root,
        Err(why) => bail!("`{spec}` attaches through tracefs: {why}"),
    };
    if !tracefs::has_tracepoint(root, category, name) {
        bail!("`{spec}`: this kernel has no tracepoint {category}:{name} (see {root}/events)");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
