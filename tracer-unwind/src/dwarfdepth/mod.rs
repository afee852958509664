//! How deep the inlined calls of an ELF file's DWARF nest, measured before the file is handed to
//! blazesym. blazesym parses the `DW_TAG_inlined_subroutine` entries of a function by recursing
//! once per level of nesting (`Function::parse_children` and `InlinedFunction::parse` in its
//! `dwarf/function.rs`): a file whose `.debug_info` nests them 20,000 deep (a few hundred
//! kilobytes) overflows the naming thread's stack and ends the whole session. So every file
//! whose DWARF may be read is scanned first, iteratively (gimli's raw entries cursor, nothing
//! kept but the depths of the open inlined entries): one nested deeper than
//! [`MAX_INLINE_DEPTH`], or whose DWARF cannot be read to its end, has its DWARF left unread and
//! is named from its symbol table only, the reason counted. Real programs nest inlined calls a
//! few dozen deep. Pure: bytes in, a verdict out; the time taken is linear in the size of
//! `.debug_info`.

use std::{borrow::Cow, collections::HashMap};

use gimli::{DebugAbbrev, DebugAbbrevOffset, DebugInfo, EndianSlice, RunTimeEndian};
use object::Object as _;

/// The most `DW_TAG_inlined_subroutine` entries one entry may sit inside; deeper DWARF is not
/// read (each level costs blazesym a few hundred bytes of stack, far more in a debug build).
pub const MAX_INLINE_DEPTH: usize = 256;

/// Why a file's DWARF is not read.
#[derive(Debug, thiserror::Error, Clone, Copy, PartialEq, Eq)]
pub enum DwarfRefusal {
    #[error("its DWARF nests inlined calls deeper than {MAX_INLINE_DEPTH}")]
    TooDeep,
    #[error("its DWARF could not be read to its end")]
    Malformed,
}

impl DwarfRefusal {
    /// The summary's name of the reason.
    pub fn name(self) -> &'static str {
        match self {
            DwarfRefusal::TooDeep => "dwarf_too_deep",
            DwarfRefusal::Malformed => "dwarf_malformed",
        }
    }
}

/// Check the DWARF of the ELF file `data` (module docs): `Ok` also when it has none or is not
/// ELF (others judge that), with the deepest inlined nesting found.
pub fn check_elf(data: &[u8]) -> Result<usize, DwarfRefusal> {
    let Ok(file) = object::File::parse(data) else {
        return Ok(0);
    };
    let Some(info) = section(&file, ".debug_info")? else {
        return Ok(0);
    };
    let abbrev = section(&file, ".debug_abbrev")?.unwrap_or_default();
    let endian = if file.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    inline_depth(&info, &abbrev, endian, MAX_INLINE_DEPTH)
}

/// The contents of the section `name` of `file`, decompressed within bounds; `None`: none.
fn section<'a>(file: &object::File<'a>, name: &str) -> Result<Option<Cow<'a, [u8]>>, DwarfRefusal> {
    match file.section_by_name(name) {
        None => Ok(None),
        Some(section) => crate::compressed::object_section_data(&section, name)
            .map(Some)
            .map_err(|_| DwarfRefusal::Malformed),
    }
}

/// The deepest nesting of `DW_TAG_inlined_subroutine` entries in `.debug_info` (with its
/// `.debug_abbrev`), if at most `limit`.
pub fn inline_depth(info: &[u8], abbrev: &[u8], endian: RunTimeEndian, limit: usize) -> Result<usize, DwarfRefusal> {
    let malformed = |_| DwarfRefusal::Malformed;
    let info = DebugInfo::from(EndianSlice::new(info, endian));
    let abbrev = DebugAbbrev::from(EndianSlice::new(abbrev, endian));
    // Units of one object share their abbreviations: parsed once per offset.
    let mut tables: HashMap<DebugAbbrevOffset, gimli::Abbreviations> = HashMap::new();
    let mut deepest = 0;
    // The depths of the inlined entries the cursor is inside, outermost first.
    let mut open: Vec<isize> = Vec::new();
    let mut units = info.units();
    while let Some(header) = units.next().map_err(malformed)? {
        let offset = header.debug_abbrev_offset();
        let abbreviations = match tables.entry(offset) {
            std::collections::hash_map::Entry::Occupied(known) => known.into_mut(),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(header.abbreviations(&abbrev).map_err(malformed)?)
            }
        };
        let mut entries = header.entries_raw(abbreviations, None).map_err(malformed)?;
        open.clear();
        while !entries.is_empty() {
            let depth = entries.next_depth();
            while open.last().is_some_and(|&d| d >= depth) {
                open.pop();
            }
            let Some(entry) = entries.read_abbreviation().map_err(malformed)? else {
                continue;
            };
            if entry.tag() == gimli::DW_TAG_inlined_subroutine {
                open.push(depth);
                if open.len() > limit {
                    return Err(DwarfRefusal::TooDeep);
                }
                deepest = deepest.max(open.len());
            }
            entries.skip_attributes(entry.attributes()).map_err(malformed)?;
        }
    }
    Ok(deepest)
}

#[cfg(test)]
mod tests;
