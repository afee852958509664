//! Kernel plumbing: preflight checks, loading the embedded eBPF program with maps sized for the
//! tables to load, filling those maps, keeping the traced processes' mappings current,
//! attaching to cpu-clock on every online CPU, and reading samples and counters back. Nothing
//! here parses unwind information or `/proc` (it gets a [`TableSet`] and [`ExecMapping`]s);
//! it only moves data between userspace and the kernel.
//!
//! Submodules: `tables` (the table maps), `procs` (the process map), `events` (the ring
//! buffer), `runtime` (memlock limit and aya-log forwarding).

mod events;
mod procs;
mod runtime;
mod tables;

use std::path::Path;

use anyhow::{Context as _, bail, ensure};
use aya::{
    Ebpf, EbpfLoader,
    maps::{MapData, PerCpuArray, ProgramArray},
    programs::{
        PerfEvent,
        perf_event::{PerfEventConfig, PerfEventLinkId, PerfEventScope, SamplePolicy, SoftwareEvent},
    },
    util::online_cpus,
};
use tracer_common::{
    Counter, MAP_COUNTERS, PROG_ON_SAMPLE,
    trace::{
        ExecMapping, GLOBAL_ALL_PROCESSES, GLOBAL_KERNEL_STACK, GLOBAL_MAX_DEPTH, GLOBAL_TASK_REGS, MAP_EVENTS,
        MAP_PAGES, MAP_PROCS, MAP_PROGS, MAP_ROWS, MAP_RULES, MAP_STOPS, MAX_USER_FRAMES, PROG_WALK, PROG_WALK_SLOT,
    },
    walk::StopReason,
};

pub use events::Events;

use crate::table::TableSet;

/// The eBPF object built by `build.rs` from `tracer-ebpf`.
static PROGRAM: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer"));

/// Size of the sample ring buffer: about 1,400 samples of 5.7 KiB.
const EVENTS_BYTES: u32 = 8 << 20;

/// Why this host cannot trace, as one sentence, or Ok.
pub fn preflight() -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        bail!("sframe-trace needs root (or CAP_BPF and CAP_PERFMON) to load its eBPF program: run it with sudo");
    }
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        bail!(
            "this kernel has no BTF (/sys/kernel/btf/vmlinux is missing): sframe-trace needs a kernel built with CONFIG_DEBUG_INFO_BTF=y"
        );
    }
    Ok(())
}

/// What the kernel side is loaded with (fixed for its lifetime: the globals are read-only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
}

/// The loaded programs and maps.
pub struct Kernel {
    ebpf: Ebpf,
    frequency: u64,
    links: Vec<PerfEventLinkId>,
    table_map_bytes: u64,
}

impl Kernel {
    /// Create maps sized from `tables` (`ROWS` in whole chunks, `PAGES`, `RULES`, each at least
    /// one entry; `PROCS` = `max_processes`), set the globals, load both programs, wire the tail
    /// call and fill the table maps. Does not attach. Call it inside a tokio runtime to have
    /// the program's log records forwarded.
    pub fn load(config: &KernelConfig, tables: &TableSet) -> anyhow::Result<Kernel> {
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
        let sizes = tables::MapSizes::of(tables)?;
        runtime::raise_memlock_limit();
        let all_processes = u32::from(config.all_processes);
        let kernel_stacks = u32::from(config.kernel_stacks);
        let task_regs = u32::from(runtime::has_task_regs());
        let mut ebpf = EbpfLoader::new()
            .override_global(GLOBAL_MAX_DEPTH, &config.max_depth, true)
            .override_global(GLOBAL_ALL_PROCESSES, &all_processes, true)
            .override_global(GLOBAL_KERNEL_STACK, &kernel_stacks, true)
            .override_global(GLOBAL_TASK_REGS, &task_regs, true)
            .map_max_entries(MAP_ROWS, sizes.rows)
            .map_max_entries(MAP_PAGES, sizes.pages)
            .map_max_entries(MAP_RULES, sizes.rules)
            .map_max_entries(MAP_PROCS, config.max_processes)
            .map_max_entries(MAP_EVENTS, EVENTS_BYTES)
            .load(PROGRAM)
            .context("loading the eBPF object (creating its maps)")?;
        runtime::forward_logs(&mut ebpf);
        let walk = load_program(&mut ebpf, PROG_WALK)?
            .fd()
            .and_then(|fd| fd.try_clone().map_err(Into::into))
            .with_context(|| format!("the file descriptor of {PROG_WALK}"))?;
        load_program(&mut ebpf, PROG_ON_SAMPLE)?;
        let mut progs = ProgramArray::try_from(map_mut(&mut ebpf, MAP_PROGS)?)?;
        progs
            .set(PROG_WALK_SLOT, &walk, 0)
            .with_context(|| format!("installing {PROG_WALK} in {MAP_PROGS}"))?;
        tables::fill(&mut ebpf, tables)?;
        Ok(Kernel {
            ebpf,
            frequency: config.frequency,
            links: Vec::new(),
            table_map_bytes: tables.map_bytes(),
        })
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

    /// Start sampling: cpu-clock at the configured frequency on every online CPU.
    pub fn attach(&mut self) -> anyhow::Result<()> {
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
        Events::new(map)
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

    /// Per loaded program, the instructions the verifier processed (its complexity measure,
    /// limited to 1M; kernels before 5.16 do not report it: there, the translated size).
    pub fn program_sizes(&self) -> anyhow::Result<Vec<(&'static str, u32)>> {
        [PROG_ON_SAMPLE, PROG_WALK]
            .into_iter()
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

    /// Kernel memory of the table maps ([`TableSet::map_bytes`] of what was loaded).
    pub fn table_map_bytes(&self) -> u64 {
        self.table_map_bytes
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        self.detach();
    }
}

fn load_program<'a>(ebpf: &'a mut Ebpf, name: &str) -> anyhow::Result<&'a mut PerfEvent> {
    let program = perf_event_mut(ebpf, name)?;
    program
        .load()
        .with_context(|| format!("the kernel verifier rejected {name}"))?;
    Ok(program)
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
