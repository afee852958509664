//! [`TableLoader`]: building, installing and unloading objects' unwind tables. Building reads
//! the file within bounds and flattens its `.sframe` (gaps filled from its call-frame
//! information) or its `.eh_frame`/`.debug_frame` into a table (pure, on any thread: tables
//! built ahead wait in the loader's cache until a process maps their file); installing puts a
//! built table into the kernel tables ([`TableStore`]: the [`TableSet`] the kernel maps are
//! kept in step with, or a fake in tests), whose room is the budget. [`TableLoader::install`]
//! and [`TableLoader::unload`] are the only places a table becomes loaded or unloaded.
//! Why an object gets no table is a typed reason the summary counts.

use std::{
    collections::HashMap,
    fs::File,
    path::Path,
    time::{Duration, Instant},
};

use crate::procmaps::ObjectKey;

use crate::tables::{AddError, TableSet};
use tracer_unwind::table::{ObjectTable, build_object};

/// Where installed tables go: the kernel's tables, as far as loading objects changes them.
pub trait TableStore {
    /// Add `table` as a new object and return its id; all or nothing (on error, unchanged).
    fn add(&mut self, table: &ObjectTable) -> Result<u32, AddError>;
    /// Remove object `id`; `false` when it is not loaded.
    fn remove(&mut self, id: u32) -> bool;
    /// Table `table`, of object `owner`, is the one of the file `key` (open as `file`): the
    /// kernel may use it for that file's code in processes not read yet.
    fn bind_file(&mut self, _table: u32, _owner: usize, _key: &ObjectKey, _file: &File) {}
    /// Rows the row space can hold at most (`None`: unbounded).
    fn row_room(&self) -> Option<u64> {
        None
    }
    /// Rows of the row space the loaded table `id` takes (0 when not loaded).
    fn rows_of(&self, _id: u32) -> u64 {
        0
    }
    /// Tables loaded, and the rows they take.
    fn loaded(&self) -> (u64, u64) {
        (0, 0)
    }
}

impl TableStore for TableSet {
    fn add(&mut self, table: &ObjectTable) -> Result<u32, AddError> {
        TableSet::add(self, table)
    }

    fn remove(&mut self, id: u32) -> bool {
        TableSet::remove(self, id)
    }

    fn bind_file(&mut self, table: u32, owner: usize, key: &ObjectKey, file: &File) {
        crate::tables::files::bind(self, table, owner, key, file);
    }

    fn row_room(&self) -> Option<u64> {
        self.capacity()
            .map(|c| (c.row_chunks as u64).saturating_mul(tracer_common::trace::ROW_CHUNK as u64))
    }

    fn rows_of(&self, id: u32) -> u64 {
        self.object_rows(id)
    }

    fn loaded(&self) -> (u64, u64) {
        (u64::from(self.num_objects()), self.live_rows() as u64)
    }
}

/// Builds tables, installs them into `T` and unloads them; keeps the tables built ahead.
#[derive(Debug, Default)]
pub struct TableLoader<T = TableSet> {
    /// The kernel's tables (their room is the budget).
    pub tables: T,
    /// Tables built ahead, by the identity of the file they were read from, waiting to be
    /// installed (with when they were built).
    prebuilt: HashMap<ObjectKey, (Instant, Result<Prebuilt, NoTable>)>,
}

impl<T: TableStore> TableLoader<T> {
    /// A loader installing into `tables`.
    pub fn new(tables: T) -> TableLoader<T> {
        TableLoader {
            tables,
            prebuilt: HashMap::new(),
        }
    }

    /// The table of the object `key` (read from `file`, shown as `path`): built ahead (see
    /// [`TableLoader::add_prebuilt`]) or now, then installed.
    pub fn load(&mut self, key: &ObjectKey, file: &File, path: &Path) -> Result<Table, NoTable> {
        let prebuilt = match self.prebuilt.remove(key) {
            Some((_, prebuilt)) => prebuilt,
            None => prebuild(file, path),
        };
        self.install(Some(key), prebuilt?)
    }

    /// The table of the object `key` (read from `file`, shown as `path`), built ahead or now,
    /// not installed yet (see [`TableLoader::install_ref`]).
    pub fn prepare(&mut self, key: &ObjectKey, file: &File, path: &Path) -> Result<Prebuilt, NoTable> {
        match self.prebuilt.remove(key) {
            Some((_, prebuilt)) => prebuilt,
            None => prebuild(file, path),
        }
    }

    /// [`TableLoader::install`] keeping `prebuilt` (to try again once room is made). The one
    /// place a table becomes loaded.
    pub fn install_ref(&mut self, prebuilt: &Prebuilt) -> Result<Table, NoTable> {
        let id = self
            .tables
            .add(&prebuilt.table)
            .map_err(|e| NoTable::NoRoom(format!("{}: {e}", prebuilt.shown)))?;
        Ok(Table {
            id,
            source: prebuilt.source,
            rows: prebuilt.rows,
        })
    }

    /// The table of an object without a file, built from its `image` and installed.
    pub fn load_image(&mut self, image: &[u8], path: &Path) -> Result<Table, NoTable> {
        self.install(None, prebuild_bytes(path, image)?)
    }

    /// Tables built ahead and not taken yet.
    pub fn prebuilt_len(&self) -> usize {
        self.prebuilt.len()
    }

    /// Put `prebuilt`, the table of the file `key` (`None`: no file), into the kernel tables:
    /// its id and where it came from, or no room (then nothing of it is installed).
    pub fn install(&mut self, _key: Option<&ObjectKey>, prebuilt: Prebuilt) -> Result<Table, NoTable> {
        self.install_ref(&prebuilt)
    }

    /// Take `table`, that of the file `key` (`None`: no file), out of the kernel tables. The
    /// one place a table becomes unloaded.
    pub fn unload(&mut self, _key: Option<&ObjectKey>, table: &Table) {
        self.tables.remove(table.id);
    }

    /// Whether a table built ahead waits for the object `key`.
    pub fn is_prebuilt(&self, key: &ObjectKey) -> bool {
        self.prebuilt.contains_key(key)
    }

    /// A table built ahead for the object `key`, installed when a process maps it.
    pub fn add_prebuilt(&mut self, key: ObjectKey, prebuilt: Result<Prebuilt, NoTable>) {
        self.prebuilt.insert(key, (Instant::now(), prebuilt));
    }

    /// Drop the tables built ahead more than `after` ago that no process took (it was gone
    /// before it was loaded).
    pub fn expire_prebuilt(&mut self, after: Duration) {
        self.prebuilt.retain(|_, (built, _)| built.elapsed() < after);
    }
}

/// Why an object has no table (counted in the summary).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NoTable {
    /// Neither `.sframe` nor call-frame information (frame pointers are the fallback).
    NoUnwindInfo,
    /// The file could not be read or parsed; the message says why.
    Unreadable(String),
    /// The parts of the file the table is built from are over the per-object limit
    /// ([`tracer_unwind::objfile::MAX_OBJECT_READ`]); the message says how large.
    TooLarge(String),
    /// The table maps have no room left (`--max-table-memory`, or the shared rule table); the
    /// message says which part is full.
    NoRoom(String),
    /// The process that mapped it would hold more than its share of the table maps' rows
    /// (`registry::share`); the message says how many.
    OverShare(String),
}

/// Where an object's table came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TableSource {
    /// `.sframe` (gaps in it filled from the call-frame information).
    Sframe,
    /// `.eh_frame`, or `.debug_frame` when there is no `.eh_frame`.
    Cfi,
    /// Neither: the leaf functions of aarch64 code, proven from the code (`table::leaf`).
    Leaves,
    /// Go code's stack-pointer deltas from its `.gopclntab` (`table::gopcsp`), before any
    /// other source.
    Gopclntab,
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
    /// The object as messages show it.
    shown: String,
}

impl Prebuilt {
    /// Rows it takes in the row space once installed.
    pub fn space_rows(&self) -> u64 {
        self.table.pages().iter().map(|(_, rows)| rows.len() as u64).sum()
    }

    /// The object as messages show it.
    pub fn shown(&self) -> &str {
        &self.shown
    }
}

/// Read (within bounds, see [`crate::sys::objfile`]) and build the table of the object `file`, shown
/// as `path` in messages (pure; any thread).
pub fn prebuild(file: &File, path: &Path) -> Result<Prebuilt, NoTable> {
    let image = crate::sys::objfile::read_object(file).map_err(|e| match e {
        tracer_unwind::objfile::ObjectFileError::TooLarge { .. } => {
            NoTable::TooLarge(format!("{}: {e}", path.display()))
        }
        e => NoTable::Unreadable(format!("{}: {e}", path.display())),
    })?;
    prebuild_bytes(path, &image)
}

/// Build the table of the object image `bytes`, shown as `path` in messages (pure).
fn prebuild_bytes(path: &Path, bytes: &[u8]) -> Result<Prebuilt, NoTable> {
    let (table, built) = build_object(bytes)
        .map_err(|e| NoTable::Unreadable(format!("{}: {e}", path.display())))?
        .ok_or(NoTable::NoUnwindInfo)?;
    // Go code is walked by its own table first, CFI or not (`table::object`).
    let source = if built.go {
        TableSource::Gopclntab
    } else if built.sframe {
        TableSource::Sframe
    } else if built.cfi {
        TableSource::Cfi
    } else {
        TableSource::Leaves
    };
    let rows = table.stats().sframe_rows;
    Ok(Prebuilt {
        table,
        source,
        rows,
        shown: path.display().to_string(),
    })
}
