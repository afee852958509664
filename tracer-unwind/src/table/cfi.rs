//! The table builder's second source: DWARF call-frame information (`.eh_frame`, else
//! `.debug_frame`) flattened into the same transitions and pages as SFrame. It reads CFI only
//! through `crate::cfi` (gimli), does no I/O, and must not panic on malformed input.
//!
//! 1. FDEs come from `CfiTable::fdes` (every readable FDE, sorted by start): those of
//!    `.eh_frame` when it has any, else those of `.debug_frame`. Entries gimli cannot read,
//!    and FDEs whose program it cannot evaluate, are `NO_INFO` (a reason).
//! 2. Overlaps, address range, the transition budget, `NO_INFO` at each FDE start and end, and
//!    the entry point's FDE being `OUTERMOST` work exactly as for SFrame functions (see
//!    `transitions`); each FDE's rows (`cfi::RowReader`: one evaluation per FDE, the rows
//!    gimli's `UnwindTable` gives) are clipped to the FDE and to the end of the row before (so
//!    hostile programs cannot make rows go backwards).
//! 3. A row becomes a rule (see [`convert_row`]): RA undefined -> `KIND_OUTERMOST`; CFA is
//!    SP/FP plus offset, or another register (topmost-only); RA and FP saved at CFA + offset; on
//!    aarch64 an RA left in x30 is topmost-only, a signed one `FLAG_MANGLED_RA`; `FLAG_SIGNAL`
//!    for CIEs with the `S` augmentation. Anything else is `NO_INFO` with a reason.
//! 4. The one CFA expression ld writes for x86-64 PLT stubs (see [`plt_threshold`]),
//!    `CFA = rsp + 8 + ((rip & 15) >= K ? 8 : 0)`, is expanded over its rows into 16-byte
//!    blocks: `SP + 8` from each block start, `SP + 16` from block start + K.
//!
//! For CFI tables, `TableStats::functions` counts FDEs and `TableStats::sframe_rows` CFI rows.

use tracer_common::unwind::{
    FLAG_FP_SAVED, FLAG_MANGLED_RA, FLAG_RA_SAVED, FLAG_SIGNAL, FLAG_TOPMOST_ONLY, KIND_CFA, KIND_OUTERMOST,
    REG_DWARF_BASE, REG_FP, REG_SP, UnwindRule,
};

use super::{
    ObjectTable, finish,
    rules::Unsupported,
    transitions::{ADDRESS_LIMIT, AMD64_PLT_ENTRY, Flat, MAX_TRANSITIONS, count},
};
use crate::cfi::{Arch, CfiCfa, CfiError, CfiReg, CfiSource, CfiTable, Evaluator, FdeRange, FdeRow, FdeRows};

/// DWARF number of the aarch64 link register (x30), where an unsaved RA still is.
const AARCH64_LR: u16 = 30;

/// The table of an object from its call-frame information: `Ok(None)` when it has none
/// (neither `.eh_frame` nor `.debug_frame`). Every row of the FDE holding `entry` (the
/// program's entry point, `elf::entry_point`) is `OUTERMOST`. Errors are files the CFI reader
/// cannot open (not an ELF file, an unsupported machine, a malformed `.eh_frame_hdr`); what the
/// kernel format cannot express, or an FDE that cannot be evaluated, is a reason in the stats.
/// In the stats, `functions` counts FDEs and `sframe_rows` CFI rows (gimli's rows, unclipped).
pub fn build_from_cfi(file: &[u8], entry: Option<u64>) -> Result<Option<ObjectTable>, CfiError> {
    Ok(flatten_file(file, entry)?.map(finish))
}

/// Steps 1-2 for a whole file: the transitions of its `.eh_frame` FDEs, else its
/// `.debug_frame` ones; `Ok(None)` when it has neither.
pub(crate) fn flatten_file(file: &[u8], entry: Option<u64>) -> Result<Option<Flat>, CfiError> {
    flatten_file_with(file, entry, Evaluator::Fast)
}

/// [`flatten_file`] with the FDE programs evaluated by `evaluator`.
pub(crate) fn flatten_file_with(
    file: &[u8],
    entry: Option<u64>,
    evaluator: Evaluator,
) -> Result<Option<Flat>, CfiError> {
    let Some(table) = CfiTable::from_elf(file)? else {
        return Ok(None);
    };
    let all = table.fdes();
    let has_eh_frame = all.iter().any(|f| f.source != CfiSource::DebugFrame);
    let fdes: Vec<FdeRange> = all
        .into_iter()
        .filter(|f| (f.source != CfiSource::DebugFrame) == has_eh_frame)
        .collect();
    let mut reader = table.row_reader(evaluator);
    let mut flat = flatten(table.arch(), &fdes, entry, |f, out| reader.fde_rows(f, out));
    count(
        &mut flat.reasons,
        Unsupported::UnreadableCfi,
        table.unreadable().count() as u64,
    );
    Ok(Some(flat))
}

/// What one CFI row becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Converted {
    /// One rule over the whole row.
    Rule(UnwindRule),
    /// The x86-64 PLT expression: `rule` with `CFA = SP + 8` from each 16-byte block start and
    /// `CFA = SP + 16` from block start + `threshold`.
    Plt { threshold: u64, rule: UnwindRule },
}

/// Steps 1-2: the transitions of `fdes` (sorted by start), their rows read by `rows_of` into
/// the buffer it is given (one buffer for all FDEs).
pub(crate) fn flatten(
    arch: Arch,
    fdes: &[FdeRange],
    entry: Option<u64>,
    mut rows_of: impl FnMut(&FdeRange, &mut FdeRows) -> Result<(), CfiError>,
) -> Flat {
    let mut flat = Flat::default();
    let mut fde = FdeRows {
        signal: false,
        rows: Vec::new(),
    };
    let mut covered_to = 0u64;
    for f in fdes {
        flat.functions += 1;
        if f.start < covered_to {
            count(&mut flat.reasons, Unsupported::OverlappingFunctions, 1);
        }
        covered_to = covered_to.max(f.end);
        flat.cover(f.start, f.end);
        flat.truncate_from(f.start);
        if f.end >= ADDRESS_LIMIT {
            count(&mut flat.reasons, Unsupported::AddressRange, 1);
            if f.start < ADDRESS_LIMIT {
                flat.push(f.start, UnwindRule::NO_INFO);
            }
            continue;
        }
        if rows_of(f, &mut fde).is_err() {
            count(&mut flat.reasons, Unsupported::UnreadableCfi, 1);
            flat.push(f.start, UnwindRule::NO_INFO);
            continue;
        }
        flat.sframe_rows += fde.rows.len() as u64;
        let rows = clipped(f, &fde.rows);
        let cost = rows.clone().fold(2u64, |sum, (start, end, row)| {
            let blocks = match plt_threshold(arch, row) {
                Some(_) => (end - start).div_ceil(AMD64_PLT_ENTRY) + 1,
                None => 0,
            };
            sum.saturating_add(2 * blocks + 1)
        });
        if (flat.transitions.len() as u64).saturating_add(cost) > MAX_TRANSITIONS {
            count(&mut flat.reasons, Unsupported::TooManyRows, 1);
            flat.push(f.start, UnwindRule::NO_INFO);
            continue;
        }
        let is_entry = entry.is_some_and(|e| f.start <= e && e < f.end);
        flat.push(f.start, UnwindRule::NO_INFO);
        for (start, end, row) in rows {
            match convert_row(arch, fde.signal, row) {
                _ if is_entry => flat.push(start, OUTERMOST),
                Ok(Converted::Rule(rule)) => flat.push(start, rule),
                Ok(Converted::Plt { threshold, rule }) => expand_plt(&mut flat, start, end, threshold, rule),
                Err(reason) => {
                    count(&mut flat.reasons, reason, 1);
                    flat.push(start, unsupported_rule(fde.signal));
                }
            }
        }
        flat.push(f.end, UnwindRule::NO_INFO);
    }
    flat
}

/// The rule of the entry point's FDE.
const OUTERMOST: UnwindRule = UnwindRule {
    kind: KIND_OUTERMOST,
    ..UnwindRule::NO_INFO
};

/// Step 2: `(start, end, row)` for the non-empty part of each row inside the FDE and after the
/// rows before it.
fn clipped<'r>(f: &FdeRange, rows: &'r [FdeRow]) -> impl Iterator<Item = (u64, u64, &'r FdeRow)> + Clone {
    let fde_end = f.end;
    rows.iter()
        .scan(f.start, move |done, row| {
            let (start, end) = (row.start.max(*done), row.end.min(fde_end));
            if start < end {
                *done = end;
            }
            Some((start, end, row))
        })
        .filter(|&(start, end, _)| start < end)
}

/// Step 4: `[start, end)` in 16-byte blocks (aligned, as `rip & 15` is), `rule` with
/// `CFA = SP + 8` from each block start and `SP + 16` from block start + `threshold`.
fn expand_plt(flat: &mut Flat, start: u64, end: u64, threshold: u64, rule: UnwindRule) {
    let with = |offset: i32| UnwindRule {
        cfa_offset: offset,
        ..rule
    };
    let mut block = start & !(AMD64_PLT_ENTRY - 1);
    while block < end {
        let at = block.max(start);
        let offset = if at - block >= threshold { 16 } else { 8 };
        flat.push(at, with(offset));
        let switch = block + threshold;
        if switch > at && switch < end {
            flat.push(switch, with(16));
        }
        block += AMD64_PLT_ENTRY;
    }
}

/// The `K` of the CFA expression GCC and ld write for x86-64 `.plt`, `.plt.sec` and
/// `.plt.got` stubs, `None` for any other expression (or machine):
/// `DW_OP_breg7 (rsp) 8; DW_OP_breg16 (rip) 0; DW_OP_lit15; DW_OP_and; DW_OP_litK; DW_OP_ge;
/// DW_OP_lit3; DW_OP_shl; DW_OP_plus` (binutils `elf_x86_64_eh_frame_plt`, K = 11 for lazy
/// `.plt` entries, 10 or 9 in the IBT/x32 variants).
pub(crate) fn plt_threshold(arch: Arch, row: &FdeRow) -> Option<u64> {
    const LIT0: u8 = 0x30;
    if arch != Arch::X86_64 || row.cfa != CfiCfa::Expression {
        return None;
    }
    match row.cfa_expression.as_slice() {
        [0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, lit, 0x2a, 0x33, 0x24, 0x22] if (LIT0..LIT0 + 16).contains(lit) => {
            Some(u64::from(lit - LIT0))
        }
        _ => None,
    }
}

/// Step 3: the rule of one CFI row of an FDE (`signal`: its CIE has the `S` augmentation), or
/// why the kernel format cannot express it.
pub(crate) fn convert_row(arch: Arch, signal: bool, row: &FdeRow) -> Result<Converted, Unsupported> {
    let signal = if signal { FLAG_SIGNAL } else { 0 };
    if arch == Arch::S390x {
        return Err(Unsupported::Abi);
    }
    if row.ra == CfiReg::Undefined {
        return Ok(Converted::Rule(UnwindRule {
            kind: KIND_OUTERMOST,
            flags: signal,
            ..UnwindRule::NO_INFO
        }));
    }
    let mut rule = UnwindRule {
        kind: KIND_CFA,
        flags: signal,
        ..UnwindRule::NO_INFO
    };
    let plt = match row.cfa {
        CfiCfa::RegOffset { reg, offset } => {
            rule.cfa_reg = cfa_register(arch, reg)?;
            if rule.cfa_reg >= REG_DWARF_BASE {
                rule.flags |= FLAG_TOPMOST_ONLY;
            }
            rule.cfa_offset = i32::try_from(offset).map_err(|_| Unsupported::CfaOffset)?;
            None
        }
        CfiCfa::Expression => Some(plt_threshold(arch, row).ok_or(Unsupported::CfaExpression)?),
    };
    match row.ra {
        CfiReg::Offset(offset) => {
            rule.flags |= FLAG_RA_SAVED;
            rule.ra_offset = i32::try_from(offset).map_err(|_| Unsupported::RaOffset)?;
        }
        CfiReg::SameValue | CfiReg::Register(AARCH64_LR) if arch == Arch::Aarch64 => rule.flags |= FLAG_TOPMOST_ONLY,
        CfiReg::SameValue => return Err(Unsupported::RaUntracked),
        CfiReg::ValOffset(_) => return Err(Unsupported::RaValCfa),
        CfiReg::Register(_) => return Err(Unsupported::RaInRegister),
        CfiReg::Expression | CfiReg::ValExpression => return Err(Unsupported::RaDwarfExpression),
        CfiReg::Undefined | CfiReg::Other => return Err(Unsupported::RegisterRuleOther),
    }
    if arch == Arch::Aarch64 && row.mangled_ra {
        rule.flags |= FLAG_MANGLED_RA;
    }
    match row.fp {
        CfiReg::Offset(offset) => {
            rule.flags |= FLAG_FP_SAVED;
            rule.fp_offset = i32::try_from(offset).map_err(|_| Unsupported::FpOffset)?;
        }
        CfiReg::SameValue => {}
        CfiReg::Undefined => return Err(Unsupported::FpUndefined),
        CfiReg::ValOffset(_) => return Err(Unsupported::FpValCfa),
        CfiReg::Register(_) => return Err(Unsupported::FpInRegister),
        CfiReg::Expression | CfiReg::ValExpression => return Err(Unsupported::FpDwarfExpression),
        CfiReg::Other => return Err(Unsupported::RegisterRuleOther),
    }
    Ok(match plt {
        Some(threshold) => Converted::Plt { threshold, rule },
        None => Converted::Rule(rule),
    })
}

/// `NO_INFO`, keeping `FLAG_SIGNAL` so the walker still recognises a signal trampoline.
fn unsupported_rule(signal: bool) -> UnwindRule {
    UnwindRule {
        flags: if signal { FLAG_SIGNAL } else { 0 },
        ..UnwindRule::NO_INFO
    }
}

/// `cfa_reg` for DWARF register `reg`: SP, FP, or `REG_DWARF_BASE + reg` (topmost-only).
fn cfa_register(arch: Arch, reg: u16) -> Result<u8, Unsupported> {
    match reg {
        r if r == arch.sp() => Ok(REG_SP),
        r if r == arch.fp() => Ok(REG_FP),
        r => u8::try_from(r)
            .ok()
            .and_then(|r| r.checked_add(REG_DWARF_BASE))
            .ok_or(Unsupported::CfaRegister),
    }
}

#[cfg(test)]
mod tests;
