//! Why an SFrame section (or one function's rows) was rejected. Every variant names the byte
//! offset inside the section where the problem sits, so a message can be checked against a hex
//! dump. Only the reasons live here: the checks themselves are made by the decoders.
//!
//! Offsets are never past the end of the section: when a header or descriptor field points
//! outside the data, the error names the field's own offset and carries the bad value.

/// A malformed or unsupported SFrame section.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// Fewer bytes than a structure needs, before the end of the section or of the region
    /// (FRE sub-section) it must stay inside.
    #[error("truncated {what}: need {need} bytes at offset {offset:#x}, have {have}")]
    Truncated {
        what: &'static str,
        offset: u64,
        need: u64,
        have: u64,
    },
    /// Neither 0xdee2 nor its byte-swapped twin.
    #[error("bad magic {found:#06x} at offset {offset:#x}: not an SFrame section")]
    BadMagic { offset: u64, found: u16 },
    #[error("unsupported SFrame version {version} at offset {offset:#x} (known: 1, 2, 3)")]
    UnsupportedVersion { offset: u64, version: u8 },
    #[error("unknown SFrame ABI/arch {abi} at offset {offset:#x} (known: 1 to 4)")]
    UnknownAbi { offset: u64, abi: u8 },
    /// A count or offset field (at `offset`) whose value reaches past `limit`.
    #[error("{what} {value:#x} in the field at offset {offset:#x} reaches past {limit:#x}")]
    OutOfBounds {
        what: &'static str,
        offset: u64,
        value: u64,
        limit: u64,
    },
    /// The header's FRE count differs from the sum of the functions' counts.
    #[error("header num_fres {header} at offset {offset:#x} differs from the functions' total {total}")]
    FreCountMismatch { offset: u64, header: u32, total: u64 },
    #[error("unknown FRE type {value} in the info byte at offset {offset:#x}")]
    UnknownFreType { offset: u64, value: u8 },
    #[error("unknown FDE type {value} in the info2 byte at offset {offset:#x}")]
    UnknownFdeType { offset: u64, value: u8 },
    /// fre_info bits 5-6 = 3 (data words of a size the format does not define).
    #[error("reserved data word size 3 in the fre_info byte at offset {offset:#x}")]
    ReservedWordSize { offset: u64 },
    /// Row starts must be strictly ascending inside a function.
    #[error("row at offset {offset:#x} starts at {start:#x}, not after the previous row's {previous:#x}")]
    RowsOutOfOrder { offset: u64, start: u32, previous: u32 },
    /// A DEFAULT row with more data words than the ABI assigns (CFA, RA, FP minus fixed ones).
    #[error("row at offset {offset:#x} has {count} data words; this ABI's DEFAULT rows have at most {max}")]
    TooManyWords { offset: u64, count: u8, max: u8 },
    #[error("invalid FLEX row at offset {offset:#x}: {reason}")]
    InvalidFlex { offset: u64, reason: &'static str },
    /// A register number that no DWARF register can have (negative, or above 65535).
    #[error("register number {value} out of range in the row at offset {offset:#x}")]
    BadRegister { offset: u64, value: i64 },
    /// A v2/v3 MASK function (at `offset`, its descriptor) whose repetition size is 0.
    #[error("MASK function descriptor at offset {offset:#x} has repetition size 0")]
    ZeroRepSize { offset: u64 },
}

impl Error {
    /// Byte offset inside the section where the problem was found (never past its end).
    pub fn offset(&self) -> u64 {
        match *self {
            Error::Truncated { offset, .. }
            | Error::BadMagic { offset, .. }
            | Error::UnsupportedVersion { offset, .. }
            | Error::UnknownAbi { offset, .. }
            | Error::OutOfBounds { offset, .. }
            | Error::FreCountMismatch { offset, .. }
            | Error::UnknownFreType { offset, .. }
            | Error::UnknownFdeType { offset, .. }
            | Error::ReservedWordSize { offset }
            | Error::RowsOutOfOrder { offset, .. }
            | Error::TooManyWords { offset, .. }
            | Error::InvalidFlex { offset, .. }
            | Error::BadRegister { offset, .. }
            | Error::ZeroRepSize { offset } => offset,
        }
    }
}
