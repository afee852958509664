//! Rules for Go code without call-frame information (a binary built with `-ldflags=-s -w`
//! keeps no `.debug_frame`), from the stack-pointer deltas of its `.gopclntab` (`pcsp`: what
//! Go's own runtime unwinds with). The frame-pointer walk would be wrong there: a Go function
//! without locals sets up no frame (its caller's frame pointer stays in place, so the caller's
//! caller would be taken for its caller), and in a prologue or epilogue the frame pointer is
//! the caller's. x86-64 only; Go 1.16+ tables.
//!
//! At an address where the function has pushed `d` bytes since its entry (`d` from `pcsp`):
//! `CFA = SP + d + 8`, `RA = *(CFA - 8)`. The caller's frame pointer is at `CFA - 16` once the
//! function has saved it, which its code shows where `d` first leaves 0:
//! 1. Go 1.21 on: `PUSHQ BP` (`0x55`) takes `d` from 0 to 8: saved from there;
//! 2. Go 1.20 and before: `SUBQ $n, SP` takes `d` from 0 to `n`, then `MOVQ BP, n-8(SP)`
//!    (`48 89 6c 24 n-8` or `48 89 ac 24 n-8 (4 bytes)`) saves it: saved after that instruction;
//! 3. anything else: never (the frame pointer is left as it is).
//!    Saved, it is at `CFA - 16` wherever `d > 0` after that point (an epilogue restores it
//!    before `d` returns to 0; the slot still holds it until then).
//! 4. A function the table flags as a top frame (`runtime.goexit`, `runtime.mstart`,
//!    `runtime.rt0_go`, `runtime.sigtramp`), where Go's own tracebacks end, is `OUTERMOST`:
//!    the stack is complete there, whatever its name.
//! 5. A function the table flags as writing SP (`SPWRITE`: `runtime.mcall`,
//!    `runtime.systemstack`, `runtime.morestack`, `time.now`, ... switch stacks) has its rules
//!    in the innermost frame only (`FLAG_TOPMOST_ONLY`): as a caller it is on the other side of
//!    the switch, where the deltas say nothing, and the walk stops there, as Go's runtime's
//!    does (`topmost_only_rule`; the summary counts a stack that stops at one of Go's stack
//!    bases complete, see `export::model::truncation`).
//!
//! A delta that is negative, not a multiple of 8 or past [`MAX_DELTA`] gives `NO_INFO` there.
//! Decoding is bounded by [`MAX_STEPS`] for the whole table: a hostile table gives fewer rules.

use object::{Architecture, Object as _};
use tracer_common::unwind::{
    FLAG_FP_SAVED, FLAG_RA_SAVED, FLAG_TOPMOST_ONLY, KIND_CFA, KIND_OUTERMOST, REG_SP, UnwindRule,
};

use super::{padding::Code, transitions::Flat};
use crate::gopclntab::{Section, Table, Version};

/// Pc-value steps decoded at most for one object.
const MAX_STEPS: usize = 1 << 24;
/// The largest stack-pointer delta taken (a Go frame is at most a few MiB).
const MAX_DELTA: i32 = 1 << 26;

/// The rule of a function Go's runtime ends its tracebacks at (step 4).
const OUTERMOST: UnwindRule = UnwindRule {
    kind: KIND_OUTERMOST,
    ..UnwindRule::NO_INFO
};

/// The rule at a delta of `d` bytes, the caller's frame pointer saved at `CFA - 16` or not.
fn rule(d: i32, fp_saved: bool) -> UnwindRule {
    if d < 0 || d % 8 != 0 || d > MAX_DELTA {
        return UnwindRule::NO_INFO;
    }
    UnwindRule {
        kind: KIND_CFA,
        cfa_reg: REG_SP,
        flags: FLAG_RA_SAVED | if fp_saved { FLAG_FP_SAVED } else { 0 },
        cfa_offset: d + 8,
        ra_offset: -8,
        fp_offset: if fp_saved { -16 } else { 0 },
        ..UnwindRule::NO_INFO
    }
}

/// Where the frame pointer is saved from, by steps 1-3, given the run where `d` first leaves
/// 0 (`start`, `d`).
fn saved_from(code: &Code<'_>, start: u64, d: i32) -> Option<u64> {
    if d == 8 && code.bytes(start.checked_sub(1)?, start) == Some(&[0x55]) {
        return Some(start);
    }
    let slot = i64::from(d) - 8;
    let head = code
        .bytes(start, start.checked_add(8)?)
        .or_else(|| code.bytes(start, start + 5))?;
    match *head {
        [0x48, 0x89, 0x6c, 0x24, disp, ..] if i64::from(disp as i8) == slot => Some(start + 5),
        [0x48, 0x89, 0xac, 0x24, a, b, c, e] if i64::from(i32::from_le_bytes([a, b, c, e])) == slot => Some(start + 8),
        _ => None,
    }
}

/// The rules of the Go code of the x86-64 ELF file `file`, `None` when it has no readable
/// `.gopclntab` (or is not x86-64).
pub(crate) fn flatten(file: &[u8]) -> Option<Flat> {
    let obj = object::File::parse(file).ok()?;
    if obj.architecture() != Architecture::X86_64 {
        return None;
    }
    let section = Section::find(file)?;
    let data = file
        .get(usize::try_from(section.offset).ok()?..usize::try_from(section.offset.checked_add(section.size)?).ok()?)?;
    let mut table = Table::parse(data, section.size).ok()?;
    if table.version != Version::Go116 {
        table.relocate(section.text_start(table.text_start())?);
    }
    let code = Code::of(file)?;
    let mut flat = Flat::default();
    let mut budget = MAX_STEPS;
    let mut last_end = 0;
    for i in 0..table.functions() {
        let Some(frame) = table.frame(data, i, &mut budget) else {
            if budget == 0 {
                break;
            }
            continue;
        };
        let (range, runs) = (frame.range, frame.sp_deltas);
        // Functions come sorted; one that overlaps the one before is not believed.
        if range.start < last_end {
            continue;
        }
        last_end = range.end;
        if frame.top {
            flat.push(range.start, OUTERMOST);
            flat.push(range.end, UnwindRule::NO_INFO);
            flat.cover(range.start, range.end);
            flat.functions += 1;
            continue;
        }
        // Step 5: valid in the innermost frame only.
        let only_topmost = if frame.sp_write { FLAG_TOPMOST_ONLY } else { 0 };
        let rule = |d: i32, fp: bool| {
            let rule = rule(d, fp);
            UnwindRule {
                flags: rule.flags | if rule.kind == KIND_CFA { only_topmost } else { 0 },
                ..rule
            }
        };
        let mut saved: Option<u64> = None;
        let mut decided = false;
        for (k, &(start, d)) in runs.iter().enumerate() {
            let end = runs.get(k + 1).map_or(range.end, |&(next, _)| next.min(range.end));
            if start >= end {
                continue;
            }
            if !decided && d > 0 {
                decided = true;
                saved = saved_from(&code, start, d);
            }
            match saved {
                Some(from) if d > 0 && from > start && from < end => {
                    flat.push(start, rule(d, false));
                    flat.push(from, rule(d, true));
                }
                Some(from) => flat.push(start, rule(d, d > 0 && from <= start)),
                None => flat.push(start, rule(d, false)),
            }
        }
        flat.push(range.end, UnwindRule::NO_INFO);
        flat.cover(range.start, range.end);
        flat.functions += 1;
    }
    (flat.functions > 0).then_some(flat)
}

#[cfg(test)]
mod tests;
