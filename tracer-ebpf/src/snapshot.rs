//! Stack copies instead of guesses: when the walker has no table for the code it is in (a
//! process userspace has not loaded yet, or a PC in none of a loaded process's mappings), the
//! sample carries the registers the walk started from and up to `SNAPSHOT_CHUNKS` chunks of
//! the user stack above SP instead (layout: `tracer_common::snapshot`), and userspace walks it
//! with the same rows and `walk::step` once the table is loaded. Frame pointers are never
//! tried there: through glibc and ld.so, built without them, a stale frame pointer that points
//! into the stack passes every check the kernel can make cheaply and invents callers.

use aya_ebpf::{
    bindings::{BPF_RB_AVAIL_DATA, BPF_RB_RING_SIZE},
    helpers::generated,
};
use tracer_common::{
    snapshot::{SNAPSHOT_CHUNK_BYTES, SNAPSHOT_CHUNK_WORDS, SNAPSHOT_CHUNKS, SNAPSHOT_SLOT, SNAPSHOT_STACK_SLOT},
    trace::{MAX_KERNEL_FRAMES, SampleRecord, WalkState},
    walk::StopReason,
};

use crate::EVENTS;

/// Make the sample in `state` a copy: frame 0 is the PC the walk started from (the frames
/// walked so far are dropped; userspace walks them again from the copy), then the registers
/// and the stack from SP rounded down to a chunk, chunk by chunk until one cannot be read (the
/// top of the stack) or `SNAPSHOT_CHUNKS` are copied. The walk ends as `Snapshot`, or as
/// `RaReadFailed` when not one chunk could be read (then the sample is frame 0 alone).
///
/// A copy is up to 16 KiB where a walked sample is a few hundred bytes: while the sample ring
/// buffer is more than [`ROOM_FRACTION`]-full (a storm of short-lived processes, a reader
/// behind), no copy is made and the sample keeps the frames walked so far (frame 0 alone for
/// a process without tables), ending as `NoMapping`, so copies never crowd out the samples of
/// loaded processes.
#[inline(always)]
pub fn take(state: &mut WalkState) {
    let regs = state.first;
    let record = &mut state.record;
    if EVENTS.query(u64::from(BPF_RB_AVAIL_DATA)) > EVENTS.query(u64::from(BPF_RB_RING_SIZE)) / ROOM_FRACTION {
        // The frames walked so far stay (frame 0 alone when the walk has not begun).
        record.header.snapshot = 0;
        // SAFETY: a plain store into the walk state; volatile, as every stop reason (see
        // `unwind::walk_frame`).
        unsafe { core::ptr::write_volatile(&mut record.header.stop, StopReason::NoMapping as u32) };
        return;
    }
    shorten(record, regs.pc, StopReason::Snapshot);
    let base = regs.sp & !(SNAPSHOT_CHUNK_BYTES - 1);
    if let Some(head) = record.frames.get_mut(SNAPSHOT_SLOT..SNAPSHOT_STACK_SLOT) {
        head.copy_from_slice(&[regs.sp, regs.fp, regs.lr, base]);
    }
    let mut words = 0u32;
    for i in 0..SNAPSHOT_CHUNKS {
        let from = SNAPSHOT_STACK_SLOT + i * SNAPSHOT_CHUNK_WORDS;
        let Some(chunk) = record.frames.get_mut(from..from + SNAPSHOT_CHUNK_WORDS) else {
            break;
        };
        let src = base.wrapping_add(i as u64 * SNAPSHOT_CHUNK_BYTES);
        // SAFETY: a probe read of exactly the chunk's bytes into the chunk (inside the map
        // value): an unmapped or kernel address fails instead of faulting.
        let read = unsafe {
            generated::bpf_probe_read_user(
                chunk.as_mut_ptr().cast(),
                SNAPSHOT_CHUNK_BYTES as u32,
                src as *const core::ffi::c_void,
            )
        };
        if read != 0 {
            break;
        }
        words += SNAPSHOT_CHUNK_WORDS as u32;
    }
    if words == 0 {
        shorten(record, regs.pc, StopReason::RaReadFailed);
    } else {
        record.header.snapshot = words;
    }
}

/// The ring buffer may be at most 1 / this full for a copy to be made.
const ROOM_FRACTION: u64 = 4;

/// Make the sample in `record` frame 0 (`pc`) alone, without a copy, ending as `stop`.
#[inline(always)]
fn shorten(record: &mut SampleRecord, pc: u64, stop: StopReason) {
    // SAFETY: a plain load from the walk state; volatile so the verifier sees an unknown
    // value, which the clamp bounds.
    let kernel = unsafe { core::ptr::read_volatile(&record.header.num_kernel) };
    let at = (kernel as usize).min(MAX_KERNEL_FRAMES);
    if let Some(slot) = record.frames.get_mut(at) {
        *slot = pc;
    }
    record.header.num_user = 1;
    record.header.snapshot = 0;
    record.header.vmas = 0;
    // SAFETY: a plain store into the walk state; volatile, as every stop reason (see
    // `unwind::walk_frame`).
    unsafe { core::ptr::write_volatile(&mut record.header.stop, stop as u32) };
}
