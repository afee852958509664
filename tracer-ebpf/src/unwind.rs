//! The user stack walk: up to `FRAMES_PER_PROG` frames per program invocation over the per-CPU
//! walk state, with the step semantics of `tracer_common::walk`. It owns the table lookups
//! (mapping, page, row, rule) and the recording of frames; it does not ship samples, bump
//! counters or tail-call (the programs in `main.rs` do).
//!
//! Each frame is one call of [`walk_frame`], a *global* BPF function: the verifier checks it
//! once, on its own, instead of once per frame inside the caller's loop (where the loop
//! counter keeps the frames' states apart). That takes `walk_user` from ~84k verified
//! instructions (97k on 6.1) to ~5k. Global functions (5.6+) take only scalars here and find
//! their state in per-CPU maps.
//!
//! Per frame (frame `n - 1` is the last recorded one, its registers in `state.regs`):
//! 1. (the depth limit is checked after step 3, so that a last frame whose rule marks it the
//!    outermost ends a complete stack, not a `MaxDepth` one);
//! 2. find the mapping of `lookup_pc` in the process's sorted mappings: binary search for the
//!    last mapping starting at or below it, at most `MAPPING_SEARCH_STEPS` steps, then check
//!    its end (`NoMapping` if none, or if the process is not in `PROCS`: the walk then ends
//!    and the sample becomes a stack copy, `snapshot.rs`; the cpu-clock walker
//!    `walk_user_vma` first asks the kernel for the VMA holding it, `vma.rs`, and a sampled
//!    PC that no VMA holds at all ends the walk as `ExecOrExit`: the registers are of no code
//!    of the process, taken in an exec or an exit, and a copy would be walked by nothing);
//! 3. with a table (`object != NO_OBJECT`), take the rule of `lookup_pc - bias` from this CPU's
//!    [`RuleCache`], or else look up the page `(lookup_pc - bias) >> 16`, search its rows with
//!    `walk::search_page` (rows read from `ROWS` chunks), read the rule from `RULES` (and
//!    remember it in the cache); apply it with `walk::table_step`; where there is no table, no
//!    page, or a `NO_INFO` rule (not a signal trampoline), use `walk::frame_pointer_step`
//!    instead, which refuses frame pointers that do not look valid (and, on aarch64, a frame
//!    record in frame 0 that is not provably the function's own) rather than inventing a frame;
//! 4. stop with `MaxDepth` when `n` frames are recorded already; the caller's PC must be in a
//!    mapping of the process (step 2 for it), else stop with `NoMapping` without recording it;
//!    then record it after the kernel frames of the record, with `FP_FRAME_BIT` set when
//!    the frame-pointer fallback found it, and continue from its registers.
//!
//! What each frame costs (the walk runs in every sample, and its time is taken from the
//! sampled program):
//! - the mapping found last and the page entry looked up last are kept in the walk state
//!   (forgotten when a walk starts), so a frame in the same mapping as the one below it costs
//!   one range check instead of two binary searches, and one in the same 64 KiB page no hash
//!   lookup;
//! - a return address walked before, on this CPU, costs one compare instead of the page
//!   lookup, row search and rule read ([`RuleCache`]: hot code is sampled over and over);
//! - user stack words are read through a window of up to 512 bytes copied with one
//!   `bpf_probe_read_user` ([`Window`]): a read is mostly fixed cost, and a few frames of
//!   ordinary size fit in one window.

use aya_ebpf::helpers::{bpf_probe_read_user, generated};
use tracer_common::{
    trace::{
        ExecMapping, FP_FRAME_BIT, FRAMES_PER_PROG, MAPPING_SEARCH_STEPS, MAX_KERNEL_FRAMES, MAX_MAPPINGS,
        MAX_USER_FRAMES, NO_OBJECT, ProcInfo, ROW_CHUNK, SOURCE_FP, SOURCE_TABLE, WalkState,
    },
    unwind::{FLAG_SIGNAL, KIND_NO_INFO, PAGE_SHIFT, PageKey, UnwindRow, UnwindRule},
    walk::{self, Arch, Regs, Step, StopReason},
};

use crate::{OPAQUE, PAGES, PROCS, ROWS, RULE_CACHE, RULES, SCRATCH, STACK, regs::ARCH};

/// Two per-CPU words that binary-search bounds pass through, so the verifier forgets them.
///
/// Why: the verifier never prunes states that differ in a "precise" value, and a value becomes
/// precise (with everything it was computed from, by backtracking) when it is used as a
/// map-value offset or decides a branch the verifier can predict, e.g. `lo >= hi` while both
/// are known constants. Then each search step doubles the paths (2^9 * 2^17 per frame: "BPF
/// program is too large"). A value loaded from map memory is an unknown scalar that starts a
/// new chain, so after a volatile round trip through these words the bounds are neither
/// constant nor precise and the two branches of every step merge again at the next one.
struct Opaque(*mut [u64; 2]);

/// Word of [`Opaque`] used by [`Opaque::launder`] and for a search's lower bound.
const LO: usize = 0;
/// Word of [`Opaque`] holding a search's upper bound.
const HI: usize = 1;

impl Opaque {
    fn get() -> Option<Opaque> {
        OPAQUE.get_ptr_mut(0).map(Opaque)
    }

    #[inline(always)]
    fn store(&self, word: usize, value: u32) {
        // SAFETY: this CPU's slot of a per-CPU map, valid while the program runs and used by
        // nothing else meanwhile (programs do not nest on a CPU); `word` is LO or HI.
        unsafe { core::ptr::write_volatile(core::ptr::addr_of_mut!((*self.0)[word]), u64::from(value)) }
    }

    #[inline(always)]
    fn load(&self, word: usize) -> u32 {
        // SAFETY: as in `store`.
        unsafe { core::ptr::read_volatile(core::ptr::addr_of!((*self.0)[word])) as u32 }
    }

    #[inline(always)]
    fn launder(&self, value: u32) -> u32 {
        self.store(LO, value);
        self.load(LO)
    }
}

/// No mapping (`end == 0`): what the searches return when none holds the PC.
const NO_TABLE: ExecMapping = ExecMapping {
    start: 0,
    end: 0,
    bias: 0,
    object: NO_OBJECT,
    frame_word: 0,
};

/// [`walk_frame`]'s result: the walk goes on.
const CONTINUE: u64 = 0;
/// [`walk_frame`]'s result: the walk is over, its reason in `header.stop`.
const DONE: u64 = 1;

/// Walk up to `FRAMES_PER_PROG` frames of the walk in `SCRATCH`; true when the walk is over
/// (the reason is then in `header.stop`), false when it should continue in another invocation.
/// With `VMA`, a PC in none of the process's known mappings is looked up in its VMAs
/// (`vma.rs`) before the walk gives up on it.
#[inline(always)]
pub fn walk_frames<const VMA: bool>(max_depth: u32) -> bool {
    for _ in 0..FRAMES_PER_PROG {
        let step = if VMA {
            walk_frame_vma(u64::from(max_depth))
        } else {
            walk_frame(u64::from(max_depth))
        };
        if step != CONTINUE {
            return true;
        }
    }
    false
}

/// Unwind one frame of the walk in `SCRATCH` (module docs): [`DONE`] with the reason stored in
/// `header.stop`, or [`CONTINUE`] with the caller recorded.
///
/// A global function (exported, not inlined): see the module docs. Inside it, every stop path
/// stores its reason to memory and meets the others at one exit, and the frame count is read
/// from memory, so no constant (reason, topmost) or range (frame count) tells the paths apart
/// and the verifier merges them instead of exploring the rest once per path.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn walk_frame(max_depth: u64) -> u64 {
    walk_frame_in::<false>(max_depth)
}

/// [`walk_frame`] that looks a PC up in the process's VMAs when no known mapping holds it.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn walk_frame_vma(max_depth: u64) -> u64 {
    walk_frame_in::<true>(max_depth)
}

/// The body of [`walk_frame`] and [`walk_frame_vma`].
#[inline(always)]
fn walk_frame_in<const VMA: bool>(max_depth: u64) -> u64 {
    let (Some(state), Some(opaque)) = (SCRATCH.get_ptr_mut(0), Opaque::get()) else {
        // Cannot happen (one-slot per-CPU arrays); nothing to record the reason in.
        return DONE;
    };
    // SAFETY: this CPU's walk state, valid while the program runs and used by nothing else
    // meanwhile (perf_event programs do not nest on a CPU).
    let state = unsafe { &mut *state };
    match frame::<VMA>(&opaque, state, max_depth as u32) {
        Some(reason) => {
            // SAFETY: a plain store into the walk state; volatile so the reason goes through
            // memory (see above) and `finish` reads it back.
            unsafe { core::ptr::write_volatile(&mut state.record.header.stop, reason as u32) };
            DONE
        }
        None => CONTINUE,
    }
}

/// One frame (module docs, steps 1-4); `Some(reason)` when the walk stops here.
#[inline(always)]
fn frame<const VMA: bool>(opaque: &Opaque, state: &mut WalkState, max_depth: u32) -> Option<StopReason> {
    let max_depth = max_depth.clamp(1, MAX_USER_FRAMES as u32);
    // SAFETY: a plain load from the walk state; volatile, see `walk_frame`.
    let n = unsafe { core::ptr::read_volatile(&state.record.header.num_user) };
    let regs = Regs::from(state.regs);
    let pc = walk::lookup_pc(&regs, n <= 1);
    let mapping = match mapping_of::<VMA>(opaque, state, pc) {
        Ok(mapping) => mapping,
        // The sampled PC in no VMA at all: not code of this address space (module docs).
        Err(NoVma) if n <= 1 && pc >> 56 == 0 => return Some(StopReason::ExecOrExit),
        Err(_) => return Some(StopReason::NoMapping),
    };
    let (next, source) = match unwind_one(opaque, state, &mapping, &regs, pc) {
        (Step::Next(next), source) => (next, source),
        (Step::Stop(reason), _) => return Some(reason),
    };
    // Only now: a last frame whose rule says it is the outermost (`_start`) ends a complete
    // stack even at the depth limit.
    if n >= max_depth {
        return Some(StopReason::MaxDepth);
    }
    // The caller's PC must be in a mapping (and the next frame finds it remembered).
    if mapping_of::<VMA>(opaque, state, walk::lookup_pc(&next, false)).is_err() {
        return Some(StopReason::NoMapping);
    }
    // A runtime's frame found by its frame pointer (a V8 JavaScript frame, a HotSpot
    // interpreted one): what names it goes after it (`tracer_common::frame_word`), where the
    // room for it and its caller is left.
    if source == SOURCE_FP && mapping.frame_word != 0 && n + 1 < max_depth {
        frame_word(state, mapping.frame_word, regs.fp);
    }
    // SAFETY: as above (the frame's word may have been appended).
    let n = unsafe { core::ptr::read_volatile(&state.record.header.num_user) };
    // Laundered: as an offset `n` would become precise, and then so would every range the
    // verifier derived for it, splitting the states of the whole frame.
    let n = opaque.launder(n);
    let word = if source == SOURCE_FP {
        next.pc | FP_FRAME_BIT
    } else {
        next.pc
    };
    // SAFETY: a plain load from the walk state, volatile as above.
    let kernel = unsafe { core::ptr::read_volatile(&state.record.header.num_kernel) };
    // In 64 bits: a 32-bit sum is zero-extended once for the bounds check and once more for
    // the store, and the verifier bounds only the first copy.
    let at = u64::from(kernel.min(MAX_KERNEL_FRAMES as u32)) + u64::from(n);
    let record = &mut state.record;
    let Some(slot) = record.frames.get_mut(at as usize) else {
        return Some(StopReason::MaxDepth);
    };
    *slot = word;
    record.header.num_user = n + 1;
    state.regs = next.into();
    None
}

/// Append the word of the frame whose frame pointer is `fp` (in a mapping with frame-word
/// `config`), if the frame has one: its slots are read through the stack window, a V8
/// function's shared part on its own.
#[inline(always)]
fn frame_word(state: &mut WalkState, config: u32, fp: u64) {
    let Some(mut words) = Window::get() else { return };
    if let Some(word) = tracer_common::frame_word::word(config, fp, |a| words.read(a), read_user) {
        crate::python::push(state, word);
    }
}

/// Why [`mapping_of`] found no mapping: `NoVma` when, with `VMA`, no VMA of the process holds
/// the PC at all; `NoTable` otherwise.
enum Missing {
    NoTable,
    NoVma,
}
use Missing::NoVma;

/// Steps 2 and 4: the mapping holding `pc` for the walk in `state`, or why there is none: the
/// traced process has none there or is not in `PROCS` (and, with `VMA`, the VMA holding `pc`
/// maps no file with a loaded table either, or there is no such VMA: `vma.rs`).
/// The mapping found is remembered in the walk state and tried first the next time.
#[inline(always)]
fn mapping_of<const VMA: bool>(opaque: &Opaque, state: &mut WalkState, pc: u64) -> Result<ExecMapping, Missing> {
    let last = state.mapping;
    if pc >= last.start && pc < last.end {
        return Ok(last);
    }
    // Not (or no longer: an exec or unmap since the walk began) in `PROCS`: no mapping is
    // known, and the walk ends as `NoMapping` (a stack copy) rather than guess.
    if let Some(procs) = PROCS.get_ptr(state.record.header.tgid) {
        let found = find_mapping(opaque, procs, pc);
        if found.end != 0 {
            state.mapping = found;
            return Ok(found);
        }
    }
    if VMA {
        match crate::vma::vma_mapping(pc) {
            0 => {}
            crate::vma::NO_VMA_AT_PC => return Err(NoVma),
            _ => return Ok(state.mapping),
        }
    }
    Err(Missing::NoTable)
}

/// Step 2: the mapping holding `pc`, or [`NO_TABLE`] (`end == 0`, which no real mapping has)
/// when none does.
#[inline(always)]
fn find_mapping(opaque: &Opaque, procs: *const ProcInfo, pc: u64) -> ExecMapping {
    let found = last_mapping_from(opaque, procs, pc);
    if pc < found.end { found } else { NO_TABLE }
}

/// Whether `[start, end)` overlaps one of the mappings of `procs` (a PROCS value): the
/// mappings are sorted and disjoint, so it does exactly when the last one starting below
/// `end` ends above `start`.
#[inline(always)]
pub fn overlaps_mappings(procs: *const ProcInfo, start: u64, end: u64) -> bool {
    let Some(opaque) = Opaque::get() else {
        // Cannot happen (a one-slot per-CPU array); assume the worst.
        return true;
    };
    start < end && last_mapping_from(&opaque, procs, end - 1).end > start
}

/// The last mapping of `procs` starting at or below `pc`, or [`NO_TABLE`].
#[inline(always)]
fn last_mapping_from(opaque: &Opaque, procs: *const ProcInfo, pc: u64) -> ExecMapping {
    // SAFETY: a value pointer from a PROCS lookup in this program run (valid under RCU until it
    // returns); fields are read through it without references into the map.
    let (num, mappings) = unsafe { ((*procs).num_mappings, core::ptr::addr_of!((*procs).mappings)) };
    // The bounds live in memory and each step stores one of them: one branch per step, whose
    // two sides the verifier merges at the next step (registers would become selects, i.e.
    // two branches on the same condition and four paths per step).
    opaque.store(LO, 0);
    opaque.store(HI, num.min(MAX_MAPPINGS as u32));
    for _ in 0..MAPPING_SEARCH_STEPS {
        let (lo, hi) = (opaque.load(LO), opaque.load(HI));
        if lo >= hi {
            break;
        }
        let mid = lo + (hi - lo) / 2;
        let at = mid as usize & (MAX_MAPPINGS - 1);
        // SAFETY: `at < MAX_MAPPINGS` (masked), inside the value's array.
        let start = unsafe { (*mappings)[at].start };
        if start <= pc {
            opaque.store(LO, mid + 1);
        } else {
            opaque.store(HI, mid);
        }
    }
    let (lo, hi) = (opaque.load(LO), opaque.load(HI));
    if lo == 0 || lo < hi {
        return NO_TABLE;
    }
    let at = (lo.wrapping_sub(1)) as usize & (MAX_MAPPINGS - 1);
    // SAFETY: as above.
    unsafe { (*mappings)[at] }
}

/// Step 3: the caller of the frame `regs` (PC in mapping `m`), and how it was found.
// Inlined so `Step` never goes through memory: storing its undefined `Next` payload for a
// `Stop` is a read of an uninitialized register to the verifier ("!read_ok").
#[inline(always)]
fn unwind_one(opaque: &Opaque, state: &mut WalkState, m: &ExecMapping, regs: &Regs, pc: u64) -> (Step, u8) {
    let Some(mut words) = Window::get() else {
        // Cannot happen (a one-slot per-CPU array).
        return (Step::Stop(StopReason::TableLookupFailed), SOURCE_TABLE);
    };
    if m.object != NO_OBJECT {
        let addr = pc.wrapping_sub(m.bias);
        let slot = cache_slot(addr, m.object);
        // Always initialized (no `Option` payload): the verifier refuses a register that one
        // path leaves undefined when the paths merge ("!read_ok").
        let mut rule = UnwindRule::NO_INFO;
        if !slot.as_deref().is_some_and(|slot| slot.get(addr, m.object, &mut rule)) {
            rule = table_rule(opaque, state, addr, m.object);
            if rule.kind == LOOKUP_FAILED {
                return (Step::Stop(StopReason::TableLookupFailed), SOURCE_TABLE);
            }
            if let Some(slot) = slot {
                slot.set(addr, m.object, rule);
            }
        }
        if rule.kind != KIND_NO_INFO || rule.flags & FLAG_SIGNAL != 0 {
            // Re-read here rather than passed in, so "topmost" is not a constant the
            // verifier carries (and explores twice) through the searches above.
            // SAFETY: a plain load from the walk state.
            let topmost = unsafe { core::ptr::read_volatile(&state.record.header.num_user) } <= 1;
            // On x86-64 a constant false: no code, no paths.
            let chained = ARCH == Arch::Aarch64 && chained(opaque, state);
            return (
                walk::table_step(ARCH, chained, &rule, regs, topmost, |a| words.read(a)),
                SOURCE_TABLE,
            );
        }
    }
    let chained = chained(opaque, state);
    // SAFETY: a plain load from the walk state.
    let topmost = unsafe { core::ptr::read_volatile(&state.record.header.num_user) } <= 1;
    (
        walk::frame_pointer_step(regs, ARCH, chained, topmost, |a| words.read(a)),
        SOURCE_FP,
    )
}

/// Whether the frame being unwound was found by the frame-pointer fallback (its FP came from
/// a frame record): the last recorded frame carries `FP_FRAME_BIT`.
#[inline(always)]
fn chained(opaque: &Opaque, state: &WalkState) -> bool {
    // SAFETY: plain loads from the walk state.
    let n = unsafe { core::ptr::read_volatile(&state.record.header.num_user) };
    n >= 2 && {
        let below = opaque.launder(n - 1);
        // SAFETY: as above.
        let kernel = unsafe { core::ptr::read_volatile(&state.record.header.num_kernel) };
        let at = (kernel.min(MAX_KERNEL_FRAMES as u32) + below) as usize;
        state.record.frames.get(at).is_some_and(|word| word & FP_FRAME_BIT != 0)
    }
}

/// [`table_rule`]'s kind for a row or rule the page promises that cannot be read (an
/// inconsistent table); no rule has it.
const LOOKUP_FAILED: u8 = u8::MAX;

/// The rule of object-relative `addr` in the table of `object`: `NO_INFO` where the table has
/// no page, kind [`LOOKUP_FAILED`] when the page's rows or rule cannot be read. The page entry
/// looked up is remembered in the walk state.
#[inline(always)]
fn table_rule(opaque: &Opaque, state: &mut WalkState, addr: u64, object: u32) -> UnwindRule {
    // An address whose page does not fit u32 cannot have a page; the truncated key must not
    // find another's.
    if addr >> PAGE_SHIFT > u64::from(u32::MAX) {
        return UnwindRule::NO_INFO;
    }
    let key = PageKey {
        object,
        page: (addr >> PAGE_SHIFT) as u32,
    };
    let entry = if state.page_key == key {
        state.page
    } else {
        // SAFETY: a copy out of the map value, valid during this run.
        let Some(&entry) = (unsafe { PAGES.get(key) }) else {
            return UnwindRule::NO_INFO;
        };
        state.page_key = key;
        state.page = entry;
        entry
    };
    let rule = walk::search_page(entry.num_rows, addr as u16, |i| {
        row_at(opaque.launder(entry.first_row.wrapping_add(i)))
    })
    .and_then(|rule| RULES.get(u32::from(rule)));
    match rule {
        Some(rule) => *rule,
        None => UnwindRule {
            kind: LOOKUP_FAILED,
            ..UnwindRule::NO_INFO
        },
    }
}

/// Entries of a [`RuleCache`] (a power of two: `1 << CACHE_BITS`).
const CACHE_BITS: u32 = 10;

/// One CPU's memory of the rules its walks looked up (`RULE_CACHE`): direct-mapped by object
/// and address, so a frame whose return address was walked before (on a hot path, most
/// frames) costs one compare instead of a page lookup, a row search and a rule read. Exact:
/// object ids are never reused and a loaded object's rows and the rules never change, so
/// what `(object, addr)` found once it finds again.
#[repr(C)]
pub struct RuleCache {
    entries: [CachedRule; 1 << CACHE_BITS],
}

/// A [`RuleCache`] entry.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CachedRule {
    addr: u64,
    /// The object plus one; 0: empty (the map starts zeroed).
    tag: u32,
    rule: UnwindRule,
}

impl CachedRule {
    /// Whether this is the entry of `(object, addr)`; if so, its rule goes into `rule`.
    #[inline(always)]
    fn get(&self, addr: u64, object: u32, rule: &mut UnwindRule) -> bool {
        let hit = self.tag == object.wrapping_add(1) && self.addr == addr;
        if hit {
            *rule = self.rule;
        }
        hit
    }

    #[inline(always)]
    fn set(&mut self, addr: u64, object: u32, rule: UnwindRule) {
        self.addr = addr;
        self.tag = object.wrapping_add(1);
        self.rule = rule;
    }
}

/// The entry of this CPU's rule cache for `(object, addr)`.
#[inline(always)]
fn cache_slot(addr: u64, object: u32) -> Option<&'static mut CachedRule> {
    let cache = RULE_CACHE.get_ptr_mut(0)?;
    let hash = (addr ^ u64::from(object) << 40).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - CACHE_BITS);
    // SAFETY: this CPU's slot of a per-CPU map, valid while the program runs and used by
    // nothing else meanwhile (programs do not nest on a CPU).
    unsafe { (*cache).entries.get_mut(hash as usize) }
}

/// Bytes of user stack a [`StackWindow`] holds.
const WINDOW_BYTES: u64 = 512;
/// Words of a [`StackWindow`].
const WINDOW_WORDS: usize = WINDOW_BYTES as usize / 8;
/// The page size a window never crosses (the smallest: a page past the one read may be
/// unmapped, and a failed read costs a fault).
const PAGE_BYTES: u64 = 4096;

/// A copy of user stack memory made during this walk (`STACK`, one per CPU): `len` bytes from
/// `base` (a whole window or nothing), 8-byte aligned, inside one page. A walk reads the saved
/// return address and frame pointer of each frame, one just above the other, and frames of
/// ordinary size lie next to each other, so a window read once serves the words of several
/// frames.
#[repr(C)]
pub struct StackWindow {
    base: u64,
    /// 0: nothing copied (a new walk: the window may hold another task's stack).
    len: u64,
    words: [u64; WINDOW_WORDS],
}

impl StackWindow {
    /// The word `offset` bytes into the window, if that is inside it (`offset` 8-aligned).
    #[inline(always)]
    fn word(&self, offset: u64) -> Option<u64> {
        if offset >= WINDOW_BYTES {
            return None;
        }
        // The index is masked, not only compared: older verifiers (5.10) bound a map-value
        // offset by its known bits, not by the comparison; `black_box` keeps the compiler from
        // dropping the mask as redundant after the comparison.
        let index = core::hint::black_box(offset / 8) as usize & (WINDOW_WORDS - 1);
        self.words.get(index).copied()
    }
}

/// Forget the window of the last walk (at the start of each walk).
pub fn forget_stack() {
    if let Some(window) = STACK.get_ptr_mut(0) {
        // SAFETY: this CPU's slot of a per-CPU map, valid while the program runs and used by
        // nothing else meanwhile (programs do not nest on a CPU).
        unsafe { (*window).len = 0 }
    }
}

/// The reader of user stack words for one step, through this CPU's [`StackWindow`].
struct Window(*mut StackWindow);

impl Window {
    fn get() -> Option<Window> {
        STACK.get_ptr_mut(0).map(Window)
    }

    /// The user word at `addr`: from the window, else from a new window holding it and the
    /// word below it (a saved frame pointer sits below the return address on x86-64), else
    /// (an unaligned address, or no window could be read) on its own.
    #[inline(always)]
    fn read(&mut self, addr: u64) -> Option<u64> {
        // SAFETY: this CPU's slot of a per-CPU map (see `forget_stack`); fields are read and
        // written through the pointer, without references into the map.
        let window = unsafe { &mut *self.0 };
        if addr & 7 == 0 {
            let offset = addr.wrapping_sub(window.base);
            if offset < window.len {
                return window.word(offset);
            }
            if let Some(base) = window_base(addr)
                && Window::fill(window, base)
                && let Some(word) = window.word(addr.wrapping_sub(base))
            {
                return Some(word);
            }
        }
        read_user(addr)
    }

    /// Copy the window at `base` (always a whole window: a read of constant size, which every
    /// kernel's verifier bounds); false, with the window emptied, when it cannot be read.
    #[inline(always)]
    fn fill(window: &mut StackWindow, base: u64) -> bool {
        // SAFETY: a probe read of exactly `size_of_val(words)` bytes into the window's words:
        // an unmapped or kernel address fails instead of faulting.
        let read = unsafe {
            generated::bpf_probe_read_user(
                window.words.as_mut_ptr().cast(),
                WINDOW_BYTES as u32,
                base as *const core::ffi::c_void,
            )
        };
        window.len = if read == 0 { WINDOW_BYTES } else { 0 };
        window.base = base;
        read == 0
    }
}

/// Where the window for the word at `addr` (8-aligned) starts: at the word below it, or lower
/// where the window would otherwise cross the end of that word's page (the next page may be
/// unmapped: the top of the stack), so that it ends at the page's end. Every byte of it is in
/// that one page. `None` at the bottom of the address space.
#[inline(always)]
fn window_base(addr: u64) -> Option<u64> {
    let start = addr.checked_sub(8).filter(|&s| s != 0)?;
    let page_end = (start | (PAGE_BYTES - 1)).checked_add(1)?;
    Some(if page_end - start < WINDOW_BYTES {
        page_end - WINDOW_BYTES
    } else {
        start
    })
}

/// Global row `index`: `ROWS[index / ROW_CHUNK].rows[index % ROW_CHUNK]`.
fn row_at(index: u32) -> Option<UnwindRow> {
    let chunk = ROWS.get(index / ROW_CHUNK as u32)?;
    chunk.rows.get(index as usize % ROW_CHUNK).copied()
}

/// One user word.
fn read_user(addr: u64) -> Option<u64> {
    // SAFETY: a probe read: an unmapped or kernel address fails instead of faulting.
    unsafe { bpf_probe_read_user(addr as *const u64) }.ok()
}
