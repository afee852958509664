//! `sframe-trace --pid PID` / `sframe-trace -- COMMAND`: the tracing session. Finds the traced
//! processes' code, builds and loads the unwind tables, samples until the processes exit, the
//! duration ends or a signal arrives, then symbolizes and writes the stacks and a summary.
//! Parsing and table building live in their own modules; this one only sequences them.

mod entries;
mod health;
mod inspect;
mod late;
mod launch;
mod live;
mod memory;
mod otlp;
mod output;
mod setup;
mod sink;
mod sizes;
mod summary;
mod targets;

use std::{
    ffi::OsString,
    time::{Duration, Instant},
};

use crate::manager::Manager;
pub use crate::manager::{LOAD_LOG, SWEEP_LOG};
pub use crate::outfile::OutputFileError;
use crate::profile::{Keep, Profile};
use crate::snapshots::Snapshots;
use crate::symbolize::SymbolCache;
pub use output::OutputSpec;
use sink::Sink;
pub use summary::{SummaryFormat, SummarySpec, schema as summary_schema};
use targets::Targets;
use tracer_common::notice::Notice;

/// The debug log of the end of a session: `sampling ended` when the loop stops, then how long
/// each step of the writing took (`RUST_LOG=sframe_trace::end=debug`).
pub const END_LOG: &str = "sframe_trace::end";

/// Samples handled in a row, at most: those waiting when a process notice comes in (before
/// its tables load), or when the samples are read (before the loop looks at its other work).
const BATCH: usize = 256;
/// How often exited processes are forgotten and unused tables unloaded.
const HOUSEKEEPING: Duration = Duration::from_secs(1);
/// How long the samples still in the ring buffer when sampling ends are taken at most: a
/// session behind its samples (a host busier than it can follow) still ends on time, the rest
/// counted as lost.
const FINAL_DRAIN: Duration = Duration::from_secs(1);

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
    /// Whole host: folded and SVG stacks rooted at their thread's name, not their process's.
    pub per_thread: bool,
    /// Whole host: keep the samples of the tracer's own threads.
    pub include_self: bool,
    /// Folded and SVG outputs: C++ and Rust names shortened.
    pub short_names: bool,
    /// Walk and name the CPython frames of processes running an interpreter.
    pub python: bool,
    /// Name the JavaScript frames of processes running a V8 from its memory.
    pub javascript: bool,
    /// The files (or stdout) the stacks are written to, each in its format (not otlp).
    pub outputs: Vec<OutputSpec>,
    /// The owner and mode of the output and summary files.
    pub access: crate::outfile::Access,
    /// Inlined functions as frames of their own (`--no-inline` turns it off).
    pub inline: bool,
    /// What the symbol cache may hold (`--max-symbol-memory`).
    pub max_symbol_memory: u64,
    /// What the names of JIT code may hold (`--max-jit-memory`, see `jit::budget`).
    pub max_jit_memory: u64,
    /// The resident size past which caches are shed (`--max-memory`, see `memory`).
    pub max_memory: u64,
    /// `-f otlp`: where and how often to export.
    pub otlp: Option<crate::export::otlp::OtlpConfig>,
    /// What stacks are taken on (`-e`), uprobe targets resolved.
    pub events: crate::event::EventSet,
    /// `--live`: the terminal view while tracing (stdout is a terminal).
    pub live: bool,
    /// `--summary-format`, `--summary-output`.
    pub summary: SummarySpec,
    /// `--drain-priority`: how the session's thread is scheduled.
    pub drain_priority: crate::priority::DrainPriority,
    /// `--health-listen`: where `/healthz` and `/metrics` are served.
    pub health_listen: Option<std::net::SocketAddr>,
    /// `--record-snapshots`: every sample of the traced processes is a stack copy, walked and
    /// recorded into this directory (`snapshots::record`).
    pub record_snapshots: Option<std::path::PathBuf>,
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

/// Trace, write the stacks, print the summary. The caller has made the process-wide settings
/// first (`sys::session::prepare`).
pub async fn run(config: TraceConfig) -> anyhow::Result<Ended> {
    // First, so that Ctrl-C or SIGTERM while the tables load still ends with the output written.
    let mut signals = targets::Signals::listen()?;
    crate::bpf::preflight()?;
    // After the check of privileges (without them there is nothing to run ahead of).
    crate::priority::apply(config.drain_priority);
    crate::bpf::check_events(&config.events)?;
    let started = Instant::now();
    let mut output = output::Outputs::open(&config)?;
    let summary_out = summary::SummaryOut::open(&config.summary, &config.access)?;
    let recorder = config
        .record_snapshots
        .as_deref()
        .map(crate::snapshots::Recorder::open)
        .transpose()?;
    let mut targets = if config.all {
        Targets::all()?
    } else {
        Targets::start(&config.pids, &config.command)?
    };
    let setup::Started {
        catalog,
        mut kernel,
        skipped,
        deferred,
    } = setup::start(&config, &targets, &mut signals)?;
    output.set_title(targets.title(&config.command));
    let mut events = kernel.events()?;
    let mut notices = kernel.notices()?;
    // A notice read ahead of its turn (see `notices_first`).
    let mut held: Option<Notice> = None;
    kernel.attach()?;
    targets.release();
    let (mut manager, mut built) = Manager::new(catalog, kernel, config.python);
    manager.start(deferred, skipped)?;
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

    let mut otlp = otlp::Otlp::start(&config, targets.pids())?;
    let health = health::Health::start(config.health_listen).await?;
    let (mut live, mut quit) = live::Live::start(&config)?;
    // Each sample is resolved once, by the profile, and symbolized once per session, through
    // one cache every consumer shares; the profile keeps only the stacks a consumer reads.
    let keep = Keep {
        whole: output.wants_whole_profile() || live.active(),
        window: otlp.active(),
    };
    let mut sink = Sink {
        profile: Profile::keeping(config.events.names(), keep),
        output,
        symbols: SymbolCache::new(config.inline, config.max_symbol_memory),
        copies: Snapshots::new(config.max_depth),
        runtimes: inspect::Runtimes::new(),
        own_pid: (config.all && !config.include_self).then(std::process::id),
        late: late::Late::default(),
        entries: entries::EntryStacks::default(),
        own_stops: [0; tracer_common::walk::StopReason::COUNT as usize],
    };
    if let Some(recorder) = recorder {
        sink.copies.record_into(recorder);
    }
    let mut sizes = sizes::SizeLog::new();
    let mut memory = memory::MemoryBound::new(config.max_memory);
    let why = {
        let stop = targets.until_done(config.duration, &mut signals);
        tokio::pin!(stop);
        loop {
            // The loop's branches are often ready at once (samples and notices are read
            // without waiting), and a future that never waits keeps the runtime from turning
            // its clock: under a fork storm no timer fired for minutes (no export, no
            // housekeeping, exited processes never forgotten). Each turn lets it.
            tokio::task::yield_now().await;
            tokio::select! {
                // In this order: the end, then timers, then process notices and built tables
                // (samples wait in their ring buffer, and the sooner a process is loaded, the
                // fewer of its samples come out short), then samples.
                biased;
                why = &mut stop => break why,
                why = quit.wait() => break why,
                // Timers before notices: each is ready at most once a second or so, and under a
                // flood of notices (a fork storm) they would otherwise never run: exited
                // processes never forgotten, no export sent.
                _ = housekeeping.tick() => {
                    // Before ended mappings are forgotten: copies waiting are walked in time.
                    sink.release(None, false, &mut manager)?;
                    manager.housekeep()?;
                    sink.flush_late(&mut manager, false);
                    // Stacks are symbolized as they arrive, or not kept at all.
                    let forgot = keep == Keep::default() && forget(&manager.idle_objects(), &mut manager, &mut sink.symbols);
                    memory.bound(&mut sink.symbols);
                    if manager.take_freed() | forgot | sink.symbols.take_dropped() {
                        release_freed_memory();
                    }
                    sizes.tick(&manager, &sink);
                    if health.active() {
                        publish_health(&health, &manager, &sink, &otlp, &memory)?;
                    }
                }
                () = otlp.due() => {
                    // Idle before the window is taken: no stack after it refers to them.
                    let idle = manager.idle_objects();
                    otlp.export(&mut sink.profile, manager.catalog(), &mut sink.symbols);
                    if !keep.whole && forget(&idle, &mut manager, &mut sink.symbols) {
                        release_freed_memory();
                    }
                }
                () = live.due() => live.show(&sink.profile, manager.catalog(), &mut sink.symbols, manager.kernel())?,
                notice = next_notice(&mut held, &mut notices) => if let Some(notice) = notice {
                    // An exit, an exec or unmapped code ends the mappings the samples queued are
                    // resolved with.
                    manager.on_notice_seen(&notice);
                    // Loading can take a while: make room in the sample ring buffer first (a
                    // bounded number: when samples arrive faster than they are written, an
                    // unbounded drain would never end).
                    for _ in 0..BATCH {
                        let Some(sample) = events.try_next() else { break };
                        notices_first(&mut notices, &mut held, sample.time_ns, &mut |notice| manager.notice(notice))?;
                        sink.take(sample, &mut manager);
                    }
                    manager.on_notice(&notice)?;
                    sink.release(Some(&[notice.tgid]), false, &mut manager)?;
                },
                Some(tables) = built.recv() => {
                    manager.on_built(tables)?;
                    sink.release(None, false, &mut manager)?;
                }
                sample = events.next() => match sample {
                    Some(sample) => {
                        notices_first(&mut notices, &mut held, sample.time_ns, &mut |notice| manager.notice(notice))?;
                        sink.take(sample, &mut manager);
                        // The rest of what is waiting, in one go: each turn of the loop costs
                        // more than a sample.
                        for _ in 1..BATCH {
                            let Some(sample) = events.try_next() else { break };
                            notices_first(&mut notices, &mut held, sample.time_ns, &mut |notice| manager.notice(notice))?;
                            sink.take(sample, &mut manager);
                        }
                        // Code compiled into a known JIT region since its jitdump was read.
                        manager.reload_dumps()?;
                    }
                    None => break "the ring buffer closed",
                },
            }
        }
    };
    log::debug!(target: END_LOG, "sampling ended: {why}");
    let mut step = Step::new();
    // Before a launched command is stopped: who used no CPU while traced.
    let idle = targets.idle();
    // The terminal is back before anything else is printed.
    live.finish();
    manager.kernel_mut().detach();
    step.done("detach");
    let deadline = Instant::now() + FINAL_DRAIN;
    let mut left_behind = 0u64;
    while let Some(sample) = events.try_next() {
        if Instant::now() < deadline {
            // Only what the notices end: loading a process now would only delay the end.
            notices_first(&mut notices, &mut held, sample.time_ns, &mut |notice| {
                manager.on_notice_seen(notice);
                Ok(())
            })?;
            sink.take(sample, &mut manager);
        } else {
            left_behind += 1;
        }
    }
    // The notices sent after the last sample (an exit just before the end): what they end is
    // ended, for the summary. The programs are detached: only what the ring holds is left.
    notices_first(&mut notices, &mut held, u64::MAX, &mut |notice| {
        manager.on_notice_seen(notice);
        Ok(())
    })?;
    sink.release(None, true, &mut manager)?;
    if let Some(recorder) = sink.copies.recorder() {
        say(format_args!(
            "sframe-trace: recorded {} stack copies ({} not recorded)\n",
            recorder.written(),
            recorder.dropped
        ));
    }
    step.done("drain");
    targets.finish().await;
    // Missing debug files may be fetched from now on (never while samples are taken).
    crate::symfiles::end_sampling();
    // What the JIT runtimes wrote until the end (some write their perf map at exit).
    manager.resolve(|catalog| catalog.runtimes.housekeep(true, crate::sys::monotonic_ns()));
    sink.flush_late(&mut manager, true);
    step.done("perf maps");
    let follow = manager.stats();
    let trusted = manager.trusted_names(&sink.runtimes.names);
    let (catalog, kernel) = manager.into_parts();
    let mut stops = kernel.stop_reasons()?;
    sink.adjust_stops(&mut stops);
    otlp.export(&mut sink.profile, &catalog, &mut sink.symbols);
    let mut finished = sink.output.finish(&sink.profile, &catalog, &mut sink.symbols, &trusted);
    step.done("outputs");
    let failed_outputs = std::mem::take(&mut finished.failed);
    summary::count_go_bases_complete(&mut stops, &finished.go_bases);
    // The exports are flushed first: the summary counts what reached the collector.
    let exported = otlp.finish().await;
    let summary = summary::Summary {
        elapsed: started.elapsed(),
        why,
        profile: &sink.profile,
        catalog: &catalog,
        counters: kernel
            .counters()?
            .into_iter()
            .map(|(c, n)| {
                (
                    c,
                    if c == tracer_common::Counter::EventsLost {
                        n + left_behind
                    } else {
                        n
                    },
                )
            })
            .collect(),
        stops,
        copies: sink.copies.stats,
        call_entries: sink.entries.stats,
        table_bytes: catalog.loader.tables.map_bytes(),
        table_capacity_bytes: catalog.loader.tables.capacity_bytes(),
        follow,
        failed_outputs: &failed_outputs,
        otlp: exported.as_ref(),
        python: summary::python::PythonFigures {
            refused: catalog.python_refused(),
            ..summary::python::PythonFigures::new(
                &kernel.python_counts()?,
                catalog.runtimes.python.code.stats(),
                catalog.runtimes.python.code.map_stats(),
            )
        },
        diagnosis: Vec::new(),
    };
    let jit = catalog.runtimes.jit.names.stats();
    let unnamed: &[(String, u64)] = if crate::symfiles::user_symbols() {
        &finished.unnamed
    } else {
        &[]
    };
    let packages = crate::symfiles::dpkg::owners(
        std::path::Path::new("/var/lib/dpkg/info"),
        &summary::diagnosis::mentioned(unnamed, sink.profile.samples),
    );
    // Java whose compiled code was read from its code heaps walks whole without the flag,
    // Node.js whose JavaScript frames were marked for the walk has them named.
    let runtime_notes: Vec<String> = sink
        .runtimes
        .notes
        .iter()
        .filter(|note| !(note.java && catalog.runtimes.jit.hotspot.was_read(note.pid)))
        .filter(|note| !(note.node && catalog.runtimes.v8.was_marked(note.pid)))
        .map(|note| note.text.clone())
        .collect();
    let diagnosis = summary::diagnosis::diagnose(&summary::diagnosis::Evidence {
        samples: sink.profile.samples,
        lost: summary
            .counters
            .iter()
            .find(|(c, _)| *c == tracer_common::Counter::EventsLost)
            .map_or(0, |c| c.1),
        frequency: config.frequency,
        target_notes: &targets.notes,
        idle: &idle,
        runtimes: &runtime_notes,
        // (Node.js whose JavaScript frames are named from V8's memory needs no perf map.)
        jit_processes: jit.processes.saturating_sub(catalog.runtimes.v8.stats().processes),
        perf_maps: jit.perf_maps,
        // With `--symbolize none` frames are unnamed on purpose: nothing to advise.
        unnamed,
        debuginfod: std::env::var_os("DEBUGINFOD_URLS").is_some_and(|v| !v.is_empty()),
        packages: &packages,
    });
    let summary = summary::Summary { diagnosis, ..summary };
    let mut ended = if failed_outputs.is_empty() {
        Ended::Complete
    } else {
        Ended::OutputFailed
    };
    if let Err(err) = summary_out.write(&summary) {
        say(format_args!("sframe-trace: {err:#}\n"));
        ended = Ended::OutputFailed;
    }
    step.done("summary");
    if let Some(report) = &exported
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
    // The session is the process's last work, and everything is written: the memory left, the
    // process's exit frees. Freeing it here, object by object, took most of a second on a
    // whole host. The kernel side is dropped as it should be: its probes are taken down.
    std::mem::forget(catalog);
    std::mem::forget((sink.profile, sink.symbols, sink.copies));
    step.done("memory left to the exit");
    drop((events, notices, kernel));
    step.done("unload");
    Ok(ended)
}

/// Free objects `idle` (no process maps them, no kept stack refers to them): their names and
/// symbolizer data, then their files. Returns whether there were any.
fn forget(idle: &[usize], manager: &mut Manager, symbols: &mut SymbolCache) -> bool {
    manager.resolve(|catalog| {
        symbols.forget(idle, catalog);
        catalog.forget(idle);
    });
    !idle.is_empty()
}

/// Hand memory freed in the allocator back to the system. Tables are built on tokio's
/// blocking threads, each with an allocator arena of its own, and a large object's build
/// (hundreds of megabytes of scratch for a compiler's libraries) would otherwise stay in the
/// tracer's resident size for good, however little it keeps; so would the symbol cache's
/// parsed data once dropped at its bound, fragmenting the heap with every cycle.
fn release_freed_memory() {
    crate::sys::heap::trim();
}

/// The next notice: one held back by [`notices_first`], else the next sent.
/// The figures `/healthz` and `/metrics` serve, as they are now.
fn publish_health(
    health: &health::Health,
    manager: &Manager,
    sink: &Sink,
    otlp: &otlp::Otlp,
    memory: &memory::MemoryBound,
) -> anyhow::Result<()> {
    use std::sync::atomic::Ordering::Relaxed;
    let catalog = manager.catalog();
    let lost = manager
        .kernel()
        .counters()?
        .into_iter()
        .find(|(c, _)| *c == tracer_common::Counter::EventsLost)
        .map_or(0, |c| c.1);
    let (sent, failed, queued) = otlp.progress();
    health.publish(|f| {
        f.samples.store(sink.profile.samples, Relaxed);
        f.lost.store(lost, Relaxed);
        f.exports_sent.store(sent, Relaxed);
        f.exports_failed.store(failed, Relaxed);
        f.exports_queued.store(queued, Relaxed);
        f.rss_bytes.store(health::rss_bytes(), Relaxed);
        f.table_bytes.store(catalog.loader.tables.map_bytes(), Relaxed);
        f.memory_sheds.store(memory.sheds, Relaxed);
        f.max_memory_bytes.store(memory.max_bytes(), Relaxed);
    });
    Ok(())
}

async fn next_notice(held: &mut Option<Notice>, notices: &mut crate::bpf::Notices) -> Option<Notice> {
    match held.take() {
        Some(notice) => Some(notice),
        None => notices.next().await.copied(),
    }
}

/// Give `act` the notices sent before a sample taken at `before_ns`, before it is resolved: those
/// (an exit and a new process with the same pid, an exec, code unmapped) decide which mappings
/// resolve it, and their ring buffer's readiness can lag behind the samples'. The first later
/// notice is held back for the session's loop: under a flood of notices (a fork storm), a
/// drain of everything sent would never end, and nothing else would run meanwhile (no
/// export, no housekeeping, exited processes never forgotten).
fn notices_first(
    notices: &mut crate::bpf::Notices,
    held: &mut Option<Notice>,
    before_ns: u64,
    act: &mut impl FnMut(&Notice) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    loop {
        let notice = match held.take() {
            Some(notice) => notice,
            None => match notices.try_next() {
                Some(&notice) => notice,
                None => return Ok(()),
            },
        };
        if notice.time_ns > before_ns {
            *held = Some(notice);
            return Ok(());
        }
        act(&notice)?;
    }
}

#[cfg(test)]
pub(crate) mod tests;

/// The steps of the end of a session, each timed in the [`END_LOG`] debug log.
struct Step(Instant);

impl Step {
    fn new() -> Step {
        Step(Instant::now())
    }

    /// `what` took the time since the step before.
    fn done(&mut self, what: &str) {
        log::debug!(target: END_LOG, "{what}: {:.3} s", self.0.elapsed().as_secs_f64());
        self.0 = Instant::now();
    }
}
