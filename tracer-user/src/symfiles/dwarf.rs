//! Whether blazesym may read a symbol file's DWARF: its inlined calls must nest no deeper than
//! blazesym's recursion can take ([`tracer_unwind::dwarfdepth`]). Asked once per file (by device and
//! inode); a file refused is named from its symbol table only, and counted by reason
//! (`symbols.symbol_table_only_by_reason` in the summary).

use std::path::Path;

use tracer_unwind::dwarfdepth::{self, DwarfRefusal};

use crate::sys::memory::Mapped;

/// Whether the DWARF of the file at `path` may be read (see the module docs). `path` is one
/// [`super::symbol_file`] chose: a file only root can change, or a sealed copy.
pub fn dwarf_usable(path: &Path) -> bool {
    let Some((file, key, len)) = super::open(path) else {
        return false;
    };
    if let Some(known) = super::with_state(|state| state.dwarf.get(&key).copied()) {
        return known;
    }
    let verdict = match Mapped::of(&file, len) {
        Some(mapped) => dwarfdepth::check_elf(mapped.bytes()).map(drop),
        None if len == 0 => Ok(()),
        None => Err(DwarfRefusal::Malformed),
    };
    if let Err(why) = verdict {
        log::debug!("{}: {why}: named from its symbol table", path.display());
    }
    super::with_state(|state| {
        if let Err(why) = verdict {
            *state.figures.symbol_table_only_by_reason.entry(why.name()).or_default() += 1;
        }
        state.dwarf.insert(key, verdict.is_ok());
    });
    verdict.is_ok()
}
