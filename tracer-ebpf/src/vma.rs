//! A PC's object found in the kernel (Linux 5.17+, `bpf_find_vma`; layout and rules in
//! `tracer_common::vma`): for a PC that no mapping of `PROCS` holds, the VMA holding it is
//! looked up, and when it maps a file whose table is loaded (`FILES`, by device and inode, and
//! only if the file's size and times are still those the table was built from), the walk goes
//! on with that table, its bias computed from the VMA's start and file offset. The mappings
//! found so are kept in the walk state and shipped after the user frames ([`attach`]), so that
//! userspace resolves the frames without having read the process.
//!
//! Only the walkers `walk_user_vma` (cpu-clock) and `walk_user_tracepoint_vma` (the stacks at
//! exit and exec, tracepoint events) call this; userspace loads them where the kernel has the
//! helper, else `walk_user` and `walk_user_tracepoint`: their callback is referenced from the
//! program, which kernels before 5.13 refuse to load even where it is never called.

use core::ffi::c_void;

use aya_ebpf::helpers::generated::{self, bpf_find_vma, bpf_get_current_task_btf};
use tracer_common::{
    trace::{ExecMapping, MAX_KERNEL_FRAMES, MAX_USER_FRAMES, NO_VMA, VMA_WORDS, WalkState},
    vma::{FileKey, MAX_FILE_SEGMENTS, MAX_VMAS, NSEC_MASK, ProcVmas, VM_EXEC},
};

use crate::{FILES, NEXT_VMAS, PROC_VMAS, SCRATCH, VMA_OFFSETS, VMA_READ};

/// What the callback reads out of a VMA and its file (zero when there is no file): a slot of
/// this CPU's `VMA_READ`, [`SLOT_SAMPLE`] or [`SLOT_TASK`].
#[repr(C)]
pub struct Vma {
    start: u64,
    end: u64,
    pgoff: u64,
    flags: u64,
    file: u64,
    inode_ptr: u64,
    sb: u64,
    inode: u64,
    size: u64,
    mtime_sec: i64,
    ctime_sec: i64,
    dev: u32,
    mtime_nsec: u32,
    ctime_nsec: u32,
    _pad: u32,
}

/// Copy the kernel value of `size_of::<T>()` bytes at `addr` into `dst`; where it cannot be
/// read (an address that is not mapped kernel memory, such as a null pointer plus a member's
/// offset) the helper zeroes `dst`. No branch on the outcome: see [`read_vma`].
#[inline(always)]
fn copy<T>(dst: &mut T, addr: u64) {
    // SAFETY: a probe read of exactly `size_of::<T>()` bytes into `dst` (plain data): an
    // address that is not mapped kernel memory fails, and then the helper zeroes `dst`.
    unsafe {
        generated::bpf_probe_read_kernel(
            core::ptr::from_mut(dst).cast(),
            size_of::<T>() as u32,
            addr as *const c_void,
        );
    }
}

/// `VMA_READ`'s slot of the cpu-clock walker (a perf_event program: it may interrupt a program
/// running in the task, so it has a slot of its own) and of the tracepoint walker (which holds
/// the CPU's BPF activity count while it runs, so that no perf_event program runs beside it).
pub const SLOT_SAMPLE: u32 = 0;
/// `VMA_READ`'s slot of the programs that run in the task (exec, mmap).
pub const SLOT_TASK: u32 = 1;
/// Slots of `VMA_READ`.
pub const VMA_SLOTS: u32 = 2;

/// The `bpf_find_vma` callback: copy what [`Vma`] holds out of `vma` into the slot of this
/// CPU's `VMA_READ` that `slot` (a `u32` on the caller's stack, only read) names. A static
/// function (the verifier takes no global one as a callback).
///
/// Straight-line on purpose (regression: on Linux 6.7+, whose verifier explores a callback as
/// a loop until the caller's state stops changing, the version that branched on each read's
/// outcome and stored into the caller's stack made `walk_user_vma` exceed the 1M-instruction
/// limit on 7.2, after 53 s): no branch on what is read (a failed read yields zero, as a null
/// file, inode or superblock does, since each read through a null pointer fails), and no write
/// to the caller's stack, so every path through it leaves the caller in one state.
#[inline(never)]
extern "C" fn read_vma(_task: *mut c_void, vma: *mut c_void, slot: *mut c_void) -> i64 {
    // SAFETY: `slot` is the `u32` on the stack of `find`, valid for the whole helper call.
    let slot = unsafe { *slot.cast::<u32>() };
    let Some(out) = VMA_READ.get_ptr_mut(slot) else {
        return 0;
    };
    // SAFETY: this CPU's slot of a per-CPU map, valid while the program runs and used by
    // nothing else meanwhile (programs do not nest on a CPU).
    let out = unsafe { &mut *out };
    let o = VMA_OFFSETS.load();
    let vma = vma as u64;
    copy(&mut out.start, vma + u64::from(o.vm_start));
    copy(&mut out.end, vma + u64::from(o.vm_end));
    copy(&mut out.pgoff, vma + u64::from(o.vm_pgoff));
    copy(&mut out.flags, vma + u64::from(o.vm_flags));
    copy(&mut out.file, vma + u64::from(o.vm_file));
    copy(&mut out.inode_ptr, out.file.wrapping_add(u64::from(o.f_inode)));
    let inode = out.inode_ptr;
    copy(&mut out.sb, inode.wrapping_add(u64::from(o.i_sb)));
    copy(&mut out.dev, out.sb.wrapping_add(u64::from(o.s_dev)));
    copy(&mut out.inode, inode.wrapping_add(u64::from(o.i_ino)));
    copy(&mut out.size, inode.wrapping_add(u64::from(o.i_size)));
    copy(&mut out.mtime_sec, inode.wrapping_add(u64::from(o.i_mtime_sec)));
    copy(&mut out.ctime_sec, inode.wrapping_add(u64::from(o.i_ctime_sec)));
    copy(&mut out.mtime_nsec, inode.wrapping_add(u64::from(o.i_mtime_nsec)));
    copy(&mut out.ctime_nsec, inode.wrapping_add(u64::from(o.i_ctime_nsec)));
    0
}

/// The mapping holding `pc` in the current process, from its VMA and the table loaded for the
/// VMA's file: 1 when found (then it is `state.mapping` and the walk state's next VMA mapping),
/// [`NO_VMA_AT_PC`] when no VMA holds it at all, 0 when there is none otherwise (see
/// [`Found::Unusable`], or `MAX_VMAS` found already in this walk).
///
/// A global function (exported, not inlined), like `unwind::walk_frame`: the verifier checks
/// it once on its own.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn vma_mapping(pc: u64) -> u64 {
    let Some(state) = SCRATCH.get_ptr_mut(0) else {
        return 0;
    };
    // SAFETY: this CPU's walk state, valid while the program runs and used by nothing else
    // meanwhile (see `crate::scratch`).
    let state = unsafe { &mut *state };
    // SAFETY: a plain load from the walk state; volatile, so the verifier sees an unknown
    // value, which the mask below bounds.
    let n = unsafe { core::ptr::read_volatile(&state.record.header.vmas) };
    // Found before in this walk (a walk goes back and forth between a program and libc). The
    // count is read again at each step (volatile), so that the loop counts up to `MAX_VMAS`
    // with the index it reads at (regression: compiled as a countdown from `min(n, 4)` beside
    // a moving pointer, Linux 6.1's verifier could not bound the pointer, and refused the
    // program).
    for i in 0..MAX_VMAS {
        // SAFETY: as above.
        if i >= unsafe { core::ptr::read_volatile(&state.record.header.vmas) } as usize {
            break;
        }
        let m = state.vmas[i];
        if m.start <= pc && pc < m.end {
            state.mapping = m;
            return 1;
        }
    }
    if n as usize >= MAX_VMAS {
        return 0;
    }
    let tgid = state.record.header.tgid;
    // Found by an earlier sample of the process (one lookup per sample: `MAP_PROC_VMAS`).
    if let Some(m) = known_overlapping(tgid, pc, pc.saturating_add(1)) {
        keep(state, n, m);
        return 1;
    }
    let mapping = match find(pc, SLOT_SAMPLE) {
        Found::Mapping(mapping) => mapping,
        Found::NoVma => return NO_VMA_AT_PC,
        Found::Unusable => return 0,
    };
    keep(state, n, mapping);
    let Some(next) = NEXT_VMAS.get_ptr_mut(0) else {
        return 1;
    };
    // SAFETY: this CPU's slot of a per-CPU map, used by nothing else while the program runs.
    remember(unsafe { &mut *next }, tgid, mapping);
    1
}

/// What [`find`] found.
pub enum Found {
    Mapping(ExecMapping),
    /// No VMA of the process holds the address (or it has no address space any more).
    NoVma,
    /// A VMA that maps no file with a loaded table (not executable, no file, no table for the
    /// file, the file changed since), or the VMA lock could not be had (`bpf_find_vma` tries
    /// it, and in an interrupt it is released by an irq_work that must run first).
    Unusable,
}

/// `vma_mapping`'s answer when no VMA holds the PC at all.
pub const NO_VMA_AT_PC: u64 = 2;

/// `bpf_find_vma`'s answer when the task has no address space or none of its VMAs holds the
/// address (`-ENOENT`).
const ENOENT: i64 = -2;

/// The mapping holding `pc` in the current process, from its VMA and the table loaded for the
/// VMA's file, read through `VMA_READ`'s `slot` ([`SLOT_SAMPLE`] or [`SLOT_TASK`]).
#[inline(always)]
pub fn find(pc: u64, slot: u32) -> Found {
    let Some(read) = VMA_READ.get_ptr_mut(slot) else {
        return Found::Unusable;
    };
    // SAFETY: a slot of this CPU's per-CPU map that no program that may interrupt this one
    // uses (see `SLOT_SAMPLE`); forgotten first, so that a lookup whose callback never ran
    // leaves nothing of an earlier one.
    unsafe { (*read).flags = 0 };
    let mut slot = slot;
    // SAFETY: the helper finds the VMA of `pc` in the current task's memory map and calls
    // `read_vma` with it and `&mut slot` (on this stack, valid for the call; it writes the
    // `VMA_READ` slot named there); flags must be 0.
    let found = unsafe {
        bpf_find_vma(
            bpf_get_current_task_btf(),
            pc,
            read_vma as *mut c_void,
            core::ptr::addr_of_mut!(slot).cast(),
            0,
        )
    };
    if found == ENOENT {
        return Found::NoVma;
    }
    // SAFETY: as above; read in place.
    let vma = unsafe { &*read };
    let (inode, dev) = (vma.inode, vma.dev);
    // No file or no inode: the inode number read through the null pointer is zero.
    if found != 0 || vma.flags & VM_EXEC == 0 || inode == 0 || !(vma.start <= pc && pc < vma.end) {
        return Found::Unusable;
    }
    let key = FileKey { dev, _pad: 0, inode };
    // Read in place (a copy would take 136 bytes of the 512 the calls share).
    let Some(table) = FILES.get_ptr(key) else {
        return Found::Unusable;
    };
    // SAFETY: a value pointer from the lookup above, valid under RCU until the program returns;
    // plain loads.
    let table = unsafe { &*table };
    let same = table.size == vma.size
        && table.mtime_sec == vma.mtime_sec
        && table.mtime_nsec == vma.mtime_nsec & NSEC_MASK
        && table.ctime_sec == vma.ctime_sec
        && table.ctime_nsec == vma.ctime_nsec & NSEC_MASK;
    if !same {
        return Found::Unusable;
    }
    let off = vma.pgoff << (VMA_OFFSETS.load().page_shift & 63);
    let mut delta = None;
    for (i, segment) in table.segments.iter().enumerate().take(MAX_FILE_SEGMENTS) {
        if (i as u32) < table.num_segments && segment.start <= off && off < segment.end {
            delta = Some(segment.delta);
            break;
        }
    }
    let Some(delta) = delta else {
        return Found::Unusable;
    };
    Found::Mapping(ExecMapping {
        start: vma.start,
        end: vma.end,
        bias: vma.start.wrapping_sub(off).wrapping_sub(delta),
        object: table.object,
        frame_word: 0,
    })
}

/// `mapping` becomes the walk's `n`th VMA mapping and its current one.
#[inline(always)]
fn keep(state: &mut WalkState, n: u32, mapping: ExecMapping) {
    if let Some(slot) = state.vmas.get_mut(n as usize & (MAX_VMAS - 1)) {
        *slot = mapping;
    }
    state.record.header.vmas = n + 1;
    state.mapping = mapping;
}

/// Keep `mapping` for the later samples of process `tgid` (while there is room), in place of
/// any it overlaps (code mapped over code). The entry is built in `next` (a per-CPU slot, or the
/// stack of a program that has room) and replaces the old one whole (a hash map update is seen
/// whole or not at all), so that two CPUs sampling two threads of the process at once lose at
/// most one mapping, never mix two into one.
#[inline(always)]
pub fn remember(next: &mut ProcVmas, tgid: u32, mapping: ExecMapping) {
    next.num = 0;
    if let Some(known) = PROC_VMAS.get_ptr(tgid) {
        // SAFETY: a value pointer from the lookup, valid under RCU until the program returns.
        let known = unsafe { &*known };
        for i in 0..MAX_VMAS {
            if i >= known.num as usize {
                break;
            }
            let m = known.mappings[i];
            if m.start < mapping.end && mapping.start < m.end {
                continue;
            }
            let n = next.num as usize;
            if let Some(slot) = next.mappings.get_mut(n & (MAX_VMAS - 1)) {
                *slot = m;
            }
            next.num += 1;
        }
    }
    let n = next.num;
    if n as usize >= MAX_VMAS {
        return;
    }
    if let Some(slot) = next.mappings.get_mut(n as usize & (MAX_VMAS - 1)) {
        *slot = mapping;
    }
    next.num = n + 1;
    let _ = PROC_VMAS.insert(tgid, next, 0);
}

/// Look up the code at `pc` of the current process, `tgid`, and keep its mapping for the
/// process's samples (outside the walk: exec and mmap, where no interrupt holds the VMA lock's
/// release back). 1 when kept.
///
/// A global function (exported, not inlined): the verifier checks it once on its own, not in
/// every caller's state.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn remember_code_at(tgid: u32, pc: u64) -> u64 {
    let Found::Mapping(mapping) = find(pc, SLOT_TASK) else {
        return 0;
    };
    let mut next = ProcVmas {
        num: 0,
        _pad: 0,
        mappings: [NO_VMA; MAX_VMAS],
    };
    remember(&mut next, tgid, mapping);
    1
}

/// Forget the mappings found for process `tgid` if one of them overlaps `start..end` (code
/// unmapped: a pid's later code there must not meet them).
#[inline(always)]
pub fn forget_overlapping(tgid: u32, start: u64, end: u64) {
    if known_overlapping(tgid, start, end).is_some() {
        let _ = PROC_VMAS.remove(tgid);
    }
}

/// The first mapping kept for process `tgid` (`MAP_PROC_VMAS`) that overlaps `start..end`.
#[inline(always)]
fn known_overlapping(tgid: u32, start: u64, end: u64) -> Option<ExecMapping> {
    // SAFETY: a value pointer from the lookup, valid under RCU until the program returns.
    let known = unsafe { &*PROC_VMAS.get_ptr(tgid)? };
    for i in 0..MAX_VMAS {
        if i >= known.num as usize {
            break;
        }
        let m = known.mappings[i];
        if m.start < end && start < m.end {
            return Some(m);
        }
    }
    None
}

/// Put the walk's VMA mappings after its user frames, where `SampleRecord::len_with` ships
/// them (a walk that ends as a stack copy has none: `snapshot::shorten` clears them).
#[inline(always)]
pub fn attach(state: &mut WalkState) {
    // SAFETY: plain loads from the walk state; volatile, so the verifier sees unknown values,
    // which the clamps bound.
    let (nk, nu, n) = unsafe {
        (
            core::ptr::read_volatile(&state.record.header.num_kernel),
            core::ptr::read_volatile(&state.record.header.num_user),
            core::ptr::read_volatile(&state.record.header.vmas),
        )
    };
    let first = (nk as usize).min(MAX_KERNEL_FRAMES) + (nu as usize).min(MAX_USER_FRAMES);
    for i in 0..MAX_VMAS {
        if i >= n as usize {
            break;
        }
        let m = state.vmas[i];
        let at = first + VMA_WORDS * i;
        if let Some(words) = state.record.frames.get_mut(at..at + VMA_WORDS) {
            words.copy_from_slice(&[m.start, m.end, m.bias, u64::from(m.object)]);
        }
    }
}
