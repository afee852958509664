//! One executable mapping of a process as the walker resolves a PC with it: shared by the
//! process table (`trace::ProcInfo`), the mappings found through VMAs (`vma`) and the sample
//! records that carry those.

/// [`ExecMapping::object`] of a mapping without a table: only frame pointers can unwind it.
pub const NO_OBJECT: u32 = u32::MAX;

/// No mapping (`end == 0`, which no real mapping has).
pub const NO_VMA: ExecMapping = ExecMapping {
    start: 0,
    end: 0,
    bias: 0,
    object: NO_OBJECT,
    frame_word: 0,
};

/// One executable mapping of a process: `[start, end)` holds code of `object`, whose own
/// addresses are `pc - bias`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecMapping {
    pub start: u64,
    pub end: u64,
    pub bias: u64,
    /// Dense object id (`PageKey::object`), or [`NO_OBJECT`].
    pub object: u32,
    /// In a mapping of a runtime whose frames keep what names them (V8's JavaScript frames,
    /// HotSpot's interpreted ones), how the walk reads it (`crate::frame_word`); 0 elsewhere,
    /// and in every mapping found through VMAs.
    pub frame_word: u32,
}

const _: () = assert!(core::mem::size_of::<ExecMapping>() == 32);

#[cfg(feature = "user")]
// SAFETY: `#[repr(C)]`, integers only, no padding, size pinned above: every bit
// pattern is valid and there are no implicit padding bytes.
unsafe impl aya::Pod for ExecMapping {}
