//! Where the stacks go: the `--output` file or stdout, in the `--format` chosen. Streaming
//! formats (json, perf-script) get each sample as it arrives, symbolized through the session's
//! cache and flushed at once; the others get the whole profile, symbolized, at the end.

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
    profile::{Profile, Stack},
    symbolize::{self, Collection, SymbolCache},
};
use crate::{
    event::EventNames,
    export::{Format, folded, json, model::ResolvedSample, perf_script, pprof, svg},
};

/// The open output of a session.
pub struct Output {
    format: Format,
    out: Box<dyn Write>,
    /// The file, for messages (`None`: stdout).
    path: Option<PathBuf>,
    /// `--live` without `--output`: nothing is written (or symbolized for it).
    discard: bool,
    cache: SymbolCache,
    /// The names of the session's events.
    events: EventNames,
    period_ns: u64,
    start: SystemTime,
    started: Instant,
    /// `CLOCK_REALTIME - CLOCK_MONOTONIC`: turns sample times (`bpf_ktime_get_ns`) into Unix time.
    realtime_offset_ns: i128,
}

impl Output {
    /// Create the output file (or take stdout) before tracing starts, so a bad path fails early.
    pub fn open(config: &TraceConfig) -> anyhow::Result<Output> {
        let out: Box<dyn Write> = match &config.output {
            Some(path) => Box::new(BufWriter::new(
                File::create(path).with_context(|| format!("creating {}", path.display()))?,
            )),
            // The live view has the terminal: the stacks go to --output only.
            None if config.live => Box::new(std::io::sink()),
            None => Box::new(BufWriter::new(std::io::stdout())),
        };
        Ok(Output {
            format: config.format,
            out,
            path: config.output.clone(),
            discard: config.live && config.output.is_none(),
            cache: SymbolCache::new(config.inline),
            events: config.events.names(),
            period_ns: 1_000_000_000 / config.frequency.max(1),
            start: SystemTime::now(),
            started: Instant::now(),
            realtime_offset_ns: i128::from(clock_ns(libc::CLOCK_REALTIME))
                - i128::from(clock_ns(libc::CLOCK_MONOTONIC)),
        })
    }

    /// Stream one sample, when the format is a streaming one.
    pub fn sample(&mut self, sample: &Sample, catalog: &Catalog) -> anyhow::Result<()> {
        if !self.format.is_streamed() || self.discard {
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
        let written = match self.format {
            Format::Json => json::write_sample(&mut self.out, &resolved, objects),
            Format::PerfScript => perf_script::write_sample(&mut self.out, &resolved, objects),
            Format::Folded | Format::Svg | Format::Pprof | Format::Otlp => Ok(()),
        };
        written.with_context(|| self.describe())
    }

    /// Write the profile (formats written at the end) and flush.
    pub fn finish(mut self, profile: &Profile, catalog: &Catalog) -> anyhow::Result<()> {
        let resolved = (!self.format.is_streamed() && !self.discard).then(|| {
            let collection = Collection {
                start: self.start,
                duration: self.started.elapsed(),
                period_ns: self.period_ns,
            };
            symbolize::resolve(profile, catalog, &mut self.cache, &collection)
        });
        let written = match (self.format, &resolved) {
            (Format::Folded, Some(resolved)) => folded::write(&mut self.out, resolved),
            (Format::Svg, Some(resolved)) => svg::write(&mut self.out, resolved),
            (Format::Pprof, Some(resolved)) => pprof::write(&mut self.out, resolved),
            (Format::Folded | Format::Svg | Format::Pprof | Format::Json | Format::PerfScript | Format::Otlp, _) => {
                self.out.flush()
            }
        };
        written.with_context(|| self.describe())
    }

    fn describe(&self) -> String {
        match &self.path {
            Some(path) => format!("writing {}", path.display()),
            None => "writing to stdout".to_owned(),
        }
    }
}

/// Nanoseconds of `clock`.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}
