//! Building and installing an object's unwind table: read the file within bounds, flatten its
//! `.sframe` (gaps filled from its call-frame information) or its `.eh_frame`/`.debug_frame`
//! into a table (pure, on any thread), and put a built table into the kernel tables' layout.
//! Why an object gets no table is a typed reason the summary counts.

use std::fs::File;

use crate::table::{ObjectTable, TableSet, build_object};

/// Why an object has no table (counted in the summary).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NoTable {
    /// Neither `.sframe` nor call-frame information (frame pointers are the fallback).
    NoUnwindInfo,
    /// The file could not be read or parsed; the message says why.
    Unreadable(String),
    /// The parts of the file the table is built from are over the per-object limit
    /// ([`crate::objfile::MAX_OBJECT_READ`]); the message says how large.
    TooLarge(String),
    /// The table maps have no room left (`--max-table-memory`, or the shared rule table); the
    /// message says which part is full.
    NoRoom(String),
}

/// Where an object's table came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TableSource {
    /// `.sframe` (gaps in it filled from the call-frame information).
    Sframe,
    /// `.eh_frame`, or `.debug_frame` when there is no `.eh_frame`.
    Cfi,
}

/// An object's table in the kernel maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Table {
    /// Its id in the kernel tables (`PageKey::object`).
    pub id: u32,
    pub source: TableSource,
    /// Rows of its sources (SFrame FREs and CFI rows) flattened for it.
    pub rows: u64,
}

/// An object's table, built but not yet in the kernel tables.
#[derive(Debug)]
pub struct Prebuilt {
    table: ObjectTable,
    source: TableSource,
    rows: u64,
}

/// Read (within bounds, see [`crate::objfile`]) and build the table of the object `file`, shown
/// as `path` in messages (pure; any thread).
pub fn prebuild(file: &File, path: &std::path::Path) -> Result<Prebuilt, NoTable> {
    let image = crate::objfile::read_object(file).map_err(|e| match e {
        crate::objfile::ObjectFileError::TooLarge { .. } => NoTable::TooLarge(format!("{}: {e}", path.display())),
        e => NoTable::Unreadable(format!("{}: {e}", path.display())),
    })?;
    prebuild_bytes(path, &image)
}

pub(super) fn prebuild_bytes(path: &std::path::Path, bytes: &[u8]) -> Result<Prebuilt, NoTable> {
    let (table, built) = build_object(bytes)
        .map_err(|e| NoTable::Unreadable(format!("{}: {e}", path.display())))?
        .ok_or(NoTable::NoUnwindInfo)?;
    let source = if built.sframe {
        TableSource::Sframe
    } else {
        TableSource::Cfi
    };
    let rows = table.stats().sframe_rows;
    Ok(Prebuilt { table, source, rows })
}

/// Put `prebuilt` into `tables`: its id and where it came from, or no room.
pub(super) fn install(tables: &mut TableSet, prebuilt: &Prebuilt) -> Result<Table, NoTable> {
    let id = tables
        .add(&prebuilt.table)
        .map_err(|e| NoTable::NoRoom(e.to_string()))?;
    Ok(Table {
        id,
        source: prebuilt.source,
        rows: prebuilt.rows,
    })
}

/// Messages of objects without a table a session keeps at most (see [`TableCounts::notes`]).
const MAX_NOTES: usize = 1000;

/// The tables of the objects a session met, counted: by source, their rows, and why objects
/// have none. The catalog folds an object in when it forgets it (its slot then holds another
/// object), so that a session of any length keeps a few counters rather than every object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableCounts {
    pub sframe: u64,
    pub cfi: u64,
    /// Rows the tables were built from.
    pub rows: u64,
    /// Objects without a table, by why.
    pub without: std::collections::BTreeMap<NoTableKind, u64>,
    /// Why objects have no table, one message each (those with one: unreadable, too large, no
    /// room), the first [`MAX_NOTES`]; `notes_left_out` counts the others.
    pub notes: Vec<String>,
    pub notes_left_out: u64,
}

/// [`NoTable`] without its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NoTableKind {
    NoUnwindInfo,
    Unreadable,
    TooLarge,
    NoRoom,
}

impl NoTable {
    pub fn kind(&self) -> NoTableKind {
        match self {
            NoTable::NoUnwindInfo => NoTableKind::NoUnwindInfo,
            NoTable::Unreadable(_) => NoTableKind::Unreadable,
            NoTable::TooLarge(_) => NoTableKind::TooLarge,
            NoTable::NoRoom(_) => NoTableKind::NoRoom,
        }
    }
}

impl TableCounts {
    /// Count one more object, whose table is `table`.
    pub fn add(&mut self, table: &Result<Table, NoTable>) {
        match table {
            Ok(table) => {
                match table.source {
                    TableSource::Sframe => self.sframe += 1,
                    TableSource::Cfi => self.cfi += 1,
                }
                self.rows += table.rows;
            }
            Err(why) => {
                *self.without.entry(why.kind()).or_default() += 1;
                if let NoTable::Unreadable(note) | NoTable::TooLarge(note) | NoTable::NoRoom(note) = why {
                    if self.notes.len() < MAX_NOTES {
                        self.notes.push(note.clone());
                    } else {
                        self.notes_left_out += 1;
                    }
                }
            }
        }
    }
}
