//! `sframe-trace --pid PID` / `sframe-trace -- COMMAND`: the tracing session. Finds the traced
//! processes' code, builds and loads the unwind tables, samples until the processes exit, the
//! duration ends or a signal arrives, then symbolizes and writes the stacks and a summary.
//! Parsing and table building live in their own modules; this one only sequences them.

pub(crate) mod objects;
mod otlp;
mod output;
pub(crate) mod profile;
mod summary;
pub(crate) mod symbolize;
mod targets;

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::Context as _;

use crate::{
    bpf::{Kernel, KernelConfig},
    procmaps,
};
use objects::Catalog;
use profile::Profile;
use targets::Targets;

/// A validated tracing configuration.
#[derive(Debug)]
pub struct TraceConfig {
    pub pids: Vec<u32>,
    pub command: Vec<String>,
    pub frequency: u64,
    pub duration: Option<Duration>,
    pub max_depth: u32,
    pub kernel_stacks: bool,
    pub output: Option<PathBuf>,
    pub format: crate::export::Format,
    /// Inlined functions as frames of their own (`--no-inline` turns it off).
    pub inline: bool,
    /// `-f otlp`: where and how often to export.
    pub otlp: Option<crate::export::otlp::OtlpConfig>,
}

/// Trace, write the stacks, print the summary.
pub async fn run(config: TraceConfig) -> anyhow::Result<()> {
    crate::bpf::preflight()?;
    let started = Instant::now();
    let mut output = output::Output::open(&config)?;
    let mut targets = Targets::start(&config.pids, &config.command).await?;

    let mut catalog = Catalog::default();
    let mut exec = Vec::new();
    for &pid in targets.pids() {
        let mappings =
            procmaps::executable_mappings(pid).with_context(|| format!("reading the mappings of pid {pid}"))?;
        exec.push((pid, catalog.add_process(pid, &mappings)));
    }
    let kernel_config = KernelConfig {
        frequency: config.frequency,
        max_depth: config.max_depth,
        kernel_stacks: config.kernel_stacks,
        all_processes: false,
        max_processes: u32::try_from(exec.len()).unwrap_or(u32::MAX).max(1),
    };
    let mut kernel = Kernel::load(&kernel_config, &catalog.tables)?;
    for (pid, mappings) in &exec {
        kernel.set_process(*pid, mappings)?;
    }
    let mut events = kernel.events()?;
    kernel.attach()?;
    eprintln!(
        "sframe-trace: sampling {} at {} Hz{}; Ctrl-C to stop",
        targets.describe(),
        config.frequency,
        config
            .duration
            .map(|d| format!(" for {:.1} s", d.as_secs_f64()))
            .unwrap_or_default()
    );

    let mut profile = Profile::default();
    let mut otlp = otlp::Otlp::start(&config, targets.pids())?;
    let why = {
        let stop = targets.until_done(config.duration);
        tokio::pin!(stop);
        loop {
            tokio::select! {
                sample = events.next() => match sample {
                    Some(sample) => {
                        profile.add(&sample, &catalog);
                        output.sample(&sample, &catalog)?;
                    }
                    None => break "the ring buffer closed",
                },
                () = otlp.due() => otlp.export(&mut profile, &catalog),
                why = &mut stop => break why?,
            }
        }
    };
    kernel.detach();
    while let Some(sample) = events.try_next() {
        profile.add(&sample, &catalog);
        output.sample(&sample, &catalog)?;
    }
    targets.finish().await;
    otlp.export(&mut profile, &catalog);

    output.finish(&profile, &catalog)?;
    let summary = summary::Summary {
        elapsed: started.elapsed(),
        why,
        profile: &profile,
        catalog: &catalog,
        counters: kernel.counters()?,
        stops: kernel.stop_reasons()?,
        table_bytes: kernel.table_map_bytes(),
    };
    eprint!("{summary}");
    if let Some(report) = otlp.finish().await {
        eprint!("{report}");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
