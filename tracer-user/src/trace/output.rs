//! Where the stacks go: each `--output` file (or stdout) in the `--format` paired with it.
//! Streaming formats (json, perf-script) get each sample as it arrives, symbolized once through
//! the session's cache for all of them and flushed at once; the others get the whole profile,
//! symbolized once, at the end. Several outputs of one session carry the same stacks.
//!
//! With `-f otlp` the profile's stacks are taken out at every export: the end-of-run outputs
//! keep them first ([`Outputs::keep`]).

use std::{
    fs::File,
    io::{BufWriter, Write},
    path::PathBuf,
    time::{Instant, SystemTime},
};

use anyhow::Context as _;
use tracer_common::trace::Sample;

use super::{
    TraceConfig,
    objects::Catalog,
    profile::{self, Profile, Stack},
    symbolize::{self, Collection, SymbolCache},
};
use crate::{
    event::EventNames,
    export::{Format, folded, json, model::ResolvedSample, perf_script, pprof, svg},
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
}

impl Sink {
    fn describe(&self) -> String {
        match &self.path {
            Some(path) => format!("writing {}", path.display()),
            None => "writing to stdout".to_owned(),
        }
    }
}

/// The open outputs of a session (none: `--live` without `--output`, or otlp only).
pub struct Outputs {
    sinks: Vec<Sink>,
    cache: SymbolCache,
    /// The names of the session's events.
    events: EventNames,
    period_ns: u64,
    start: SystemTime,
    started: Instant,
    /// `CLOCK_REALTIME - CLOCK_MONOTONIC`: turns sample times (`bpf_ktime_get_ns`) into Unix time.
    realtime_offset_ns: i128,
    /// The session exports OTLP, which takes the profile's stacks out at every export.
    exports_take_stacks: bool,
    /// The stacks those exports took, for the outputs written at the end.
    kept: profile::Stacks,
}

impl Outputs {
    /// Create the output files (or take stdout) before tracing starts, so a bad path fails early.
    pub fn open(config: &TraceConfig) -> anyhow::Result<Outputs> {
        let sinks = config
            .outputs
            .iter()
            .map(|spec| {
                let out: Box<dyn Write> = match &spec.path {
                    Some(path) => Box::new(BufWriter::new(
                        File::create(path).with_context(|| format!("creating {}", path.display()))?,
                    )),
                    None => Box::new(BufWriter::new(std::io::stdout())),
                };
                Ok(Sink {
                    format: spec.format,
                    out,
                    path: spec.path.clone(),
                })
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Outputs {
            sinks,
            cache: SymbolCache::new(config.inline),
            events: config.events.names(),
            period_ns: 1_000_000_000 / config.frequency.max(1),
            start: SystemTime::now(),
            started: Instant::now(),
            realtime_offset_ns: i128::from(clock_ns(libc::CLOCK_REALTIME))
                - i128::from(clock_ns(libc::CLOCK_MONOTONIC)),
            exports_take_stacks: config.otlp.is_some(),
            kept: profile::Stacks::default(),
        })
    }

    /// Stream one sample to the streaming outputs.
    pub fn sample(&mut self, sample: &Sample, catalog: &Catalog) -> anyhow::Result<()> {
        if !self.sinks.iter().any(|s| s.format.is_streamed()) {
            return Ok(());
        }
        let stack = Stack::of_sample(sample, catalog, &self.events);
        let resolved = ResolvedSample {
            time_ns: sample.time_ns,
            time_unix_ns: u64::try_from(i128::from(sample.time_ns) + self.realtime_offset_ns).unwrap_or(0),
            pid: stack.pid,
            tid: stack.tid,
            cpu: sample.cpu,
            event: stack.event.to_string(),
            weight_ns: sample.weight,
            frames: self.cache.frames(&stack, catalog),
            comm: stack.comm,
        };
        let objects = self.cache.objects();
        for sink in &mut self.sinks {
            let written = match sink.format {
                Format::Json => json::write_sample(&mut sink.out, &resolved, objects),
                Format::PerfScript => perf_script::write_sample(&mut sink.out, &resolved, objects),
                Format::Folded | Format::Svg | Format::Pprof | Format::Otlp => Ok(()),
            };
            written.with_context(|| sink.describe())?;
        }
        Ok(())
    }

    /// Keep the stacks of `profile` before an OTLP export takes them out (when there are
    /// outputs written at the end).
    pub fn keep(&mut self, profile: &Profile) {
        if self.exports_take_stacks && self.sinks.iter().any(|s| !s.format.is_streamed()) {
            profile::merge(&mut self.kept, &profile.stacks);
        }
    }

    /// Write the outputs written at the end (the profile symbolized once for all) and flush
    /// every output.
    pub fn finish(mut self, profile: &Profile, catalog: &Catalog) -> anyhow::Result<()> {
        let resolved = self.sinks.iter().any(|s| !s.format.is_streamed()).then(|| {
            let collection = Collection {
                start: self.start,
                duration: self.started.elapsed(),
                period_ns: self.period_ns,
            };
            symbolize::resolve_with_kept(&self.kept, profile, catalog, &mut self.cache, &collection)
        });
        for sink in &mut self.sinks {
            let written = match (sink.format, &resolved) {
                (Format::Folded, Some(resolved)) => folded::write(&mut sink.out, resolved),
                (Format::Svg, Some(resolved)) => svg::write(&mut sink.out, resolved),
                (Format::Pprof, Some(resolved)) => pprof::write(&mut sink.out, resolved),
                (
                    Format::Folded | Format::Svg | Format::Pprof | Format::Json | Format::PerfScript | Format::Otlp,
                    _,
                ) => Ok(()),
            };
            written
                .and_then(|()| sink.out.flush())
                .with_context(|| sink.describe())?;
        }
        Ok(())
    }
}

/// Nanoseconds of `clock`.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}
