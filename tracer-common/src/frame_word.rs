//! What a runtime's frames keep that names them, as the walk keeps it for userspace: a word
//! after the frame in the record. V8's (Node.js) JavaScript frames give their function's shared
//! part ([`v8_config`]); HotSpot's interpreted frames their `Method*` and bytecode index
//! ([`slot_config`], [`slot_config_with_bci`]).
//!
//! V8's JavaScript frames (interpreted, baseline, optimized) keep frame pointers, so the walk
//! finds them by the frame-pointer fallback; what it cannot know is whose they are. A
//! JavaScript frame keeps its context (a heap object) just below the saved frame pointer and
//! its function (a `JSFunction`) below that; a frame of V8's own (entry, exit, stub) keeps a
//! frame-type marker, a small integer (Smi), where the context would be. So, for every frame
//! it unwinds by frame pointer in a mapping marked with a [`v8_config`] (`ExecMapping::frame_word`,
//! set by userspace for the mappings of a process that runs V8), the walk reads those slots
//! ([`word`]) and, for a JavaScript frame, appends after the frame the function's
//! `SharedFunctionInfo` address with [`FRAME_WORD_BIT`]: the function's shared part lives in
//! the old generation, where objects seldom move, and userspace names it
//! (`tracer-user`'s `v8/`). The offsets come from the `v8dbg_*` constants the binary
//! exports for debuggers.

use crate::{python::PY_CODE_BIT, trace::FP_FRAME_BIT};

/// Set in a record's user word that is the `SharedFunctionInfo` of the frame before it (or,
/// with a [`slot_config`], the slot of another runtime's frame): not a frame. No user address
/// has it, and neither [`FP_FRAME_BIT`] nor [`PY_CODE_BIT`] goes with it.
pub const FRAME_WORD_BIT: u64 = 1 << 61;
/// The address bits of a [`FRAME_WORD_BIT`] word.
pub const WORD_ADDR_MASK: u64 = (1 << 48) - 1;
/// Set in every [`v8_config`] (so that none is 0).
const CONFIG_BIT: u32 = 1 << 31;
/// Set in a [`slot_config`]: the frame's word is its slot, as it is.
const SLOT_BIT: u32 = 1 << 30;
/// V8's tag of a heap object pointer (its low two bits); a Smi has its lowest bit clear.
pub const HEAP_OBJECT_TAG: u64 = 1;
const TAG_MASK: u64 = 3;

/// The word of [`crate::mapping::ExecMapping::frame_word`] for a V8 whose frames keep their context
/// `fp_context` bytes and their function `fp_function` bytes below the frame pointer, and
/// whose `JSFunction` has its shared part at byte `shared` (all below 256, checked by
/// userspace). An interpreted frame keeps its bytecode offset (a Smi) `fp_bytecode_offset`
/// bytes below the frame pointer (a multiple of 8 below 512; 0: not read): the word then also
/// holds it plus one at [`BCI_SHIFT`] when the slot holds a Smi that fits (userspace takes it
/// only for a frame it knows to be interpreted: in other frames the slot is a spill slot).
pub const fn v8_config(fp_context: u8, fp_function: u8, shared: u8, fp_bytecode_offset: u16) -> u32 {
    CONFIG_BIT
        | fp_context as u32
        | (fp_function as u32) << 8
        | (shared as u32) << 16
        | ((fp_bytecode_offset as u32 / 8) & 0x3f) << 24
}

/// The word of [`crate::mapping::ExecMapping::frame_word`] for a runtime whose frames keep what names
/// them `fp_slot` bytes below the frame pointer, taken as it is (HotSpot's interpreted frames
/// keep their `Method*` there): the same record, a word after the frame.
pub const fn slot_config(fp_slot: u8) -> u32 {
    CONFIG_BIT | SLOT_BIT | fp_slot as u32
}

/// [`slot_config`] for HotSpot's interpreted frames with where they are in their method: the
/// frame keeps its bytecode pointer `bcp_slot` bytes below the frame pointer, the `Method`
/// its `ConstMethod*` at byte `const_method` (a multiple of 8, below 128), and the bytecodes
/// follow the `ConstMethod`'s `const_size` bytes (a multiple of 8, below 512). The word then
/// also holds the bytecode index plus one at [`BCI_SHIFT`] (0: not known).
pub const fn slot_config_with_bci(fp_slot: u8, bcp_slot: u8, const_method: u8, const_size: u16) -> u32 {
    slot_config(fp_slot)
        | (bcp_slot as u32) << 8
        | ((const_size as u32 / 8) & 0x3f) << 16
        | ((const_method as u32 / 8) & 0xf) << 22
}

/// Where a [`slot_config_with_bci`] word keeps the bytecode index plus one (a [`v8_config`]
/// word its bytecode offset plus one), and its mask: values past it are not kept.
pub const BCI_SHIFT: u32 = 48;
pub const BCI_MASK: u64 = 0x1fff;

/// The word to append after a frame unwound by frame pointer `fp` in a mapping with V8
/// `config` (not 0), reading the frame's slots with `stack` and the function with `heap`;
/// `None` for a frame that is not a JavaScript function's (or whose slots cannot be read or
/// hold no heap objects).
#[inline(always)]
pub fn word(
    config: u32,
    fp: u64,
    mut stack: impl FnMut(u64) -> Option<u64>,
    heap: impl FnOnce(u64) -> Option<u64>,
) -> Option<u64> {
    if config & SLOT_BIT != 0 {
        // A pointer, 8-aligned, in user space.
        let word = stack(fp.wrapping_sub(u64::from(config & 0xff)))?;
        if word == 0 || word & 7 != 0 || word & !WORD_ADDR_MASK != 0 {
            return None;
        }
        let bcp_slot = u64::from(config >> 8 & 0xff);
        if bcp_slot == 0 {
            return Some(FRAME_WORD_BIT | word);
        }
        // Where the frame is in its method: its bytecode pointer's distance from the first
        // bytecode (the `ConstMethod` read from the `Method`).
        let const_size = u64::from(config >> 16 & 0x3f) * 8;
        let const_method = u64::from(config >> 22 & 0xf) * 8;
        let bci = match (stack(fp.wrapping_sub(bcp_slot)), heap(word.wrapping_add(const_method))) {
            (Some(bcp), Some(constants)) => bcp.wrapping_sub(constants.wrapping_add(const_size)),
            _ => BCI_MASK,
        };
        let known = if bci < BCI_MASK { (bci + 1) << BCI_SHIFT } else { 0 };
        return Some(FRAME_WORD_BIT | known | word);
    }
    let fp_context = u64::from(config & 0xff);
    let fp_function = u64::from(config >> 8 & 0xff);
    let shared = u64::from(config >> 16 & 0xff);
    let context = stack(fp.wrapping_sub(fp_context))?;
    if context & TAG_MASK != HEAP_OBJECT_TAG {
        return None;
    }
    let function = stack(fp.wrapping_sub(fp_function))?;
    if function & TAG_MASK != HEAP_OBJECT_TAG {
        return None;
    }
    let info = heap(function.wrapping_sub(HEAP_OBJECT_TAG).wrapping_add(shared))?;
    if info & TAG_MASK != HEAP_OBJECT_TAG || info & !WORD_ADDR_MASK != 0 {
        return None;
    }
    // The bytecode offset, a Smi (its value in the upper half of the word).
    let offset_slot = u64::from(config >> 24 & 0x3f) * 8;
    let offset = match offset_slot {
        0 => None,
        slot => stack(fp.wrapping_sub(slot)),
    };
    let known = match offset {
        Some(smi) if smi & 1 == 0 && (smi >> 32) < BCI_MASK => ((smi >> 32) + 1) << BCI_SHIFT,
        _ => 0,
    };
    Some(FRAME_WORD_BIT | known | info)
}

/// Whether user word `word` of a record is a [`FRAME_WORD_BIT`] word (and not a frame or a
/// Python word).
#[inline(always)]
pub const fn is_frame_word(word: u64) -> bool {
    word & (FP_FRAME_BIT | PY_CODE_BIT | FRAME_WORD_BIT) == FRAME_WORD_BIT
}

#[cfg(test)]
mod tests;
