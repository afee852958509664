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
    collections::HashMap,
    io::{self, BufWriter, Write},
    path::PathBuf,
    time::{Instant, SystemTime},
};

use tracer_common::sample::Sample;

/// What a streamed record takes from its sample besides the stack: when, where and how much.
#[derive(Clone, Copy, Debug)]
pub struct Taken {
    pub time_ns: u64,
    pub cpu: u32,
    pub weight: u64,
}

impl From<&Sample> for Taken {
    fn from(sample: &Sample) -> Taken {
        Taken {
            time_ns: sample.time_ns,
            cpu: sample.cpu,
            weight: sample.weight,
        }
    }
}

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

/// Samples counted complete though the kernel stopped them early, by the stop reason's name
/// (see [`Finished::go_bases`]).
pub type GoBases = std::collections::BTreeMap<&'static str, u64>;

/// The open outputs of a session (none: `--live` without `--output`, or otlp only).
pub struct Outputs {
    sinks: Vec<Sink>,
    period_ns: u64,
    start: SystemTime,
    started: Instant,
    /// `CLOCK_REALTIME - CLOCK_MONOTONIC`: turns sample times (`bpf_ktime_get_ns`) into Unix time.
    realtime_offset_ns: i128,
    /// Streamed samples whose walk stopped at the base Go's runtime gives a stack, by the
    /// reason the kernel counted (`zero_ra`, `topmost_only_rule`): complete.
    streamed_go_bases: GoBases,
    /// What the flame graph's title says was traced, and where (see [`Outputs::set_title`]).
    title: String,
    /// Folded and SVG stacks rooted at their process's executable name (whole host, without
    /// `--per-thread`).
    by_process: bool,
    short_names: bool,
}

/// What [`Outputs::finish`] did.
pub struct Finished {
    /// The outputs that failed, each as `PATH: why`.
    pub failed: Vec<String>,
    /// Samples the kernel counted `zero_ra` or `topmost_only_rule` whose stack ends at a Go
    /// stack base, by reason: complete (from the whole profile when one was symbolized, else
    /// from the streamed samples).
    pub go_bases: GoBases,
    /// Objects user frames were left unnamed in (no symbol found), with their samples, most
    /// first (from the whole profile, when one was symbolized).
    pub unnamed: Vec<(String, u64)>,
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
                        let (file, placement) = outfile::create_for(path, &config.access)?;
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
            streamed_go_bases: GoBases::new(),
            title: String::new(),
            by_process: config.all && !config.per_thread,
            short_names: config.short_names,
        })
    }

    /// What was traced and where, for the flame graph's title (`pid 12 (app) on HOST`).
    pub fn set_title(&mut self, title: String) {
        self.title = title;
    }

    /// Whether an output is written at the end from the whole session's stacks (the profile
    /// then keeps them).
    pub fn wants_whole_profile(&self) -> bool {
        self.sinks.iter().any(|s| !s.format.is_streamed())
    }

    /// Whether an output streams samples as they come (and is not given up on).
    pub fn streams(&self) -> bool {
        self.sinks.iter().any(|s| s.format.is_streamed() && s.failed.is_none())
    }

    /// Stream one sample, whose stack the profile resolved, to the streaming outputs (those not
    /// given up on).
    pub fn sample(&mut self, sample: Taken, stack: &Stack, catalog: &Catalog, symbols: &mut SymbolCache) {
        if !self.streams() {
            return;
        }
        let frames = symbols.frames(stack, catalog);
        let truncated = stack.truncated.map(tracer_common::walk::StopReason::name);
        let shown = crate::export::model::truncation(truncated, &frames);
        if shown.is_none()
            && let Some(why) = truncated
        {
            *self.streamed_go_bases.entry(why).or_default() += 1;
        }
        let resolved = ResolvedSample {
            time_ns: sample.time_ns,
            time_unix_ns: u64::try_from(i128::from(sample.time_ns) + self.realtime_offset_ns).unwrap_or(0),
            pid: stack.pid,
            tid: stack.tid,
            cpu: sample.cpu,
            event: stack.event.to_string(),
            weight_ns: sample.weight,
            truncated: shown,
            frames,
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
    /// output and put each complete file in place.
    /// `processes`: the executable names of the processes sampled, by pid.
    pub fn finish(
        mut self,
        profile: &Profile,
        catalog: &Catalog,
        symbols: &mut SymbolCache,
        processes: &HashMap<u32, String>,
    ) -> Finished {
        let style = folded::Style {
            processes: self.by_process.then_some(processes),
            short_names: self.short_names,
        };
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
                (Format::Folded, Some(resolved)) => folded::write_styled(&mut sink.out, resolved, &style),
                (Format::Svg, Some(resolved)) => svg::write_titled(&mut sink.out, resolved, &self.title, &style),
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
        let go_bases = resolved.as_ref().map_or_else(
            || self.streamed_go_bases.clone(),
            |resolved| {
                let mut bases = GoBases::new();
                for s in &resolved.stacks {
                    if let Some(why) = s.truncated.filter(|_| s.truncation().is_none()) {
                        *bases.entry(why).or_default() += s.count;
                    }
                }
                bases
            },
        );
        let unnamed = resolved.as_ref().map(unnamed_objects).unwrap_or_default();
        let failed = self
            .sinks
            .iter_mut()
            .filter_map(|s| s.failed.take())
            .filter(|why| !why.is_empty())
            .collect();
        Finished {
            failed,
            go_bases,
            unnamed,
        }
    }
}

/// The objects of `resolved` with user frames that have no name (no symbol found in them),
/// each with the samples of those stacks, most first.
fn unnamed_objects(resolved: &crate::export::model::Resolved) -> Vec<(String, u64)> {
    use crate::export::model::FrameSource;
    let mut by_object: std::collections::HashMap<usize, u64> = std::collections::HashMap::new();
    for stack in &resolved.stacks {
        let mut objects: Vec<usize> = stack
            .frames
            .iter()
            .filter(|f| {
                f.symbol.is_none()
                    && matches!(
                        f.source,
                        FrameSource::Sframe
                            | FrameSource::EhFrame
                            | FrameSource::Fp
                            | FrameSource::Leaf
                            | FrameSource::Gopclntab
                    )
            })
            .filter_map(|f| f.object)
            .collect();
        objects.sort_unstable();
        objects.dedup();
        for object in objects {
            *by_object.entry(object).or_default() += stack.count;
        }
    }
    let mut unnamed: Vec<(String, u64)> = by_object
        .into_iter()
        .filter_map(|(i, n)| Some((resolved.objects.get(i)?.path.clone(), n)))
        .collect();
    unnamed.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    unnamed
}

/// Nanoseconds of `clock`.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    crate::sys::clock_ns_lossy(clock)
}
