//! The summary printed at the end: samples and losses, complete and truncated stacks by stop
//! reason, frames by source, the unwind tables loaded, and what following processes did. The
//! figures are gathered once ([`Figures`]) and written either as text for people (the
//! default, on stderr) or as one JSON object for scripts (`--summary-format json`, on stderr or
//! to `--summary-output`): both forms carry the same numbers. Writing the file lives in `file`.

pub mod diagnosis;
mod file;
pub mod python;
mod schema;

pub use schema::schema;

use std::{collections::BTreeMap, fmt, path::PathBuf, time::Duration};

use serde::Serialize;
use tracer_common::{Counter, walk::StopReason};

use crate::export::otlp::ExportReport;

use super::entries::EntryStats;
use crate::manager::FollowStats;
use crate::registry::{Catalog, NoTableKind};
use crate::{profile::Profile, snapshots::SnapshotStats};

/// Objects without a table whose reason the text prints in full (the JSON has them all).
const MAX_NOTES: usize = 8;

/// How the summary is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SummaryFormat {
    /// Lines for people.
    #[default]
    Text,
    /// One JSON object (see [`Figures`] and docs/guide.md).
    Json,
}

/// Where and how the summary is written: its format, and its file (`None`: stderr).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SummarySpec {
    pub format: SummaryFormat,
    pub path: Option<PathBuf>,
}

/// The summary's destination, opened before tracing starts so that a bad path fails early.
pub struct SummaryOut {
    format: SummaryFormat,
    file: Option<file::SummaryFile>,
}

impl SummaryOut {
    /// Create the summary file (see `file`), or take stderr.
    pub fn open(spec: &SummarySpec, access: &crate::outfile::Access) -> Result<SummaryOut, super::OutputFileError> {
        let file = spec
            .path
            .as_deref()
            .map(|path| file::SummaryFile::create(path, access))
            .transpose()?;
        Ok(SummaryOut {
            format: spec.format,
            file,
        })
    }

    /// Write `summary` in the chosen format (to stderr, never failing: after a hangup the
    /// terminal may be gone).
    pub fn write(self, summary: &Summary<'_>) -> anyhow::Result<()> {
        let text = match self.format {
            SummaryFormat::Text => summary.to_string(),
            SummaryFormat::Json => summary.json() + "\n",
        };
        match self.file {
            Some(file) => file.write(&text),
            None => {
                super::say(format_args!("{text}"));
                Ok(())
            }
        }
    }
}

pub struct Summary<'a> {
    pub elapsed: Duration,
    pub why: &'static str,
    pub profile: &'a Profile,
    pub catalog: &'a Catalog,
    pub counters: Vec<(Counter, u64)>,
    pub stops: Vec<(StopReason, u64)>,
    /// What became of the samples shipped as stack copies.
    pub copies: SnapshotStats,
    /// The stacks kept at exit and exec, and the samples inside those calls given them.
    pub call_entries: EntryStats,
    /// Kernel memory the loaded tables use, and the table maps' size.
    pub table_bytes: u64,
    pub table_capacity_bytes: u64,
    pub follow: FollowStats,
    /// The outputs that could not be written, each `PATH: why`.
    pub failed_outputs: &'a [String],
    /// What became of the OTLP exports (`-f otlp` only).
    pub otlp: Option<&'a ExportReport>,
    /// The kernel's CPython walks.
    pub python: python::PythonFigures,
    /// Why the profile is empty or broken, and what to do, one sentence each ([`diagnosis`]).
    pub diagnosis: Vec<String>,
}

/// Every figure of the summary, as the JSON form names them (field by field in docs/guide.md).
#[derive(Debug, PartialEq, Serialize)]
pub struct Figures {
    /// Samples kept (folded into the stacks written).
    pub samples: u64,
    pub seconds: f64,
    /// Why tracing ended, e.g. "the duration ended".
    pub ended: &'static str,
    /// Samples the kernel could not hand over (the sample ring buffer was full).
    pub lost: u64,
    pub stacks: Stacks,
    pub user_frames: UserFrames,
    pub tables: Tables,
    /// Process notices lost (the notice ring buffer was full).
    pub notices_lost: u64,
    pub processes: FollowStats,
    /// Samples whose stack the kernel copied for userspace to walk (no table yet).
    pub stack_copies: SnapshotStats,
    /// User stacks the kernel walked as threads entered `exit`, `exit_group`, `execve` or
    /// `execveat` (`kept`), samples taken inside those calls once the memory was gone and
    /// given their thread's stack (`given`), and those stacks dropped for room or age.
    pub call_entries: EntryStats,
    /// Why objects have no table, one sentence each (unreadable, or no room): the first
    /// thousand of the session; `notes_left_out` counts the others.
    pub notes: Vec<String>,
    pub notes_left_out: u64,
    /// Debug files fetched, and files not symbolized from (`symfiles`).
    pub symbols: crate::symfiles::SymbolFigures,
    /// The outputs that could not be written, each `PATH: why` (the others were written).
    pub failed_outputs: Vec<String>,
    /// The OTLP exports (`null` without `-f otlp`).
    pub otlp: Option<Exports>,
    /// Perf maps of processes running JIT code: read, and refused by reason.
    pub jit: crate::jit::JitStats,
    /// jitdumps of processes running JIT code: read, refused by reason, regions given tables.
    pub jitdump: crate::jit::dumps::DumpStats,
    /// JVMs whose code heaps were read (compiled Java walked and named without flags).
    pub hotspot: crate::jit::hotspot::HotSpotStats,
    /// Node.js processes whose JavaScript frames were named from V8's memory: frames named,
    /// left native by reason, V8s refused by reason.
    pub v8: crate::v8::V8Stats,
    /// CPython frame chains the kernel walked: walks, frames, walks cut short by reason.
    pub python: python::PythonFigures,
    /// Why the profile came back empty or broken, and the next step: one sentence each
    /// (a thread id traced as its process, a kernel thread, a process that slept, no samples,
    /// a runtime without its flag, JIT code without a perf map, objects without symbols).
    pub diagnosis: Vec<String>,
}

/// What became of the OTLP exports: snapshots sent and their samples, and those that never
/// reached the collector (with their samples), by why.
#[derive(Debug, PartialEq, Serialize)]
pub struct Exports {
    /// The collector's URL, and `grpc` or `http`.
    pub endpoint: String,
    pub protocol: String,
    pub sent: u64,
    pub sent_samples: u64,
    pub dropped: u64,
    pub dropped_samples: u64,
    pub queue_full: u64,
    pub failed: u64,
    /// The failed snapshots by why (`tls-unknown-issuer`, `unauthenticated`, ...; only reasons
    /// seen).
    pub failed_by_reason: BTreeMap<&'static str, u64>,
    pub unsent: u64,
    pub retries: u64,
    pub rejected_profiles: u64,
}

impl From<&ExportReport> for Exports {
    fn from(report: &ExportReport) -> Exports {
        Exports {
            endpoint: report.destination.url.clone(),
            protocol: report.destination.protocol.flag_name().to_owned(),
            sent: report.sent,
            sent_samples: report.sent_samples,
            dropped: report.dropped(),
            dropped_samples: report.lost_samples,
            queue_full: report.queue_full,
            failed: report.failed,
            failed_by_reason: report.failed_by_reason.clone(),
            unsent: report.unsent,
            retries: report.retries,
            rejected_profiles: report.rejected_profiles,
        }
    }
}

/// Walks by how they ended.
#[derive(Debug, PartialEq, Serialize)]
pub struct Stacks {
    /// Walks that reached the outermost frame.
    pub complete: u64,
    /// Walks that stopped early, in total and by stop reason (only reasons seen).
    pub truncated: u64,
    pub truncated_by_reason: BTreeMap<&'static str, u64>,
    /// Walks that found code through the process's VMAs, with a table loaded for its file,
    /// before userspace had read the process (or the code).
    pub through_vmas: u64,
}

/// User frames by where their unwind step came from.
#[derive(Debug, PartialEq, Serialize)]
pub struct UserFrames {
    pub sframe: u64,
    pub eh_frame: u64,
    pub frame_pointers: u64,
    /// Through leaf functions proven from aarch64 code (only when there were some).
    #[serde(skip_serializing_if = "is_zero")]
    pub leaf: u64,
    /// Through Go code's `.gopclntab` stack-pointer deltas (only when there were some).
    #[serde(skip_serializing_if = "is_zero")]
    pub gopclntab: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The unwind tables of the objects the session met.
#[derive(Debug, PartialEq, Serialize)]
pub struct Tables {
    /// Objects with a table built from `.sframe`, and from `.eh_frame`/`.debug_frame`.
    pub sframe: u64,
    pub eh_frame: u64,
    /// Objects with a table of the leaf functions their aarch64 code proves, having no unwind
    /// information (only when there were some).
    #[serde(skip_serializing_if = "is_zero")]
    pub leaves: u64,
    /// Objects with a table of Go code from its `.gopclntab` (only when there were some).
    #[serde(skip_serializing_if = "is_zero")]
    pub gopclntab: u64,
    /// Unwind rows the tables were built from.
    pub rows: u64,
    /// Bytes of kernel map memory the tables use, and the table maps' size.
    pub kernel_bytes: u64,
    pub capacity_bytes: u64,
    /// Objects without a table, in total and by reason (only reasons seen): `no_unwind_info`,
    /// `unreadable`, `too_large`, `no_room`, `over_share`.
    pub without: u64,
    pub without_by_reason: BTreeMap<&'static str, u64>,
}

/// Count the walks the kernel ended early, `bases` by the name of their stop reason
/// (`zero_ra`, `topmost_only_rule`), as complete: their stacks end at the base Go's runtime
/// gives a stack (`export::model::truncation`).
pub fn count_go_bases_complete(stops: &mut [(StopReason, u64)], bases: &std::collections::BTreeMap<&'static str, u64>) {
    let mut moved = 0;
    for (reason, count) in stops.iter_mut() {
        if let Some(&n) = bases.get(reason.name()) {
            let n = n.min(*count);
            *count -= n;
            moved += n;
        }
    }
    if let Some((_, complete)) = stops.iter_mut().find(|(r, _)| *r == StopReason::Outermost) {
        *complete += moved;
    }
}

/// The JSON name of why an object has no table, and the text's.
fn no_table_names(why: NoTableKind) -> (&'static str, &'static str) {
    match why {
        NoTableKind::NoUnwindInfo => ("no_unwind_info", "no unwind information"),
        NoTableKind::Unreadable => ("unreadable", "unreadable"),
        NoTableKind::TooLarge => ("too_large", "too large (over the per-object read limit)"),
        NoTableKind::NoRoom => ("no_room", "no room in the table maps (--max-table-memory)"),
        NoTableKind::OverShare => ("over_share", "over its process's share (half the table maps' rows)"),
    }
}

impl Summary<'_> {
    /// The figures, gathered once for either form.
    pub fn figures(&self) -> Figures {
        let counter = |c: Counter| self.counters.iter().find(|(k, _)| *k == c).map_or(0, |(_, v)| *v);
        let complete = self
            .stops
            .iter()
            .filter(|(r, _)| *r == StopReason::Outermost)
            .map(|(_, n)| n)
            .sum();
        let truncated_by_reason: BTreeMap<&'static str, u64> = self
            .stops
            .iter()
            .filter(|(r, n)| *r != StopReason::Outermost && *n > 0)
            .map(|(r, n)| (r.name(), *n))
            .collect();
        let counts = self.catalog.table_counts();
        let without_by_reason: BTreeMap<&'static str, u64> = counts
            .without
            .iter()
            .map(|(&why, &n)| (no_table_names(why).0, n))
            .collect();
        Figures {
            samples: self.profile.samples,
            seconds: self.elapsed.as_secs_f64(),
            ended: self.why,
            lost: counter(Counter::EventsLost),
            stacks: Stacks {
                complete,
                truncated: truncated_by_reason.values().sum(),
                truncated_by_reason,
                through_vmas: self.profile.vma_samples,
            },
            user_frames: UserFrames {
                sframe: self.profile.sframe_frames,
                eh_frame: self.profile.cfi_frames,
                frame_pointers: self.profile.fp_frames,
                leaf: self.profile.leaf_frames,
                gopclntab: self.profile.gopclntab_frames,
            },
            tables: Tables {
                sframe: counts.sframe,
                eh_frame: counts.cfi,
                leaves: counts.leaves,
                gopclntab: counts.gopclntab,
                rows: counts.rows,
                kernel_bytes: self.table_bytes,
                capacity_bytes: self.table_capacity_bytes,
                without: without_by_reason.values().sum(),
                without_by_reason,
            },
            notices_lost: counter(Counter::NoticesLost),
            processes: self.follow,
            stack_copies: self.copies,
            call_entries: EntryStats {
                exec_limited: counter(Counter::ExecEntriesLimited),
                ..self.call_entries
            },
            notes: counts.notes,
            notes_left_out: counts.notes_left_out,
            symbols: crate::symfiles::figures(),
            failed_outputs: self.failed_outputs.to_vec(),
            otlp: self.otlp.map(Exports::from),
            jit: self.catalog.runtimes.jit.names.stats(),
            jitdump: self.catalog.runtimes.jit.dumps.stats.clone(),
            hotspot: self.catalog.runtimes.jit.hotspot.figures(),
            v8: self.catalog.runtimes.v8.stats(),
            python: self.python.clone(),
            diagnosis: self.diagnosis.clone(),
        }
    }

    /// The figures as one line of JSON.
    pub fn json(&self) -> String {
        serde_json::to_string(&self.figures()).unwrap_or_else(|err| format!("{{\"error\":\"{err}\"}}"))
    }
}

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let figures = self.figures();
        writeln!(
            f,
            "sframe-trace: {} samples in {:.1} s ({}), {} lost",
            figures.samples, figures.seconds, figures.ended, figures.lost,
        )?;
        let stacks = &figures.stacks;
        write!(
            f,
            "  stacks: {} complete, {} truncated",
            stacks.complete, stacks.truncated
        )?;
        if !stacks.truncated_by_reason.is_empty() {
            let reasons: Vec<String> = stacks
                .truncated_by_reason
                .iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect();
            write!(f, " ({})", reasons.join(", "))?;
        }
        if stacks.through_vmas > 0 {
            write!(f, "; {} walked through code found in the kernel", stacks.through_vmas)?;
        }
        writeln!(f)?;
        let frames = &figures.user_frames;
        write!(
            f,
            "  user frames: {} from SFrame, {} from .eh_frame, {} from frame pointers",
            frames.sframe, frames.eh_frame, frames.frame_pointers
        )?;
        if frames.leaf > 0 {
            write!(f, ", {} through leaf functions", frames.leaf)?;
        }
        writeln!(f)?;
        let tables = &figures.tables;
        let without: Vec<String> = self
            .catalog
            .table_counts()
            .without
            .iter()
            .map(|(&why, n)| format!("{n} {}", no_table_names(why).1))
            .collect();
        writeln!(
            f,
            "  tables: {} with SFrame, {} with .eh_frame{}{} ({} rows, {} KiB of {} KiB of table maps in use), {} without{}",
            tables.sframe,
            tables.eh_frame,
            if tables.leaves > 0 {
                format!(", {} of leaf functions", tables.leaves)
            } else {
                String::new()
            },
            if tables.gopclntab > 0 {
                format!(", {} from .gopclntab", tables.gopclntab)
            } else {
                String::new()
            },
            tables.rows,
            tables.kernel_bytes.div_ceil(1024),
            tables.capacity_bytes.div_ceil(1024),
            tables.without,
            if without.is_empty() {
                String::new()
            } else {
                format!(" ({})", without.join(", "))
            },
        )?;
        // Exact, for `cargo xtask bench` and the 4-bytes-per-row aim (rows: the unwind rows the
        // tables were built from).
        if tables.rows > 0 {
            writeln!(
                f,
                "  table memory: {} bytes in kernel maps for {} rows, {:.2} bytes per row",
                tables.kernel_bytes,
                tables.rows,
                tables.kernel_bytes as f64 / tables.rows as f64
            )?;
        }
        if figures.notices_lost > 0 {
            writeln!(
                f,
                "  process notices lost: {} (the notice ring buffer was full)",
                figures.notices_lost
            )?;
        }
        let follow = &figures.processes;
        if *follow != FollowStats::default() {
            writeln!(
                f,
                "  processes: {} loaded while tracing, {} refreshed (new code mapped), {} exited, {} gone before loading, \
                 {} without room, {} traced at the end; {} tables unloaded",
                follow.loaded,
                follow.refreshed,
                follow.exited,
                follow.vanished,
                follow.no_room,
                follow.traced_at_end,
                follow.unloaded
            )?;
        }
        write_jit(f, &figures.jit, &figures.jitdump)?;
        write_hotspot(f, &figures.hotspot)?;
        write_v8(f, &figures.v8)?;
        python::write(f, &figures.python)?;
        let symbols = &figures.symbols;
        if !symbols.is_empty() {
            let mut parts = vec![format!(
                "{} fetched from debuginfod, {} from its cache, {} read through sealed copies",
                symbols.fetched, symbols.cached, symbols.sealed_copies
            )];
            for (what, by) in [
                ("not fetched", &symbols.not_fetched_by_reason),
                ("not read", &symbols.refused_by_reason),
                ("symbol table only", &symbols.symbol_table_only_by_reason),
            ] {
                if !by.is_empty() {
                    let reasons: Vec<String> = by.iter().map(|(r, n)| format!("{r} {n}")).collect();
                    parts.push(format!("{what}: {}", reasons.join(", ")));
                }
            }
            writeln!(f, "  symbol files: {}", parts.join("; "))?;
        }
        let copies = &figures.stack_copies;
        if copies.copies > 0 {
            let why = if copies.every_sample {
                "every sample, recorded"
            } else {
                "no table yet when sampled"
            };
            writeln!(
                f,
                "  stack copies ({why}): {}, {} walked once loaded, {} never resolved, {} over the queue",
                copies.copies, copies.walked, copies.unresolved, copies.overflowed
            )?;
        }
        let entries = &figures.call_entries;
        if entries.given > 0 {
            writeln!(
                f,
                "  stacks kept at exit and exec: {}, given to {} samples taken inside those calls",
                entries.kept, entries.given
            )?;
        }
        // The first few reasons in full; system-wide there can be many.
        for why in figures.notes.iter().take(MAX_NOTES) {
            // Reasons name files other users control.
            writeln!(f, "  note: {}", tracer_unwind::names::escaped(why))?;
        }
        let more = figures.notes.len().saturating_sub(MAX_NOTES) as u64 + figures.notes_left_out;
        if more > 0 {
            writeln!(f, "  note: and {more} more objects without a table")?;
        }
        for failed in &figures.failed_outputs {
            writeln!(f, "  output failed: {}", tracer_unwind::names::escaped(failed))?;
        }
        if let Some(report) = self.otlp {
            write!(f, "{report}")?;
        }
        // Last, where the eye lands.
        for sentence in &figures.diagnosis {
            writeln!(f, "  diagnosis: {}", tracer_unwind::names::escaped(sentence))?;
        }
        Ok(())
    }
}

/// The JVM line, when one was met.
fn write_hotspot(f: &mut fmt::Formatter<'_>, h: &crate::jit::hotspot::HotSpotStats) -> fmt::Result {
    if *h == crate::jit::hotspot::HotSpotStats::default() {
        return Ok(());
    }
    write!(
        f,
        "  hotspot: {} JVMs read ({} reads, {:.1} ms), {} compiled methods ({} unnamed, {} without lines), {} malformed blobs",
        h.processes,
        h.scans,
        h.read_us as f64 / 1000.0,
        h.compiled_methods,
        h.unnamed_methods,
        h.unscoped_methods,
        h.malformed_blobs
    )?;
    let interpreted = &h.interpreted;
    if interpreted.named != 0 || !interpreted.unnamed_by_reason.is_empty() {
        write!(f, ", {} interpreted frames named", interpreted.named)?;
        let unnamed: Vec<String> = interpreted
            .unnamed_by_reason
            .iter()
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        if !unnamed.is_empty() {
            write!(f, " ({} not: {})", unnamed.len(), unnamed.join(", "))?;
        }
    }
    if !h.refused_by_reason.is_empty() {
        let refused: Vec<String> = h.refused_by_reason.iter().map(|(r, n)| format!("{r} {n}")).collect();
        write!(f, ", refused: {}", refused.join(", "))?;
    }
    writeln!(f)
}

/// The Node.js line, when a V8 was met.
fn write_v8(f: &mut fmt::Formatter<'_>, v: &crate::v8::V8Stats) -> fmt::Result {
    if *v == crate::v8::V8Stats::default() {
        return Ok(());
    }
    let unnamed: u64 = v.unnamed_by_reason.values().sum();
    write!(
        f,
        "  v8: {} processes, {} JavaScript frames named ({} functions), {} left native",
        v.processes, v.frames, v.functions, unnamed
    )?;
    let counts = |m: &std::collections::BTreeMap<&str, u64>| -> String {
        m.iter().map(|(r, n)| format!("{r} {n}")).collect::<Vec<_>>().join(", ")
    };
    if !v.unnamed_by_reason.is_empty() {
        write!(f, " ({})", counts(&v.unnamed_by_reason))?;
    }
    if v.frames != 0 {
        write!(f, "; {} at their running line", v.lined)?;
        if !v.unlined_by_reason.is_empty() {
            write!(f, " (without: {})", counts(&v.unlined_by_reason))?;
        }
        if v.inlined != 0 {
            write!(f, ", {} inlined", v.inlined)?;
        }
    }
    if v.replaced != 0 {
        write!(f, ", {} cached functions replaced", v.replaced)?;
    }
    if !v.refused_by_reason.is_empty() {
        write!(f, ", refused: {}", counts(&v.refused_by_reason))?;
    }
    writeln!(f)
}

/// The perf-map line, when a process ran code outside any object.
fn write_jit(
    f: &mut fmt::Formatter<'_>,
    jit: &crate::jit::JitStats,
    dump: &crate::jit::dumps::DumpStats,
) -> fmt::Result {
    if *dump != crate::jit::dumps::DumpStats::default() {
        write!(
            f,
            "  jitdump: {} read, {} regions of JIT code with tables ({} malformed records, {} unwind entries unusable)",
            dump.read, dump.regions, dump.malformed_records, dump.unusable_unwind
        )?;
        let refused: Vec<String> = dump.refused_by_reason.iter().map(|(r, n)| format!("{r} {n}")).collect();
        if !refused.is_empty() {
            write!(f, ", refused: {}", refused.join(", "))?;
        }
        writeln!(f)?;
    }
    if jit.processes == 0 {
        return Ok(());
    }
    write!(
        f,
        "  jit: {} processes sampled in anonymous code, {} perf maps read ({} names, {} malformed lines, {} over the limit)",
        jit.processes, jit.perf_maps, jit.entries, jit.malformed_lines, jit.over_limit
    )?;
    if !jit.refused_by_reason.is_empty() {
        let refused: Vec<String> = jit.refused_by_reason.iter().map(|(r, n)| format!("{r} {n}")).collect();
        write!(f, ", refused: {}", refused.join(", "))?;
    }
    writeln!(f)?;
    let b = &jit.budget;
    if b.perf_map_lines_over_budget + b.jitdump_records_over_budget + b.jitdump_images_over_budget + b.reads_behind > 0
    {
        writeln!(
            f,
            "  jit budget: {} of {} bytes held at most; over it: {} perf-map lines, {} jitdump records, {} jitdump images; {} reads put off for time",
            b.peak_bytes,
            b.limit_bytes,
            b.perf_map_lines_over_budget,
            b.jitdump_records_over_budget,
            b.jitdump_images_over_budget,
            b.reads_behind
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
