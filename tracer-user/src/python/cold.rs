//! The evaluation loop's cold part in an interpreter whose symbol table is stripped (Debian's
//! 3.14 and 3.15: GCC split `_PyEval_EvalFrameDefault` and put nearly all of the loop, its
//! opcodes, in the unnamed `_PyEval_EvalFrameDefault.cold`; the named part is the prologue,
//! about 1 KiB). Samples taken in the loop are then in the cold part, and without it no
//! native frame would be known as the evaluation loop's.
//!
//! Found without a name: GCC emits the cold part's FDE right after the function's own, and the
//! function jumps into it. The FDE after the one that starts at the function is taken only if
//! it is disjoint from the function, at most [`MAX_COLD`] long, and at least [`LEAST_JUMPS`]
//! direct jumps (x86-64 `jmp rel32`, `jcc rel32`) of the function's bytes land strictly inside
//! it (a tail call to the next function lands on its first byte). x86-64 only. Bounded: the
//! function's bytes read are at most [`MAX_COLD`]; an unreadable `.eh_frame` gives none.

use gimli::{BaseAddresses, CieOrFde, EhFrame, LittleEndian, UnwindSection as _};
use object::{Architecture, Object as _, ObjectSection as _, ReadRef};

/// The longest cold part (and main part scanned) accepted.
pub const MAX_COLD: u64 = 4 << 20;
/// Jumps of the function into the candidate needed to take it.
pub const LEAST_JUMPS: usize = 2;

/// `[start, end)` of the cold part of the function at `eval`, if one is found as described.
pub fn cold_part<'d, R: ReadRef<'d>>(file: &object::File<'d, R>, eval: (u64, u64)) -> Option<(u64, u64)> {
    if file.architecture() != Architecture::X86_64 || !file.is_little_endian() {
        return None;
    }
    let section = file.section_by_name(".eh_frame")?;
    let data = section.data().ok()?;
    let candidate = fde_after(data, section.address(), eval.0)?;
    let (start, end) = candidate;
    let disjoint = end <= eval.0 || start >= eval.1;
    if !disjoint || end <= start || end - start > MAX_COLD || eval.1.saturating_sub(eval.0) > MAX_COLD {
        return None;
    }
    let code = file
        .sections()
        .find_map(|s| s.data_range(eval.0, eval.1 - eval.0).ok().flatten())?;
    (jumps_into(code, eval.0, candidate) >= LEAST_JUMPS).then_some(candidate)
}

/// The range of the FDE that follows, in `.eh_frame` (`data` at `address`), the one starting
/// at `function`.
fn fde_after(data: &[u8], address: u64, function: u64) -> Option<(u64, u64)> {
    let eh = EhFrame::new(data, LittleEndian);
    let bases = BaseAddresses::default().set_eh_frame(address);
    let mut entries = eh.entries(&bases);
    let mut found = false;
    while let Ok(Some(entry)) = entries.next() {
        let CieOrFde::Fde(partial) = entry else { continue };
        let Ok(fde) = partial.parse(|section, bases, at| section.cie_from_offset(bases, at)) else {
            continue;
        };
        if found {
            return Some((fde.initial_address(), fde.end_address()));
        }
        found = fde.initial_address() == function;
    }
    None
}

/// Direct `jmp rel32` (`e9`) and `jcc rel32` (`0f 80`-`0f 8f`) in `code` (at `at`) whose
/// target is strictly inside `(start, end)`. Every byte position is tried (no decoding): a
/// false target from other bytes needs four bytes to land inside the range.
pub fn jumps_into(code: &[u8], at: u64, (start, end): (u64, u64)) -> usize {
    let rel = |i: usize| {
        code.get(i..i + 4)
            .map(|b| i64::from(i32::from_le_bytes(b.try_into().expect("4 bytes"))))
    };
    let mut count = 0;
    for i in 0..code.len() {
        let (len, imm) = match (code[i], code.get(i + 1)) {
            (0xe9, _) => (5, i + 1),
            (0x0f, Some(&op)) if (0x80..=0x8f).contains(&op) => (6, i + 2),
            _ => continue,
        };
        let Some(rel) = rel(imm) else { continue };
        let target = at.wrapping_add((i + len) as u64).wrapping_add_signed(rel);
        count += usize::from(target > start && target < end);
    }
    count
}
