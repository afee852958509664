//! Text in the layout of `perf script` with call chains, one record per sample, written as the
//! samples arrive, so the tools made for perf read it: stackcollapse-perf.pl and
//! inferno-collapse-perf, speedscope, the Firefox profiler's importer.
//!
//! ```text
//! app 7/8 [001] 12345.678901: 2004008 cpu-clock:
//!         55d0c2a01136 spin (/usr/bin/app)
//!         55d0c2a011a0 main (/usr/bin/app)
//!         7f3e1a02a1c9 [libfoo.so+0x1c9] (/usr/lib/libfoo.so)
//!
//! ```
//!
//! The header is command, pid/tid, CPU, the time (`CLOCK_MONOTONIC` seconds, perf's clock), the
//! period (nanoseconds of CPU time the sample stands for) and the event; then the frames,
//! innermost first, one per line after a tab: address, name, object. Inlined functions are lines of their
//! own at the same address. Names are those of the folded format (a frame without a symbol
//! is named by its object and offset instead of perf's `[unknown]`), so collapsing this text
//! gives the folded stacks, with counts multiplied by the period.
//!
//! Names other users control are written by the perf-script rules of [`tracer_unwind::names`]: no
//! control character, no space in the command name or in an object path, no command name
//! starting with `#`, so that a name can neither start a record nor split a field.

use std::io::{self, Write};

use super::model::{FrameSource, ObjectInfo, ResolvedSample};
use tracer_unwind::names;

/// Write one sample as a record and flush it.
pub fn write_sample(out: &mut impl Write, sample: &ResolvedSample, objects: &[ObjectInfo]) -> io::Result<()> {
    let mut record = Vec::with_capacity(64 + 80 * sample.frames.len());
    writeln!(
        record,
        "{} {}/{} [{:03}] {}.{:06}: {} {}:",
        names::perf_script_comm(&sample.comm),
        sample.pid,
        sample.tid,
        sample.cpu,
        sample.time_ns / 1_000_000_000,
        sample.time_ns % 1_000_000_000 / 1000,
        sample.weight_ns,
        names::escaped(&sample.event),
    )?;
    for frame in &sample.frames {
        let object = match (frame.source, frame.object.and_then(|o| objects.get(o))) {
            (_, Some(object)) => names::perf_script_object(&object.path),
            (FrameSource::Kernel, None) => "[kernel.kallsyms]".to_owned(),
            (_, None) => "[unknown]".to_owned(),
        };
        writeln!(
            record,
            "\t{:>16x} {} ({})",
            frame.addr,
            names::escaped(&frame.name(objects)),
            object
        )?;
    }
    record.push(b'\n');
    out.write_all(&record)?;
    out.flush()
}

#[cfg(test)]
mod tests;
