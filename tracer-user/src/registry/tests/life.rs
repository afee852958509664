//! The registry's life cycle against a fake of the kernel tables ([`FakeTables`]): which tables
//! are loaded, when they are unloaded, what a full budget leaves, and which object each sample
//! resolves through, as processes map files, dlopen and dlclose, exec, exit, reuse a pid, or
//! replace a file. No root, no BPF: the objects are small checked-in ELF files of made-up
//! identities ([`super::super::testing`]).

use std::{collections::BTreeSet, time::Duration};

use tracer_common::trace::{ExecMapping, NO_OBJECT};

use crate::sys::monotonic_ns;

use super::super::{
    Catalog, NoTable, TableStore,
    testing::{BUILD_ID, mapped, object},
};
use crate::tables::{AddError, Capacity, TableSet};
use tracer_unwind::table::ObjectTable;

/// The kernel tables, as far as the registry changes them: the ids loaded, with room for at
/// most `room` tables at once.
#[derive(Debug, Default)]
struct FakeTables {
    loaded: BTreeSet<u32>,
    next_id: u32,
    room: Option<usize>,
    /// Tables refused for want of room.
    refused: usize,
}

impl TableStore for FakeTables {
    fn add(&mut self, _table: &ObjectTable) -> Result<u32, AddError> {
        if self.room.is_some_and(|room| self.loaded.len() >= room) {
            self.refused += 1;
            return Err(AddError::PagesFull);
        }
        let id = self.next_id;
        self.next_id += 1;
        self.loaded.insert(id);
        Ok(id)
    }

    fn remove(&mut self, id: u32) -> bool {
        self.loaded.remove(&id)
    }
}

fn registry() -> Catalog<FakeTables> {
    Catalog::with_tables(FakeTables::default())
}

/// The table ids the kernel resolves each of these mappings with.
fn ids(exec: &[ExecMapping]) -> Vec<u32> {
    exec.iter().map(|m| m.object).collect()
}

/// The table id of object `index`; panics when it has none.
fn table_id(catalog: &Catalog<FakeTables>, index: usize) -> u32 {
    catalog.objects[index].table.as_ref().expect("a table").id
}

/// The object that held `addr` in `pid` at `time_ns`.
fn object_at(catalog: &Catalog<FakeTables>, pid: u32, addr: u64, time_ns: u64) -> Option<usize> {
    catalog.mapping_at(pid, addr, time_ns)?.object
}

/// One file, whatever path a process reaches it by, is one object with one table, held by
/// every process that maps it.
#[test]
fn one_file_is_one_object_and_one_table() {
    let mut r = registry();
    let lib = object("libshlib.so", 1, 0);
    let mut elsewhere = mapped(&lib, 0x50000);
    elsewhere.path = "/proc/1/root/usr/lib/libshlib.so".into();
    let first = r.add_process(10, &[mapped(&lib, 0x10000)]);
    let second = r.add_process(11, &[elsewhere]);
    assert_eq!(r.objects.len(), 1);
    assert_eq!(ids(&first), ids(&second));
    assert_eq!(r.loader.tables.loaded, BTreeSet::from([ids(&first)[0]]));
    assert_eq!(r.objects[0].users, 2);
}

/// Regression (build-ids were trusted as identity): a file carrying another file's build-id,
/// mapped first, gets its own object and table, and the real file's table is never its.
#[test]
fn the_same_build_id_in_two_files_never_shares_a_table() {
    let mut r = registry();
    let (fake, real) = (object("cfi", 1, 0), object("libshlib.so", 2, 0));
    let fake_exec = r.add_process(10, &[mapped(&fake, 0x10000)]);
    let real_exec = r.add_process(11, &[mapped(&real, 0x10000)]);
    assert_eq!(r.objects.len(), 2);
    assert_eq!(r.objects[0].build_id.as_deref(), Some(&BUILD_ID[..]));
    assert_eq!(r.objects[0].build_id, r.objects[1].build_id, "the build-ids collide");
    assert_ne!(ids(&fake_exec), ids(&real_exec));
    assert_eq!(object_at(&r, 11, 0x10800, monotonic_ns()), Some(1));
    r.remove_process(10);
    assert_eq!(r.unload_unused(Duration::ZERO), 1, "only the fake's table goes");
    assert_eq!(r.loader.tables.loaded, BTreeSet::from([table_id(&r, 1)]));
}

/// dlclose in one process keeps a library's table while another process holds it; once none
/// does it is unloaded after the idle time, not before. Samples taken before the dlclose still
/// resolve through the library.
#[test]
fn dlclose_keeps_a_table_another_process_holds() {
    let mut r = registry();
    let (app, lib) = (object("chain", 1, 0), object("libshlib.so", 2, 0));
    r.add_process(10, &[mapped(&app, 0x10000), mapped(&lib, 0x20000)]);
    r.add_process(11, &[mapped(&lib, 0x30000)]);
    let lib_id = table_id(&r, 1);
    let before = monotonic_ns();
    r.add_process(10, &[mapped(&app, 0x10000)]);
    assert_eq!(object_at(&r, 10, 0x20800, before), Some(1), "an earlier sample");
    assert_eq!(object_at(&r, 10, 0x20800, monotonic_ns()), None, "a later one");
    assert_eq!(r.objects[1].users, 1);
    assert_eq!(r.unload_unused(Duration::ZERO), 0, "process 11 still maps it");
    assert!(r.loader.tables.loaded.contains(&lib_id));
    r.remove_process(11);
    assert_eq!(r.unload_unused(Duration::from_secs(3600)), 0, "not idle long enough");
    assert_eq!(r.unload_unused(Duration::ZERO), 1);
    assert!(!r.loader.tables.loaded.contains(&lib_id));
    assert!(r.objects[1].unloaded && !r.objects[0].unloaded);
    assert!(
        r.loader.tables.loaded.contains(&table_id(&r, 0)),
        "the program keeps its table"
    );
}

/// A library dlopen'ed again after its table was unloaded is the same object with its table
/// installed again under a new id (ids are never reused: a stale id finds nothing).
#[test]
fn an_unloaded_table_is_installed_again_under_a_new_id() {
    let mut r = registry();
    let lib = object("libshlib.so", 2, 0);
    let first = ids(&r.add_process(10, &[mapped(&lib, 0x20000)]));
    r.remove_process(10);
    assert_eq!(r.unload_unused(Duration::ZERO), 1);
    assert!(r.loader.tables.loaded.is_empty());
    assert!(r.missing(&[mapped(&lib, 0x20000)]).len() == 1, "to be built again");
    let again = ids(&r.add_process(11, &[mapped(&lib, 0x20000)]));
    assert_eq!(r.objects.len(), 1, "the same object");
    assert!(!r.objects[0].unloaded);
    assert_ne!(first, again);
    assert_eq!(r.loader.tables.loaded, BTreeSet::from([again[0]]));
    assert_eq!(r.unload_unused(Duration::ZERO), 0, "mapped again");
}

/// A file replaced at its path (same path; a new mtime, or a new inode) is a new object with
/// its own table; the old one is released by the process that moved on, unloaded once idle,
/// and forgotten (its file closed) while the new one stays found by its identity.
#[test]
fn a_replaced_file_is_a_new_object_and_the_old_one_is_released() {
    let mut r = registry();
    let old = object("libshlib.so", 2, 0);
    let rewritten = object("libshlib.so", 2, 1);
    let renamed_over = object("libshlib.so", 3, 1);
    r.add_process(10, &[mapped(&old, 0x20000)]);
    r.add_process(10, &[mapped(&rewritten, 0x20000)]);
    r.add_process(11, &[mapped(&renamed_over, 0x20000)]);
    assert_eq!(r.objects.len(), 3);
    let tables: BTreeSet<u32> = (0..3).map(|i| table_id(&r, i)).collect();
    assert_eq!(tables.len(), 3, "three tables");
    assert_eq!(r.objects[0].users, 0);
    assert_eq!(r.unload_unused(Duration::ZERO), 1, "only the old file's");
    assert!(r.objects[0].unloaded);
    assert_eq!(r.idle_objects(Duration::ZERO), [0]);
    r.forget(&[0]);
    assert!(r.known_file(&old.key).is_none() && r.symbol_source(0).is_none());
    assert!(r.known_file(&rewritten.key).is_some() && r.known_file(&renamed_over.key).is_some());
}

/// With the tables' room spent, an object gets the named `NoRoom` reason, its mapping no table
/// in the kernel, and nothing of it is installed; the process is still registered.
#[test]
fn a_spent_budget_is_a_reason_and_installs_nothing() {
    let mut r = Catalog::with_tables(FakeTables {
        room: Some(1),
        ..FakeTables::default()
    });
    let (app, lib) = (object("chain", 1, 0), object("libshlib.so", 2, 0));
    let exec = ids(&r.add_process(10, &[mapped(&app, 0x10000), mapped(&lib, 0x20000)]));
    assert_ne!(exec[0], NO_OBJECT);
    assert_eq!(exec[1], NO_OBJECT);
    assert!(
        matches!(&r.objects[1].table, Err(NoTable::NoRoom(why)) if why.contains("page index") && why.contains("libshlib.so")),
        "the note names the object: {:?}",
        r.objects[1].table
    );
    assert_eq!((r.loader.tables.loaded.len(), r.loader.tables.refused), (1, 1));
    assert_eq!(object_at(&r, 10, 0x20800, monotonic_ns()), Some(1), "still symbolized");
}

/// Against the real table layout: an object over the budget leaves no page, row or rule of
/// it behind (all or nothing), and what the kernel is told to write is the first object only.
#[test]
fn a_refused_table_leaves_nothing_in_the_table_maps() {
    let (app, lib) = (object("chain", 1, 0), object("libshlib.so", 2, 0));
    let mut sized: Catalog = Catalog::with_tables(TableSet::new());
    sized.add_process(10, &[mapped(&app, 0x10000)]);
    let just_app = Capacity {
        row_chunks: sized.loader.tables.row_chunks(),
        pages: sized.loader.tables.pages().len(),
        rules: sized.loader.tables.rules().len(),
    };
    let mut r: Catalog = Catalog::with_tables(TableSet::with_capacity(just_app));
    let exec = ids(&r.add_process(10, &[mapped(&app, 0x10000), mapped(&lib, 0x20000)]));
    assert_eq!(exec[1], NO_OBJECT);
    assert!(matches!(r.objects[1].table, Err(NoTable::NoRoom(_))));
    let tables = &mut r.loader.tables;
    assert_eq!(tables.num_objects(), 1);
    assert_eq!(tables.live_rows(), sized.loader.tables.live_rows());
    assert!(
        tables
            .take_changes()
            .pages_set
            .iter()
            .all(|(key, _)| key.object == exec[0])
    );
}

/// A pid taken again by a new process: samples resolve through the process that had the pid
/// when they were taken, and the first process's exit heard late releases nothing of the
/// second's.
#[test]
fn a_reused_pid_is_two_processes() {
    let mut r = registry();
    let (first, second) = (object("chain", 1, 0), object("cfi", 2, 0));
    r.add_process(5, &[mapped(&first, 0x10000)]);
    let exit = monotonic_ns();
    assert!(r.end_process(5, exit));
    assert_eq!(r.objects[0].users, 0, "released at its exit");
    r.add_process(5, &[mapped(&second, 0x10000)]);
    assert_eq!(object_at(&r, 5, 0x10800, exit - 1), Some(0));
    assert_eq!(object_at(&r, 5, 0x10800, monotonic_ns()), Some(1));
    assert!(!r.end_process(5, exit), "the exit heard again, late");
    assert_eq!(r.objects[1].users, 1, "the new process keeps its object");
    assert_eq!(r.unload_unused(Duration::ZERO), 1, "only the first process's table");
    assert!(r.loader.tables.loaded.contains(&table_id(&r, 1)));
}

/// An exit keeps the process's mappings for the samples taken before it until they expire;
/// its objects are unloaded once idle.
#[test]
fn an_exit_serves_earlier_samples_until_expired() {
    let mut r = registry();
    let app = object("chain", 1, 0);
    r.add_process(5, &[mapped(&app, 0x10000)]);
    let before = monotonic_ns();
    r.end_process(5, monotonic_ns());
    assert_eq!(object_at(&r, 5, 0x10800, before), Some(0));
    r.expire_ended(Duration::from_secs(3600));
    assert_eq!(object_at(&r, 5, 0x10800, before), Some(0), "kept while recent");
    r.expire_ended(Duration::ZERO);
    assert_eq!(object_at(&r, 5, 0x10800, before), None, "expired");
    assert_eq!(r.unload_unused(Duration::ZERO), 1);
    assert!(r.loader.tables.loaded.is_empty());
}

/// A table built ahead is what a process mapping its file gets (it is not built again from the
/// file), and only once.
#[test]
fn a_table_built_ahead_is_installed_not_built_again() {
    let mut r = registry();
    let app = object("chain", 1, 0);
    assert_eq!(r.missing(&[mapped(&app, 0x10000)]).len(), 1);
    r.add_prebuilt(app.key.clone(), Err(NoTable::Unreadable("built ahead".into())));
    assert!(r.missing(&[mapped(&app, 0x10000)]).is_empty());
    r.add_process(10, &[mapped(&app, 0x10000)]);
    assert_eq!(r.objects[0].table, Err(NoTable::Unreadable("built ahead".into())));
    assert!(r.loader.tables.loaded.is_empty());
    assert!(!r.loader.is_prebuilt(&app.key), "taken");
}

/// A vDSO read again with the same bytes is the same object, found by its image (it has no
/// file identity), with a table from its call-frame information.
#[test]
fn the_same_vdso_image_is_one_object() {
    let pid = std::process::id();
    let vdso: Vec<_> = crate::procmaps::executable_mappings(pid)
        .expect("own mappings")
        .into_iter()
        .filter(|m| matches!(m.kind, crate::procmaps::MappingKind::Vdso))
        .collect();
    assert_eq!(vdso.len(), 1, "this process has a vDSO");
    let mut r = registry();
    let first = ids(&r.add_process(pid, &vdso));
    let again = ids(&r.add_process(pid, &vdso));
    assert_eq!(r.objects.len(), 1);
    assert_eq!(
        (r.objects[0].name.as_str(), r.objects[0].key.as_ref()),
        ("[vdso]", None)
    );
    assert_eq!(first, again);
    assert_ne!(first[0], NO_OBJECT);
    assert_eq!(r.objects[0].users, 1, "one process, loaded twice");
}
