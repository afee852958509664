//! Where the stacks go: each `--output` file (or stdout) in the `--format` paired with it.
//! Streaming formats (json, perf-script) get each sample as it arrives, resolved once by the
//! profile and symbolized once through the session's cache for all of them; the others get the
//! whole profile, symbolized once, at the end. Several outputs of one session carry the same
//! stacks.
//!
//! Files are created safely and put in place only when complete ([`outfile`]). Each output
//! fails alone: one that cannot be written (a full disk, `/dev/full`) is given up on, named in
//! the summary, and the others are still written. A closed stdout (`| head`) is no failure.

use std::{
    io::{self, BufWriter, Write},
    path::PathBuf,
    time::{Instant, SystemTime},
};

use tracer_common::trace::Sample;

use super::TraceConfig;
use crate::export::{Format, folded, json, model::ResolvedSample, perf_script, pprof, svg};
use crate::registry::Catalog;
use crate::{
    outfile::{self, Placement},
    profile::{Profile, Stack},
    symbolize::{self, Collection, SymbolCache},
};

/// One output asked for: its format (never otlp) and its file (`None`: stdout).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputSpec {
    pub format: Format,
    pub path: Option<PathBuf>,
}

/// One open output.
struct Sink {
    format: Format,
    out: Box<dyn Write>,
    /// The file, for messages (`None`: stdout).
    path: Option<PathBuf>,
    /// Where the file ends up once complete (`None`: stdout).
    placement: Option<Placement>,
    /// Given up on: why (the output is not written any more).
    failed: Option<String>,
}

impl Sink {
    /// Record that writing failed and stop writing: the file is closed and its temporary
    /// file removed. A closed stdout is not a failure: its reader is done.
    fn fail(&mut self, err: &io::Error) {
        if self.failed.is_some() {
            return;
        }
        self.out = Box::new(io::sink());
        self.placement = None;
        self.failed = Some(match &self.path {
            Some(path) => format!("{}: {err}", path.display()),
            None if err.kind() == io::ErrorKind::BrokenPipe => String::new(),
            None => format!("stdout: {err}"),
        });
    }
}

/// The open outputs of a session (none: `--live` without `--output`, or otlp only).
pub struct Outputs {
    sinks: Vec<Sink>,
    period_ns: u64,
    start: SystemTime,
    started: Instant,
    /// `CLOCK_REALTIME - CLOCK_MONOTONIC`: turns sample times (`bpf_ktime_get_ns`) into Unix time.
    realtime_offset_ns: i128,
}

impl Outputs {
    /// Create the output files (or take stdout) before tracing starts, so that a bad path, or
    /// a link or special file at it, is refused before anything is traced.
    pub fn open(config: &TraceConfig) -> anyhow::Result<Outputs> {
        let sinks = config
            .outputs
            .iter()
            .map(|spec| {
                let (out, placement): (Box<dyn Write>, _) = match &spec.path {
                    Some(path) => {
                        let (file, placement) = outfile::create(path)?;
                        (Box::new(BufWriter::new(file)), Some(placement))
                    }
                    None => (Box::new(BufWriter::new(std::io::stdout())), None),
                };
                Ok(Sink {
                    format: spec.format,
                    out,
                    path: spec.path.clone(),
                    placement,
                    failed: None,
                })
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Outputs {
            sinks,
            period_ns: 1_000_000_000 / config.frequency.max(1),
            start: SystemTime::now(),
            started: Instant::now(),
            realtime_offset_ns: i128::from(clock_ns(libc::CLOCK_REALTIME))
                - i128::from(clock_ns(libc::CLOCK_MONOTONIC)),
        })
    }

    /// Whether an output is written at the end from the whole session's stacks (the profile
    /// then keeps them).
    pub fn wants_whole_profile(&self) -> bool {
        self.sinks.iter().any(|s| !s.format.is_streamed())
    }

    /// Stream one sample, whose stack the profile resolved, to the streaming outputs (those not
    /// given up on).
    pub fn sample(&mut self, sample: &Sample, stack: &Stack, catalog: &Catalog, symbols: &mut SymbolCache) {
        if !self.sinks.iter().any(|s| s.format.is_streamed() && s.failed.is_none()) {
            return;
        }
        let resolved = ResolvedSample {
            time_ns: sample.time_ns,
            time_unix_ns: u64::try_from(i128::from(sample.time_ns) + self.realtime_offset_ns).unwrap_or(0),
            pid: stack.pid,
            tid: stack.tid,
            cpu: sample.cpu,
            event: stack.event.to_string(),
            weight_ns: sample.weight,
            frames: symbols.frames(stack, catalog),
            comm: stack.comm.clone(),
        };
        let objects = symbols.objects();
        for sink in self.sinks.iter_mut().filter(|s| s.failed.is_none()) {
            let written = match sink.format {
                Format::Json => json::write_sample(&mut sink.out, &resolved, objects),
                Format::PerfScript => perf_script::write_sample(&mut sink.out, &resolved, objects),
                Format::Folded | Format::Svg | Format::Pprof | Format::Otlp => Ok(()),
            };
            if let Err(err) = written {
                sink.fail(&err);
            }
        }
    }

    /// Write the outputs written at the end (the profile symbolized once for all), flush every
    /// output and put each complete file in place. Returns the outputs that failed, each as
    /// `PATH: why`.
    pub fn finish(mut self, profile: &Profile, catalog: &Catalog, symbols: &mut SymbolCache) -> Vec<String> {
        let resolved = self
            .sinks
            .iter()
            .any(|s| !s.format.is_streamed() && s.failed.is_none())
            .then(|| {
                let collection = Collection {
                    start: self.start,
                    duration: self.started.elapsed(),
                    period_ns: self.period_ns,
                };
                symbolize::resolve(&profile.stacks, catalog, symbols, &collection)
            });
        for sink in self.sinks.iter_mut().filter(|s| s.failed.is_none()) {
            let written = match (sink.format, &resolved) {
                (Format::Folded, Some(resolved)) => folded::write(&mut sink.out, resolved),
                (Format::Svg, Some(resolved)) => svg::write(&mut sink.out, resolved),
                (Format::Pprof, Some(resolved)) if !crate::symfiles::user_symbols() => {
                    pprof::write_unsymbolized(&mut sink.out, resolved)
                }
                (Format::Pprof, Some(resolved)) => pprof::write(&mut sink.out, resolved),
                (
                    Format::Folded | Format::Svg | Format::Pprof | Format::Json | Format::PerfScript | Format::Otlp,
                    _,
                ) => Ok(()),
            };
            let placed = written.and_then(|()| sink.out.flush()).and_then(|()| {
                // Closes the file before it is renamed into place.
                sink.out = Box::new(io::sink());
                sink.placement.take().map_or(Ok(()), Placement::commit)
            });
            if let Err(err) = placed {
                sink.fail(&err);
            }
        }
        self.sinks
            .iter_mut()
            .filter_map(|s| s.failed.take())
            .filter(|why| !why.is_empty())
            .collect()
    }
}

/// Nanoseconds of `clock`.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}
