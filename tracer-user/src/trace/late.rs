//! Streamed samples that wait for their JIT names. A sample is named when it is taken in; one
//! taken after its process's perf map was last read, in code compiled since, is named by the
//! lines written since, but the map is read again at most every few milliseconds
//! (`JitNames::put_off`). Such a sample waits for that read (the next sample's, or the
//! housekeeping tick's) instead of being written without its names. Bounded: past
//! [`MAX_HELD`], the oldest is written as it is.

use std::collections::VecDeque;

use super::output::Taken;
use crate::jit::JitNames;
use crate::profile::{Frame, Stack};

/// Samples held at most (a few milliseconds of samples on a large host).
pub(super) const MAX_HELD: usize = 4096;

/// The samples held for their names, oldest first.
#[derive(Debug, Default)]
pub(super) struct Late {
    held: VecDeque<(Taken, Stack)>,
    /// [`JitNames::settled`] when the samples held were last looked at: until it changes, no
    /// put-off read was made and none of them is ready (they are not looked at per sample).
    seen: u64,
}

/// Whether `stack` has a JIT frame without a name that a put-off read of its perf map may name.
pub(super) fn waits(stack: &Stack, jit: &JitNames) -> bool {
    stack.user.iter().any(|frame| match *frame {
        Frame::UserUnknown { addr, process } => {
            process != 0 && jit.name(process, addr).is_none() && jit.put_off(stack.pid, process)
        }
        _ => false,
    })
}

impl Late {
    /// Hold `stack`; the oldest sample held, when there are [`MAX_HELD`] already, is handed
    /// back to be written as it is.
    pub(super) fn hold(&mut self, taken: Taken, stack: Stack) -> Option<(Taken, Stack)> {
        let oldest = (self.held.len() >= MAX_HELD).then(|| self.held.pop_front()).flatten();
        self.held.push_back((taken, stack));
        oldest
    }

    /// The samples held that wait no more (every one with `all`), oldest first.
    pub(super) fn ready(&mut self, jit: &JitNames, all: bool) -> Vec<(Taken, Stack)> {
        if self.held.is_empty() || (!all && jit.settled() == self.seen) {
            return Vec::new();
        }
        self.seen = jit.settled();
        let (ready, waiting): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(_, stack)| all || !waits(stack, jit));
        self.held = waiting;
        ready.into()
    }

    pub(super) fn len(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests;
