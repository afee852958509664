//! Go code named from its binary's `.gopclntab` (`tracer_unwind::gopclntab`): the table Go's runtime
//! names its own code with, kept in a binary stripped of symbols and DWARF. Every address a Go
//! object's table covers is named from it, stripped or not, so that the two builds of one
//! program name the same functions (its names are the runtime's: `main.work`,
//! `runtime.goexit`); addresses outside it (cgo's C code) are left to the ELF symbols and DWARF.
//! Functions the compiler inlined are named too, from the binary's inline trees, as Go's runtime
//! names them (`tracer_unwind::gopclntab::Call`). The table and the trees are read from the mapped file
//! on demand (`pread`, never mapped: a file truncated by its owner gives short reads, no
//! fault), within the reader's bounds.

use std::{fs::File, ops::Range, os::unix::fs::FileExt as _};

use object::ReadCache;

use super::named::Named;
use tracer_unwind::gopclntab::{Bytes, Loaded, Part, Section, Table, Version};

/// The `.gopclntab` of one object, ready to name its addresses.
#[derive(Debug)]
pub struct GoText {
    file: File,
    offset: u64,
    table: Table,
    /// The addresses its functions cover.
    text: Range<u64>,
    /// `.rodata` and `go:func.*`'s address in it, where the inline trees are (`None`: not
    /// found, no inlined frames).
    trees: Option<(Part, u64)>,
}

/// A section of a file read with `pread`, never past the section's end.
struct FileBytes<'a> {
    file: &'a File,
    offset: u64,
    size: u64,
}

impl Bytes for FileBytes<'_> {
    fn read_at(&self, at: u64, buf: &mut [u8]) -> bool {
        let fits = at.checked_add(buf.len() as u64).is_some_and(|end| end <= self.size);
        fits && self
            .offset
            .checked_add(at)
            .is_some_and(|at| self.file.read_exact_at(buf, at).is_ok())
    }
}

impl GoText {
    /// The table of the object file `file`, `None` when it has none or it cannot be read (a
    /// descriptor of its own is kept: the table is read as addresses are named); with the
    /// functions inlined at each address if `inline`.
    pub fn of_file(file: &File, inline: bool) -> Option<GoText> {
        let len = file.metadata().ok()?.len();
        let section = Section::find(&ReadCache::new(crate::sys::objfile::Pread::new(file, len)))?;
        let file = file.try_clone().ok()?;
        let bytes = FileBytes {
            file: &file,
            offset: section.offset,
            size: section.size.min(len.saturating_sub(section.offset)),
        };
        let mut table = match Table::parse(&bytes, bytes.size) {
            Ok(table) => table,
            Err(err) => {
                log::debug!("gopclntab unread: {err}");
                return None;
            }
        };
        if table.version != Version::Go116 {
            table.relocate(section.text_start(table.text_start())?);
        }
        let text = table.text(&bytes)?;
        let whole = FileBytes {
            file: &file,
            offset: 0,
            size: len,
        };
        let trees = if inline { section.trees(&whole, &table) } else { None };
        if inline && trees.is_none() {
            log::debug!("go:func.* not found: Go code named without its inlined functions");
        }
        let offset = section.offset;
        Some(GoText {
            file,
            offset,
            table,
            text,
            trees,
        })
    }

    /// The functions at object-relative address `offset`, innermost first (those inlined
    /// there, then the function holding them), `None` outside the table's code.
    pub fn name(&self, offset: u64) -> Option<Vec<Named>> {
        if !self.text.contains(&offset) {
            return None;
        }
        // A file truncated since gives short reads: no name.
        let bytes = FileBytes {
            file: &self.file,
            offset: self.offset,
            size: self.table.size(),
        };
        let whole = FileBytes {
            file: &self.file,
            offset: 0,
            size: u64::MAX,
        };
        let image = self.trees.map(|(part, _)| Loaded { file: &whole, part });
        let gofunc = self.trees.map(|(_, gofunc)| gofunc);
        // An address in the table's code but in no function of it (padding) keeps no name.
        let found = match &image {
            Some(image) => self.table.calls(&bytes, image, gofunc, offset),
            None => self.table.calls(&bytes, &[][..], None, offset),
        };
        Some(found.map_or_else(
            || vec![Named::default()],
            |calls| {
                calls
                    .into_iter()
                    .map(|call| Named {
                        symbol: Some(call.function),
                        file: call.file,
                        line: call.line,
                        inlined: call.inlined,
                    })
                    .collect()
            },
        ))
    }
}
