//! The start of a session: read the mappings of the processes traced from the start, build
//! their tables within the `--max-table-memory` budget (with a progress line on stderr when
//! that takes more than a second), create the kernel maps with room to grow, and load the
//! programs and processes. Nothing is attached here.

use std::{
    io::IsTerminal as _,
    time::{Duration, Instant},
};

use anyhow::Context as _;

use super::{
    TraceConfig,
    targets::{Signals, Targets},
};
use crate::registry::{Catalog, budget};
use crate::tables::TableSet;
use crate::{
    bpf::{Kernel, KernelConfig},
    procmaps,
};

/// Processes the process map has room for in system-wide mode: twice those running at start
/// plus headroom, within these bounds.
const ALL_PROCESSES_MIN: usize = 1024;
const ALL_PROCESSES_MAX: usize = 65536;

/// What the session starts with.
pub struct Started {
    pub catalog: Catalog,
    pub kernel: Kernel,
    /// Processes running at start that could not be traced (gone, or no room), system-wide.
    pub skipped: u64,
    /// Processes running at start whose tables are built once sampling runs.
    pub deferred: Vec<u32>,
}

/// New objects (files) of a process larger than this in total are built after the start.
const DEFER_BYTES: u64 = 8 << 20;
/// Room kept for deferred objects: their table takes about this many times less than the file
/// (measured: glibc 18, a compiler's 130 MB library 15).
const FILE_BYTES_PER_TABLE_BYTE: u64 = 16;

/// The size of the files of the mappings that have no table yet.
fn new_bytes(catalog: &Catalog, mappings: &[procmaps::Mapping]) -> u64 {
    catalog.missing(mappings).iter().map(|m| m.key.size).sum()
}

/// Build and load everything for `targets`. A signal (`signals`) stops the building of
/// tables early: the session that follows ends at once.
pub fn start(config: &TraceConfig, targets: &Targets, signals: &mut Signals) -> anyhow::Result<Started> {
    let budget = budget::for_budget(config.max_table_memory);
    let mut catalog = Catalog::with_tables(TableSet::with_capacity(budget));
    catalog.runtimes.jit.names.budget = crate::jit::budget::JitBudget::new(config.max_jit_memory);
    catalog.runtimes.v8.set_enabled(config.javascript);
    let mut progress = Progress::new(targets.pids().len());
    let mut exec = Vec::new();
    let mut skipped = 0;
    let (mut deferred, mut deferred_bytes) = (Vec::new(), 0u64);
    for (i, &pid) in targets.pids().iter().enumerate() {
        if signals.received().is_some() {
            break;
        }
        progress.show(i, catalog.objects.len());
        match procmaps::executable_mappings_with(pid, &|key| catalog.known_file(key)) {
            // Kernel threads map nothing.
            Ok(mappings) if mappings.is_empty() && targets.is_all() => {}
            Ok(mappings) => {
                let new = if targets.is_all() {
                    new_bytes(&catalog, &mappings)
                } else {
                    0
                };
                if new > DEFER_BYTES {
                    // Large new objects (a compiler's libraries) would hold up the start: they
                    // are built in the background once sampling runs.
                    deferred_bytes += new;
                    deferred.push(pid);
                } else {
                    exec.push((pid, catalog.add_process(pid, &mappings)));
                }
            }
            Err(_) if targets.is_all() => skipped += 1,
            Err(err) => return Err(err).with_context(|| format!("reading the mappings of pid {pid}")),
        }
    }
    progress.done(catalog.objects.len());
    let capacity = budget::with_headroom(
        &catalog.loader.tables,
        &budget,
        deferred_bytes / FILE_BYTES_PER_TABLE_BYTE,
    );
    catalog.loader.tables.set_capacity(capacity);
    let max_processes = if targets.is_all() {
        (exec.len() * 2 + 256).clamp(ALL_PROCESSES_MIN, ALL_PROCESSES_MAX)
    } else {
        exec.len().max(1)
    };
    let kernel_config = KernelConfig {
        frequency: config.frequency,
        max_depth: config.max_depth,
        kernel_stacks: config.kernel_stacks,
        all_processes: targets.is_all(),
        max_processes: u32::try_from(max_processes).unwrap_or(u32::MAX),
        table_capacity: Some(capacity),
        events: config.events.clone(),
        ring_buffer_bytes: config.ring_buffer_bytes,
        copy_stacks: config.record_snapshots.is_some(),
    };
    let mut kernel = Kernel::load(&kernel_config, &mut catalog.loader.tables)?;
    for (pid, mappings) in &exec {
        match kernel.set_process(*pid, mappings) {
            Ok(_) => log::debug!(target: crate::manager::LOAD_LOG, "pid {pid} loaded"),
            Err(_) if targets.is_all() => skipped += 1,
            Err(err) => return Err(err),
        }
    }
    Ok(Started {
        catalog,
        kernel,
        skipped,
        deferred,
    })
}

/// A progress line on stderr, shown once loading has taken a second: rewritten in place on a
/// terminal, else one line every few seconds.
struct Progress {
    started: Instant,
    last: Option<Instant>,
    total: usize,
    terminal: bool,
}

impl Progress {
    fn new(total: usize) -> Progress {
        Progress {
            started: Instant::now(),
            last: None,
            total,
            terminal: std::io::stderr().is_terminal(),
        }
    }

    fn show(&mut self, done: usize, objects: usize) {
        let every = if self.terminal {
            Duration::from_millis(100)
        } else {
            Duration::from_secs(5)
        };
        if self.started.elapsed() < Duration::from_secs(1) || self.last.is_some_and(|t| t.elapsed() < every) {
            return;
        }
        self.last = Some(Instant::now());
        let line = format!(
            "sframe-trace: loading unwind tables: {done}/{} processes, {objects} objects",
            self.total
        );
        if self.terminal {
            super::say(format_args!("\r{line}\x1b[K"));
        } else {
            super::say(format_args!("{line}\n"));
        }
    }

    fn done(&mut self, objects: usize) {
        if self.last.is_some() {
            let line = format!(
                "sframe-trace: loaded unwind tables of {objects} objects in {:.1} s",
                self.started.elapsed().as_secs_f64()
            );
            if self.terminal {
                super::say(format_args!("\r{line}\x1b[K\n"));
            } else {
                super::say(format_args!("{line}\n"));
            }
        }
    }
}
