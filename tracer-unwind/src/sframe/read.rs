//! Bounds-checked, unaligned, endian-aware reads of fixed-width fields. Every read names the
//! structure it belongs to and the end of the region it must stay inside (the section, or the
//! FRE sub-section), and fails with [`Error::Truncated`] instead of panicking. No format
//! knowledge lives here.

use super::{Endian, Error};

/// The section's bytes and byte order.
#[derive(Clone, Copy)]
pub(crate) struct Bytes<'a> {
    data: &'a [u8],
    endian: Endian,
}

impl<'a> Bytes<'a> {
    pub(crate) fn new(data: &'a [u8], endian: Endian) -> Self {
        Self { data, endian }
    }

    pub(crate) fn len(&self) -> u64 {
        self.data.len() as u64
    }

    /// `len` bytes at `offset`, which must end at or before `limit` (and the end of the data).
    pub(crate) fn slice(&self, offset: u64, len: u64, limit: u64, what: &'static str) -> Result<&'a [u8], Error> {
        let end = limit.min(self.len());
        let found = offset
            .checked_add(len)
            .filter(|&stop| stop <= end)
            // `stop <= data.len()`, so both bounds fit in usize.
            .and_then(|stop| self.data.get(offset as usize..stop as usize));
        found.ok_or(Error::Truncated {
            what,
            offset: offset.min(self.len()),
            need: len,
            have: end.saturating_sub(offset),
        })
    }

    fn array<const N: usize>(&self, offset: u64, limit: u64, what: &'static str) -> Result<[u8; N], Error> {
        let s = self.slice(offset, N as u64, limit, what)?;
        // `slice` returned exactly N bytes.
        Ok(s.try_into().unwrap_or([0; N]))
    }

    pub(crate) fn u8(&self, offset: u64, limit: u64, what: &'static str) -> Result<u8, Error> {
        self.array::<1>(offset, limit, what).map(|[b]| b)
    }

    pub(crate) fn u16(&self, offset: u64, limit: u64, what: &'static str) -> Result<u16, Error> {
        self.array::<2>(offset, limit, what).map(|b| self.unsigned(&b) as u16)
    }

    pub(crate) fn u32(&self, offset: u64, limit: u64, what: &'static str) -> Result<u32, Error> {
        self.array::<4>(offset, limit, what).map(|b| self.unsigned(&b))
    }

    pub(crate) fn i64(&self, offset: u64, limit: u64, what: &'static str) -> Result<i64, Error> {
        let b = self.array::<8>(offset, limit, what)?;
        Ok(match self.endian {
            Endian::Little => i64::from_le_bytes(b),
            Endian::Big => i64::from_be_bytes(b),
        })
    }

    /// A 1-, 2- or 4-byte field already in hand, zero-extended (other lengths read as 0).
    pub(crate) fn unsigned(&self, bytes: &[u8]) -> u32 {
        match (bytes, self.endian) {
            (&[b], _) => u32::from(b),
            (&[a, b], Endian::Little) => u32::from(u16::from_le_bytes([a, b])),
            (&[a, b], Endian::Big) => u32::from(u16::from_be_bytes([a, b])),
            (&[a, b, c, d], Endian::Little) => u32::from_le_bytes([a, b, c, d]),
            (&[a, b, c, d], Endian::Big) => u32::from_be_bytes([a, b, c, d]),
            _ => 0,
        }
    }

    /// The same field sign-extended: offsets are signed, FLEX control words unsigned.
    pub(crate) fn signed(&self, bytes: &[u8]) -> i64 {
        let v = self.unsigned(bytes);
        i64::from(match bytes.len() {
            1 => i32::from(v as u8 as i8),
            2 => i32::from(v as u16 as i16),
            _ => v as i32,
        })
    }
}
