//! Stack copies: what the kernel ships instead of a walk when it has no table to walk with (a
//! process not loaded yet, a PC in code userspace has not read yet), so that userspace can walk
//! the sample with the same rows and the same `walk::step` once the table is there, instead of
//! anyone guessing with frame pointers.
//!
//! Layout inside a [`crate::trace::SampleRecord`] whose header has `snapshot != 0`: the kernel
//! frames and frame 0 (the sampled PC, `num_user == 1`) as usual, then from frame slot
//! [`SNAPSHOT_SLOT`] on: SP, FP, LR, the address the copy starts at, and `snapshot` words of
//! user stack from there. The copy starts at SP rounded down to [`SNAPSHOT_CHUNK_BYTES`] and is
//! read in chunks of that size (never crossing a page: the page above the stack's top is
//! unmapped), up to [`SNAPSHOT_CHUNKS`] of them, stopping at the first that cannot be read.

use crate::trace::{MAX_KERNEL_FRAMES, RECORD_FRAMES, RECORD_HEADER_BYTES, WalkRegs};

/// Bytes of one chunk of a copy: a constant-size read, aligned so it never crosses a page.
pub const SNAPSHOT_CHUNK_BYTES: u64 = 512;
/// Words of one chunk.
pub const SNAPSHOT_CHUNK_WORDS: usize = SNAPSHOT_CHUNK_BYTES as usize / 8;
/// Chunks of a copy at most: 16 KiB of stack (twice perf's default for `--call-graph dwarf`),
/// more than a process's first milliseconds (the dynamic loader, `main`'s first calls) use. The
/// copy ends at the stack's top (the first chunk that cannot be read), so a shallow stack ships
/// only what it holds; the bound is what the record's frame slots have room for beside the
/// kernel frames, and is what a new process's deepest first stacks are cut at (`snapshot_end`).
pub const SNAPSHOT_CHUNKS: usize = 32;
/// Words of stack in a copy at most.
pub const SNAPSHOT_WORDS: usize = SNAPSHOT_CHUNKS * SNAPSHOT_CHUNK_WORDS;
/// The frame slot of a record where a copy's registers start: after every kernel frame and
/// frame 0, so the frames before it never overlap it.
pub const SNAPSHOT_SLOT: usize = MAX_KERNEL_FRAMES + 1;
/// Words before the stack words: SP, FP, LR and the copy's start address.
pub const SNAPSHOT_HEADER_WORDS: usize = 4;
/// The frame slot of a record where the stack words start.
pub const SNAPSHOT_STACK_SLOT: usize = SNAPSHOT_SLOT + SNAPSHOT_HEADER_WORDS;

/// The registers and stack of a sample shipped as a copy (see the module docs).
#[derive(Clone, Copy, Debug)]
pub struct StackSnapshot {
    /// The sampled task's registers (`pc` is frame 0).
    pub regs: WalkRegs,
    /// The user address of `words[0]`.
    pub base: u64,
    /// Valid: `words[..len]`.
    pub len: u32,
    pub words: [u64; SNAPSHOT_WORDS],
}

impl StackSnapshot {
    /// No copy.
    pub const EMPTY: StackSnapshot = StackSnapshot {
        regs: WalkRegs {
            pc: 0,
            sp: 0,
            fp: 0,
            lr: 0,
        },
        base: 0,
        len: 0,
        words: [0; SNAPSHOT_WORDS],
    };

    /// The copied word at user address `addr`, or `None` when it is outside the copy (or not
    /// 8-aligned relative to it).
    pub fn read(&self, addr: u64) -> Option<u64> {
        let offset = addr.checked_sub(self.base)?;
        if offset % 8 != 0 {
            return None;
        }
        let index = usize::try_from(offset / 8).ok()?;
        if index >= self.len as usize {
            return None;
        }
        self.words.get(index).copied()
    }

    /// Whether `addr` is past the end of the copy (above it: a read there needed more stack
    /// than was copied, not a bad address).
    pub fn beyond(&self, addr: u64) -> bool {
        addr >= self.base.saturating_add(8 * u64::from(self.len))
    }
}

/// Bytes of a record carrying a copy of `words` stack words (at most [`SNAPSHOT_WORDS`]).
pub const fn snapshot_record_len(words: u32) -> usize {
    let words = if (words as usize) < SNAPSHOT_WORDS {
        words as usize
    } else {
        SNAPSHOT_WORDS
    };
    RECORD_HEADER_BYTES + 8 * (SNAPSHOT_STACK_SLOT + words)
}

const _: () = assert!(SNAPSHOT_STACK_SLOT + SNAPSHOT_WORDS <= RECORD_FRAMES);
const _: () = assert!(4096 % SNAPSHOT_CHUNK_BYTES == 0);

#[cfg(test)]
mod tests;
