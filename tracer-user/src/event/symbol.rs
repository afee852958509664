//! Where a uprobe goes: the file offset of a function (plus an offset into it) in a 64-bit ELF
//! executable or library, which is what the kernel's uprobes take. Symbols come from `.symtab`,
//! else `.dynsym`; the address becomes a file offset through the `PT_LOAD` segment holding it.
//! [`file_offset_in`] is pure (bytes in); [`file_offset`] reads the file.

use std::path::Path;

use object::{Endianness, Object as _, ObjectSegment as _, ObjectSymbol as _, SymbolKind, read::elf::ElfFile64};

/// Why a function cannot be probed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SymbolError {
    #[error("cannot read {path}: {error}")]
    Unreadable { path: String, error: String },
    #[error("not a 64-bit ELF file: {0}")]
    NotElf(String),
    #[error("no function named {0} in the file's symbol tables")]
    NotFound(String),
    #[error("offset {offset:#x} is past the end of {symbol} ({size:#x} bytes)")]
    PastEnd { symbol: String, offset: u64, size: u64 },
    #[error("{0} is in no loadable segment of the file")]
    NotLoaded(String),
}

/// The file offset of `symbol + offset` in the ELF file at `path`.
pub fn file_offset(path: &Path, symbol: &str, offset: u64) -> Result<u64, SymbolError> {
    let bytes = std::fs::read(path).map_err(|error| SymbolError::Unreadable {
        path: path.display().to_string(),
        error: error.to_string(),
    })?;
    file_offset_in(&bytes, symbol, offset)
}

/// The file offset of `symbol + offset` in the ELF file `bytes`.
pub fn file_offset_in(bytes: &[u8], symbol: &str, offset: u64) -> Result<u64, SymbolError> {
    let file = ElfFile64::<Endianness>::parse(bytes).map_err(|e| SymbolError::NotElf(e.to_string()))?;
    let found = file
        .symbols()
        .chain(file.dynamic_symbols())
        .find(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.name() == Ok(symbol))
        .ok_or_else(|| SymbolError::NotFound(symbol.to_owned()))?;
    if found.size() > 0 && offset >= found.size() {
        return Err(SymbolError::PastEnd {
            symbol: symbol.to_owned(),
            offset,
            size: found.size(),
        });
    }
    let address = found.address().wrapping_add(offset);
    file.segments()
        .find_map(|segment| {
            let (start, size) = segment.file_range();
            let within = address.checked_sub(segment.address())?;
            (within < size).then_some(start + within)
        })
        .ok_or_else(|| SymbolError::NotLoaded(symbol.to_owned()))
}
