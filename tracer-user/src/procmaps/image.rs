//! What the ELF file behind one executable mapping says about it: the load bias that turns a
//! runtime pc into the file's own virtual address, and the GNU build-id. Pure over any
//! [`ReadRef`]: a byte slice in tests, a lazily read file (`object::ReadCache`) in `read`, so
//! only the ELF header, program headers and notes are ever read. It never opens files.
//!
//! Bias, for a mapping of `[start, end)` at file offset `off` produced by loading the
//! executable `PT_LOAD` segment `s` (the kernel maps `s` at `bias + p_vaddr` rounded down to a
//! page, from `p_offset` rounded down the same way, since `p_vaddr ≡ p_offset` modulo the page):
//!
//! `bias = start - (p_vaddr + (off - p_offset))`, so `object-relative address = pc - bias`.
//!
//! Both subtractions wrap on purpose: a PIE or shared object linked at 0 gives
//! `bias = start - small`, but a non-PIE executable loaded at its link address gives `bias = 0`,
//! and with linkers that pack segments (lld) `off` is page-rounded below `p_offset`, making
//! `off - p_offset` "negative"; the modular result is still the right one.

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};
use object::{Endianness, FileKind, ReadRef};

/// Bias and identity of the ELF file behind one mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElfFacts {
    /// `object-relative address = runtime pc - bias` (module docs).
    pub bias: u64,
    /// The `NT_GNU_BUILD_ID` note's descriptor; `None` when absent or empty.
    pub build_id: Option<Box<[u8]>>,
}

/// Why the ELF behind a mapping could not be used.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImageError {
    #[error("not an ELF file")]
    NotElf,
    #[error("malformed ELF {what}: {source}")]
    Malformed {
        what: &'static str,
        source: object::read::Error,
    },
    #[error("no PT_LOAD segment covers file offsets {file_offset:#x}..{end:#x} of the mapping")]
    NoSegment { file_offset: u64, end: u64 },
}

fn malformed(what: &'static str) -> impl FnOnce(object::read::Error) -> ImageError {
    move |source| ImageError::Malformed { what, source }
}

/// Bias and build-id for the mapping `[start, end)` of the ELF file `data` at `file_offset`.
pub fn inspect<'data, R: ReadRef<'data>>(
    data: R,
    start: u64,
    end: u64,
    file_offset: u64,
) -> Result<ElfFacts, ImageError> {
    let file_range = file_offset..file_offset.saturating_add(end.saturating_sub(start));
    match FileKind::parse(data) {
        Ok(FileKind::Elf32) => inspect_in::<elf::FileHeader32<Endianness>, R>(data, start, file_range),
        Ok(FileKind::Elf64) => inspect_in::<elf::FileHeader64<Endianness>, R>(data, start, file_range),
        _ => Err(ImageError::NotElf),
    }
}

fn inspect_in<'data, Elf: FileHeader<Endian = Endianness>, R: ReadRef<'data>>(
    data: R,
    start: u64,
    file_range: std::ops::Range<u64>,
) -> Result<ElfFacts, ImageError> {
    let header = Elf::parse(data).map_err(malformed("file header"))?;
    let endian = header.endian().map_err(malformed("file header"))?;
    let segments = header
        .program_headers(endian, data)
        .map_err(malformed("program headers"))?;
    let off = file_range.start;
    // Prefer the executable segment holding `off`, then any executable segment overlapping the
    // mapping (packed segments, see module docs), then any segment overlapping it (old binaries
    // under READ_IMPLIES_EXEC map every readable segment executable).
    let segment = segments
        .iter()
        .filter(|ph| ph.p_type(endian) == elf::PT_LOAD)
        .filter_map(|ph| {
            let (p_offset, p_filesz): (u64, u64) = (ph.p_offset(endian).into(), ph.p_filesz(endian).into());
            let seg_end = p_offset.saturating_add(p_filesz);
            let overlaps = p_offset < file_range.end && file_range.start < seg_end;
            let holds_off = p_offset <= off && off < seg_end;
            let exec = ph.p_flags(endian).0 & elf::PF_X.0 != 0;
            overlaps.then_some(((!exec, !holds_off), ph))
        })
        .min_by_key(|(rank, _)| *rank)
        .map(|(_, ph)| ph)
        .ok_or(ImageError::NoSegment {
            file_offset: file_range.start,
            end: file_range.end,
        })?;
    let p_vaddr: u64 = segment.p_vaddr(endian).into();
    let p_offset: u64 = segment.p_offset(endian).into();
    let bias = start.wrapping_sub(p_vaddr.wrapping_add(off.wrapping_sub(p_offset)));
    Ok(ElfFacts {
        bias,
        build_id: build_id(segments, endian, data)?,
    })
}

/// The first `NT_GNU_BUILD_ID` note of the `PT_NOTE` segments. Linked files always load
/// `.note.gnu.build-id` through a `PT_NOTE`, also when stripped of section headers.
fn build_id<'data, P: ProgramHeader<Endian = Endianness>, R: ReadRef<'data>>(
    segments: &[P],
    endian: Endianness,
    data: R,
) -> Result<Option<Box<[u8]>>, ImageError> {
    for segment in segments {
        let Some(mut notes) = segment.notes(endian, data).map_err(malformed("PT_NOTE segment"))? else {
            continue;
        };
        while let Some(note) = notes.next().map_err(malformed("note"))? {
            if note.name() == elf::ELF_NOTE_GNU
                && note.n_type(endian) == elf::NT_GNU_BUILD_ID
                && !note.desc().is_empty()
            {
                return Ok(Some(note.desc().into()));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests;
