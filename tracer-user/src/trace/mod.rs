//! `sframe-trace --pid PID` / `sframe-trace -- COMMAND`: the tracing session. Finds the traced
//! processes' code, builds and loads the unwind tables, samples until the processes exit, the
//! duration ends or a signal arrives, then symbolizes and writes the stacks and a summary.
//! Parsing and table building live in their own modules; this one only sequences them.

mod folded;
mod objects;
mod profile;
mod summary;
mod symbolize;
mod targets;

use std::{
    io::Write as _,
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
}

/// Trace, write the stacks, print the summary.
pub async fn run(config: TraceConfig) -> anyhow::Result<()> {
    crate::bpf::preflight()?;
    let started = Instant::now();
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
    let why = {
        let stop = targets.until_done(config.duration);
        tokio::pin!(stop);
        loop {
            tokio::select! {
                sample = events.next() => match sample {
                    Some(sample) => profile.add(&sample, &catalog),
                    None => break "the ring buffer closed",
                },
                why = &mut stop => break why?,
            }
        }
    };
    kernel.detach();
    while let Some(sample) = events.try_next() {
        profile.add(&sample, &catalog);
    }
    targets.finish().await;

    write_output(&config, &profile, &catalog)?;
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
    Ok(())
}

fn write_output(config: &TraceConfig, profile: &Profile, catalog: &Catalog) -> anyhow::Result<()> {
    let names = symbolize::Names::resolve(
        profile.stacks.keys().flat_map(|s| s.user.iter().chain(&s.kernel)),
        catalog,
    );
    match &config.output {
        Some(path) => {
            let file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
            let mut out = std::io::BufWriter::new(file);
            folded::write(&mut out, profile, &names).with_context(|| format!("writing {}", path.display()))?;
        }
        None => {
            let mut out = std::io::stdout().lock();
            folded::write(&mut out, profile, &names)?;
            out.flush()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
