//! Where compressed data sits in an ELF file: `SHF_COMPRESSED` sections (an `Elf_Chdr` before
//! the data), GNU `.zdebug_*` sections (`ZLIB` and a big-endian 64-bit size before the data) and
//! `.gnu_debugdata` (xz, no stated size); and [`vet_file`], which checks every one of them in a
//! file before a reader that does not bound its output (blazesym) is given the file.

use std::borrow::Cow;

use object::{
    CompressionFormat, Endianness, Object as _, ObjectSection as _, ReadRef,
    read::elf::{CompressionHeader as _, SectionHeader},
};

use super::{Codec, DecompressError, MAX_DECOMPRESSED, decompress, measure};

/// A section's contents as readers want them: `raw` (its bytes in `file`) when it is not
/// compressed, else decompressed (at most [`MAX_DECOMPRESSED`] bytes).
pub fn elf_section_data<'a, S: SectionHeader<Endian = Endianness>>(
    file: &'a [u8],
    endian: Endianness,
    sh: &S,
    raw: &'a [u8],
    name: &str,
) -> Result<Cow<'a, [u8]>, DecompressError> {
    let bad_header = || DecompressError::BadHeader {
        section: name.to_owned(),
    };
    if let Some((header, offset, size)) = sh.compression(endian, file).map_err(|_| bad_header())? {
        let ch_type = header.ch_type(endian).0;
        let codec = Codec::from_ch_type(ch_type).ok_or_else(|| DecompressError::UnknownMethod {
            section: name.to_owned(),
            ch_type,
        })?;
        let data = file.read_bytes_at(offset, size).map_err(|_| bad_header())?;
        let stated = header.ch_size(endian).into();
        return decompress(codec, data, Some(stated), MAX_DECOMPRESSED, name).map(Cow::Owned);
    }
    if name.starts_with(".zdebug_") {
        let (stated, data) = gnu_zdebug(raw).ok_or_else(bad_header)?;
        return decompress(Codec::Zlib, data, Some(stated), MAX_DECOMPRESSED, name).map(Cow::Owned);
    }
    Ok(Cow::Borrowed(raw))
}

/// The stated size and the zlib data of a GNU `.zdebug_*` section.
fn gnu_zdebug(raw: &[u8]) -> Option<(u64, &[u8])> {
    let rest = raw.strip_prefix(b"ZLIB")?;
    let size = u64::from_be_bytes(rest.get(..8)?.try_into().ok()?);
    Some((size, &rest[8..]))
}

/// A section's contents (read through the `object` crate) decompressed within bounds; the
/// same forms as [`elf_section_data`] (`object` recognises `.zdebug_*` for `.debug_*` names).
pub fn object_section_data<'a>(
    section: &object::Section<'a, '_>,
    name: &str,
) -> Result<Cow<'a, [u8]>, DecompressError> {
    let bad_header = || DecompressError::BadHeader {
        section: name.to_owned(),
    };
    let compressed = section.compressed_data().map_err(|_| bad_header())?;
    let codec = match compressed.format {
        CompressionFormat::None => return Ok(Cow::Borrowed(compressed.data)),
        CompressionFormat::Zlib => Codec::Zlib,
        CompressionFormat::Zstandard => Codec::Zstd,
        _ => return Err(bad_header()),
    };
    decompress(
        codec,
        compressed.data,
        Some(compressed.uncompressed_size),
        MAX_DECOMPRESSED,
        name,
    )
    .map(Cow::Owned)
}

/// The most all stated sizes of one file's compressed sections may add up to (a file of many
/// sections, each within [`MAX_DECOMPRESSED`], would otherwise cost unbounded time to vet).
pub const MAX_FILE_DECOMPRESSED: u64 = 2 << 30;

/// One compressed section of a file: its codec, stated size and where its data is.
struct Packed {
    name: String,
    codec: Codec,
    stated: Option<u64>,
    offset: u64,
    size: u64,
}

/// Check that every compressed section of the ELF file whose headers `headers` reads (and of
/// the MiniDebugInfo file inside it) decompresses to at most [`MAX_DECOMPRESSED`] bytes and
/// exactly what it states, and its MiniDebugInfo file (`.gnu_debugdata`) to at most
/// `debugdata_cap` bytes (at most [`super::MAX_GNU_DEBUGDATA`]). `read(offset, size)` gives a section's compressed bytes, one section
/// at a time (so that memory holds at most one; `None`: unreadable). Returns how many compressed
/// sections there are. A file that is not ELF passes (others refuse it).
pub fn vet_file<'a, R: ReadRef<'a>>(
    headers: R,
    read: &mut dyn FnMut(u64, u64) -> Option<Vec<u8>>,
    debugdata_cap: u64,
) -> Result<usize, DecompressError> {
    let debugdata_cap = debugdata_cap.min(super::MAX_GNU_DEBUGDATA);
    let packed = packed_sections(headers, true)?;
    let stated: u64 = packed
        .iter()
        .map(|p| p.stated.unwrap_or(0))
        .fold(0, u64::saturating_add);
    if stated > MAX_FILE_DECOMPRESSED {
        return Err(DecompressError::TooLarge {
            section: "(all compressed sections of the file)".into(),
            stated,
            cap: MAX_FILE_DECOMPRESSED,
        });
    }
    let mut count = packed.len();
    for p in &packed {
        let bytes = read(p.offset, p.size).ok_or_else(|| DecompressError::BadHeader {
            section: p.name.clone(),
        })?;
        count += check(p, &bytes, debugdata_cap)?;
    }
    Ok(count)
}

/// Decode `p` (its compressed bytes `bytes`) within bounds; a MiniDebugInfo file's own
/// compressed sections too (their count is returned); the MiniDebugInfo file itself to at most
/// `debugdata_cap` bytes.
fn check(p: &Packed, bytes: &[u8], debugdata_cap: u64) -> Result<usize, DecompressError> {
    if p.codec != Codec::Xz {
        measure(p.codec, bytes, p.stated, MAX_DECOMPRESSED, &p.name)?;
        return Ok(0);
    }
    let inner = decompress(p.codec, bytes, p.stated, debugdata_cap, &p.name)?;
    let packed = packed_sections(inner.as_slice(), false)?;
    for q in &packed {
        let range = usize::try_from(q.offset).ok().zip(usize::try_from(q.size).ok());
        let data = range
            .and_then(|(start, len)| inner.get(start..start.checked_add(len)?))
            .ok_or_else(|| DecompressError::BadHeader {
                section: q.name.clone(),
            })?;
        check(q, data, debugdata_cap)?;
    }
    Ok(packed.len())
}

/// The compressed sections of the ELF file `data` (`.gnu_debugdata` too when `outer`).
fn packed_sections<'a, R: ReadRef<'a>>(data: R, outer: bool) -> Result<Vec<Packed>, DecompressError> {
    let Ok(file) = object::File::parse(data) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for section in file.sections() {
        let name = String::from_utf8_lossy(section.name_bytes().unwrap_or_default()).into_owned();
        let Ok(range) = section.compressed_file_range() else {
            return Err(DecompressError::BadHeader { section: name });
        };
        let (stated, codec) = match range.format {
            CompressionFormat::None if name == ".gnu_debugdata" && outer => (None, Codec::Xz),
            CompressionFormat::None => continue,
            CompressionFormat::Zlib => (Some(range.uncompressed_size), Codec::Zlib),
            CompressionFormat::Zstandard => (Some(range.uncompressed_size), Codec::Zstd),
            _ => return Err(DecompressError::BadHeader { section: name }),
        };
        if range.compressed_size > MAX_DECOMPRESSED {
            return Err(DecompressError::TooLarge {
                section: name,
                stated: range.compressed_size,
                cap: MAX_DECOMPRESSED,
            });
        }
        out.push(Packed {
            name,
            codec,
            stated,
            offset: range.offset,
            size: range.compressed_size,
        });
    }
    Ok(out)
}
