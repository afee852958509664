//! CPython frames, shared by the eBPF walk and userspace: the per-process record that says
//! where a process's interpreter keeps its thread states and how its structures are laid out
//! ([`PyProcInfo`], the value of [`MAP_PYTHON`]), how a Python frame is written into a sample
//! record, and the walk of a thread's frames one [`step`] at a time, reading memory through
//! a closure so the kernel plugs in `bpf_probe_read_user` and tests a fake process.
//!
//! The chain (CPython 3.11-3.15): `_PyRuntime.interpreters.head` is the main interpreter, its
//! `threads.head` the newest thread state, linked by `next`; the thread state of the sampled
//! thread is the one whose `native_thread_id` is the thread's id. Its current frame is
//! `tstate->cframe->current_frame` (3.11, 3.12) or `tstate->current_frame` (3.13+), and frames
//! are linked by `previous`, innermost first. One call of `_PyEval_EvalFrameDefault` runs a
//! run of those frames (Python-to-Python calls do not recurse in C): in 3.11 the run ends with
//! the frame marked `is_entry`; from 3.12 on each call pushes a frame owned by the C stack
//! ([`OWNER_CSTACK`]) below its run, which is skipped. From 3.14 on a frame's code is a
//! tagged reference ([`PY_TAGGED_CODE`]); 3.15 ends the chain with the thread's base frame
//! ([`PY_BASE_FRAME`]).
//!
//! 3.6 to 3.10 ([`PY_FRAME_OBJECT`]): the thread state is the one whose `thread_id`
//! (`pthread_self()`) is the sampled thread's TLS base ([`PY_THREAD_PTHREAD`]; 3.6's list of
//! interpreters is its static `interp_head`, read at offset 0), its current frame
//! `tstate->frame`, frames `PyFrameObject`s linked by `f_back`, each one call of the
//! evaluation loop: a run of its own, its instruction pointer the 32 bits of `f_lasti`.
//!
//! The kernel walks the whole chain of the sampled thread, run after run, once the native walk
//! is over, and appends it to the record after the native frames, every word with
//! [`PY_CODE_BIT`] set (no native frame has it): per Python frame, innermost first, the code
//! object's address, then the frame's instruction pointer (the code unit it is at), the two
//! words carrying the code object's identity as it was at the sample ([`code_ident`],
//! [`frame_words`]); after each run, [`PY_RUN_END`]; after the last, [`PY_CHAIN_END`] if the
//! chain was walked whole.
//! Userspace gives the runs to the evaluation-loop frames of the
//! native stack, innermost first, and turns each instruction pointer into an offset into the
//! code and, with the line table, a line.
//!
//! The identity is what lets userspace cache code objects by address without ever naming a
//! frame after another code object: an interpreter frees code objects (a module's body, a
//! class body once run) and makes others at their addresses, often with their names and line
//! tables at the freed ones' addresses too (a program compiling the same text for another file
//! in a loop does), and a sample is resolved a moment after it was taken. The identity is made
//! of what names a frame: the pointers to the qualified name, file name and line table, the
//! first line, and the length and last characters of the two names. Userspace names a frame
//! only with a code object of the same identity, computed by the same [`code_ident`].

/// Read-only global: byte offset of the TLS base in the kernel's `task_struct` (x86-64:
/// `thread.fsbase`, from the kernel's BTF; 0 when not found): the key of the sampled thread
/// in interpreters laid out with [`PY_THREAD_PTHREAD`] (userspace registers none without it).
pub const GLOBAL_TASK_FSBASE_OFFSET: &str = "TASK_FSBASE_OFFSET";
/// Hash `tgid -> PyProcInfo`: the processes whose Python frames are walked.
pub const MAP_PYTHON: &str = "PYTHON";
/// Processes with an interpreter whose frames are walked at once.
pub const PYTHON_ENTRIES: u32 = 1024;
/// Thread states searched for the sampled thread's (`threads.head`, then `next`).
pub const MAX_PY_THREADS: u32 = 32;
/// An offset of [`PyOffsets`] the version does not have.
pub const NO_FIELD: u16 = u16::MAX;
/// `_PyInterpreterFrame::owner` of the frame each evaluation-loop call pushes in 3.12+
/// (`FRAME_OWNED_BY_CSTACK` in 3.12 and 3.13, `FRAME_OWNED_BY_INTERPRETER` from 3.14 on).
/// Owners above it (3.14's `FRAME_OWNED_BY_CSTACK`, 4) are frames of no code: skipped, they
/// end no run.
pub const OWNER_CSTACK: u8 = 3;
/// Set in every word of the Python part of a sample record. No user address has it (user
/// space ends below 2^57); distinct from `trace::FP_FRAME_BIT` (bit 63).
pub const PY_CODE_BIT: u64 = 1 << 62;
/// The bits of a Python word that hold its address (or `f_lasti`); user addresses are below
/// 2^48 on x86-64 and arm64. Bits 48 to 59 carry half of the frame's [`code_ident`] each.
pub const PY_ADDR_MASK: u64 = (1 << 48) - 1;
/// Where a Python word's half of the identity starts, and its width.
const PY_IDENT_SHIFT: u32 = 48;
const PY_IDENT_HALF: u32 = 12;
/// The word that ends a run in a sample record.
pub const PY_RUN_END: u64 = PY_CODE_BIT | 1 << 61;
/// The word after the last run of a chain walked to its end (none when the walk was cut
/// short): the runs are all the thread's.
pub const PY_CHAIN_END: u64 = PY_CODE_BIT | 1 << 60;
/// Python frames recorded per sample at most (two words each, plus one per run).
pub const MAX_PY_SAMPLE_FRAMES: u32 = 256;
/// Per-CPU `u64` counters of the Python walks: one per [`PyStop`] (walks cut short), then
/// [`PY_COUNT_WALKS`] and [`PY_COUNT_FRAMES`].
pub const MAP_PY_STOPS: &str = "PY_STOPS";
/// Slot of [`MAP_PY_STOPS`]: samples whose Python chain was walked.
pub const PY_COUNT_WALKS: u32 = PyStop::COUNT;
/// Slot of [`MAP_PY_STOPS`]: Python frames recorded.
pub const PY_COUNT_FRAMES: u32 = PyStop::COUNT + 1;
/// Slots of [`MAP_PY_STOPS`].
pub const PY_COUNTERS: u32 = PyStop::COUNT + 2;

/// Field offsets of one CPython version's structures, as the kernel walk needs them.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PyOffsets {
    /// `_PyRuntimeState.interpreters.head`.
    pub runtime_interpreters_head: u16,
    /// `PyInterpreterState.threads.head`.
    pub interp_threads_head: u16,
    /// `PyThreadState.next`.
    pub tstate_next: u16,
    /// `PyThreadState.native_thread_id`.
    pub tstate_native_thread_id: u16,
    /// `PyThreadState.cframe` (3.11, 3.12) or `.current_frame` (3.13).
    pub tstate_frame: u16,
    /// `_PyCFrame.current_frame`, or [`NO_FIELD`] when `tstate_frame` is the frame itself.
    pub cframe_current_frame: u16,
    /// `_PyInterpreterFrame.f_code` (3.11, 3.12) or `.f_executable` (3.13).
    pub frame_code: u16,
    /// `_PyInterpreterFrame.previous`.
    pub frame_previous: u16,
    /// `_PyInterpreterFrame.prev_instr` (3.11, 3.12) or `.instr_ptr` (3.13).
    pub frame_instr: u16,
    /// `_PyInterpreterFrame.owner` (a byte).
    pub frame_owner: u16,
    /// `_PyInterpreterFrame.is_entry` (a byte, 3.11), or [`NO_FIELD`] (3.12+: [`OWNER_CSTACK`]).
    pub frame_is_entry: u16,
    /// [`PY_FRAME_OBJECT`], [`PY_THREAD_PTHREAD`].
    pub flags: u16,
}

/// [`PyOffsets::flags`]: frames are `PyFrameObject`s (3.6-3.10): `frame_previous` is
/// `f_back`, `frame_code` `f_code`, `frame_instr` the `int f_lasti` (recorded as its 32 bits),
/// and each frame is a run of its own (every Python call is one evaluation-loop call).
pub const PY_FRAME_OBJECT: u16 = 1;
/// [`PyOffsets::flags`]: `tstate_native_thread_id` is `PyThreadState.thread_id`, the thread's
/// `pthread_self()` (before 3.11 no thread state holds the kernel's thread id), which the kernel
/// compares with the sampled thread's TLS base (x86-64's `fsbase`: glibc's and musl's
/// `pthread_self()` is that address).
pub const PY_THREAD_PTHREAD: u16 = 2;
/// [`PyOffsets::flags`]: `frame_code` is a `_PyStackRef` (3.14+), whose low bits are tags: they
/// are cleared ([`PY_TAG_MASK`]) to give the code object (objects are 8-byte aligned).
pub const PY_TAGGED_CODE: u16 = 4;
/// [`PyOffsets::flags`]: the chain ends with the thread's base frame (3.15+: owned by the
/// interpreter, as the frame each evaluation-loop call pushes, but the last, `previous` 0), which
/// belongs to no evaluation-loop call and ends no run.
pub const PY_BASE_FRAME: u16 = 8;
/// The tag bits of a `_PyStackRef` ([`PY_TAGGED_CODE`]).
pub const PY_TAG_MASK: u64 = 7;

/// The value of [`MAP_PYTHON`]: where one process's interpreter is and how it is laid out.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PyProcInfo {
    /// The address of `_PyRuntime` in the process.
    pub runtime: u64,
    /// `[start, end)` of `_PyEval_EvalFrameDefault` in the process.
    pub eval_start: u64,
    pub eval_end: u64,
    /// `[start, end)` of its cold part (`.cold`, split off by the compiler), or `0, 0`.
    pub cold_start: u64,
    pub cold_end: u64,
    pub offsets: PyOffsets,
    /// Where the parts of a code object its identity is made of are.
    pub ident: IdentOffsets,
    pub _pad: u32,
}

/// Where [`code_ident`] reads a code object and its names.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdentOffsets {
    /// `PyCodeObject.co_qualname` (`co_name` before 3.11), `.co_filename`, `.co_linetable`
    /// (`co_lnotab` before 3.10), all pointers, and `.co_firstlineno` (an `int`).
    pub qualname: u16,
    pub filename: u16,
    pub linetable: u16,
    pub firstlineno: u16,
    /// `PyASCIIObject.length`, and its size (where an ASCII string's characters start).
    pub str_length: u16,
    pub str_data: u16,
}

/// The identity of the code object at `code` (offsets `o`), 0 when it cannot be read: 24 bits
/// of a hash of the pointers to its qualified name, file name and line table, its first line,
/// and the length and last eight bytes of characters of both names (a name's characters read
/// as an ASCII string's: another kind of string gives other bytes, the same each time while it
/// lives). Never 0 for a code object read.
#[inline(always)]
pub fn code_ident(o: &IdentOffsets, code: u64, mut read: impl FnMut(u64) -> Option<u64>) -> u32 {
    let mut field = |offset: u16| read(code.wrapping_add(u64::from(offset)));
    let (Some(qualname), Some(filename), Some(linetable), Some(first)) = (
        field(o.qualname),
        field(o.filename),
        field(o.linetable),
        field(o.firstlineno & !7),
    ) else {
        return 0;
    };
    let first = (first >> (8 * u64::from(o.firstlineno & 7))) & 0xffff_ffff;
    let (Some(qualname_tail), Some(filename_tail)) = (tail(o, qualname, &mut read), tail(o, filename, &mut read))
    else {
        return 0;
    };
    let mut hash: u64 = 0x243f_6a88_85a3_08d3;
    for word in [qualname, filename, linetable, first, qualname_tail, filename_tail] {
        hash = (hash ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        hash ^= hash >> 29;
    }
    let ident = (hash >> 40) as u32;
    if ident == 0 { 1 } else { ident }
}

/// The length of the string at `s`, mixed with its last eight bytes of characters (fewer for a
/// shorter string, the bytes past its end left out).
#[inline(always)]
fn tail(o: &IdentOffsets, s: u64, read: &mut impl FnMut(u64) -> Option<u64>) -> Option<u64> {
    let len = read(s.wrapping_add(u64::from(o.str_length)))?;
    let data = s.wrapping_add(u64::from(o.str_data));
    if len >= 8 {
        let last = read(data.wrapping_add(len - 8))?;
        return Some(last ^ len.rotate_left(32));
    }
    let first = read(data)?;
    let kept = if len == 0 {
        0
    } else {
        first & (u64::MAX >> (64 - 8 * len))
    };
    Some(kept ^ len.rotate_left(32))
}

/// The two words of a Python frame in a sample record: its code object and instruction
/// pointer, each with [`PY_CODE_BIT`] and half of the identity `ident`.
#[inline(always)]
pub fn frame_words(code: u64, instr: u64, ident: u32) -> [u64; 2] {
    let half = |bits: u32| (u64::from(bits) & ((1 << PY_IDENT_HALF) - 1)) << PY_IDENT_SHIFT;
    [
        PY_CODE_BIT | (code & PY_ADDR_MASK) | half(ident >> PY_IDENT_HALF),
        PY_CODE_BIT | (instr & PY_ADDR_MASK) | half(ident),
    ]
}

/// What [`frame_words`] wrote: the code object, the instruction pointer and the identity.
pub fn of_frame_words([code, instr]: [u64; 2]) -> (u64, u64, u32) {
    let half = |word: u64| ((word >> PY_IDENT_SHIFT) & ((1 << PY_IDENT_HALF) - 1)) as u32;
    (
        code & PY_ADDR_MASK,
        instr & PY_ADDR_MASK,
        half(code) << PY_IDENT_HALF | half(instr),
    )
}

impl PyProcInfo {
    /// Whether `pc` is in the evaluation loop.
    #[inline(always)]
    pub fn in_eval(&self, pc: u64) -> bool {
        (pc >= self.eval_start && pc < self.eval_end) || (pc >= self.cold_start && pc < self.cold_end)
    }
}

/// Why a Python walk ended early (the evaluation-loop frame then stays a native frame, or
/// keeps the Python frames found before the stop). Counted by userspace, by name.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PyStop {
    /// No thread state of the interpreter belongs to the sampled thread (among the first
    /// [`MAX_PY_THREADS`]).
    NoThreadState = 0,
    /// A thread state or frame could not be read.
    ReadFailed = 1,
    /// The sample had more than [`MAX_PY_SAMPLE_FRAMES`] Python frames (a cycle in the chain
    /// ends here too), or the record was full.
    TooDeep = 2,
    /// The thread's frame chain ended inside a run (set by [`step`]; userspace also
    /// counts it when the native stack has more evaluation-loop frames than the chain runs).
    ChainEnded = 3,
    /// The innermost run was not the thread's: the sample came while an evaluation-loop call
    /// was being entered (3.11, 3.12: its `_PyCFrame` is the thread's, but its
    /// `current_frame` not yet set, a stale word of the C stack). The run was dropped (its
    /// evaluation-loop frame stays native) and the walk went on with the caller's frames.
    Unsettled = 4,
}

impl PyStop {
    pub const COUNT: u32 = 5;
    pub const ALL: [PyStop; Self::COUNT as usize] = [
        PyStop::NoThreadState,
        PyStop::ReadFailed,
        PyStop::TooDeep,
        PyStop::ChainEnded,
        PyStop::Unsettled,
    ];

    /// Stable name for summaries.
    pub const fn name(self) -> &'static str {
        match self {
            PyStop::NoThreadState => "no_thread_state",
            PyStop::ReadFailed => "read_failed",
            PyStop::TooDeep => "too_deep",
            PyStop::ChainEnded => "chain_ended",
            PyStop::Unsettled => "unsettled",
        }
    }
}

impl TryFrom<u32> for PyStop {
    type Error = u32;
    fn try_from(v: u32) -> Result<Self, u32> {
        PyStop::ALL.get(v as usize).copied().ok_or(v)
    }
}

/// Where the walk of a sample starts ([`current_frame`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Start {
    /// The thread's current frame (0: it runs no Python code).
    pub frame: u64,
    /// Where the innermost run must lead, if it is the thread's: the current frame of the
    /// `_PyCFrame` before the thread's (3.11, 3.12), or [`NO_OUTER`] (3.13, or unreadable).
    pub outer: u64,
}

/// [`Start::outer`] when the innermost run cannot be checked.
pub const NO_OUTER: u64 = u64::MAX;
/// `_PyCFrame.previous` follows `_PyCFrame.current_frame` (3.11 and 3.12).
const CFRAME_PREVIOUS_AFTER_CURRENT: u64 = 8;

/// Where the walk of the sampled thread in the interpreter of `info` starts, or why it cannot
/// be found. `thread` is what its thread state holds of it: its id, or its TLS base with
/// [`PY_THREAD_PTHREAD`]. `read(addr)` reads one word of the process (`None`: unreadable).
#[inline(always)]
pub fn current_frame(
    info: &PyProcInfo,
    thread: u64,
    mut read: impl FnMut(u64) -> Option<u64>,
) -> Result<Start, PyStop> {
    let o = &info.offsets;
    let interp = read(info.runtime.wrapping_add(u64::from(o.runtime_interpreters_head))).ok_or(PyStop::ReadFailed)?;
    let mut tstate = read(interp.wrapping_add(u64::from(o.interp_threads_head))).ok_or(PyStop::ReadFailed)?;
    for _ in 0..MAX_PY_THREADS {
        if tstate == 0 {
            return Err(PyStop::NoThreadState);
        }
        let id = read(tstate.wrapping_add(u64::from(o.tstate_native_thread_id))).ok_or(PyStop::ReadFailed)?;
        if id == thread {
            let frame = read(tstate.wrapping_add(u64::from(o.tstate_frame))).ok_or(PyStop::ReadFailed)?;
            if o.cframe_current_frame == NO_FIELD || frame == 0 {
                return Ok(Start { frame, outer: NO_OUTER });
            }
            let current = u64::from(o.cframe_current_frame);
            let cframe = frame;
            let frame = read(cframe.wrapping_add(current)).ok_or(PyStop::ReadFailed)?;
            // The caller's `_PyCFrame` (the thread's root one has none).
            let outer = match read(cframe.wrapping_add(current + CFRAME_PREVIOUS_AFTER_CURRENT)) {
                Some(previous) if previous != 0 => read(previous.wrapping_add(current)).unwrap_or(NO_OUTER),
                _ => NO_OUTER,
            };
            return Ok(Start { frame, outer });
        }
        tstate = read(tstate.wrapping_add(u64::from(o.tstate_next))).ok_or(PyStop::ReadFailed)?;
    }
    Err(PyStop::NoThreadState)
}

/// One step of a run: the frame at `frame` read, and where the walk goes next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PyFrame {
    /// The code object (0 for a frame that is not recorded: a C-stack frame).
    pub code: u64,
    /// The frame's instruction pointer.
    pub instr: u64,
    /// The code object's [`code_ident`] (0: it could not be read).
    pub ident: u32,
    /// The next (older) frame.
    pub previous: u64,
    /// This frame ends its evaluation-loop call's run.
    pub last: bool,
}

/// Read the frame at `frame` (not 0). A 3.12+ C-stack frame comes back with `code == 0` and
/// `last` set: it closes the run above it (and is not a Python frame itself); 3.15's base
/// frame and 3.14's frames owned by the C stack come back with `code == 0`, `last` unset.
#[inline(always)]
pub fn read_frame(info: &PyProcInfo, frame: u64, mut read: impl FnMut(u64) -> Option<u64>) -> Result<PyFrame, PyStop> {
    let o = &info.offsets;
    let previous = read(frame.wrapping_add(u64::from(o.frame_previous))).ok_or(PyStop::ReadFailed)?;
    if o.flags & PY_FRAME_OBJECT != 0 {
        let code = read(frame.wrapping_add(u64::from(o.frame_code))).ok_or(PyStop::ReadFailed)?;
        let lasti = read(frame.wrapping_add(u64::from(o.frame_instr))).ok_or(PyStop::ReadFailed)?;
        return Ok(PyFrame {
            code,
            instr: lasti & 0xffff_ffff,
            ident: code_ident(&info.ident, code, &mut read),
            previous,
            last: true,
        });
    }
    let byte = |word: u64, field: u16| (word >> (8 * u64::from(field & 7))) as u8;
    let owner_word = read(frame.wrapping_add(u64::from(o.frame_owner & !7))).ok_or(PyStop::ReadFailed)?;
    let owner = byte(owner_word, o.frame_owner);
    if o.frame_is_entry == NO_FIELD && owner >= OWNER_CSTACK {
        // The thread's base frame (3.15+) and the owners above `OWNER_CSTACK` end no run.
        let base = o.flags & PY_BASE_FRAME != 0 && previous == 0;
        return Ok(PyFrame {
            code: 0,
            instr: 0,
            ident: 0,
            previous,
            last: owner == OWNER_CSTACK && !base,
        });
    }
    let mut code = read(frame.wrapping_add(u64::from(o.frame_code))).ok_or(PyStop::ReadFailed)?;
    if o.flags & PY_TAGGED_CODE != 0 {
        code &= !PY_TAG_MASK;
    }
    let instr = read(frame.wrapping_add(u64::from(o.frame_instr))).ok_or(PyStop::ReadFailed)?;
    let last = if o.frame_is_entry == NO_FIELD {
        false
    } else {
        let word = read(frame.wrapping_add(u64::from(o.frame_is_entry & !7))).ok_or(PyStop::ReadFailed)?;
        byte(word, o.frame_is_entry) != 0
    };
    Ok(PyFrame {
        code,
        instr,
        ident: code_ident(&info.ident, code, &mut read),
        previous,
        last,
    })
}

/// Where the Python words of a sample go: the kernel's record, or a test's vector.
pub trait PyRecord {
    /// Append `word`; false when there is no room.
    fn push(&mut self, word: u64) -> bool;
    /// The words appended so far (the native frames included).
    fn used(&self) -> u32;
    /// Drop every word after the first `len`.
    fn truncate(&mut self, len: u32);
}

/// One sample's walk of its thread's frame chain, between [`step`]s.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainWalk {
    /// The next frame to read (0: the chain is over).
    pub frame: u64,
    /// [`Start::outer`].
    pub outer: u64,
    /// Python frames recorded.
    pub frames: u32,
    /// Whether the last word written ended a run (or none was written).
    pub at_run_end: u32,
    /// The record's length where the innermost run starts, while that run is read and is to
    /// be checked against [`Self::outer`]; [`ChainWalk::CHECKED`] after.
    pub first_run_at: u32,
    /// Whether the innermost run was dropped ([`PyStop::Unsettled`]).
    pub unsettled: u32,
}

/// [`step`]: the walk goes on.
pub const CONTINUE: u64 = u64::MAX;
/// [`step`]: the chain is over, complete.
pub const COMPLETE: u64 = u64::MAX - 1;

impl ChainWalk {
    pub const CHECKED: u32 = u32::MAX;

    /// The walk from `start`, the record `record_len` words long.
    pub fn new(start: Start, record_len: u32) -> ChainWalk {
        ChainWalk {
            frame: start.frame,
            outer: start.outer,
            frames: 0,
            at_run_end: 1,
            first_run_at: if start.outer == NO_OUTER {
                ChainWalk::CHECKED
            } else {
                record_len
            },
            unsettled: 0,
        }
    }

    /// The innermost run is not the thread's: drop what it wrote, record it as an empty run
    /// (its evaluation-loop frame stays native), and go on with the caller's frames.
    #[inline(always)]
    fn settle(&mut self, record: &mut impl PyRecord) -> u64 {
        record.truncate(self.first_run_at);
        self.first_run_at = ChainWalk::CHECKED;
        self.unsettled = 1;
        self.frames = 0;
        self.frame = self.outer;
        if !record.push(PY_RUN_END) {
            return PyStop::TooDeep as u64;
        }
        self.at_run_end = 1;
        CONTINUE
    }
}

/// Read the next frame of `walk` and append it to `record` (per Python frame, its code object
/// and instruction pointer; [`PY_RUN_END`] after each run): [`CONTINUE`], [`COMPLETE`], or the
/// [`PyStop`] that ends the walk. The kernel makes one call per frame (a global function, so
/// that the verifier checks it once); tests loop over it.
///
/// The innermost run is checked: a thread's run ends where its `_PyCFrame`'s caller was
/// ([`Start::outer`]). One that ends elsewhere, or not at all, was read through a stale
/// `current_frame` and is dropped ([`ChainWalk::settle`]), never recorded as the thread's.
#[inline(always)]
pub fn step(
    info: &PyProcInfo,
    walk: &mut ChainWalk,
    read: impl FnMut(u64) -> Option<u64>,
    record: &mut impl PyRecord,
) -> u64 {
    let checking = walk.first_run_at != ChainWalk::CHECKED;
    if walk.frame == 0 {
        return if checking {
            walk.settle(record)
        } else if walk.at_run_end != 0 {
            COMPLETE
        } else {
            PyStop::ChainEnded as u64
        };
    }
    let frame = match read_frame(info, walk.frame, read) {
        Ok(frame) => frame,
        Err(_) if checking => return walk.settle(record),
        Err(stop) => return stop as u64,
    };
    walk.frame = frame.previous;
    if frame.code != 0 {
        let [code, instr] = frame_words(frame.code, frame.instr, frame.ident);
        if walk.frames >= MAX_PY_SAMPLE_FRAMES || !record.push(code) {
            return PyStop::TooDeep as u64;
        }
        if !record.push(instr) {
            return PyStop::TooDeep as u64;
        }
        walk.frames += 1;
        walk.at_run_end = 0;
    }
    if frame.last {
        if checking {
            if frame.previous != walk.outer {
                return walk.settle(record);
            }
            walk.first_run_at = ChainWalk::CHECKED;
        }
        if !record.push(PY_RUN_END) {
            return PyStop::TooDeep as u64;
        }
        walk.at_run_end = 1;
    }
    CONTINUE
}

const _: () = assert!(core::mem::size_of::<PyOffsets>() == 24);
const _: () = assert!(core::mem::size_of::<PyProcInfo>() == 80);
const _: () = assert!(core::mem::size_of::<ChainWalk>() == 32);
const _: () = assert!(core::mem::size_of::<IdentOffsets>() == 12);

#[cfg(feature = "user")]
mod pod {
    // SAFETY: `#[repr(C)]` records of integers, explicit padding, sizes pinned above: every
    // bit pattern is valid and there are no implicit padding bytes.
    unsafe impl aya::Pod for super::PyProcInfo {}
}

#[cfg(test)]
mod tests;
