//! Whether blazesym may read a symbol file's DWARF: its inlined calls must nest no deeper than
//! blazesym's recursion can take ([`tracer_unwind::dwarfdepth`]). Asked once per file (by device and
//! inode); a file refused is named from its symbol table only, and counted by reason
//! (`symbols.symbol_table_only_by_reason` in the summary).

use std::{fs::File, path::Path};

use tracer_unwind::dwarfdepth::{self, DwarfRefusal};

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

/// A file mapped read-only (pages are read as the scan reaches them and are the page cache's,
/// not the tracer's heap).
struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Mapped {
    fn of(file: &File, len: u64) -> Option<Mapped> {
        let len = usize::try_from(len).ok().filter(|&len| len > 0)?;
        // SAFETY: a fresh private read-only mapping of a file this process holds open; no
        // existing memory is affected. The file cannot shrink under it (only root can change
        // it, or it is a sealed copy: see `super::mappable`), so reading it cannot fault.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                std::os::fd::AsRawFd::as_raw_fd(file),
                0,
            )
        };
        (ptr != libc::MAP_FAILED).then_some(Mapped { ptr, len })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes for as long as `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are the mapping made in `Mapped::of`, unmapped once.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}
