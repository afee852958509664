//! What a session's tables came to, counted over every object met (those forgotten
//! included), so that the summary needs no state per object.

use super::{NoTable, Table, TableSource};

/// Messages of objects without a table a session keeps at most (see [`TableCounts::notes`]).
const MAX_NOTES: usize = 1000;

/// The tables of the objects a session met, counted: by source, their rows, and why objects
/// have none. The catalog folds an object in when it forgets it (its slot then holds another
/// object), so that a session of any length keeps a few counters rather than every object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableCounts {
    pub sframe: u64,
    pub cfi: u64,
    /// Tables of leaf functions proven from aarch64 code without unwind information.
    pub leaves: u64,
    /// Tables of Go code from its `.gopclntab` (with or without call-frame information).
    pub gopclntab: u64,
    /// Rows the tables were built from.
    pub rows: u64,
    /// Objects without a table, by why.
    pub without: std::collections::BTreeMap<NoTableKind, u64>,
    /// Why objects have no table, one message each (those with one: unreadable, too large, no
    /// room), the first [`MAX_NOTES`] distinct ones; `notes_left_out` counts the others.
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
    OverShare,
}

impl NoTable {
    pub fn kind(&self) -> NoTableKind {
        match self {
            NoTable::NoUnwindInfo => NoTableKind::NoUnwindInfo,
            NoTable::Unreadable(_) => NoTableKind::Unreadable,
            NoTable::TooLarge(_) => NoTableKind::TooLarge,
            NoTable::NoRoom(_) => NoTableKind::NoRoom,
            NoTable::OverShare(_) => NoTableKind::OverShare,
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
                    TableSource::Leaves => self.leaves += 1,
                    TableSource::Gopclntab => self.gopclntab += 1,
                }
                self.rows += table.rows;
            }
            Err(why) => {
                *self.without.entry(why.kind()).or_default() += 1;
                if let NoTable::Unreadable(note)
                | NoTable::TooLarge(note)
                | NoTable::NoRoom(note)
                | NoTable::OverShare(note) = why
                {
                    // An object met again (a file loaded, unloaded and loaded later) says it
                    // once.
                    if self.notes.contains(note) {
                        return;
                    }
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
