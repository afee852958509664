//! Frame row entries of one function (docs/sframe-format.md, "Frame rows"), decoded into [`Row`]s:
//! the start field, the fre_info byte, N data words of S bytes, and their meaning per FDE
//! type and ABI. Reads stay inside the FRE sub-section; a row count never sizes an allocation
//! beyond what the bytes can hold. Does not search (see `lookup`).
//!
//! DEFAULT rows, as equations over the caller's registers (`base` = SP or FP per fre_info bit 0):
//! 1. `CFA = base + w0` (s390x stores `(offset - 160) / 8`: `CFA = base + w0 * 8 + 160`).
//! 2. The remaining words fill, in order, the registers whose header fixed offset is 0:
//!    RA, then FP. amd64 (fixed RA -8): `[CFA, FP]`; aarch64: `[CFA]` or `[CFA, RA, FP]`
//!    (`[CFA, RA]` is accepted); s390x: `[CFA, RA, FP]` where an RA word of 0 is padding.
//!    A word `w` means `reg = *(CFA + w)`; on s390x v2 an odd `w` means "held in register
//!    `w >> 1`". A register with a non-zero fixed offset has no word and stays `Unchanged`
//!    (the consumer applies the header's fixed offset), as in libsframe's readers.
//! 3. No words at all: RA undefined, the outermost frame.
//!
//! FLEX rows (v3): `(control, offset)` pairs for CFA, RA, FP; a lone control word 0 means
//! "not tracked". A register-held value (`reg_p`, no deref, offset 0) is normalised to
//! [`Rule::InRegister`] so it reads the same as s390x v2's register words.

use super::fde::addr_len;
use super::header::Layout;
use super::read::Bytes;
use super::{Abi, CfaRule, Error, FdeType, Function, Header, Reg, Row, Rule};

/// Most data words a row can have (4 bits of count).
const MAX_WORDS: usize = 15;

/// Decode all rows of `f`. A v3 DEFAULT function without rows yields one synthetic outermost
/// row at start 0 whose `offset` is the function's attribute record (see `mod.rs`).
pub(crate) fn decode(b: Bytes<'_>, h: &Header, l: &Layout, f: &Function) -> Result<Vec<Row>, Error> {
    let first = l.fre_start + u64::from(f.fre_offset);
    let room = l.fre_end.saturating_sub(first);
    let cap = u64::from(f.num_fres).min(room / (addr_len(f.fre_type) + 1)) as usize;
    let mut rows = Vec::with_capacity(cap.max(1));
    walk(b, h, l, f, |row| rows.push(row))?;
    Ok(rows)
}

/// Decode the rows of `f` without keeping them; returns how many there are (as `decode`).
pub(crate) fn count(b: Bytes<'_>, h: &Header, l: &Layout, f: &Function) -> Result<u64, Error> {
    let mut n = 0;
    walk(b, h, l, f, |_| n += 1)?;
    Ok(n)
}

/// Decode each row of `f` in order, checking that starts ascend, and hand it to `emit`.
fn walk(b: Bytes<'_>, h: &Header, l: &Layout, f: &Function, mut emit: impl FnMut(Row)) -> Result<(), Error> {
    let first = l.fre_start + u64::from(f.fre_offset);
    if h.version >= 3 && f.fde_type == FdeType::Default && f.num_fres == 0 {
        let attr = first.saturating_sub(super::header::V3_ATTR_LEN).min(b.len());
        emit(outermost(0, 1, attr));
        return Ok(());
    }
    let mut at = first;
    let mut previous: Option<u32> = None;
    // Each iteration consumes at least two bytes or fails, so this ends within the data.
    for _ in 0..f.num_fres {
        let (row, next) = decode_row(b, h, l, f, at)?;
        if let Some(previous) = previous
            && row.start <= previous
        {
            return Err(Error::RowsOutOfOrder {
                offset: at,
                start: row.start,
                previous,
            });
        }
        previous = Some(row.start);
        emit(row);
        at = next;
    }
    Ok(())
}

/// One row at `at`; returns it and the offset of the next one.
fn decode_row(b: Bytes<'_>, h: &Header, l: &Layout, f: &Function, at: u64) -> Result<(Row, u64), Error> {
    let end = l.fre_end;
    let addr = addr_len(f.fre_type);
    let head = b.slice(at, addr + 1, end, "row")?;
    let (start, info) = match head.split_last() {
        Some((&info, start)) => (b.unsigned(start), info),
        None => (0, 0),
    };
    let info_at = at + addr;
    let count = usize::from((info >> 1) & 0xf);
    let size = match (info >> 5) & 0x3 {
        0 => 1usize,
        1 => 2,
        2 => 4,
        _ => return Err(Error::ReservedWordSize { offset: info_at }),
    };
    let words_at = info_at + 1;
    let need = (count * size) as u64;
    let body = b.slice(words_at, need, end, "row data words")?;
    let mut words = [(0i64, 0u32); MAX_WORDS];
    for (w, bytes) in words.iter_mut().zip(body.chunks_exact(size)) {
        *w = (b.signed(bytes), b.unsigned(bytes));
    }
    let words = &words[..count];
    let mut row = if count == 0 {
        outermost(start, info, at)
    } else {
        match f.fde_type {
            FdeType::Default => default_row(h, start, info, words, at)?,
            FdeType::Flex => flex_row(h, start, words, at)?,
        }
    };
    row.mangled_ra = info & 0x80 != 0;
    row.offset = u32::try_from(at).unwrap_or(u32::MAX);
    Ok((row, words_at + need))
}

/// A row without data words: RA undefined. The CFA base follows fre_info bit 0, offset 0.
fn outermost(start: u32, info: u8, at: u64) -> Row {
    Row {
        start,
        cfa: CfaRule {
            base: cfa_base(info),
            offset: 0,
            deref: false,
        },
        ra: Rule::Unchanged,
        fp: Rule::Unchanged,
        ra_undefined: true,
        mangled_ra: false,
        offset: u32::try_from(at).unwrap_or(u32::MAX),
    }
}

fn cfa_base(info: u8) -> Reg {
    if info & 1 == 1 { Reg::Sp } else { Reg::Fp }
}

/// s390x stores the CFA offset as `(offset - 160) / 8` so that it fits one byte.
fn cfa_offset(h: &Header, word: i64) -> i64 {
    if h.abi == Abi::S390xBe { word * 8 + 160 } else { word }
}

fn default_row(h: &Header, start: u32, info: u8, words: &[(i64, u32)], at: u64) -> Result<Row, Error> {
    let ra_tracked = h.fixed_ra_offset == 0;
    let fp_tracked = h.fixed_fp_offset == 0;
    let max = 1 + u8::from(ra_tracked) + u8::from(fp_tracked);
    let count = words.len() as u8;
    if count > max {
        return Err(Error::TooManyWords { offset: at, count, max });
    }
    let s390x = h.abi == Abi::S390xBe;
    let mut rest = words.iter().skip(1).map(|&(w, _)| w);
    let mut ra = Rule::Unchanged;
    if ra_tracked && let Some(w) = rest.next() {
        ra = if s390x && w == 0 {
            Rule::Unchanged
        } else {
            saved(h, w, at)?
        };
    }
    let mut fp = Rule::Unchanged;
    if fp_tracked && let Some(w) = rest.next() {
        fp = saved(h, w, at)?;
    }
    Ok(Row {
        start,
        cfa: CfaRule {
            base: cfa_base(info),
            offset: cfa_offset(h, words[0].0),
            deref: false,
        },
        ra,
        fp,
        ra_undefined: false,
        mangled_ra: false,
        offset: 0,
    })
}

/// A DEFAULT RA/FP word: saved at CFA + w, or (s390x v2, odd w) held in register w >> 1.
fn saved(h: &Header, w: i64, at: u64) -> Result<Rule, Error> {
    if h.abi == Abi::S390xBe && h.version == 2 && w & 1 == 1 {
        Ok(Rule::InRegister(reg(h.abi, w >> 1, at)?))
    } else {
        Ok(Rule::AtCfa(w))
    }
}

fn flex_row(h: &Header, start: u32, words: &[(i64, u32)], at: u64) -> Result<Row, Error> {
    let [(_, control), (offset, _), ..] = *words else {
        return Err(Error::InvalidFlex {
            offset: at,
            reason: "the CFA needs a control word and an offset",
        });
    };
    if control & 1 == 0 {
        return Err(Error::InvalidFlex {
            offset: at,
            reason: "the CFA rule is not register based",
        });
    }
    let cfa = CfaRule {
        base: reg(h.abi, i64::from(control >> 3), at)?,
        offset: cfa_offset(h, offset),
        deref: control & 2 != 0,
    };
    let mut next = 2;
    let ra = flex_rule(h, words, &mut next, at)?;
    let fp = flex_rule(h, words, &mut next, at)?;
    if next != words.len() {
        return Err(Error::InvalidFlex {
            offset: at,
            reason: "data words left after the FP rule",
        });
    }
    Ok(Row {
        start,
        cfa,
        ra,
        fp,
        ra_undefined: false,
        mangled_ra: false,
        offset: 0,
    })
}

/// The RA or FP rule at `words[*next..]`: absent or padding (0) = not tracked, else a pair.
fn flex_rule(h: &Header, words: &[(i64, u32)], next: &mut usize, at: u64) -> Result<Rule, Error> {
    let Some(&(_, control)) = words.get(*next) else {
        return Ok(Rule::Unchanged);
    };
    if control == 0 {
        *next += 1;
        return Ok(Rule::Unchanged);
    }
    let Some(&(offset, _)) = words.get(*next + 1) else {
        return Err(Error::InvalidFlex {
            offset: at,
            reason: "a control word without its offset",
        });
    };
    *next += 2;
    let deref = control & 2 != 0;
    Ok(match (control & 1 != 0, deref) {
        (false, true) => Rule::AtCfa(offset),
        (false, false) => Rule::ValCfa(offset),
        (true, _) => {
            let base = reg(h.abi, i64::from(control >> 3), at)?;
            if !deref && offset == 0 {
                Rule::InRegister(base)
            } else {
                Rule::Expr { base, offset, deref }
            }
        }
    })
}

/// A DWARF register number, with the ABI's stack and frame pointers named.
fn reg(abi: Abi, n: i64, at: u64) -> Result<Reg, Error> {
    let n = u16::try_from(n).map_err(|_| Error::BadRegister { offset: at, value: n })?;
    Ok(match (abi, n) {
        (Abi::Amd64Le, 7) | (Abi::Aarch64Le | Abi::Aarch64Be, 31) | (Abi::S390xBe, 15) => Reg::Sp,
        (Abi::Amd64Le, 6) | (Abi::Aarch64Le | Abi::Aarch64Be, 29) | (Abi::S390xBe, 11) => Reg::Fp,
        _ => Reg::Dwarf(n),
    })
}
