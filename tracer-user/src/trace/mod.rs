//! `sframe-trace --pid PID` / `sframe-trace -- COMMAND`: the tracing session. Finds the traced
//! processes' code, builds and loads the unwind tables, samples until the processes exit, the
//! duration ends or a signal arrives, then symbolizes and writes the stacks and a summary.
//! Parsing and table building live in their own modules; this one only sequences them.

mod budget;
mod follow;
mod kernel;
mod launch;
mod live;
pub(crate) mod objects;
pub mod offline;
mod otlp;
mod outfile;
mod output;
pub(crate) mod profile;
mod setup;
mod summary;
pub(crate) mod symbolize;
pub mod symfiles;
mod targets;

use std::{
    ffi::OsString,
    time::{Duration, Instant},
};

use follow::Follower;
pub use outfile::OutputFileError;
pub use output::OutputSpec;
use profile::Profile;
pub use summary::{SummaryFormat, SummarySpec};
use targets::Targets;

/// Samples handled in a row, at most: those waiting when a process notice comes in (before
/// its tables load), or when the samples are read (before the loop looks at its other work).
const BATCH: usize = 256;
/// How often exited processes are forgotten and unused tables unloaded.
const HOUSEKEEPING: Duration = Duration::from_secs(1);

/// A validated tracing configuration.
#[derive(Debug)]
pub struct TraceConfig {
    /// Every process, including those started later (no pids and no command).
    pub all: bool,
    /// Kernel memory the unwind tables may use at most.
    pub max_table_memory: u64,
    /// Bytes of the sample ring buffer (a power of two, at least the page size).
    pub ring_buffer_bytes: u32,
    pub pids: Vec<u32>,
    /// The command to launch and trace (program and arguments, as given: any bytes).
    pub command: Vec<OsString>,
    pub frequency: u64,
    pub duration: Option<Duration>,
    pub max_depth: u32,
    pub kernel_stacks: bool,
    /// The files (or stdout) the stacks are written to, each in its format (not otlp).
    pub outputs: Vec<OutputSpec>,
    /// Inlined functions as frames of their own (`--no-inline` turns it off).
    pub inline: bool,
    /// `-f otlp`: where and how often to export.
    pub otlp: Option<crate::export::otlp::OtlpConfig>,
    /// What stacks are taken on (`-e`), uprobe targets resolved.
    pub events: crate::event::EventSet,
    /// `--live`: the terminal view while tracing (stdout is a terminal).
    pub live: bool,
    /// `--summary-format`, `--summary-output`.
    pub summary: SummarySpec,
}

/// How a session that traced ended, for the exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Every output written (and exported, with `-f otlp`).
    Complete,
    /// An output could not be written (named in the summary); the others were.
    OutputFailed,
    /// Every OTLP export failed: nothing reached the collector.
    NothingExported,
}

/// Print to stderr, never failing: after a hangup the terminal may be gone, or stderr a pipe
/// whose reader left, and by then the outputs are written.
pub(crate) fn say(text: std::fmt::Arguments<'_>) {
    let _ = std::io::Write::write_fmt(&mut std::io::stderr(), text);
}

/// Trace, write the stacks, print the summary.
pub async fn run(config: TraceConfig) -> anyhow::Result<Ended> {
    // First, so that Ctrl-C or SIGTERM while the tables load still ends with the output written.
    let mut signals = targets::Signals::listen()?;
    crate::bpf::preflight()?;
    crate::bpf::check_events(&config.events)?;
    let started = Instant::now();
    let mut output = output::Outputs::open(&config)?;
    let summary_out = summary::SummaryOut::open(&config.summary)?;
    let mut targets = if config.all {
        Targets::all()?
    } else {
        Targets::start(&config.pids, &config.command)?
    };
    let setup::Started {
        mut catalog,
        mut kernel,
        skipped,
        deferred,
    } = setup::start(&config, &targets, &mut signals)?;
    let mut events = kernel.events()?;
    let mut notices = kernel.notices()?;
    kernel.attach()?;
    targets.release();
    let (mut follower, mut built) = Follower::new();
    follower.stats.vanished += skipped;
    for pid in deferred {
        follower.load(pid, &mut catalog, &mut kernel)?;
    }
    let mut housekeeping = tokio::time::interval(HOUSEKEEPING);
    say(format_args!(
        "sframe-trace: sampling {} {}{}; Ctrl-C to stop\n",
        targets.describe(),
        config.events.describe(config.frequency),
        config
            .duration
            .map(|d| format!(" for {:.1} s", d.as_secs_f64()))
            .unwrap_or_default()
    ));

    let mut profile = Profile::new(config.events.names());
    let mut otlp = otlp::Otlp::start(&config, targets.pids())?;
    let (mut live, mut quit) = live::Live::start(&config)?;
    let why = {
        let stop = targets.until_done(config.duration, &mut signals);
        tokio::pin!(stop);
        loop {
            tokio::select! {
                // In this order: the end, then process notices and built tables (samples wait
                // in their ring buffer, and the sooner a process is loaded, the fewer of its
                // samples come out short), then timers, then samples.
                biased;
                why = &mut stop => break why,
                why = quit.wait() => break why,
                notice = notices.next() => if let Some(&notice) = notice {
                    // An exit, an exec or unmapped code ends the mappings the samples queued are
                    // resolved with.
                    follower.ended(&notice, &mut catalog);
                    // Loading can take a while: make room in the sample ring buffer first (a
                    // bounded number: when samples arrive faster than they are written, an
                    // unbounded drain would never end).
                    for _ in 0..BATCH {
                        let Some(sample) = events.try_next() else { break };
                        notices_first(&mut notices, &mut follower, &mut catalog, &mut kernel)?;
                        take(sample, &mut profile, &mut output, &mut catalog);
                    }
                    follower.notice(&notice, &mut catalog, &mut kernel)?;
                },
                Some(tables) = built.recv() => follower.built(tables, &mut catalog, &mut kernel)?,
                _ = housekeeping.tick() => {
                    follower.housekeep(&mut catalog, &mut kernel)?;
                    catalog.jit.refresh(false, objects::monotonic_ns());
                }
                () = otlp.due() => {
                    live.keep(&profile);
                    output.keep(&profile);
                    otlp.export(&mut profile, &catalog);
                }
                () = live.due() => live.show(&profile, &catalog, &kernel)?,
                sample = events.next() => match sample {
                    Some(sample) => {
                        notices_first(&mut notices, &mut follower, &mut catalog, &mut kernel)?;
                        take(sample, &mut profile, &mut output, &mut catalog);
                        // The rest of what is waiting, in one go: each turn of the loop costs
                        // more than a sample.
                        for _ in 1..BATCH {
                            let Some(sample) = events.try_next() else { break };
                            notices_first(&mut notices, &mut follower, &mut catalog, &mut kernel)?;
                            take(sample, &mut profile, &mut output, &mut catalog);
                        }
                        // Code compiled into a known JIT region since its jitdump was read.
                        for pid in catalog.take_dump_rereads() {
                            follower.load(pid, &mut catalog, &mut kernel)?;
                        }
                    }
                    None => break "the ring buffer closed",
                },
            }
        }
    };
    // The terminal is back before anything else is printed.
    live.finish();
    kernel.detach();
    while let Some(sample) = events.try_next() {
        take(sample, &mut profile, &mut output, &mut catalog);
    }
    targets.finish().await;
    // Missing debug files may be fetched from now on (never while samples are taken).
    symfiles::end_sampling();
    follower.stats.traced_at_end = catalog.processes.len() as u64;
    // What the JIT runtimes wrote until the end (some write their perf map at exit).
    catalog.jit.refresh(true, objects::monotonic_ns());
    output.keep(&profile);
    otlp.export(&mut profile, &catalog);
    let failed_outputs = output.finish(&profile, &catalog);
    // The exports are flushed first: the summary counts what reached the collector.
    let exported = otlp.finish().await;
    let summary = summary::Summary {
        elapsed: started.elapsed(),
        why,
        profile: &profile,
        catalog: &catalog,
        counters: kernel.counters()?,
        stops: kernel.stop_reasons()?,
        table_bytes: catalog.tables.map_bytes(),
        table_capacity_bytes: catalog.tables.capacity_bytes(),
        follow: follower.stats,
        failed_outputs: &failed_outputs,
        otlp: exported.as_ref(),
    };
    let mut ended = if failed_outputs.is_empty() {
        Ended::Complete
    } else {
        Ended::OutputFailed
    };
    if let Err(err) = summary_out.write(&summary) {
        say(format_args!("sframe-trace: {err:#}\n"));
        ended = Ended::OutputFailed;
    }
    if let Some(report) = exported
        && report.sent == 0
        && report.dropped() > 0
    {
        say(format_args!(
            "sframe-trace: every OTLP export failed: nothing reached {}\n",
            report.destination
        ));
        if ended == Ended::Complete {
            ended = Ended::NothingExported;
        }
    }
    Ok(ended)
}

/// Fold `sample` into the profile and stream it to the outputs that are written as it goes.
fn take(
    sample: &tracer_common::trace::Sample,
    profile: &mut Profile,
    output: &mut output::Outputs,
    catalog: &mut objects::Catalog,
) {
    profile.add(sample, catalog);
    // JIT code not named yet: its perf map may have grown since it was read.
    if catalog.jit.is_wanted() {
        catalog.jit.refresh_wanted();
    }
    output.sample(sample, catalog);
}

/// Act on the notices sent so far, before a sample is resolved: those sent before it was taken
/// (an exit and a new process with the same pid, an exec, code unmapped) decide which mappings
/// resolve it, and their ring buffer's readiness can lag behind the samples'.
fn notices_first(
    notices: &mut crate::bpf::Notices,
    follower: &mut Follower,
    catalog: &mut objects::Catalog,
    kernel: &mut crate::bpf::Kernel,
) -> anyhow::Result<()> {
    while let Some(notice) = notices.try_next() {
        follower.notice(notice, catalog, kernel)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
