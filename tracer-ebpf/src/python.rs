//! The CPython frames of a sample (`tracer_common::python`): once the native walk is over,
//! the sampled thread's frame chain is walked whole, run after run, and appended to the record
//! after the native frames, for userspace to give each run to its evaluation-loop frame. Only
//! processes userspace put in `PYTHON` are walked; the rest pay one hash lookup.
//!
//! Each Python frame is one call of [`py_frame`], a global function (as the native walk's
//! frames are, `unwind.rs`), so the verifier checks a frame once, not once per loop turn; the
//! walk's own state is in the per-CPU `PY_WALK`. Bounded: [`MAX_PY_THREADS`] thread states
//! searched, [`MAX_PY_SAMPLE_FRAMES`] frames per sample, the record's room. Why a walk ends
//! early is counted in `PY_STOPS` by `PyStop`, with the walks and frames recorded.

use aya_ebpf::{
    helpers::bpf_probe_read_user,
    macros::map,
    maps::{HashMap, PerCpuArray},
};
use tracer_common::{
    python::{
        MAX_PY_SAMPLE_FRAMES, MAX_PY_THREADS, PY_CODE_BIT, PY_COUNT_FRAMES, PY_COUNT_WALKS, PY_COUNTERS, PY_RUN_END,
        PYTHON_ENTRIES, PyProcInfo, PyStop, current_frame, read_frame,
    },
    trace::{MAX_KERNEL_FRAMES, MAX_USER_FRAMES, WalkState},
};

use crate::SCRATCH;

/// `tgid -> PyProcInfo` (`MAP_PYTHON`), written by userspace.
#[map]
static PYTHON: HashMap<u32, PyProcInfo> = HashMap::with_max_entries(PYTHON_ENTRIES, 0);
/// Counters (`MAP_PY_STOPS`).
#[map]
static PY_STOPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(PY_COUNTERS, 0);
/// The Python walk in progress on this CPU.
#[map]
static PY_WALK: PerCpuArray<PyWalk> = PerCpuArray::with_max_entries(1, 0);

/// [`PY_WALK`]'s value.
#[repr(C)]
pub struct PyWalk {
    info: PyProcInfo,
    /// The next frame to read (0: the chain is over).
    frame: u64,
    /// Python frames recorded in this sample.
    frames: u32,
    /// Whether the last word written ended a run (or none was written).
    at_run_end: u32,
}

/// [`py_frame`]: the walk goes on.
const CONTINUE: u64 = u64::MAX;
/// [`py_frame`]: the chain is over, complete.
const COMPLETE: u64 = u64::MAX - 1;

/// Append the Python frames of the sampled thread to the finished native walk in `state`.
pub fn walk(state: &WalkState) {
    let tgid = state.record.header.tgid;
    // SAFETY: a copy out of the map value, valid during this run.
    let Some(info) = (unsafe { PYTHON.get(tgid) }) else {
        return;
    };
    let Some(walk) = PY_WALK.get_ptr_mut(0) else { return };
    // SAFETY: this CPU's slot of a per-CPU map, used by nothing else while the program runs
    // (programs that walk do not nest on a CPU, see `main.rs`).
    let walk = unsafe { &mut *walk };
    walk.info = *info;
    walk.frames = 0;
    walk.at_run_end = 1;
    count(PY_COUNT_WALKS);
    walk.frame = match current_frame(&walk.info, state.record.header.tid, read_user) {
        Ok(frame) => frame,
        Err(stop) => return count(stop as u32),
    };
    for _ in 0..MAX_PY_SAMPLE_FRAMES + MAX_PY_THREADS {
        match py_frame() {
            CONTINUE => continue,
            COMPLETE => return,
            stop => return count(stop as u32),
        }
    }
    count(PyStop::TooDeep as u32);
}

/// Read the next frame of the walk in `PY_WALK` and append it to the record in `SCRATCH`:
/// [`CONTINUE`], [`COMPLETE`], or the `PyStop` that ends the walk.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn py_frame() -> u64 {
    let (Some(walk), Some(state)) = (PY_WALK.get_ptr_mut(0), SCRATCH.get_ptr_mut(0)) else {
        return PyStop::ReadFailed as u64;
    };
    // SAFETY: this CPU's slots of per-CPU maps, used by nothing else while the program runs.
    let (walk, state) = unsafe { (&mut *walk, &mut *state) };
    if walk.frame == 0 {
        return if walk.at_run_end != 0 {
            COMPLETE
        } else {
            PyStop::ChainEnded as u64
        };
    }
    let frame = match read_frame(&walk.info, walk.frame, read_user) {
        Ok(frame) => frame,
        Err(stop) => return stop as u64,
    };
    walk.frame = frame.previous;
    if frame.code != 0 {
        if walk.frames >= MAX_PY_SAMPLE_FRAMES || !push(state, PY_CODE_BIT | frame.code) {
            return PyStop::TooDeep as u64;
        }
        if !push(state, PY_CODE_BIT | frame.instr) {
            return PyStop::TooDeep as u64;
        }
        walk.frames += 1;
        walk.at_run_end = 0;
        count(PY_COUNT_FRAMES);
    }
    if frame.last {
        if !push(state, PY_RUN_END) {
            return PyStop::TooDeep as u64;
        }
        walk.at_run_end = 1;
    }
    CONTINUE
}

/// Append `word` after the user frames of the record; false when it is full.
#[inline(always)]
fn push(state: &mut WalkState, word: u64) -> bool {
    // SAFETY: plain loads from the walk state; volatile so the verifier bounds them by the
    // checks below rather than by what it knows of earlier stores.
    let (kernel, user) = unsafe {
        (
            core::ptr::read_volatile(&state.record.header.num_kernel),
            core::ptr::read_volatile(&state.record.header.num_user),
        )
    };
    if user >= MAX_USER_FRAMES as u32 {
        return false;
    }
    let at = u64::from(kernel.min(MAX_KERNEL_FRAMES as u32)) + u64::from(user);
    let Some(slot) = state.record.frames.get_mut(at as usize) else {
        return false;
    };
    *slot = word;
    state.record.header.num_user = user + 1;
    true
}

/// Bump counter `slot` of `PY_STOPS` on this CPU.
#[inline(always)]
fn count(slot: u32) {
    if let Some(slot) = PY_STOPS.get_ptr_mut(slot) {
        // SAFETY: this CPU's slot of a per-CPU map, valid while the program runs.
        unsafe { *slot += 1 }
    }
}

/// One word of the sampled process.
fn read_user(addr: u64) -> Option<u64> {
    // SAFETY: a probe read: an unmapped or kernel address fails instead of faulting.
    unsafe { bpf_probe_read_user(addr as *const u64) }.ok()
}
