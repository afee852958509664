//! Room in the table maps, shared fairly. The row space is bounded (`--max-table-memory`, and
//! the maps' size); a process mapping ever more code must not take it from the others:
//!
//! 1. **A process's share.** A table is loaded for a process only if the rows of every loaded
//!    table that process maps, the new one included, stay within half the row space
//!    ([`SHARE_DIVISOR`]); otherwise the object gets [`NoTable::OverShare`], counted by that
//!    name in the summary, and is tried again when mapped anew after no process mapped it.
//!    Tables loaded already (a library others map) are held without a check: they cost no row.
//! 2. **Tables nobody maps make room.** When a table does not fit, the tables of the objects no
//!    process maps any more (kept for a program started again, see `unload_unused`) are
//!    unloaded, and the table is tried again.
//! 3. **Unlinked files are released promptly.** `unload_unused` unloads the table of an object
//!    whose file has no name left (a memfd, a deleted file) once no process has mapped it for
//!    a second (`store::UNLINKED_AFTER`), not after the grace of files a program may map
//!    again by their path (`ObjectStore::unloadable`). Code unmapped is seen at once (the
//!    kernel's notice of `munmap` over code reloads the process's mappings).
//!
//! Each table loaded or unloaded is logged at debug level under [`TABLES_LOG`] with the tables
//! and rows loaded then.

use std::{fs::File, path::Path};

use super::{Catalog, NoTable, Table, TableStore};
use crate::procmaps::{Mapping, MappingKind, ObjectKey};

/// A process's share of the row space is `1 / SHARE_DIVISOR` of it.
pub const SHARE_DIVISOR: u64 = 2;

/// The log target of the line each load or unload of a table writes (`RUST_LOG=...,
/// sframe_trace::tables=debug`): `tables: N loaded, R rows`.
pub const TABLES_LOG: &str = "sframe_trace::tables";

/// The process a table is loaded for, and the rows of the loaded tables it maps so far.
#[derive(Debug, Default)]
pub(super) struct Claim {
    pub pid: u32,
    held: u64,
    /// Its objects whose tables are counted in `held`.
    objects: Vec<usize>,
}

impl Claim {
    pub fn of(pid: u32) -> Claim {
        Claim {
            pid,
            ..Claim::default()
        }
    }
}

/// The share of a process in a row space of `room` rows (`None`: unbounded).
pub fn share_of(room: Option<u64>) -> u64 {
    room.map_or(u64::MAX, |room| room / SHARE_DIVISOR)
}

impl<T: TableStore> Catalog<T> {
    /// The claim of process `pid`, about to map `mappings`: what it maps that is loaded
    /// already counts first, so that a table is loaded for it only if every loaded table it
    /// maps, the new one included, fits its share.
    pub(super) fn claim(&self, pid: u32, mappings: &[Mapping]) -> Claim {
        let mut claim = Claim::of(pid);
        for m in mappings {
            if let MappingKind::File { key, .. } = &m.kind
                && let Some(i) = self.objects.find(key)
                && !self.objects[i].unloaded
            {
                self.count(&mut claim, i);
            }
        }
        claim
    }

    /// Count the table of object `i`, which `claim`'s process maps, in its rows (once; an
    /// object without a table yet is counted once it has one).
    pub(super) fn count(&self, claim: &mut Claim, i: usize) {
        if claim.objects.contains(&i) {
            return;
        }
        if let Ok(table) = &self.objects[i].table {
            claim.objects.push(i);
            claim.held = claim.held.saturating_add(self.loader.tables.rows_of(table.id));
        }
    }

    /// The table of the file `key` (open as `file`, shown as `path`) loaded for `claim`'s
    /// process: within its share, room made from unused tables if need be.
    pub(super) fn load_table(
        &mut self,
        key: &ObjectKey,
        file: &File,
        path: &Path,
        claim: &Claim,
    ) -> Result<Table, NoTable> {
        let prebuilt = self.loader.prepare(key, file, path)?;
        let room = self.loader.tables.row_room();
        let share = share_of(room);
        let wanted = claim.held.saturating_add(prebuilt.space_rows());
        // A table larger than the whole row space is refused for room, not over a share.
        let fits = room.is_none_or(|room| prebuilt.space_rows() <= room);
        if wanted > share && fits {
            log::debug!(target: TABLES_LOG, "over share: process {} would hold {wanted} rows, its share is {share}", claim.pid);
            return Err(NoTable::OverShare(format!(
                "{}: process {} would hold {wanted} rows of tables, over its share of {share} ({} of the {} rows of the table maps)",
                prebuilt.shown(),
                claim.pid,
                if SHARE_DIVISOR == 2 { "half" } else { "a part" },
                room.unwrap_or(0),
            )));
        }
        let table = match self.loader.install_ref(&prebuilt) {
            Err(NoTable::NoRoom(_)) if self.unload_unmapped() > 0 => self.loader.install_ref(&prebuilt),
            other => other,
        };
        if table.is_ok() {
            self.log_tables();
        }
        table
    }

    /// Unload the tables of the objects no process maps now; returns how many.
    pub(super) fn unload_unmapped(&mut self) -> usize {
        let mut unloaded = 0;
        for object in self.objects.unused_loaded() {
            if let Ok(table) = &object.table {
                self.loader.unload(object.key.as_ref(), table);
                object.unloaded = true;
                unloaded += 1;
            }
        }
        if unloaded > 0 {
            log::debug!(target: TABLES_LOG, "room made: {unloaded} tables no process maps unloaded");
            self.log_tables();
        }
        unloaded
    }

    /// The [`TABLES_LOG`] line.
    pub(super) fn log_tables(&self) {
        let (tables, rows) = self.loader.tables.loaded();
        log::debug!(target: TABLES_LOG, "tables: {tables} loaded, {rows} rows");
    }
}
