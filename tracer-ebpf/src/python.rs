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
    Global,
    helpers::{bpf_probe_read_kernel, bpf_probe_read_user, generated::bpf_get_current_task},
    macros::map,
    maps::{HashMap, PerCpuArray},
};
use tracer_common::{
    python::{
        COMPLETE, CONTINUE, ChainWalk, MAX_PY_SAMPLE_FRAMES, MAX_PY_THREADS, PY_CHAIN_END, PY_COUNT_FRAMES,
        PY_COUNT_WALKS, PY_COUNTERS, PY_THREAD_PTHREAD, PYTHON_ENTRIES, PyProcInfo, PyRecord, PyStop, current_frame,
        step,
    },
    trace::{MAX_KERNEL_FRAMES, MAX_USER_FRAMES, WalkState},
};

use crate::SCRATCH;

/// `tracer_common::python::GLOBAL_TASK_FSBASE_OFFSET`.
#[unsafe(no_mangle)]
static TASK_FSBASE_OFFSET: Global<u32> = Global::new(0);

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
    chain: ChainWalk,
}

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
    count(PY_COUNT_WALKS);
    let Some(thread) = thread_key(&walk.info, state.record.header.tid) else {
        return count(PyStop::NoThreadState as u32);
    };
    let start = match current_frame(&walk.info, thread, read_user) {
        Ok(start) => start,
        Err(stop) => return count(stop as u32),
    };
    walk.chain = ChainWalk::new(start, state.record.header.num_user);
    let mut end = CONTINUE;
    for _ in 0..MAX_PY_SAMPLE_FRAMES + MAX_PY_THREADS {
        end = py_frame();
        if end != CONTINUE {
            break;
        }
    }
    if end == CONTINUE {
        end = PyStop::TooDeep as u64;
    }
    if end == COMPLETE {
        // SAFETY: this CPU's slot of `SCRATCH`, the record being built (see `py_frame`).
        if let Some(state) = SCRATCH.get_ptr_mut(0) {
            push(unsafe { &mut *state }, PY_CHAIN_END);
        }
    } else {
        count(end as u32);
    }
    if walk.chain.unsettled != 0 {
        count(PyStop::Unsettled as u32);
    }
    if let Some(slot) = PY_STOPS.get_ptr_mut(PY_COUNT_FRAMES) {
        // SAFETY: this CPU's slot of a per-CPU map, valid while the program runs.
        unsafe { *slot += u64::from(walk.chain.frames) }
    }
}

/// What the sampled thread's (`current`'s) thread state holds of it: its id, or with
/// `PY_THREAD_PTHREAD` its TLS base (`pthread_self()`), read from its `task_struct`. The base
/// is saved there when the thread's is set (`clone`, `arch_prctl`), which is how the C
/// libraries set it.
#[inline(always)]
fn thread_key(info: &PyProcInfo, tid: u32) -> Option<u64> {
    if info.offsets.flags & PY_THREAD_PTHREAD == 0 {
        return Some(u64::from(tid));
    }
    let offset = TASK_FSBASE_OFFSET.load();
    if offset == 0 {
        return None;
    }
    // SAFETY: `bpf_get_current_task` has no preconditions.
    let task = unsafe { bpf_get_current_task() };
    // SAFETY: a probe read: a bad address fails instead of faulting.
    unsafe { bpf_probe_read_kernel(task.wrapping_add(u64::from(offset)) as *const u64) }.ok()
}

/// One [`step`] of the walk in `PY_WALK`, appending to the record in `SCRATCH`.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn py_frame() -> u64 {
    let (Some(walk), Some(state)) = (PY_WALK.get_ptr_mut(0), SCRATCH.get_ptr_mut(0)) else {
        return PyStop::ReadFailed as u64;
    };
    // SAFETY: this CPU's slots of per-CPU maps, used by nothing else while the program runs.
    let (walk, state) = unsafe { (&mut *walk, &mut *state) };
    step(&walk.info, &mut walk.chain, read_user, &mut Record(state))
}

/// The record's user words, as [`step`] appends to them.
struct Record<'a>(&'a mut WalkState);

impl PyRecord for Record<'_> {
    #[inline(always)]
    fn push(&mut self, word: u64) -> bool {
        push(self.0, word)
    }

    #[inline(always)]
    fn used(&self) -> u32 {
        self.0.record.header.num_user
    }

    #[inline(always)]
    fn truncate(&mut self, len: u32) {
        let user = &mut self.0.record.header.num_user;
        *user = (*user).min(len);
    }
}

/// Append `word` after the user words of the record; false when it is full. (Also a frame's
/// word, `unwind.rs`.)
#[inline(always)]
pub(crate) fn push(state: &mut WalkState, word: u64) -> bool {
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
