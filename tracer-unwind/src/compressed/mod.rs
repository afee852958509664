//! Compressed ELF sections, decompressed within bounds. Debug files and Go binaries carry
//! `SHF_COMPRESSED` sections (an `Elf_Chdr` then zlib or zstd data), old toolchains wrote GNU
//! `.zdebug_*` sections (`ZLIB`, a big-endian size, zlib data), and Fedora-style stripped binaries
//! carry MiniDebugInfo: `.gnu_debugdata`, an xz-compressed ELF file with a symbol table.
//!
//! Every such section may come from someone hostile: a few kilobytes can claim, or really
//! expand to, gigabytes. So the stated size is checked against [`MAX_DECOMPRESSED`] before any
//! work, output is produced only up to that size (one byte more is the proof of a lie), and a
//! section whose data ends short of, or runs past, its stated size is refused. Pure: bytes in,
//! bytes or a [`DecompressError`] out.

mod sections;

pub use sections::{elf_section_data, object_section_data, vet_file};

use std::io::{self, Read, Write};

/// The most bytes one section may decompress to. The largest debug sections in use (a web
/// browser's `.debug_info`) reach a few hundred MiB; unwind and symbol tables are far smaller.
pub const MAX_DECOMPRESSED: u64 = 512 << 20;
/// The most a MiniDebugInfo file (`.gnu_debugdata`, which states no size) may decompress to:
/// real ones hold a symbol table of a few MiB; xz of zeros reaches [`MAX_DECOMPRESSED`] from
/// 156 KB. The tracer bounds it lower still by `--max-symbol-memory` (see `symfiles`), as
/// blazesym keeps what it reads from it.
pub const MAX_GNU_DEBUGDATA: u64 = 32 << 20;

/// The compression methods found in ELF files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// zlib (`ELFCOMPRESS_ZLIB`, `.zdebug_*`).
    Zlib,
    /// Zstandard (`ELFCOMPRESS_ZSTD`).
    Zstd,
    /// xz (`.gnu_debugdata`).
    Xz,
}

impl Codec {
    /// The codec of an `Elf_Chdr`'s `ch_type`, if known.
    pub fn from_ch_type(ch_type: u32) -> Option<Codec> {
        match ch_type {
            t if t == object::elf::ELFCOMPRESS_ZLIB.0 => Some(Codec::Zlib),
            t if t == object::elf::ELFCOMPRESS_ZSTD.0 => Some(Codec::Zstd),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Codec::Zlib => "zlib",
            Codec::Zstd => "zstd",
            Codec::Xz => "xz",
        }
    }
}

/// Why a compressed section was not decompressed. Each names the section.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecompressError {
    #[error("section {section} is compressed with unknown method {ch_type} (only zlib and zstd are read)")]
    UnknownMethod { section: String, ch_type: u32 },
    #[error(
        "section {section} has a malformed compression header, or one of an unknown method (only zlib and zstd are read)"
    )]
    BadHeader { section: String },
    #[error("section {section} would decompress to more than {cap} bytes (states {stated}): refused")]
    TooLarge { section: String, stated: u64, cap: u64 },
    #[error("section {section} decompresses to more than {cap} bytes: refused")]
    Unbounded { section: String, cap: u64 },
    #[error("section {section} decompresses to more than the {stated} bytes it states: refused")]
    LongerThanStated { section: String, stated: u64 },
    #[error("section {section} decompresses to {actual} bytes, not the {stated} it states")]
    ShorterThanStated { section: String, stated: u64, actual: u64 },
    #[error("section {section}: corrupt {codec} data ({detail})")]
    Corrupt {
        section: String,
        codec: &'static str,
        detail: String,
    },
}

/// Decompress `data` (a whole stream of `codec`) that states it is `stated` bytes long
/// (`None`: not stated, as in `.gnu_debugdata`), producing at most `cap` bytes.
pub fn decompress(
    codec: Codec,
    data: &[u8],
    stated: Option<u64>,
    cap: u64,
    section: &str,
) -> Result<Vec<u8>, DecompressError> {
    // Not more than 64 MiB ahead of the data: a stated size is only a claim.
    let mut out = Vec::with_capacity(stated.unwrap_or(0).min(cap).min(64 << 20) as usize);
    pump(codec, data, stated, cap, section, &mut out)?;
    Ok(out)
}

/// How many bytes `data` decompresses to, checked as [`decompress`] checks it, without keeping
/// them (memory stays small whatever the size).
pub fn measure(
    codec: Codec,
    data: &[u8],
    stated: Option<u64>,
    cap: u64,
    section: &str,
) -> Result<u64, DecompressError> {
    pump(codec, data, stated, cap, section, &mut io::sink())
}

/// Decode into `out`, at most `limit + 1` bytes (`limit`: the stated size, or `cap`).
fn pump(
    codec: Codec,
    data: &[u8],
    stated: Option<u64>,
    cap: u64,
    section: &str,
    out: &mut dyn Write,
) -> Result<u64, DecompressError> {
    let too_large = |stated| DecompressError::TooLarge {
        section: section.to_owned(),
        stated,
        cap,
    };
    if let Some(stated) = stated
        && stated > cap
    {
        return Err(too_large(stated));
    }
    let limit = stated.unwrap_or(cap);
    let corrupt = |error: io::Error| DecompressError::Corrupt {
        section: section.to_owned(),
        codec: codec.name(),
        detail: error.to_string(),
    };
    let reader: Box<dyn Read + '_> = match codec {
        Codec::Zlib => Box::new(flate2::bufread::ZlibDecoder::new(data)),
        Codec::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(data).map_err(corrupt)?),
        Codec::Xz => Box::new(xz2::bufread::XzDecoder::new(data)),
    };
    let actual = io::copy(&mut reader.take(limit + 1), out).map_err(corrupt)?;
    match stated {
        _ if actual <= limit && stated.is_none_or(|s| s == actual) => Ok(actual),
        Some(stated) if actual > stated => Err(DecompressError::LongerThanStated {
            section: section.to_owned(),
            stated,
        }),
        Some(stated) => Err(DecompressError::ShorterThanStated {
            section: section.to_owned(),
            stated,
            actual,
        }),
        None => Err(DecompressError::Unbounded {
            section: section.to_owned(),
            cap,
        }),
    }
}

#[cfg(test)]
mod tests;
