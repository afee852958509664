//! Indexing a CFI section by scanning it: every FDE's address range and offset, entry by
//! entry, so that one entry gimli cannot read (malformed, or an augmentation it does not know)
//! is recorded and skipped instead of hiding every entry after it.
//!
//! It must not evaluate CFI programs (that is `table`), and must not panic on malformed input.

use gimli::{
    BaseAddresses, CommonInformationEntry, EndianSlice, Reader as _, ReaderOffsetId, RunTimeEndian, UnwindOffset,
    UnwindSection,
};

use super::{CfiError, CfiSource, Slice};

/// One FDE: the addresses `[start, end)` it covers, its section and its byte offset there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdeRange {
    pub start: u64,
    pub end: u64,
    pub source: CfiSource,
    pub offset: u64,
}

/// An entry (at `offset` in `section`) that gimli could not read.
pub(super) fn entry_error(section: &'static str, offset: usize, source: gimli::Error) -> CfiError {
    CfiError::Entry {
        section,
        offset: offset as u64,
        source,
    }
}

/// Every readable FDE of a section with a non-empty range, in section order, and the entries
/// that could not be read. Entries are delimited here rather than by gimli's iterator, which
/// stops at the first bad entry (e.g. an aarch64 CIE with the `B` augmentation gimli rejects).
pub(super) fn scan<'d, S: UnwindSection<Slice<'d>>>(
    section: &S,
    data: &'d [u8],
    endian: RunTimeEndian,
    bases: &BaseAddresses,
    source: CfiSource,
) -> (Vec<FdeRange>, Vec<CfiError>) {
    let name = source.section();
    let (mut fdes, mut unreadable) = (Vec::new(), Vec::new());
    // The CIE of the FDE before: consecutive FDEs usually share one, parsed once.
    let mut last_cie: Option<CommonInformationEntry<Slice<'d>>> = None;
    let mut offset = 0;
    while offset < data.len() {
        let (length, id) = match entry_header(&data[offset..], endian, source) {
            Ok(header) => header,
            Err(e) => {
                unreadable.push(entry_error(name, offset, e));
                break;
            }
        };
        let Some(next) = length.and_then(|(len, header)| offset.checked_add(header)?.checked_add(len)) else {
            // A zero length ends `.eh_frame` (and is an empty entry in `.debug_frame`).
            if source == CfiSource::DebugFrame {
                offset += 4;
                continue;
            }
            break;
        };
        if next > data.len() {
            let eof = gimli::Error::UnexpectedEof(ReaderOffsetId(offset as u64));
            unreadable.push(entry_error(name, offset, eof));
            break;
        }
        let is_cie = match source {
            CfiSource::DebugFrame => id == Some(u64::from(u32::MAX)) || id == Some(u64::MAX),
            CfiSource::EhFrameHdr | CfiSource::EhFrame => id == Some(0),
        };
        if !is_cie {
            let fde = section
                .partial_fde_from_offset(bases, S::Offset::from(offset))
                .and_then(|partial| {
                    partial.parse(|section, bases, at| match &last_cie {
                        Some(cie) if cie.offset() == UnwindOffset::into(at) => Ok(cie.clone()),
                        _ => section.cie_from_offset(bases, at),
                    })
                });
            if let Ok(fde) = &fde {
                last_cie = Some(fde.cie().clone());
            }
            match fde {
                Ok(fde) if fde.len() > 0 => {
                    fdes.push(FdeRange {
                        start: fde.initial_address(),
                        end: fde.end_address(),
                        source,
                        offset: offset as u64,
                    });
                }
                Ok(_) => {}
                Err(e) => unreadable.push(entry_error(name, offset, e)),
            }
        }
        offset = next;
    }
    (fdes, unreadable)
}

/// An entry's `(length, size of the length field)` (`None` for length 0) and its CIE id / CIE
/// pointer field (`None` when the entry is too short to have one).
type EntryHeader = (Option<(usize, usize)>, Option<u64>);

fn entry_header(entry: &[u8], endian: RunTimeEndian, source: CfiSource) -> gimli::Result<EntryHeader> {
    let mut r = EndianSlice::new(entry, endian);
    let (length, header, wide) = match r.read_u32()? {
        0 => return Ok((None, None)),
        u32::MAX => (r.read_u64()?, 12, true),
        length => (u64::from(length), 4, false),
    };
    let length = usize::try_from(length).map_err(|_| gimli::Error::UnsupportedOffset)?;
    // `.eh_frame`'s CIE id / pointer is 4 bytes even in the 64-bit format.
    let id = if wide && source == CfiSource::DebugFrame {
        r.read_u64().ok()
    } else {
        r.read_u32().ok().map(u64::from)
    };
    Ok((Some((length, header)), id))
}
