//! The walk of a stack copy (`tracer_common::snapshot`), frame by frame as the kernel walks a
//! live stack (`tracer-ebpf/src/unwind.rs`): the same [`walk::table_step`] with the same rules,
//! the same frame-pointer fallback (with the rules of the architecture this is built for) where
//! an object has no table or a row says `NO_INFO`, the same checks (every caller's PC in a
//! mapping, the depth limit after the outermost rule), only reading the copy instead of the
//! process. Pure: the rules come from a closure, so the tests feed fake tables and stacks.

use tracer_common::{
    snapshot::StackSnapshot,
    trace::{MAX_USER_FRAMES, SOURCE_FP, SOURCE_TABLE},
    unwind::{FLAG_SIGNAL, KIND_NO_INFO, UnwindRule},
    walk::{self, Arch, Regs, Step, StopReason},
};

/// What covers a PC for the walk: `None`, no mapping of the process; `Some(None)`, a mapping
/// without a table (frame pointers); `Some(Some(rule))`, the table's rule there.
pub type Covering = Option<Option<UnwindRule>>;

/// A walked copy: the user frames (frame 0 first) with how each was found, and why the walk
/// ended.
#[derive(Debug, PartialEq, Eq)]
pub struct Walked {
    pub frames: Vec<(u64, u8)>,
    pub stop: StopReason,
}

/// Walk `copy` up to `max_depth` frames, `rule_at(pc)` saying what covers each PC looked up
/// (`walk::lookup_pc`). A read the copy cannot answer because it is above its end ends the walk
/// as [`StopReason::SnapshotEnd`] (the stack was deeper than what was copied); other failed
/// reads end it as the kernel's walk would.
pub fn walk_copy(copy: &StackSnapshot, max_depth: u32, rule_at: impl FnMut(u64) -> Covering) -> Walked {
    walk_copy_on(Arch::HOST, copy, max_depth, rule_at)
}

/// [`walk_copy`] with the rules of `arch` (a recording of another architecture replayed here).
pub fn walk_copy_on(
    arch: Arch,
    copy: &StackSnapshot,
    max_depth: u32,
    mut rule_at: impl FnMut(u64) -> Covering,
) -> Walked {
    let max_depth = (max_depth as usize).clamp(1, MAX_USER_FRAMES);
    let mut regs = Regs::from(copy.regs);
    let mut frames = vec![(regs.pc, SOURCE_TABLE)];
    let mut past_end = false;
    let mut read = |addr: u64| {
        let word = copy.read(addr);
        past_end |= word.is_none() && copy.beyond(addr);
        word
    };
    let stop = loop {
        let n = frames.len();
        let topmost = n <= 1;
        let Some(covering) = rule_at(walk::lookup_pc(&regs, topmost)) else {
            break StopReason::NoMapping;
        };
        // Found by the frame-pointer fallback: its FP came from a frame record.
        let chained = n >= 2 && frames[n - 1].1 == SOURCE_FP;
        let (step, source) = match covering {
            Some(rule) if rule.kind != KIND_NO_INFO || rule.flags & FLAG_SIGNAL != 0 => (
                walk::table_step(arch, chained, &rule, &regs, topmost, &mut read),
                SOURCE_TABLE,
            ),
            _ => (
                walk::frame_pointer_step(&regs, arch, chained, topmost, &mut read),
                SOURCE_FP,
            ),
        };
        let next = match step {
            Step::Next(next) => next,
            Step::Stop(reason) => break reason,
        };
        if n >= max_depth {
            break StopReason::MaxDepth;
        }
        if rule_at(walk::lookup_pc(&next, false)).is_none() {
            break StopReason::NoMapping;
        }
        frames.push((next.pc, source));
        regs = next;
    };
    let stop = match stop {
        StopReason::CfaReadFailed | StopReason::RaReadFailed | StopReason::FpReadFailed if past_end => {
            StopReason::SnapshotEnd
        }
        other => other,
    };
    Walked { frames, stop }
}

#[cfg(test)]
mod tests;
