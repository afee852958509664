//! The unwind table the kernel executes: the one compact row format every source (SFrame,
//! `.eh_frame`) is flattened into by userspace, and the walker's per-frame equations.
//!
//! Layout in BPF maps (per object, addresses are object-relative: runtime PC minus the
//! mapping's bias):
//! 1. [`PageKey`] `{object, page = addr >> 16}` -> [`PageEntry`] `{first_row, num_rows}`
//!    (hash map): the rows of one 64 KiB page, a slice of the global row array.
//! 2. [`UnwindRow`] (4 bytes): low 16 address bits + index into the de-duplicated rule table.
//!    Every page's slice starts with a row at `addr_lo == 0` carrying the rule in effect at the
//!    page start, so a lookup never leaves its page: binary search for the last row with
//!    `addr_lo <= pc & 0xffff` (at most 17 steps).
//! 3. [`UnwindRule`] (12 bytes), shared by all objects: the rule of a row.
//!
//! Rule equations, with `reg` the caller-visible registers of the frame being unwound:
//! - `KIND_CFA`:       `CFA = reg[cfa_reg] + cfa_offset`
//! - `KIND_CFA_DEREF`: `CFA = *(reg[cfa_reg] + cfa_offset)` (DRAP / realigned stacks)
//! - then `RA = *(CFA + ra_offset)` when `FLAG_RA_SAVED`, `FP = *(CFA + fp_offset)` when
//!   `FLAG_FP_SAVED` (else FP unchanged), and `SP = CFA`.
//! - `KIND_OUTERMOST`: this frame is the last one (`_start`, thread entry): the stack is complete.
//! - `KIND_NO_INFO`:   no unwind information covers the address (gap between functions, or a
//!   rule the kernel cannot execute): fall back to frame pointers, or stop with a reason. Gaps
//!   that are nothing but alignment padding carry the rule before them instead (never executed;
//!   see `tracer-unwind/src/table/padding.rs`).
//!
//! `FLAG_TOPMOST_ONLY` marks rules that read a register other than SP/FP (or need the
//! pre-prologue state): valid only in the first frame, whose full register set is known.

/// Object-relative address bits that select a row inside a page.
pub const PAGE_SHIFT: u32 = 16;
/// Upper bound on binary-search steps inside one page (`log2(65536) + 1`).
pub const PAGE_SEARCH_STEPS: u32 = PAGE_SHIFT + 1;

/// Key of the page index map.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PageKey {
    /// Dense id of a loaded object (one per build-id / file identity).
    pub object: u32,
    /// `object-relative address >> PAGE_SHIFT`.
    pub page: u32,
}

/// Value of the page index map: a slice of the global row array.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageEntry {
    pub first_row: u32,
    pub num_rows: u32,
}

/// One row: where it starts inside its page and which rule applies from there on.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnwindRow {
    pub addr_lo: u16,
    pub rule: u16,
}

/// CFA computation kinds ([`UnwindRule::kind`]).
pub const KIND_CFA: u8 = 0;
pub const KIND_CFA_DEREF: u8 = 1;
pub const KIND_OUTERMOST: u8 = 2;
pub const KIND_NO_INFO: u8 = 3;

/// Registers a rule can name ([`UnwindRule::cfa_reg`]); any other DWARF register `n` is
/// `REG_DWARF_BASE + n` and makes the rule topmost-only.
pub const REG_SP: u8 = 0;
pub const REG_FP: u8 = 1;
pub const REG_DWARF_BASE: u8 = 2;

/// `FP = *(CFA + fp_offset)`; without it FP is unchanged.
pub const FLAG_FP_SAVED: u8 = 1 << 0;
/// `RA = *(CFA + ra_offset)`.
pub const FLAG_RA_SAVED: u8 = 1 << 1;
/// The saved RA is signed (aarch64 PAC): strip the signature before use.
pub const FLAG_MANGLED_RA: u8 = 1 << 2;
/// Valid only in the first frame (reads a register other than SP/FP).
pub const FLAG_TOPMOST_ONLY: u8 = 1 << 3;
/// The function is a signal trampoline: the caller's registers are in the signal frame.
pub const FLAG_SIGNAL: u8 = 1 << 4;

/// A de-duplicated unwind rule. See the module docs for the equations.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UnwindRule {
    pub kind: u8,
    pub cfa_reg: u8,
    pub flags: u8,
    pub _pad: u8,
    pub cfa_offset: i32,
    pub fp_offset: i32,
    pub ra_offset: i32,
}

impl UnwindRule {
    /// The rule of addresses nothing describes.
    pub const NO_INFO: UnwindRule = UnwindRule {
        kind: KIND_NO_INFO,
        cfa_reg: 0,
        flags: 0,
        _pad: 0,
        cfa_offset: 0,
        fp_offset: 0,
        ra_offset: 0,
    };
}

const _: () = assert!(core::mem::size_of::<PageKey>() == 8);
const _: () = assert!(core::mem::size_of::<PageEntry>() == 8);
const _: () = assert!(core::mem::size_of::<UnwindRow>() == 4);
const _: () = assert!(core::mem::size_of::<UnwindRule>() == 16);

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain `#[repr(C)]` structs of integers with no padding bytes (sizes pinned above).
    unsafe impl aya::Pod for super::PageKey {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::PageEntry {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::UnwindRow {}
    // SAFETY: as above; `_pad` is an explicit field, so no implicit padding.
    unsafe impl aya::Pod for super::UnwindRule {}
}
