//! A process's fair share of the table maps and the release of tables no process maps
//! (`registry::share`), against a fake of the kernel tables that counts rows: a process is
//! refused past half the row space with the named reason, another process mapping the same
//! object gets it, tables of unlinked copies are released without the grace of named files,
//! and a full row space makes room from tables no process maps.

use std::{collections::BTreeMap, io::Write as _, sync::Arc, time::Duration};

use tracer_common::trace::NO_OBJECT;

use super::super::{
    Catalog, NoTable, NoTableKind, TableStore, prebuild,
    testing::{Fixture, mapped, object},
};
use crate::tables::AddError;
use tracer_unwind::table::ObjectTable;

/// The kernel tables, as far as the registry changes them: the rows each loaded table takes,
/// within `room` rows.
#[derive(Debug, Default)]
struct RowTables {
    loaded: BTreeMap<u32, u64>,
    next_id: u32,
    room: u64,
}

impl TableStore for RowTables {
    fn add(&mut self, table: &ObjectTable) -> Result<u32, AddError> {
        let rows: u64 = table.pages().iter().map(|(_, rows)| rows.len() as u64).sum();
        let used: u64 = self.loaded.values().sum();
        if used + rows > self.room {
            return Err(AddError::RowsFull {
                needed: rows as usize,
                free: (self.room - used) as usize,
            });
        }
        let id = self.next_id;
        self.next_id += 1;
        self.loaded.insert(id, rows);
        Ok(id)
    }

    fn remove(&mut self, id: u32) -> bool {
        self.loaded.remove(&id).is_some()
    }

    fn row_room(&self) -> Option<u64> {
        Some(self.room)
    }

    fn rows_of(&self, id: u32) -> u64 {
        self.loaded.get(&id).copied().unwrap_or(0)
    }

    fn loaded(&self) -> (u64, u64) {
        (self.loaded.len() as u64, self.loaded.values().sum())
    }
}

/// Rows of the fixture `name`'s table.
fn rows(name: &str) -> u64 {
    let f = object(name, 1, 0);
    prebuild(&f.file, &f.path).expect("a table").space_rows()
}

fn catalog(room: u64) -> Catalog<RowTables> {
    Catalog::with_tables(RowTables {
        room,
        ..RowTables::default()
    })
}

/// A copy of `libshlib.so` whose file has no name left (like a memfd), as identity `inode`.
fn unlinked_copy(dir: &tempfile::TempDir, inode: u64) -> Fixture {
    let mut f = object("libshlib.so", inode, 0);
    let path = dir.path().join(format!("copy{inode}.so"));
    let bytes = std::fs::read(&f.path).expect("read the fixture");
    std::fs::File::create(&path)
        .and_then(|mut out| out.write_all(&bytes))
        .expect("write the copy");
    let file = std::fs::File::open(&path).expect("open the copy");
    std::fs::remove_file(&path).expect("unlink the copy");
    f.file = Arc::new(file);
    f
}

/// A process gets tables up to half the row space: the copy past it is refused with the
/// named, counted reason and no table in the kernel, while another process mapping that same
/// object gets its table.
#[test]
fn a_process_holds_at_most_half_the_rows() {
    let (app, lib) = (rows("chain"), rows("libshlib.so"));
    // Room for the program and one library copy in a half, not two.
    let mut r = catalog(2 * (app + lib + lib / 2));
    let chain = object("chain", 1, 0);
    let copies: Vec<Fixture> = (2..5).map(|inode| object("libshlib.so", inode, 0)).collect();
    let exec = r.add_process(
        10,
        &[
            mapped(&chain, 0x10000),
            mapped(&copies[0], 0x20000),
            mapped(&copies[1], 0x30000),
        ],
    );
    assert_ne!(exec[1].object, NO_OBJECT);
    assert_eq!(exec[2].object, NO_OBJECT, "over its share");
    assert!(
        matches!(&r.objects[2].table, Err(NoTable::OverShare(why)) if why.contains("process 10")),
        "{:?}",
        r.objects[2].table
    );
    assert_eq!(r.table_counts().without.get(&NoTableKind::OverShare), Some(&1));
    assert_eq!(r.loader.tables.loaded().1, app + lib);
    // The same process mapping it again is refused again without a rebuild being installed.
    let again = r.add_process(
        10,
        &[
            mapped(&chain, 0x10000),
            mapped(&copies[0], 0x20000),
            mapped(&copies[1], 0x30000),
        ],
    );
    assert_eq!(again[2].object, NO_OBJECT);
    // Another process has a share of its own.
    let other = r.add_process(11, &[mapped(&copies[1], 0x30000)]);
    assert_ne!(other[0].object, NO_OBJECT, "another process gets the table");
    assert!(r.objects[2].table.is_ok());
}

/// Regression (issue 29: a process mapping fresh memfd copies of a plugin kept every copy's
/// table loaded for 10 s): the table of an unlinked copy no process maps is unloaded without
/// the grace of a file with a name, which keeps its table.
#[test]
fn unlinked_copies_are_released_without_grace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let named = object("libshlib.so", 2, 0);
    let copy = unlinked_copy(&dir, 3);
    let mut r = catalog(1 << 30);
    r.add_process(10, &[mapped(&named, 0x20000), mapped(&copy, 0x30000)]);
    assert_eq!(r.loader.tables.loaded().0, 2);
    // Unmapped: the process's mappings read again without either.
    r.add_process(10, &[]);
    assert_eq!(r.unload_unused_after(Duration::from_secs(3600), Duration::ZERO), 1);
    assert!(r.objects[1].unloaded, "the unlinked copy's table is gone");
    assert!(!r.objects[0].unloaded, "the named file keeps its table for its grace");
    assert_eq!(r.loader.tables.loaded().0, 1);
    // Mapped again (the process still holds the memfd), it is loaded again.
    let exec = r.add_process(10, &[mapped(&copy, 0x30000)]);
    assert_ne!(exec[0].object, NO_OBJECT);
}

/// Regression (issue 29: copies were refused for room while unused tables filled the maps,
/// and a process started later was never loaded): a table that does not fit unloads the
/// tables no process maps and is loaded.
#[test]
fn room_is_made_from_tables_no_process_maps() {
    let lib = rows("libshlib.so");
    let mut r = catalog(2 * lib + lib / 2);
    let copies: Vec<Fixture> = (2..5).map(|inode| object("libshlib.so", inode, 0)).collect();
    r.add_process(10, &[mapped(&copies[0], 0x20000)]);
    r.add_process(11, &[mapped(&copies[1], 0x20000)]);
    // Process 10 unmaps its copy; its table stays for the grace of a named file.
    r.add_process(10, &[]);
    assert_eq!(r.loader.tables.loaded().0, 2);
    let later = r.add_process(12, &[mapped(&copies[2], 0x20000)]);
    assert_ne!(later[0].object, NO_OBJECT, "the later process is loaded");
    assert!(r.objects[0].unloaded, "the unmapped copy made room");
    assert!(
        r.objects[1].table.is_ok() && !r.objects[1].unloaded,
        "a mapped table stays"
    );
    assert_eq!(r.loader.tables.loaded().0, 2);
}
