//! The Python part of the summary: samples whose CPython frame chain the kernel walked, the
//! Python frames it recorded, and the walks it cut short, by named reason (`PY_STOPS`); then
//! what became of those frames in the stacks (`python::PyFrameStats`: named, unnamed,
//! left unmatched).

use std::{collections::BTreeMap, fmt};

use serde::Serialize;

use crate::{
    bpf::PythonCounts,
    python::{PyFrameStats, PyMapStats},
};

/// The kernel's Python walk counters, as the summary names them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PythonFigures {
    /// Samples whose Python frame chain was walked.
    pub walks: u64,
    /// Python frames recorded.
    pub frames: u64,
    /// Walks cut short, in all and by reason (reasons that happened only).
    pub cut_short: u64,
    pub cut_short_by_reason: BTreeMap<&'static str, u64>,
    /// The Python frames put into stacks, and those not named.
    pub stacks: PyFrameStats,
    /// The processes given to the kernel's map of interpreters: added, evicted, refused.
    pub map: PyMapStats,
    /// Interpreters mapped by traced processes whose frames are not walked, by reason (the
    /// version or build, named): objects.
    pub refused: BTreeMap<String, u64>,
}

impl PythonFigures {
    /// The kernel's `counts` and what became of the frames in the stacks.
    pub fn new(counts: &PythonCounts, stacks: PyFrameStats, map: PyMapStats) -> PythonFigures {
        PythonFigures {
            stacks,
            map,
            ..PythonFigures::from(counts)
        }
    }
}

impl From<&PythonCounts> for PythonFigures {
    fn from(counts: &PythonCounts) -> PythonFigures {
        let cut_short_by_reason: BTreeMap<_, _> = counts
            .stops
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(stop, n)| (stop.name(), *n))
            .collect();
        PythonFigures {
            walks: counts.walks,
            frames: counts.frames,
            cut_short: cut_short_by_reason.values().sum(),
            cut_short_by_reason,
            stacks: PyFrameStats::default(),
            map: PyMapStats::default(),
            refused: BTreeMap::new(),
        }
    }
}

/// The text line, only when some Python chain was walked; the map's line, only when a
/// process was evicted or refused; the refused interpreters' line, only when one was.
pub fn write(f: &mut fmt::Formatter<'_>, python: &PythonFigures) -> fmt::Result {
    if !python.refused.is_empty() {
        let reasons: Vec<String> = python.refused.iter().map(|(r, n)| format!("{r} ({n})")).collect();
        writeln!(f, "  python interpreters not walked: {}", reasons.join(", "))?;
    }
    let map = &python.map;
    if map.evicted + map.refused_full + map.refused_error > 0 {
        writeln!(
            f,
            "  python map: {} processes added, {} idle ones gave way, {} refused (full of processes \
             sampled more recently {}, error {})",
            map.added,
            map.evicted,
            map.refused_full + map.refused_error,
            map.refused_full,
            map.refused_error
        )?;
    }
    if python.walks == 0 {
        return Ok(());
    }
    write!(
        f,
        "  python: {} walks, {} frames, {} walks cut short",
        python.walks, python.frames, python.cut_short
    )?;
    if !python.cut_short_by_reason.is_empty() {
        let reasons: Vec<String> = python
            .cut_short_by_reason
            .iter()
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        write!(f, " ({})", reasons.join(", "))?;
    }
    let stacks = &python.stacks;
    if stacks.frames > 0 {
        write!(
            f,
            "; {} Python frames in stacks, {} unnamed",
            stacks.frames,
            stacks.unnamed + stacks.replaced + stacks.too_many_functions + stacks.over_user_budget + stacks.over_budget
        )?;
        if stacks.replaced > 0 {
            write!(
                f,
                " ({} with their code object replaced before they were named)",
                stacks.replaced
            )?;
        }
    }
    let bounded = stacks.over_user_budget + stacks.over_budget + stacks.elided + stacks.caches_emptied;
    if bounded > 0 {
        write!(
            f,
            " (bounds: {} over their user's share of names, {} over their sample's work, {} elided, \
             {} caches emptied)",
            stacks.over_user_budget, stacks.over_budget, stacks.elided, stacks.caches_emptied
        )?;
    }
    let unmatched = stacks.eval_frames_without_run + stacks.runs_dropped;
    if unmatched > 0 {
        write!(
            f,
            ", {} evaluation-loop frames without Python frames, {} runs dropped",
            stacks.eval_frames_without_run, stacks.runs_dropped
        )?;
    }
    if stacks.reads_stuck > 0 {
        write!(f, ", {} memory reads stuck", stacks.reads_stuck)?;
    }
    if stacks.reads_late > 0 {
        write!(
            f,
            ", {} memory reads late (read again once answered)",
            stacks.reads_late
        )?;
    }
    writeln!(f)
}
