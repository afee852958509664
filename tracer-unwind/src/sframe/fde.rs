//! Function descriptors (docs/sframe-format.md, "Function descriptors"): v1 (17 bytes), v2
//! (20 bytes) and v3 (16-byte index entry + 5-byte attribute record in the FRE sub-section),
//! with start addresses resolved to where the ELF file places the function, and the list
//! sorted by that address. Checks that each function's rows could fit in the FRE sub-section
//! (so decoding never allocates by an unchecked count); does not decode the rows.

use super::header::{Layout, OFF_NUM_FRES, V3_ATTR_LEN};
use super::read::Bytes;
use super::{Error, FdeType, FreType, Function, Header, PauthKey, PcType};

/// Decode every descriptor, cross-check the header's FRE count, sort by resolved start.
pub(crate) fn parse(b: Bytes<'_>, h: &Header, l: &Layout, vaddr: u64) -> Result<Vec<Function>, Error> {
    // The header check guarantees `num_fdes * fde_len` bytes exist, which bounds this.
    let mut out = Vec::with_capacity(h.num_fdes as usize);
    let mut total = 0u64;
    for index in 0..h.num_fdes {
        let at = descriptor_offset(l, index);
        let f = if h.version >= 3 {
            v3(b, h, l, vaddr, index, at)?
        } else {
            v1v2(b, h, l, vaddr, index, at)?
        };
        total += u64::from(f.num_fres);
        out.push(f);
    }
    if total != u64::from(h.num_fres) {
        return Err(Error::FreCountMismatch {
            offset: OFF_NUM_FRES,
            header: h.num_fres,
            total,
        });
    }
    // Raw values are not monotonic with FUNC_START_PCREL even when FDE_SORTED is set, and
    // nothing guarantees the flag is honest: search needs the resolved order. The sort is
    // stable, so equal starts keep descriptor order (index).
    if !out.is_sorted_by_key(|f| f.start) {
        out.sort_by_key(|f| f.start);
    }
    Ok(out)
}

/// Offset of descriptor `index`'s first byte (v3: of its index entry).
pub(crate) fn descriptor_offset(l: &Layout, index: u32) -> u64 {
    l.fde_start + u64::from(index) * l.fde_len
}

/// Where the function starts: relative to the section, or with FUNC_START_PCREL (v2 errata,
/// v3) to the start field itself. Addresses wrap like the target's pointer arithmetic.
fn resolve(h: &Header, vaddr: u64, field_at: u64, raw: i64) -> u64 {
    let base = if h.is_pcrel() {
        vaddr.wrapping_add(field_at)
    } else {
        vaddr
    };
    base.wrapping_add_signed(raw)
}

/// v1/v2: start i32, size u32, start_fre_off u32, num_fres u32, info u8 (v2: rep_size u8, pad u16).
fn v1v2(b: Bytes<'_>, h: &Header, l: &Layout, vaddr: u64, index: u32, at: u64) -> Result<Function, Error> {
    let end = b.len();
    let what = "function descriptor";
    let raw = b.u32(at, end, what)? as i32;
    let size = b.u32(at + 4, end, what)?;
    let fre_off = b.u32(at + 8, end, what)?;
    let num_fres = b.u32(at + 12, end, what)?;
    let info = b.u8(at + 16, end, what)?;
    let rep_size = if h.version >= 2 { b.u8(at + 17, end, what)? } else { 0 };
    let info = Info::decode(info, at + 16, false)?;
    check_rows_fit(l, fre_off, at + 8, num_fres, at + 12, info.fre_type)?;
    Ok(Function {
        start: resolve(h, vaddr, at, raw.into()),
        size,
        pc_type: info.pc_type,
        rep_size,
        fde_type: FdeType::Default,
        signal: false,
        pauth_key: info.pauth_key,
        fre_type: info.fre_type,
        num_fres,
        fre_offset: fre_off,
        index,
    })
}

/// v3: index entry (start i64, size u32, start_fre_off u32), then at FRE sub-section +
/// start_fre_off the attribute record (num_fres u16, info u8, info2 u8, rep_size u8).
fn v3(b: Bytes<'_>, h: &Header, l: &Layout, vaddr: u64, index: u32, at: u64) -> Result<Function, Error> {
    let end = b.len();
    let what = "function index entry";
    let raw = b.i64(at, end, what)?;
    let size = b.u32(at + 8, end, what)?;
    let attr_off = b.u32(at + 12, end, what)?;
    let fre_len = l.fre_end - l.fre_start;
    if u64::from(attr_off) + V3_ATTR_LEN > fre_len {
        return Err(Error::OutOfBounds {
            what: "start_fre_off (attribute record)",
            offset: at + 12,
            value: attr_off.into(),
            limit: fre_len.saturating_sub(V3_ATTR_LEN),
        });
    }
    let attr = l.fre_start + u64::from(attr_off);
    let what = "function attribute record";
    let num_fres = u32::from(b.u16(attr, l.fre_end, what)?);
    let info = Info::decode(b.u8(attr + 2, l.fre_end, what)?, attr + 2, true)?;
    let info2 = b.u8(attr + 3, l.fre_end, what)?;
    let rep_size = b.u8(attr + 4, l.fre_end, what)?;
    let fde_type = match info2 & 0x1f {
        0 => FdeType::Default,
        1 => FdeType::Flex,
        value => {
            return Err(Error::UnknownFdeType {
                offset: attr + 3,
                value,
            });
        }
    };
    // Fits in u32: attr_off + 5 <= fre_len <= u32::MAX.
    let fre_offset = attr_off + V3_ATTR_LEN as u32;
    check_rows_fit(l, fre_offset, at + 12, num_fres, attr, info.fre_type)?;
    Ok(Function {
        start: resolve(h, vaddr, at, raw),
        size,
        pc_type: info.pc_type,
        rep_size,
        fde_type,
        signal: info.signal,
        pauth_key: info.pauth_key,
        fre_type: info.fre_type,
        num_fres,
        fre_offset,
        index,
    })
}

/// A function's rows start inside the FRE sub-section and `num_fres` minimal rows fit after
/// that start. The fields' own offsets (`off_at`, `num_at`) go in the error.
fn check_rows_fit(l: &Layout, fre_off: u32, off_at: u64, num_fres: u32, num_at: u64, t: FreType) -> Result<(), Error> {
    let fre_len = l.fre_end - l.fre_start;
    let Some(room) = fre_len.checked_sub(fre_off.into()) else {
        return Err(Error::OutOfBounds {
            what: "start_fre_off",
            offset: off_at,
            value: fre_off.into(),
            limit: fre_len,
        });
    };
    let max = room / (addr_len(t) + 1);
    if u64::from(num_fres) > max {
        return Err(Error::OutOfBounds {
            what: "function num_fres",
            offset: num_at,
            value: num_fres.into(),
            limit: max,
        });
    }
    Ok(())
}

/// Bytes of a row's start field.
pub(crate) fn addr_len(t: FreType) -> u64 {
    match t {
        FreType::Addr1 => 1,
        FreType::Addr2 => 2,
        FreType::Addr4 => 4,
    }
}

/// The info byte: bits 0-3 FRE type, bit 4 PC type, bit 5 PAuth key, bit 7 SIGNAL (v3 only).
struct Info {
    fre_type: FreType,
    pc_type: PcType,
    pauth_key: PauthKey,
    signal: bool,
}

impl Info {
    fn decode(byte: u8, at: u64, v3: bool) -> Result<Self, Error> {
        let fre_type = match byte & 0xf {
            0 => FreType::Addr1,
            1 => FreType::Addr2,
            2 => FreType::Addr4,
            value => return Err(Error::UnknownFreType { offset: at, value }),
        };
        Ok(Self {
            fre_type,
            pc_type: if byte & 0x10 == 0 { PcType::Inc } else { PcType::Mask },
            pauth_key: if byte & 0x20 == 0 { PauthKey::A } else { PauthKey::B },
            signal: v3 && byte & 0x80 != 0,
        })
    }
}
