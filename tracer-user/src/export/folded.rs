//! The folded format: one line per distinct stack, `comm;outermost;...;innermost COUNT` — user
//! frames from the outermost (`_start`) to the sampled function, then kernel frames from the
//! system-call entry to the sampled kernel function. Read by flamegraph.pl, inferno, speedscope.
//! Stacks of different threads or processes with the same command name and frame names share a
//! line.
//!
//! COUNT is the number of samples or hits, except for `offcpu`, whose lines count the
//! microseconds blocked (as off-CPU flame graphs do). When a profile has several events, each
//! line starts with its event (`offcpu;comm;...`), so that they never add up in one line.
//!
//! Names are written by the folded rule of [`crate::names`]: control characters as `\xHH`, `;`
//! as `_`, and never ending in what reads as a count, so a line has one `;` per frame and ends
//! in its count whatever the names.

use std::{collections::BTreeMap, io::Write};

use super::model::Resolved;
use crate::{event::is_offcpu, names};

/// The folded lines of `resolved` (without their counts), sorted, with their counts.
pub fn lines(resolved: &Resolved) -> BTreeMap<String, u64> {
    let first_event = resolved.stacks.first().map(|s| s.event.as_str());
    let several_events = resolved.stacks.iter().any(|s| Some(s.event.as_str()) != first_event);
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    for stack in &resolved.stacks {
        let mut line = String::new();
        if several_events {
            line.push_str(&names::folded(&stack.event));
            line.push(';');
        }
        line.push_str(&names::folded(&stack.comm));
        for frame in stack.frames.iter().rev() {
            line.push(';');
            line.push_str(&names::folded(&frame.name(&resolved.objects)));
        }
        let value = if is_offcpu(&stack.event) {
            stack.weight_ns / 1000
        } else {
            stack.count
        };
        *lines.entry(line).or_default() += value;
    }
    lines
}

/// Write `resolved` as folded lines, sorted for stable output.
pub fn write(out: &mut impl Write, resolved: &Resolved) -> std::io::Result<()> {
    for (line, count) in lines(resolved) {
        writeln!(out, "{line} {count}")?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::model::{FrameSource, ObjectInfo, ResolvedFrame, ResolvedStack};

    fn frame(symbol: Option<&str>, object: Option<usize>, offset: u64, source: FrameSource) -> ResolvedFrame {
        ResolvedFrame {
            addr: 0x5000 + offset,
            object,
            offset,
            symbol: symbol.map(str::to_owned),
            file: None,
            line: None,
            inlined: false,
            source,
        }
    }

    fn stack(tid: u32, frames: Vec<ResolvedFrame>, count: u64) -> ResolvedStack {
        ResolvedStack {
            pid: 7,
            tid,
            comm: "app".to_owned(),
            event: crate::event::CPU_CLOCK.to_owned(),
            frames,
            count,
            weight_ns: count * 10,
        }
    }

    /// A line is `comm;outermost user;...;innermost user;outermost kernel;...;innermost kernel
    /// COUNT`; separators in names are replaced, unknown frames are named by object and offset,
    /// and stacks of two threads with the same names share one line.
    #[test]
    fn lines_go_from_outermost_to_innermost() {
        let objects = vec![ObjectInfo {
            path: "/lib/libx.so".to_owned(),
            name: "libx.so".to_owned(),
            build_id: None,
        }];
        let frames = vec![
            frame(Some("k_inner"), None, 0xa, FrameSource::Kernel),
            frame(None, None, 0xb, FrameSource::Kernel),
            frame(None, Some(0), 0x1234, FrameSource::Sframe),
            frame(Some("main;weird"), Some(0), 0x200, FrameSource::Sframe),
            frame(None, None, 0x99, FrameSource::Fp),
        ];
        let resolved = Resolved {
            objects,
            stacks: vec![stack(8, frames.clone(), 2), stack(9, frames, 3)],
            ..Resolved::default()
        };
        let mut out = Vec::new();
        write(&mut out, &resolved).expect("write");
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            "app;[unknown 0x5099];main_weird;[libx.so+0x1234];[kernel 0x500b];k_inner 5\n"
        );
    }

    /// Lines of several events start with the event; offcpu lines count microseconds blocked.
    #[test]
    fn events_prefix_their_lines() {
        let frames = vec![frame(Some("nap"), None, 0x10, FrameSource::Sframe)];
        let mut offcpu = stack(8, frames.clone(), 2);
        offcpu.event = "offcpu".to_owned();
        offcpu.weight_ns = 7_500_000;
        let mut uprobe = stack(8, frames.clone(), 4);
        uprobe.event = "uprobe:/app:nap".to_owned();
        let resolved = Resolved {
            stacks: vec![offcpu.clone(), uprobe],
            ..Resolved::default()
        };
        assert_eq!(
            lines_of(&resolved),
            [
                ("offcpu;app;nap".to_owned(), 7500),
                ("uprobe:/app:nap;app;nap".to_owned(), 4)
            ]
        );
        let alone = Resolved {
            stacks: vec![offcpu],
            ..Resolved::default()
        };
        assert_eq!(lines_of(&alone), [("app;nap".to_owned(), 7500)]);
    }

    fn lines_of(resolved: &Resolved) -> Vec<(String, u64)> {
        lines(resolved).into_iter().collect()
    }
}
