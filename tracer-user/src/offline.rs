//! `sframe-trace symbolize`: a pprof profile written with `--symbolize none` (or any pprof
//! whose user locations have no lines) named here, possibly on another machine, and written in
//! a file format. Locations that have lines (kernel frames, named on the host) keep them; the
//! others are looked up by their mapping's build-id and the location's object-relative address
//! through `symfiles` (debug directories, the object at its path when its build-id matches,
//! debuginfod) and blazesym, as a tracing session names them: the stacks come out the same.
//!
//! The profile is input from elsewhere: it is read within bounds (its file and its gzip
//! expansion), and references it holds (string, mapping, location and function indices) are
//! checked, an invalid one naming what is wrong. Its counts are not trusted either: the frames
//! it unfolds into are bounded ([`MAX_RESOLVED_FRAMES`]), sums saturate instead of wrapping,
//! and the streamed formats, which write one record per sample counted, refuse a profile whose
//! records would hold more than `--max-frames` frames ([`Expansion`]) before writing anything.
//!
//! `-` as the output is stdout. A file output appears whole or not at all (`outfile`); a signal
//! ends the command with its temporary file removed ([`stop`]).

use std::{
    collections::{BTreeMap, HashMap},
    io::{Read as _, Write as _},
    path::{Path, PathBuf},
};

use anyhow::{Context as _, bail};
use prost::Message as _;
use tracer_common::walk::StopReason;

use super::{symbolize, symfiles};
use crate::export::{
    folded, json,
    model::{FrameSource, ObjectInfo, Resolved, ResolvedFrame, ResolvedSample, ResolvedStack},
    perf_script, pprof, svg,
};

/// The largest profile read (compressed, and once gunzipped).
const MAX_PROFILE: u64 = 256 << 20;

/// The most frames the stacks of one profile unfold into (each location's lines, each
/// unnamed location's names): about a gigabyte of frames in memory at most. A session's
/// profile holds far fewer (one stack per distinct stack, at most a few thousand frames each).
pub const MAX_RESOLVED_FRAMES: usize = 10_000_000;

/// The default of `--max-frames`: the most frames the records of `json` or `perf-script`
/// hold in all (a record without frames counts as one), some gigabytes of text.
pub const DEFAULT_MAX_FRAMES: u64 = 50_000_000;

/// Why the records of a streamed format are not written: the profile counts too many.
#[derive(Debug, thiserror::Error, Clone, Copy, PartialEq, Eq)]
#[error(
    "the profile counts {samples} samples, and {format} writes one record per sample with its frames: \
     {frames} frames in all, more than --max-frames {max} (folded, svg and pprof write one line \
     per stack; or give a larger --max-frames)"
)]
pub struct Expansion {
    pub format: &'static str,
    /// Samples counted (the records to write), saturated at `u64::MAX`.
    pub samples: u64,
    /// Frames of those records, saturated at `u64::MAX`.
    pub frames: u64,
    pub max: u64,
}

/// The formats `symbolize` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    Folded,
    Svg,
    Pprof,
    /// One record per sample the profile counts (see [`samples`]).
    Json,
    PerfScript,
}

impl FileFormat {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FileFormat::Folded => "folded",
            FileFormat::Svg => "svg",
            FileFormat::Pprof => "pprof",
            FileFormat::Json => "json",
            FileFormat::PerfScript => "perf-script",
        }
    }

    /// One record per sample counted ([`samples`]).
    fn is_streamed(self) -> bool {
        matches!(self, FileFormat::Json | FileFormat::PerfScript)
    }
}

/// What `symbolize` writes, and where.
#[derive(Clone, Debug)]
pub struct Job {
    pub input: PathBuf,
    /// The file written; `-` is stdout.
    pub output: PathBuf,
    pub format: FileFormat,
    /// Inlined functions as frames of their own.
    pub inline: bool,
    /// The most frames the records of a streamed format may hold in all.
    pub max_frames: u64,
}

/// Read `job.input`, name its frames, write `job.output` in `job.format`.
pub fn symbolize_file(job: &Job) -> anyhow::Result<Resolved> {
    let input = &job.input;
    let profile = read_profile(input, MAX_PROFILE).with_context(|| format!("cannot read {}", input.display()))?;
    let resolved = resolve(&profile, job.inline).with_context(|| format!("{}: malformed profile", input.display()))?;
    drop(profile);
    if job.format.is_streamed() {
        expansion(&resolved, job.format, job.max_frames)?;
    }
    let output = &job.output;
    let written = |out: &mut dyn std::io::Write| -> std::io::Result<()> {
        let mut out = std::io::BufWriter::new(out);
        match job.format {
            FileFormat::Folded => folded::write(&mut out, &resolved),
            FileFormat::Svg => svg::write(&mut out, &resolved),
            FileFormat::Pprof => pprof::write(&mut out, &resolved),
            FileFormat::Json => {
                samples(&resolved).try_for_each(|s| json::write_sample(&mut out, &s, &resolved.objects))
            }
            FileFormat::PerfScript => {
                samples(&resolved).try_for_each(|s| perf_script::write_sample(&mut out, &s, &resolved.objects))
            }
        }?;
        out.flush()
    };
    if output.as_os_str() == "-" {
        written(&mut std::io::stdout().lock()).context("cannot write to stdout")?;
        return Ok(resolved);
    }
    let (mut file, placement) = super::outfile::create(output)?;
    written(&mut file).with_context(|| format!("cannot write {}", output.display()))?;
    placement
        .commit()
        .with_context(|| format!("cannot write {}", output.display()))?;
    Ok(resolved)
}

/// The samples the records of `format` would stand for and the frames they would hold; an
/// [`Expansion`] error when more than `max` frames.
pub fn expansion(resolved: &Resolved, format: FileFormat, max: u64) -> Result<(u64, u64), Expansion> {
    let (samples, frames) = resolved.stacks.iter().fold((0u64, 0u64), |(samples, frames), stack| {
        let records = stack.count.max(1);
        let each = u64::try_from(stack.frames.len()).unwrap_or(u64::MAX).max(1);
        (
            samples.saturating_add(records),
            frames.saturating_add(records.saturating_mul(each)),
        )
    });
    if frames > max {
        return Err(Expansion {
            format: format.name(),
            samples,
            frames,
            max,
        });
    }
    Ok((samples, frames))
}

/// The profile's stacks as the records of the streamed formats: `count` records per stack, in
/// the profile's order, the stack's weight shared among them (the remainder on the first).
/// What a profile does not hold is left out: every record has the profile's start as its Unix
/// time, 0 as its monotonic time and CPU, and user frames' `addr` is their object-relative
/// address (locations are per object, not per process).
/// (Bounded by [`expansion`] before `symbolize` writes them.)
pub fn samples(resolved: &Resolved) -> impl Iterator<Item = ResolvedSample> + '_ {
    resolved.stacks.iter().flat_map(move |stack| {
        let count = stack.count.max(1);
        let each = stack.weight_ns / count;
        (0..count).map(move |i| ResolvedSample {
            time_ns: 0,
            time_unix_ns: resolved.start_unix_ns,
            pid: stack.pid,
            tid: stack.tid,
            cpu: 0,
            comm: stack.comm.clone(),
            event: stack.event.clone(),
            weight_ns: if i == 0 {
                stack.weight_ns - each * (count - 1)
            } else {
                each
            },
            frames: stack.frames.clone(),
            truncated: stack.truncation(),
        })
    })
}

/// The profile message of the file at `path` (gzipped or not), at most `cap` bytes before and
/// after gunzipping.
fn read_profile(path: &Path, cap: u64) -> anyhow::Result<pprof::Profile> {
    let file = crate::sys::objfile::open_regular(path)?;
    let mut raw = Vec::new();
    (&file).take(cap + 1).read_to_end(&mut raw)?;
    if raw.len() as u64 > cap {
        bail!("larger than {cap} bytes");
    }
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(raw.as_slice())
            .take(cap + 1)
            .read_to_end(&mut out)
            .context("corrupt gzip data")?;
        if out.len() as u64 > cap {
            bail!("expands to more than {cap} bytes");
        }
        out
    } else {
        raw
    };
    Ok(pprof::Profile::decode(bytes.as_slice())?)
}

/// The kernel's mapping name, as the tracer writes it.
const KERNEL: &str = "[kernel.kallsyms]";

/// The profile as the model the writers take, every unnamed user location named.
fn resolve(p: &pprof::Profile, inline: bool) -> anyhow::Result<Resolved> {
    resolve_within(p, inline, MAX_RESOLVED_FRAMES)
}

/// [`resolve`], refusing a profile whose stacks unfold into more than `max_frames` frames.
fn resolve_within(p: &pprof::Profile, inline: bool, max_frames: usize) -> anyhow::Result<Resolved> {
    let string = |i: i64| -> anyhow::Result<&str> {
        usize::try_from(i)
            .ok()
            .and_then(|i| p.string_table.get(i))
            .map(String::as_str)
            .with_context(|| format!("string index {i} is out of the table"))
    };
    // Objects: one per mapping.
    let mut objects = Vec::with_capacity(p.mapping.len());
    let mut mapping_index = HashMap::new();
    for m in &p.mapping {
        let path = string(m.filename)?.to_owned();
        let name = Path::new(&path)
            .file_name()
            .map_or_else(|| path.clone(), |n| n.to_string_lossy().into_owned());
        let build_id = unhex(string(m.build_id)?);
        mapping_index.insert(m.id, objects.len());
        objects.push(ObjectInfo { path, name, build_id });
    }
    // Names of the unnamed user locations, one lookup per object.
    let mut wanted: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for l in &p.location {
        if l.line.is_empty()
            && let Some(&object) = mapping_index.get(&l.mapping_id)
        {
            wanted.entry(object).or_default().push(l.address);
        }
    }
    let symbolizer = symbolize::symbolizer(inline);
    let mut named: HashMap<(usize, u64), Vec<symbolize::Named>> = HashMap::new();
    for (object, mut offsets) in wanted {
        offsets.sort_unstable();
        offsets.dedup();
        let info = &objects[object];
        let local = PathBuf::from(&info.path);
        let own = info
            .build_id
            .as_deref()
            .is_none_or(|id| symfiles::debuginfod::matches_build_id(&local, id))
            .then_some(local.as_path())
            .filter(|p| p.is_absolute());
        let file = symfiles::symbol_file(info.build_id.as_deref(), own);
        let own_file = own.and_then(|path| crate::sys::objfile::open_regular(path).ok());
        let plt = own_file
            .as_ref()
            .map_or_else(symbolize::Plt::default, symbolize::Plt::of_file);
        let go = own_file
            .as_ref()
            .and_then(|file| symbolize::GoText::of_file(file, inline));
        for (offset, names) in
            offsets
                .iter()
                .zip(symbolize::name_in_file(&symbolizer, file, &plt, go.as_ref(), &offsets))
        {
            named.insert((object, *offset), names);
        }
    }
    let functions: HashMap<u64, &pprof::Function> = p.function.iter().map(|f| (f.id, f)).collect();
    let locations: HashMap<u64, &pprof::Location> = p.location.iter().map(|l| (l.id, l)).collect();
    let mut stacks = Vec::with_capacity(p.sample.len());
    // Frames unfolded so far, against MAX_RESOLVED_FRAMES.
    let mut unfolded = 0usize;
    for s in &p.sample {
        let mut stack = ResolvedStack {
            pid: 0,
            tid: 0,
            comm: String::new(),
            event: crate::event::CPU_CLOCK.to_owned(),
            frames: Vec::new(),
            count: s.value.first().map_or(0, |&v| u64::try_from(v).unwrap_or(0)),
            weight_ns: s.value.get(1).map_or(0, |&v| u64::try_from(v).unwrap_or(0)),
            truncated: None,
            cpu: None,
        };
        let mut sources = "";
        for label in &s.label {
            match string(label.key)? {
                "pid" => stack.pid = u32::try_from(label.num).unwrap_or(0),
                "tid" => stack.tid = u32::try_from(label.num).unwrap_or(0),
                "comm" => stack.comm = string(label.str)?.to_owned(),
                "event" => stack.event = string(label.str)?.to_owned(),
                "sources" => sources = string(label.str)?,
                "truncated" => {
                    let why = string(label.str)?;
                    stack.truncated = StopReason::ALL.iter().map(|r| r.name()).find(|name| *name == why);
                }
                _ => {}
            }
        }
        let mut sources = sources.chars();
        for id in &s.location_id {
            if unfolded.saturating_add(stack.frames.len()) > max_frames {
                bail!("its stacks hold more than {max_frames} frames");
            }
            let l = locations
                .get(id)
                .with_context(|| format!("location {id} does not exist"))?;
            let object = mapping_index.get(&l.mapping_id).copied();
            let kernel = object.is_some_and(|o| objects[o].path == KERNEL);
            // How the frame was found, when the profile says (a tracer's profile does);
            // otherwise the kernel's, or SFrame's for user frames.
            let said = sources.next().and_then(FrameSource::from_letter);
            let source = match said {
                Some(source) if kernel == (source == FrameSource::Kernel) => source,
                _ if kernel => FrameSource::Kernel,
                _ => FrameSource::Sframe,
            };
            let frame =
                |symbol: Option<String>, file: Option<String>, line: Option<u32>, inlined: bool| ResolvedFrame {
                    addr: l.address,
                    object,
                    offset: l.address,
                    symbol,
                    file,
                    line,
                    inlined,
                    source,
                };
            if l.line.is_empty() {
                let unknown = [symbolize::Named::default()];
                let names = object.and_then(|o| named.get(&(o, l.address)));
                for n in names.map_or(&unknown[..], Vec::as_slice) {
                    stack
                        .frames
                        .push(frame(n.symbol.clone(), n.file.clone(), n.line, n.inlined));
                }
                continue;
            }
            let last = l.line.len() - 1;
            if unfolded.saturating_add(stack.frames.len()).saturating_add(l.line.len()) > max_frames {
                bail!("its stacks hold more than {max_frames} frames");
            }
            for (i, line) in l.line.iter().enumerate() {
                let f = functions
                    .get(&line.function_id)
                    .with_context(|| format!("function {} does not exist", line.function_id))?;
                // Names the profile carries are cut like every name the tracer reads.
                let file = Some(string(f.filename)?)
                    .filter(|s| !s.is_empty())
                    .map(|s| tracer_unwind::names::capped_str(s).into_owned());
                let number = u32::try_from(line.line).ok().filter(|&n| n > 0);
                let name = tracer_unwind::names::capped_str(string(f.name)?).into_owned();
                stack.frames.push(frame(Some(name), file, number, i != last));
            }
        }
        unfolded = unfolded.saturating_add(stack.frames.len());
        if unfolded > max_frames {
            bail!("its stacks hold more than {max_frames} frames");
        }
        stacks.push(stack);
    }
    stacks.sort_by(|a, b| (a.pid, a.tid, b.count).cmp(&(b.pid, b.tid, a.count)));
    Ok(Resolved {
        objects,
        stacks,
        start_unix_ns: u64::try_from(p.time_nanos).unwrap_or(0),
        duration_ns: u64::try_from(p.duration_nanos).unwrap_or(0),
        period_ns: u64::try_from(p.period).unwrap_or(0),
    })
}

/// Bytes of a hexadecimal build-id (`None` when empty or not hexadecimal).
fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.is_empty() || !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

pub mod stop;

#[cfg(test)]
mod tests;
