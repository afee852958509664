//! The folded format: one line per distinct stack, `comm;outermost;...;innermost COUNT` — user
//! frames from the outermost (`_start`) to the sampled function, then kernel frames from the
//! system-call entry to the sampled kernel function. Read by flamegraph.pl, inferno, speedscope.
//! Stacks of different threads or processes with the same command name and frame names share a
//! line.

use std::{collections::BTreeMap, io::Write};

use super::model::Resolved;

/// The folded lines of `resolved` (without their counts), sorted, with their counts.
pub fn lines(resolved: &Resolved) -> BTreeMap<String, u64> {
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    for stack in &resolved.stacks {
        let mut line = sanitize(&stack.comm);
        for frame in stack.frames.iter().rev() {
            line.push(';');
            line.push_str(&sanitize(&frame.name(&resolved.objects)));
        }
        *lines.entry(line).or_default() += stack.count;
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

/// A frame name can hold neither the frame separator nor a line break.
fn sanitize(name: &str) -> String {
    name.replace([';', '\n'], "_")
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
            event: "cpu-clock".to_owned(),
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
}
