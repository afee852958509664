//! A sample as userspace reads it: the ring buffer's [`SampleRecord`] bytes decoded, every
//! count checked against the record's length and limits (the kernel's bytes are trusted no
//! more than they must be).

use crate::{
    frame_word::{BCI_MASK, BCI_SHIFT, WORD_ADDR_MASK, is_frame_word},
    mapping::{ExecMapping, NO_VMA},
    snapshot::{SNAPSHOT_SLOT, SNAPSHOT_STACK_SLOT, SNAPSHOT_WORDS, StackSnapshot, snapshot_record_len},
    trace::{
        FP_FRAME_BIT, MAX_KERNEL_FRAMES, MAX_USER_FRAMES, RECORD_HEADER_BYTES, SOURCE_FP, SOURCE_TABLE, SampleHeader,
        SampleRecord, VMA_WORDS, WalkRegs,
    },
    vma::MAX_VMAS,
};

/// One sample as userspace sees it: decoded from a [`SampleRecord`] by [`Sample::decode`],
/// its header's fields readable directly (`sample.tgid`).
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub header: SampleHeader,
    /// Valid: `..num_kernel` (innermost first).
    pub kernel: [u64; MAX_KERNEL_FRAMES],
    /// Valid: `..num_user` (frame 0 = the sampled PC, then callers).
    pub user: [u64; MAX_USER_FRAMES],
    /// [`SOURCE_TABLE`] or [`SOURCE_FP`] per user frame: how the frame's *caller* was found
    /// is recorded on the caller (frame 0's source is always `SOURCE_TABLE`).
    pub user_source: [u8; MAX_USER_FRAMES],
    /// Per user frame, the `SharedFunctionInfo` the kernel read from it when it is a V8
    /// JavaScript frame (`crate::v8`), else 0. The record carries it as a word after the
    /// frame; decoding takes it out of the frames.
    pub user_word: [u64; MAX_USER_FRAMES],
    /// The registers and stack copy when `header.snapshot != 0` (`stop` is then
    /// `StopReason::Snapshot` and `user` holds frame 0 only).
    pub copy: StackSnapshot,
    /// Valid: `..vmas`: the mappings the kernel found through the process's VMAs
    /// (`crate::vma`), which resolve frames userspace has no mapping for.
    pub vma_mappings: [ExecMapping; MAX_VMAS],
}

impl core::ops::Deref for Sample {
    type Target = SampleHeader;

    fn deref(&self) -> &SampleHeader {
        &self.header
    }
}

impl core::ops::DerefMut for Sample {
    fn deref_mut(&mut self) -> &mut SampleHeader {
        &mut self.header
    }
}

impl Sample {
    /// A sample with no frames, to decode records into ([`Sample::decode_into`]).
    pub const EMPTY: Sample = Sample {
        header: SampleHeader {
            time_ns: 0,
            weight: 0,
            event: 0,
            snapshot: 0,
            tgid: 0,
            tid: 0,
            cpu: 0,
            stop: 0,
            num_user: 0,
            num_kernel: 0,
            vmas: 0,
            _pad: 0,
            comm: [0; 16],
        },
        kernel: [0; MAX_KERNEL_FRAMES],
        user: [0; MAX_USER_FRAMES],
        user_source: [SOURCE_TABLE; MAX_USER_FRAMES],
        user_word: [0; MAX_USER_FRAMES],
        copy: StackSnapshot::EMPTY,
        vma_mappings: [NO_VMA; MAX_VMAS],
    };

    /// The sample of a record's bytes as shipped (the first [`SampleRecord::len`] bytes of a
    /// [`SampleRecord`]), or `None` when they are too short for the header or for the frames
    /// it announces, or announce more frames than a record holds (nothing the kernel writes).
    pub fn decode(bytes: &[u8]) -> Option<Sample> {
        let mut sample = Sample::EMPTY;
        sample.decode_into(bytes).then_some(sample)
    }

    /// [`Sample::decode`] into `self`, reused from record to record (a sample is 5.6 KiB, a
    /// typical record a tenth of that): writes the header and the frames the record holds,
    /// leaving the slots past `num_kernel` and `num_user` as they were. False (and `self`
    /// unspecified) when the bytes are not a record.
    pub fn decode_into(&mut self, bytes: &[u8]) -> bool {
        self.read(bytes).is_some()
    }

    fn read(&mut self, bytes: &[u8]) -> Option<()> {
        let word = |at: usize| -> Option<u64> {
            let b = bytes.get(at..at + 8)?;
            Some(u64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
        };
        let half = |at: usize| -> Option<u32> {
            let b = bytes.get(at..at + 4)?;
            Some(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        };
        if bytes.len() < RECORD_HEADER_BYTES {
            return None;
        }
        let num_user = half(core::mem::offset_of!(SampleHeader, num_user))?;
        let num_kernel = half(core::mem::offset_of!(SampleHeader, num_kernel))?;
        let (nu, nk) = (num_user as usize, num_kernel as usize);
        if nu > MAX_USER_FRAMES || nk > MAX_KERNEL_FRAMES || bytes.len() < SampleRecord::len(num_kernel, num_user) {
            return None;
        }
        let snapshot = half(core::mem::offset_of!(SampleHeader, snapshot))?;
        let vmas = half(core::mem::offset_of!(SampleHeader, vmas))?;
        // Mappings come with walked samples only.
        if vmas as usize > MAX_VMAS
            || (vmas != 0 && snapshot != 0)
            || bytes.len() < SampleRecord::len_with(num_kernel, num_user, vmas)
        {
            return None;
        }
        // A copy follows frame 0 and the kernel frames, which must not reach into it.
        if snapshot != 0
            && (snapshot as usize > SNAPSHOT_WORDS
                || nk + nu > SNAPSHOT_SLOT
                || bytes.len() < snapshot_record_len(snapshot))
        {
            return None;
        }
        let mut comm = [0u8; 16];
        let at = core::mem::offset_of!(SampleHeader, comm);
        comm.copy_from_slice(&bytes[at..at + 16]);
        self.header = SampleHeader {
            time_ns: word(core::mem::offset_of!(SampleHeader, time_ns))?,
            weight: word(core::mem::offset_of!(SampleHeader, weight))?,
            event: half(core::mem::offset_of!(SampleHeader, event))?,
            snapshot,
            tgid: half(core::mem::offset_of!(SampleHeader, tgid))?,
            tid: half(core::mem::offset_of!(SampleHeader, tid))?,
            cpu: half(core::mem::offset_of!(SampleHeader, cpu))?,
            stop: half(core::mem::offset_of!(SampleHeader, stop))?,
            num_user: 0,
            num_kernel,
            vmas,
            _pad: 0,
            comm,
        };
        let frame = |i: usize| word(RECORD_HEADER_BYTES + 8 * i);
        for (i, slot) in self.kernel[..nk].iter_mut().enumerate() {
            *slot = frame(i)?;
        }
        // A frame word belongs to the frame before it (the kernel writes none first).
        let mut frames = 0;
        for i in 0..nu {
            let word = frame(nk + i)?;
            if is_frame_word(word) {
                if frames > 0 {
                    self.user_word[frames - 1] = word & (WORD_ADDR_MASK | BCI_MASK << BCI_SHIFT);
                }
                continue;
            }
            self.user[frames] = word & !FP_FRAME_BIT;
            self.user_word[frames] = 0;
            self.user_source[frames] = if word & FP_FRAME_BIT != 0 {
                SOURCE_FP
            } else {
                SOURCE_TABLE
            };
            frames += 1;
        }
        self.header.num_user = frames as u32;
        for (i, slot) in self.vma_mappings[..vmas as usize].iter_mut().enumerate() {
            let at = nk + nu + VMA_WORDS * i;
            let object = frame(at + 3)?;
            *slot = ExecMapping {
                start: frame(at)?,
                end: frame(at + 1)?,
                bias: frame(at + 2)?,
                object: object as u32,
                frame_word: (object >> 32) as u32,
            };
        }
        self.copy.len = snapshot;
        if snapshot != 0 {
            self.copy.regs = WalkRegs {
                pc: self.user[0],
                sp: frame(SNAPSHOT_SLOT)?,
                fp: frame(SNAPSHOT_SLOT + 1)?,
                lr: frame(SNAPSHOT_SLOT + 2)?,
            };
            self.copy.base = frame(SNAPSHOT_SLOT + 3)?;
            for (i, slot) in self.copy.words[..snapshot as usize].iter_mut().enumerate() {
                *slot = frame(SNAPSHOT_STACK_SLOT + i)?;
            }
        }
        Some(())
    }
}

#[cfg(test)]
mod tests;
