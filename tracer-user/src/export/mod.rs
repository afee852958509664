//! Output formats. Each writes a [`model::Resolved`] profile (or, for streaming formats, one
//! event at a time); symbolization happens before, in `symbolize`.

pub mod folded;
pub mod json;
pub mod live;
pub mod model;
pub mod otlp;
pub mod perf_script;
pub mod pprof;
pub mod short;
pub mod svg;

#[cfg(test)]
mod tests;

/// The format of `--format` output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One line per distinct stack, written at the end.
    Folded,
    /// A flame graph, written at the end.
    Svg,
    /// Gzipped profile.proto, written at the end.
    Pprof,
    /// One JSON object per sample, streamed.
    Json,
    /// `perf script` text, one record per sample, streamed.
    PerfScript,
    /// OpenTelemetry profiles sent to a collector every export interval (`otlp`); nothing is
    /// written.
    Otlp,
}

impl Format {
    /// Written sample by sample while tracing, rather than from the whole profile at the end.
    pub fn is_streamed(self) -> bool {
        matches!(self, Format::Json | Format::PerfScript)
    }
}
