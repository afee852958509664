//! The Python part of the summary: samples whose CPython frame chain the kernel walked, the
//! Python frames it recorded, and the walks it cut short, by named reason (`PY_STOPS`).

use std::{collections::BTreeMap, fmt};

use serde::Serialize;

use crate::bpf::PythonCounts;

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
        }
    }
}

/// The text line, only when some Python chain was walked.
pub fn write(f: &mut fmt::Formatter<'_>, python: &PythonFigures) -> fmt::Result {
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
    writeln!(f)
}
