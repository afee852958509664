//! Kernel plumbing: preflight checks, loading the embedded eBPF program with maps sized for the
//! tables to load, filling those maps, keeping the traced processes' mappings current,
//! attaching to cpu-clock on every online CPU and to the other `-e` events, and reading samples
//! and counters back. Nothing
//! here parses unwind information or `/proc` (it gets a [`TableSet`] and [`ExecMapping`]s);
//! it only moves data between userspace and the kernel.
//!
//! Submodules: `tables` (the table maps), `procs` (the process map), `events` (the ring
//! buffer), `probes` (the programs of events other than cpu-clock), `btf` (kernel structure
//! offsets), `runtime` (memlock limit and aya-log forwarding), `tracefs` (found or mounted
//! before the first tracepoint attach), `unmap` (the programs that see code unmapped).

mod btf;
mod entries;
mod events;
mod probes;
mod procs;
mod python;
mod runtime;
mod tables;
mod tracefs;
mod unmap;

use std::path::Path;

use anyhow::{Context as _, bail, ensure};
use aya::{
    Ebpf, EbpfLoader,
    maps::{MapData, PerCpuArray, ProgramArray},
    programs::{
        PerfEvent, RawTracePoint,
        perf_event::{PerfEventConfig, PerfEventLinkId, PerfEventScope, SamplePolicy, SoftwareEvent},
    },
    util::online_cpus,
};
use tracer_common::{
    Counter, MAP_COUNTERS, PROG_ON_SAMPLE,
    event::{
        EventKind, GLOBAL_MIN_BLOCK_NS, GLOBAL_TASK_FLAGS_OFFSET, GLOBAL_TASK_PID_OFFSET, GLOBAL_TASK_STATE_OFFSET,
        MAP_PARKED, PARKED_ENTRIES, PROG_WALK_TRACEPOINT, PROG_WALK_TRACEPOINT_VMA,
    },
    notice::{
        GLOBAL_SIGNAL_LIVE_OFFSET, GLOBAL_TASK_SIGNAL_OFFSET, GLOBAL_TASK_START_TIME_OFFSET, MAP_NOTICES, PROG_ON_EXEC,
        PROG_ON_EXEC_VMA, PROG_ON_EXIT, TRACEPOINT_EXEC, TRACEPOINT_EXIT,
    },
    python::GLOBAL_TASK_FSBASE_OFFSET,
    trace::{
        ExecMapping, GLOBAL_ALL_PROCESSES, GLOBAL_COPY_STACKS, GLOBAL_KERNEL_STACK, GLOBAL_MAX_DEPTH, GLOBAL_TASK_REGS,
        MAP_EVENTS, MAP_PAGES, MAP_PROCS, MAP_PROGS, MAP_ROWS, MAP_RULES, MAP_STOPS, MAX_USER_FRAMES, PROG_WALK,
        PROG_WALK_SLOT,
    },
    vma::{GLOBAL_VMA_OFFSETS, PROG_WALK_VMA},
    walk::StopReason,
};

pub use events::{Events, Notices};
pub use python::PythonCounts;

use crate::event::EventSet;

use crate::tables::{Capacity, TableSet};

/// The eBPF object built by `build.rs` from `tracer-ebpf`.
static PROGRAM: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer"));

/// The default size of the sample ring buffer: about 1,400 samples of the deepest stacks
/// (5.7 KiB), 17,000 of 44 user frames (480 bytes).
pub const DEFAULT_RING_BUFFER_BYTES: u32 = 8 << 20;

/// Why this host cannot trace, as one sentence, or Ok.
pub fn preflight() -> anyhow::Result<()> {
    let euid = crate::sys::process::effective_uid();
    if euid != 0 && !has_effective_capabilities(&[CAP_PERFMON, CAP_BPF]) {
        bail!("tracing needs root (or CAP_BPF and CAP_PERFMON) to load the eBPF program: run it with sudo");
    }
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        bail!(
            "this kernel has no BTF (/sys/kernel/btf/vmlinux is missing): sframe-trace needs a kernel built with CONFIG_DEBUG_INFO_BTF=y"
        );
    }
    Ok(())
}

/// `CAP_PERFMON` and `CAP_BPF` (Linux 5.8): loading the program and sampling without root.
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Whether this process has every capability of `caps` in its effective set.
fn has_effective_capabilities(caps: &[u32]) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let effective = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    caps.iter().all(|&cap| effective & (1 << cap) != 0)
}

/// Why this kernel cannot take stacks on `events`, as one sentence, or Ok (after [`preflight`]:
/// the helper probes need the privileges it checks).
pub fn check_events(events: &EventSet) -> anyhow::Result<()> {
    ensure!(
        !events.has(EventKind::Offcpu) || runtime::has_task_regs(),
        OFFCPU_NEEDS_TASK_REGS
    );
    Ok(())
}

/// The refusal of offcpu where the walk of a blocked task's stack is impossible.
const OFFCPU_NEEDS_TASK_REGS: &str =
    "offcpu needs Linux 5.15 or newer (the bpf_task_pt_regs helper), which this kernel is not";

/// What the kernel side is loaded with (fixed for its lifetime: the globals are read-only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelConfig {
    /// cpu-clock samples per second per CPU.
    pub frequency: u64,
    /// User frames per sample, 1..=`MAX_USER_FRAMES`.
    pub max_depth: u32,
    /// Record kernel stacks.
    pub kernel_stacks: bool,
    /// Sample every process (those without mappings are walked with frame pointers only).
    pub all_processes: bool,
    /// Size of the process map: at most this many processes at once.
    pub max_processes: u32,
    /// Room in the table maps for tables loaded later (`None`: exactly the tables given to
    /// [`Kernel::load`], nothing more).
    pub table_capacity: Option<Capacity>,
    /// What stacks are taken on (cpu-clock at `frequency`, probes, tracepoints, offcpu); uprobe
    /// targets resolved.
    pub events: EventSet,
    /// Bytes of the sample ring buffer: a power of two, a multiple of the page size
    /// ([`DEFAULT_RING_BUFFER_BYTES`] unless asked otherwise).
    pub ring_buffer_bytes: u32,
    /// Ship every sample of a traced process as a stack copy instead of walking it in the
    /// kernel (`--record-snapshots`; `tracer_common::trace::GLOBAL_COPY_STACKS`).
    pub copy_stacks: bool,
}

/// The loaded programs and maps.
pub struct Kernel {
    ebpf: Ebpf,
    frequency: u64,
    events: EventSet,
    links: Vec<PerfEventLinkId>,
    /// The attached programs of events other than cpu-clock.
    event_links: Vec<probes::Link>,
    /// The exec and exit programs are attached (they stay until the kernel side is dropped).
    lifecycle_attached: bool,
    /// The exec program loaded (with VMA lookups or without), and the mmap-return one.
    on_exec: &'static str,
    on_mmap_exit: &'static str,
    /// The program that keeps user stacks at exit and exec is loaded (`entries`).
    call_entries: bool,
    /// Where every tracepoint attaches, found or mounted once before the first attach.
    tracefs: tracefs::Tracefs,
    /// `GLOBAL_TASK_FSBASE_OFFSET` as set (0: not found; see `Kernel::set_python`).
    fsbase_offset: u32,
    /// Whether the cpu-clock walker looks PCs up in VMAs (`walk_user_vma`), or why not.
    vma_lookups: Result<(), String>,
}

impl Kernel {
    /// Create maps sized for `config.table_capacity`, else from `tables` (`ROWS` in whole
    /// chunks, `PAGES`, `RULES`, each at least one entry; `PROCS` = `max_processes`), set the
    /// globals, load the programs, wire the tail call and write the tables. Does not attach.
    /// Call it inside a tokio runtime to have the program's log records forwarded.
    pub fn load(config: &KernelConfig, tables: &mut TableSet) -> anyhow::Result<Kernel> {
        ensure!(config.frequency > 0, "the sampling frequency must be at least 1 Hz");
        ensure!(
            (1..=MAX_USER_FRAMES as u32).contains(&config.max_depth),
            "the maximum depth must be between 1 and {MAX_USER_FRAMES} frames, not {}",
            config.max_depth
        );
        ensure!(
            config.max_processes > 0,
            "the process map needs room for at least one process"
        );
        let sizes = tables::MapSizes::of(tables, config.table_capacity.as_ref())?;
        // Before anything attaches (see `tracefs`); only tracepoint events need it.
        let tracefs = tracefs::find_or_mount();
        if let (true, Err(why)) = (config.events.has(EventKind::Tracepoint), &tracefs) {
            bail!("tracepoint events attach through tracefs: {why}");
        }
        let _deferred = runtime::DeferSignals::new();
        // Lifted when the session started (`sys::session::prepare`).
        let memlock = crate::sys::session::memlock_left();
        let all_processes = u32::from(config.all_processes);
        let kernel_stacks = u32::from(config.kernel_stacks);
        let copy_stacks = u32::from(config.copy_stacks);
        let task_regs = runtime::has_task_regs();
        let offcpu = config.events.has(EventKind::Offcpu);
        ensure!(task_regs || !offcpu, OFFCPU_NEEDS_TASK_REGS);
        let task = if offcpu {
            btf::task_offsets()?
        } else {
            btf::TaskOffsets::default()
        };
        let min_block_ns = u64::try_from(config.events.min_block.as_nanos()).unwrap_or(u64::MAX);
        let mut vma = vma_offsets(config);
        let task_regs = u32::from(task_regs);
        let fsbase_offset = btf::fsbase_offset().unwrap_or_else(|err| {
            log::debug!("CPython before 3.11 is not walked: {err:#}");
            0
        });
        // Without them a process ends at its leader's exit, as the threads killed with it
        // still run (their samples then are copies of a process no longer known), and the
        // teardown of an exited process's memory is not sampled (`DYING`).
        let (signal_offset, live_offset, start_time_offset) = btf::exit_offsets().unwrap_or_else(|err| {
            log::debug!("a process ends at its leader's exit: {err:#}");
            (0, 0, 0)
        });
        let mut ebpf = EbpfLoader::new()
            .override_global(GLOBAL_MAX_DEPTH, &config.max_depth, true)
            .override_global(GLOBAL_ALL_PROCESSES, &all_processes, true)
            .override_global(GLOBAL_KERNEL_STACK, &kernel_stacks, true)
            .override_global(GLOBAL_TASK_REGS, &task_regs, true)
            .override_global(GLOBAL_COPY_STACKS, &copy_stacks, true)
            .override_global(GLOBAL_MIN_BLOCK_NS, &min_block_ns, true)
            .override_global(GLOBAL_TASK_PID_OFFSET, &task.pid, true)
            .override_global(GLOBAL_TASK_STATE_OFFSET, &task.state, true)
            .override_global(GLOBAL_TASK_FLAGS_OFFSET, &task.flags, true)
            .override_global(GLOBAL_VMA_OFFSETS, &vma.as_ref().copied().unwrap_or_default(), true)
            .override_global(GLOBAL_TASK_FSBASE_OFFSET, &fsbase_offset, true)
            .override_global(GLOBAL_TASK_SIGNAL_OFFSET, &signal_offset, true)
            .override_global(GLOBAL_SIGNAL_LIVE_OFFSET, &live_offset, true)
            .override_global(GLOBAL_TASK_START_TIME_OFFSET, &start_time_offset, true)
            .map_max_entries(MAP_PARKED, if offcpu { PARKED_ENTRIES } else { 1 })
            .map_max_entries(MAP_ROWS, sizes.rows)
            .map_max_entries(MAP_PAGES, sizes.pages)
            .map_max_entries(MAP_RULES, sizes.rules)
            .map_max_entries(MAP_PROCS, config.max_processes)
            .map_max_entries(MAP_EVENTS, config.ring_buffer_bytes)
            .load(PROGRAM)
            .map_err(|err| runtime::explain_load_failure(err.into(), memlock))?;
        runtime::forward_logs(&mut ebpf);
        // Whether the cpu-clock walker looks PCs up in VMAs.
        let mut lookups = false;
        if config.events.has(EventKind::CpuClock) {
            // Where the kernel refuses the walker with VMA lookups, the other one walks (and
            // what `PROCS` lacks becomes stack copies, as without it).
            let mut walker = PROG_WALK;
            if vma.is_ok() {
                match load_program(&mut ebpf, PROG_WALK_VMA) {
                    Ok(_) => walker = PROG_WALK_VMA,
                    Err(err) => {
                        log::warn!("PCs are not looked up in VMAs: {err:#}");
                        vma = Err(format!("{err:#}"));
                    }
                }
            }
            if walker == PROG_WALK {
                load_program(&mut ebpf, PROG_WALK)?;
            }
            lookups = walker == PROG_WALK_VMA;
            let walk = perf_event_mut(&mut ebpf, walker)?
                .fd()
                .and_then(|fd| fd.try_clone().map_err(Into::into))
                .with_context(|| format!("the file descriptor of {walker}"))?;
            load_program(&mut ebpf, PROG_ON_SAMPLE)?;
            let mut progs = ProgramArray::try_from(map_mut(&mut ebpf, MAP_PROGS)?)?;
            progs
                .set(PROG_WALK_SLOT, &walk, 0)
                .with_context(|| format!("installing {walker} in {MAP_PROGS}"))?;
        }
        probes::load(&mut ebpf, &config.events, lookups)?;
        let call_entries = entries::load(&mut ebpf, task_regs == 1, lookups);
        // With the VMA walker, exec and mmap also look the new code up (outside an interrupt,
        // where a lookup cannot be refused for a pending one), so that the first samples of a
        // new process walk without lookups of their own; elsewhere the programs without.
        let mut on_exec = PROG_ON_EXEC;
        if lookups {
            match load_raw_tracepoint(&mut ebpf, PROG_ON_EXEC_VMA) {
                Ok(()) => on_exec = PROG_ON_EXEC_VMA,
                Err(err) => log::warn!("code is not looked up at exec: {err:#}"),
            }
        }
        for name in [on_exec, PROG_ON_EXIT] {
            if name != PROG_ON_EXEC_VMA {
                load_raw_tracepoint(&mut ebpf, name)?;
            }
        }
        let on_mmap_exit = unmap::load(&mut ebpf, lookups)?;
        tables::sync(&mut ebpf, tables)?;
        Ok(Kernel {
            ebpf,
            frequency: config.frequency,
            events: config.events.clone(),
            event_links: Vec::new(),
            links: Vec::new(),
            lifecycle_attached: false,
            on_exec,
            on_mmap_exit,
            call_entries,
            tracefs,
            fsbase_offset,
            vma_lookups: vma.map(|_| ()),
        })
    }

    /// Write what changed in `tables` (objects added or removed) into the table maps.
    pub fn sync_tables(&mut self, tables: &mut TableSet) -> anyhow::Result<()> {
        tables::sync(&mut self.ebpf, tables)
    }

    /// Trace `tgid` with these executable mappings (replacing any it had): they are sorted,
    /// overlapping or empty ones and those beyond `MAX_MAPPINGS` are left out. Returns how many
    /// were left out.
    pub fn set_process(&mut self, tgid: u32, mappings: &[ExecMapping]) -> anyhow::Result<usize> {
        procs::set(map_mut(&mut self.ebpf, MAP_PROCS)?, tgid, mappings)
    }

    /// Stop tracing `tgid` (nothing happens if it was not traced).
    pub fn remove_process(&mut self, tgid: u32) -> anyhow::Result<()> {
        procs::remove(map_mut(&mut self.ebpf, MAP_PROCS)?, tgid)
    }

    /// Start following exec and exit, then sampling: cpu-clock at the configured frequency on
    /// every online CPU, and the other events.
    pub fn attach(&mut self) -> anyhow::Result<()> {
        if !self.lifecycle_attached {
            for (name, tracepoint) in [(self.on_exec, TRACEPOINT_EXEC), (PROG_ON_EXIT, TRACEPOINT_EXIT)] {
                raw_tracepoint_mut(&mut self.ebpf, name)?
                    .attach(tracepoint)
                    .with_context(|| format!("attaching {name} to the {tracepoint} raw tracepoint"))?;
            }
            unmap::attach(&mut self.ebpf, &self.tracefs, self.on_mmap_exit)?;
            if self.call_entries {
                entries::attach(&mut self.ebpf, &self.tracefs)?;
            }
            self.lifecycle_attached = true;
        }
        if self.event_links.is_empty() {
            self.event_links = probes::attach(&mut self.ebpf, &self.events, &self.tracefs)?;
        }
        if !self.events.has(EventKind::CpuClock) {
            return Ok(());
        }
        let cpus = online_cpus().map_err(|(path, err)| anyhow::anyhow!("reading {path}: {err}"))?;
        let frequency = self.frequency;
        let program = perf_event_mut(&mut self.ebpf, PROG_ON_SAMPLE)?;
        for cpu in cpus {
            let link = program
                .attach(
                    PerfEventConfig::Software(SoftwareEvent::CpuClock),
                    PerfEventScope::AllProcessesOneCpu { cpu },
                    SamplePolicy::Frequency(frequency),
                    false,
                )
                .with_context(|| format!("attaching to cpu-clock on CPU {cpu}"))?;
            self.links.push(link);
        }
        Ok(())
    }

    /// Stop sampling (the ring buffer can then be drained). Does nothing if not attached.
    pub fn detach(&mut self) {
        probes::detach(&mut self.ebpf, std::mem::take(&mut self.event_links));
        if self.links.is_empty() {
            return;
        }
        let Ok(program) = perf_event_mut(&mut self.ebpf, PROG_ON_SAMPLE) else {
            return;
        };
        for link in self.links.drain(..) {
            if let Err(err) = program.detach(link) {
                log::warn!("detaching {PROG_ON_SAMPLE} from a CPU: {err}");
            }
        }
    }

    /// The sample stream. Once only: it takes the ring buffer. Needs a tokio runtime.
    pub fn events(&mut self) -> anyhow::Result<Events> {
        let map = self
            .ebpf
            .take_map(MAP_EVENTS)
            .with_context(|| format!("map {MAP_EVENTS} missing from the eBPF object, or its events already taken"))?;
        Events::new(map, MAP_EVENTS)
    }

    /// The process notices (exec, exit, new processes, unknown code). Once only, like
    /// [`Kernel::events`].
    pub fn notices(&mut self) -> anyhow::Result<Notices> {
        let map = self
            .ebpf
            .take_map(MAP_NOTICES)
            .with_context(|| format!("map {MAP_NOTICES} missing from the eBPF object, or already taken"))?;
        Notices::new(map, MAP_NOTICES)
    }

    /// Counter totals over all CPUs, in [`Counter::ALL`] order.
    pub fn counters(&self) -> anyhow::Result<Vec<(Counter, u64)>> {
        let array = per_cpu_u64(&self.ebpf, MAP_COUNTERS)?;
        Counter::ALL.iter().map(|&c| Ok((c, sum(&array, c as u32)?))).collect()
    }

    /// Why walks ended, totals over all CPUs, in [`StopReason::ALL`] order.
    pub fn stop_reasons(&self) -> anyhow::Result<Vec<(StopReason, u64)>> {
        let array = per_cpu_u64(&self.ebpf, MAP_STOPS)?;
        StopReason::ALL
            .iter()
            .map(|&r| Ok((r, sum(&array, r as u32)?)))
            .collect()
    }

    /// Whether the cpu-clock walker looks PCs up in VMAs, or why not (the verifier's refusal,
    /// a kernel without `bpf_find_vma`, a BTF without a member).
    pub fn vma_lookups(&self) -> Result<(), &str> {
        self.vma_lookups.as_ref().map(|_| ()).map_err(String::as_str)
    }

    /// Per loaded program, the instructions the verifier processed (its complexity measure,
    /// limited to 1M; kernels before 5.16 do not report it: there, the translated size).
    pub fn program_sizes(&self) -> anyhow::Result<Vec<(&'static str, u32)>> {
        let cpu_clock = self.events.has(EventKind::CpuClock);
        // The walker loaded (`walk_user_vma` or `walk_user`).
        let walker = [PROG_WALK_VMA, PROG_WALK]
            .into_iter()
            .find(|name| self.ebpf.program(name).is_some_and(|p| p.fd().is_ok()))
            .unwrap_or(PROG_WALK);
        let cpu_clock = [PROG_ON_SAMPLE, walker].into_iter().filter(|_| cpu_clock);
        // The tracepoint walker loaded, where the events ask for one.
        let loaded = |name: &'static str| self.ebpf.program(name).is_some_and(|p| p.fd().is_ok());
        let tracepoint_walker = |name: &'static str| match name {
            PROG_WALK_TRACEPOINT if loaded(PROG_WALK_TRACEPOINT_VMA) => PROG_WALK_TRACEPOINT_VMA,
            name => name,
        };
        cpu_clock
            .chain(probes::programs(&self.events).into_iter().map(tracepoint_walker))
            .map(|name| {
                let info = self
                    .ebpf
                    .program(name)
                    .with_context(|| format!("program {name} missing from the eBPF object"))?
                    .info()
                    .with_context(|| format!("reading the program info of {name}"))?;
                let count = info
                    .verified_instruction_count()
                    .or_else(|| info.size_translated().map(|bytes| bytes / 8))
                    .unwrap_or(0);
                Ok((name, count))
            })
            .collect()
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        self.detach();
    }
}

fn load_program<'a>(ebpf: &'a mut Ebpf, name: &str) -> anyhow::Result<&'a mut PerfEvent> {
    let program = perf_event_mut(ebpf, name)?;
    program.load().map_err(|err| runtime::rejected(name, err))?;
    Ok(program)
}

fn load_raw_tracepoint(ebpf: &mut Ebpf, name: &str) -> anyhow::Result<()> {
    raw_tracepoint_mut(ebpf, name)?
        .load()
        .map_err(|err| runtime::rejected(name, err))
}

fn raw_tracepoint_mut<'a>(ebpf: &'a mut Ebpf, name: &str) -> anyhow::Result<&'a mut RawTracePoint> {
    let program = ebpf
        .program_mut(name)
        .with_context(|| format!("program {name} missing from the eBPF object"))?;
    program
        .try_into()
        .with_context(|| format!("program {name} is not a raw tracepoint program"))
}

/// The kernel structure offsets `walk_user_vma` reads with, when it is the cpu-clock walker:
/// sampling on a kernel with `bpf_find_vma` (5.17+) whose BTF has every member (otherwise why
/// not: the walker without it, and stack copies for what `PROCS` lacks).
fn vma_offsets(config: &KernelConfig) -> Result<tracer_common::vma::VmaOffsets, String> {
    if !config.events.has(EventKind::CpuClock) {
        return Err("no cpu-clock sampling".to_owned());
    }
    if std::env::var_os(NO_FIND_VMA).is_some() {
        return Err(format!("{NO_FIND_VMA} is set"));
    }
    if !runtime::has_find_vma() {
        return Err("the kernel's perf_event programs have no bpf_find_vma (Linux 5.17+)".to_owned());
    }
    let mut offsets = btf::vma_offsets().map_err(|err| {
        log::debug!("PCs are not looked up in VMAs: {err:#}");
        format!("the kernel's BTF: {err:#}")
    })?;
    let page = crate::sys::page_size();
    offsets.page_shift = u64::try_from(page)
        .ok()
        .filter(|p| p.is_power_of_two())
        .ok_or_else(|| format!("a page size of {page} bytes"))?
        .trailing_zeros();
    Ok(offsets)
}

/// Set (to anything) in the environment: the kernel does not look PCs up in VMAs even where it
/// can (the walk of before, for comparisons: `cargo xtask bench`, `first_sample`).
pub const NO_FIND_VMA: &str = "SFRAME_TRACE_NO_FIND_VMA";

/// Whether a map operation failed because the key was not there (Linux `ENOENT`).
fn is_missing(err: &aya::maps::MapError) -> bool {
    const ENOENT: i32 = 2;
    matches!(err, aya::maps::MapError::SyscallError(e) if e.io_error.raw_os_error() == Some(ENOENT))
}

fn perf_event_mut<'a>(ebpf: &'a mut Ebpf, name: &str) -> anyhow::Result<&'a mut PerfEvent> {
    let program = ebpf
        .program_mut(name)
        .with_context(|| format!("program {name} missing from the eBPF object"))?;
    program
        .try_into()
        .with_context(|| format!("program {name} is not a perf_event program"))
}

fn map_mut<'a>(ebpf: &'a mut Ebpf, name: &str) -> anyhow::Result<&'a mut aya::maps::Map> {
    ebpf.map_mut(name)
        .with_context(|| format!("map {name} missing from the eBPF object"))
}

fn per_cpu_u64<'a>(ebpf: &'a Ebpf, name: &str) -> anyhow::Result<PerCpuArray<&'a MapData, u64>> {
    let map = ebpf
        .map(name)
        .with_context(|| format!("map {name} missing from the eBPF object"))?;
    PerCpuArray::try_from(map).with_context(|| format!("map {name} is not a per-CPU array of u64"))
}

fn sum(array: &PerCpuArray<&MapData, u64>, index: u32) -> anyhow::Result<u64> {
    let per_cpu = array
        .get(&index, 0)
        .with_context(|| format!("reading counter slot {index}"))?;
    Ok(per_cpu.iter().sum())
}

#[cfg(test)]
mod tests;
