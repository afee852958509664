//! The 28-byte SFrame header (docs/sframe-format.md, "Header"): byte order from the magic,
//! version, ABI, and the absolute byte ranges of the FDE and FRE sub-sections, validated
//! against the data so that later reads can only fail on the contents of one descriptor or
//! row. Does not look at function descriptors or rows.

use super::read::Bytes;
use super::{Abi, Endian, Error, Header};

/// Size of the fixed header in every version.
pub(crate) const HEADER_LEN: u64 = 28;
/// Smallest possible row: a 1-byte start and the fre_info byte.
pub(crate) const MIN_ROW_LEN: u64 = 2;
/// v3 per-function attribute record in the FRE sub-section.
pub(crate) const V3_ATTR_LEN: u64 = 5;

/// Offset of the header's num_fres field.
pub(crate) const OFF_NUM_FRES: u64 = 0x0c;
const OFF_FRE_LEN: u64 = 0x10;
const OFF_FDEOFF: u64 = 0x14;
const OFF_FREOFF: u64 = 0x18;

/// Where things are, as absolute offsets into the section.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    /// First byte of the FDE sub-section.
    pub(crate) fde_start: u64,
    /// Size of one function descriptor (v3: of one index entry).
    pub(crate) fde_len: u64,
    /// First byte of the FRE sub-section.
    pub(crate) fre_start: u64,
    /// One past the last byte of the FRE sub-section (`fre_start + fre_len`).
    pub(crate) fre_end: u64,
}

/// Decode and validate the header; the returned layout lies inside `data`.
pub(crate) fn parse(data: &[u8]) -> Result<(Header, Endian, Layout), Error> {
    let len = data.len() as u64;
    if len < HEADER_LEN {
        return Err(Error::Truncated {
            what: "header",
            offset: 0,
            need: HEADER_LEN,
            have: len,
        });
    }
    let endian = match [data[0], data[1]] {
        [0xe2, 0xde] => Endian::Little,
        [0xde, 0xe2] => Endian::Big,
        found => {
            return Err(Error::BadMagic {
                offset: 0,
                found: u16::from_le_bytes(found),
            });
        }
    };
    let b = Bytes::new(data, endian);
    let version = data[2];
    if !(1..=3).contains(&version) {
        return Err(Error::UnsupportedVersion { offset: 2, version });
    }
    let abi = match data[4] {
        1 => Abi::Aarch64Be,
        2 => Abi::Aarch64Le,
        3 => Abi::Amd64Le,
        4 => Abi::S390xBe,
        abi => return Err(Error::UnknownAbi { offset: 4, abi }),
    };
    let header = Header {
        version,
        flags: data[3],
        abi,
        fixed_fp_offset: data[5] as i8,
        fixed_ra_offset: data[6] as i8,
        auxhdr_len: data[7],
        num_fdes: b.u32(0x08, len, "header")?,
        num_fres: b.u32(OFF_NUM_FRES, len, "header")?,
        fre_len: b.u32(OFF_FRE_LEN, len, "header")?,
        fdeoff: b.u32(OFF_FDEOFF, len, "header")?,
        freoff: b.u32(OFF_FREOFF, len, "header")?,
    };
    let layout = layout(&header, len)?;
    Ok((header, endian, layout))
}

/// Check that both sub-sections and the counts fit in `len` bytes.
fn layout(h: &Header, len: u64) -> Result<Layout, Error> {
    let aux = u64::from(h.auxhdr_len);
    let body = HEADER_LEN + aux;
    if body > len {
        return Err(Error::Truncated {
            what: "auxiliary header",
            offset: HEADER_LEN,
            need: aux,
            have: len - HEADER_LEN,
        });
    }
    // All sums below are of u32 values in u64: they cannot overflow.
    let room = len - body;
    let fde_start = body + u64::from(h.fdeoff);
    if fde_start > len {
        return Err(Error::OutOfBounds {
            what: "fdeoff",
            offset: OFF_FDEOFF,
            value: h.fdeoff.into(),
            limit: room,
        });
    }
    let fde_len: u64 = match h.version {
        1 => 17,
        2 => 20,
        _ => 16,
    };
    let fde_bytes = u64::from(h.num_fdes) * fde_len;
    if fde_bytes > len - fde_start {
        return Err(Error::Truncated {
            what: "function descriptors",
            offset: fde_start,
            need: fde_bytes,
            have: len - fde_start,
        });
    }
    let fre_start = body + u64::from(h.freoff);
    if fre_start > len {
        return Err(Error::OutOfBounds {
            what: "freoff",
            offset: OFF_FREOFF,
            value: h.freoff.into(),
            limit: room,
        });
    }
    let fre_len = u64::from(h.fre_len);
    if fre_len > len - fre_start {
        return Err(Error::OutOfBounds {
            what: "fre_len",
            offset: OFF_FRE_LEN,
            value: fre_len,
            limit: len - fre_start,
        });
    }
    // Every row takes at least two bytes; v3 adds one attribute record per function.
    let attrs = if h.version >= 3 {
        u64::from(h.num_fdes) * V3_ATTR_LEN
    } else {
        0
    };
    let max_rows = fre_len.saturating_sub(attrs) / MIN_ROW_LEN;
    if u64::from(h.num_fres) > max_rows {
        return Err(Error::OutOfBounds {
            what: "num_fres",
            offset: OFF_NUM_FRES,
            value: h.num_fres.into(),
            limit: max_rows,
        });
    }
    Ok(Layout {
        fde_start,
        fde_len,
        fre_start,
        fre_end: fre_start + fre_len,
    })
}
