//! The catalog's object counting and the mappings of each sample's time.

use super::*;

/// Objects are counted by the processes that map them: a table is unloaded only once no
/// process maps it, after the idle time, and built again when a process maps it again.
#[test]
fn tables_follow_the_processes_that_map_them() {
    let mappings = procmaps::executable_mappings(std::process::id()).expect("own mappings");
    let mut catalog: Catalog = Catalog::default();
    catalog.add_process(1, &mappings);
    catalog.add_process(2, &mappings);
    let loaded = catalog.loader.tables.num_objects();
    assert!(loaded >= 2, "this test's own executable and libc have tables");
    catalog.remove_process(1);
    assert_eq!(
        catalog.unload_unused(std::time::Duration::ZERO),
        0,
        "process 2 still maps them"
    );
    catalog.remove_process(2);
    assert_eq!(
        catalog.unload_unused(std::time::Duration::from_secs(3600)),
        0,
        "not idle long enough"
    );
    assert_eq!(catalog.unload_unused(std::time::Duration::ZERO) as u32, loaded);
    assert_eq!(catalog.loader.tables.num_objects(), 0);
    assert_eq!(catalog.loader.tables.live_rows(), 0);
    let objects = catalog.objects.len();
    let exec = catalog.add_process(3, &mappings);
    assert_eq!(catalog.loader.tables.num_objects(), loaded, "built again");
    assert_eq!(catalog.objects.len(), objects, "the same objects, not new ones");
    assert!(exec.iter().any(|m| m.object != NO_OBJECT));
    assert!(catalog.objects.iter().all(|o| !o.unloaded));
}

/// A sample resolves through the image its process had when it was taken: the mappings of
/// a process that exited (or exec'ed) serve the samples taken before, those of the next
/// process with the same pid the samples taken after, and none serve a sample taken after
/// an end when nothing was loaded since.
#[test]
fn samples_resolve_through_the_image_of_their_time() {
    let image = |bias| {
        vec![ResolvedMapping {
            start: 0x1000,
            end: 0x2000,
            bias,
            object: None,
        }]
    };
    let bias_at = |catalog: &Catalog, time| catalog.mapping_at(5, 0x1800, time).map(|m| m.bias);
    let mut catalog: Catalog = Catalog::default();
    catalog.processes.current.insert(5, image(1));
    assert_eq!(bias_at(&catalog, 50), Some(1));
    assert!(catalog.end_process(5, 100));
    assert_eq!(bias_at(&catalog, 99), Some(1));
    assert_eq!(bias_at(&catalog, 100), None, "ended, nothing loaded since");
    catalog.processes.current.insert(5, image(2));
    assert_eq!(bias_at(&catalog, 99), Some(1));
    assert_eq!(bias_at(&catalog, 150), Some(2));
    catalog.end_process(5, 200);
    assert_eq!((bias_at(&catalog, 99), bias_at(&catalog, 150)), (Some(1), Some(2)));
    assert_eq!(bias_at(&catalog, 250), None);
    assert!(!catalog.end_process(5, 300), "nothing loaded since 200");
    assert_eq!(
        bias_at(&catalog, 250),
        None,
        "a process never loaded resolves nothing, not its successor's"
    );
    // An end heard of after newer mappings were loaded ends the older ones then, when they
    // were loaded before it...
    catalog.processes.current.insert(5, image(3));
    catalog.processes.loaded_at.insert(5, 400);
    catalog.processes.keep_ended(5, 400, 320, image(4));
    assert!(!catalog.end_process(5, 350));
    assert_eq!((bias_at(&catalog, 340), bias_at(&catalog, 360)), (Some(4), Some(3)));
    // ... and else nothing: the newer ones are a successor's.
    catalog.processes.current.insert(5, image(6));
    catalog.processes.loaded_at.insert(5, 600);
    catalog.processes.keep_ended(5, 600, 500, image(5));
    assert!(!catalog.end_process(5, 450));
    assert_eq!(bias_at(&catalog, 440), None, "ended before the older ones were loaded");
    assert_eq!((bias_at(&catalog, 550), bias_at(&catalog, 650)), (Some(5), Some(6)));
    catalog.expire_ended(Duration::ZERO);
    assert_eq!(bias_at(&catalog, 99), Some(6), "the older ones forgotten");
}

/// Objects idle past the idle time with their tables unloaded are forgotten: their files are
/// closed, they no longer lend their file to discovery, and a process that maps the same files
/// again gets new objects in the slots they left (the catalog does not grow with every object
/// met) with tables built again, while the summary's counts still count every object met;
/// objects still mapped are not idle.
#[test]
fn idle_objects_are_forgotten_and_come_back_as_new_ones() {
    let mappings = procmaps::executable_mappings(std::process::id()).expect("own mappings");
    let mut catalog: Catalog = Catalog::default();
    catalog.add_process(1, &mappings);
    assert!(catalog.idle_objects(Duration::ZERO).is_empty(), "process 1 maps them");
    catalog.remove_process(1);
    assert!(
        catalog
            .idle_objects(Duration::ZERO)
            .iter()
            .all(|&i| catalog.objects[i].table.is_err()),
        "objects with a loaded table are not idle before it is unloaded"
    );
    catalog.unload_unused(Duration::ZERO);
    let idle = catalog.idle_objects(Duration::ZERO);
    assert!(
        catalog.idle_objects(Duration::from_secs(3600)).is_empty(),
        "not idle long enough"
    );
    let before = catalog.objects.len();
    let counts = catalog.table_counts();
    assert!(counts.sframe + counts.cfi > 0, "{counts:?}");
    assert_eq!(idle.len(), before, "every object is idle");
    let key = catalog
        .objects
        .iter()
        .find_map(|o| o.key.clone())
        .expect("a file's key");
    assert!(catalog.known_file(&key).is_some());
    catalog.forget(&idle);
    assert!(catalog.objects.iter().all(|o| o.file.is_none() && o.build_id.is_none()));
    assert!(
        catalog.known_file(&key).is_none(),
        "a forgotten file is not lent to discovery"
    );
    assert!(catalog.symbol_source(idle[0]).is_none());
    assert!(
        catalog.idle_objects(Duration::ZERO).is_empty(),
        "nothing left to forget"
    );
    assert_eq!(catalog.table_counts(), counts, "forgotten objects still counted");
    let exec = catalog.add_process(2, &mappings);
    assert_eq!(catalog.objects.len(), before, "the forgotten objects' slots reused");
    assert!(exec.iter().any(|m| m.object != NO_OBJECT), "tables built again");
    assert!(
        catalog.objects.iter().all(|o| o.file.is_some()),
        "every slot holds an object"
    );
    let again = catalog.table_counts();
    assert_eq!(
        (again.sframe, again.cfi, again.rows),
        (2 * counts.sframe, 2 * counts.cfi, 2 * counts.rows),
        "every object met counted, those forgotten and the new ones"
    );
}

/// A table built ahead for a process that was gone before it was loaded is dropped after a
/// while instead of being kept for good.
#[test]
fn tables_built_ahead_for_nobody_expire() {
    let mappings = procmaps::executable_mappings(std::process::id()).expect("own mappings");
    let mut catalog: Catalog = Catalog::default();
    let missing = catalog.missing(&mappings);
    assert!(!missing.is_empty());
    for m in &missing {
        catalog.add_prebuilt(m.key.clone(), prebuild(&m.file, &m.path));
    }
    assert!(catalog.missing(&mappings).is_empty(), "built ahead");
    catalog.expire_prebuilt(Duration::from_secs(3600));
    assert!(catalog.missing(&mappings).is_empty(), "kept while recent");
    catalog.expire_prebuilt(Duration::ZERO);
    assert_eq!(catalog.missing(&mappings).len(), missing.len(), "dropped");
}

mod life;
mod share;

/// Why objects have no table is told once per message: an object loaded, unloaded and refused
/// again (or many refused for one reason) does not fill the summary's notes with copies.
#[test]
fn table_notes_are_told_once() {
    let mut counts = TableCounts::default();
    for _ in 0..3 {
        counts.add(&Err(NoTable::NoRoom("/lib/a.so: the page index is full".to_owned())));
    }
    counts.add(&Err(NoTable::NoRoom("/lib/b.so: the page index is full".to_owned())));
    counts.add(&Err(NoTable::NoUnwindInfo));
    assert_eq!(
        counts.notes,
        ["/lib/a.so: the page index is full", "/lib/b.so: the page index is full"]
    );
    assert_eq!(
        counts.without.get(&NoTableKind::NoRoom),
        Some(&4),
        "each object still counts"
    );
    assert_eq!(counts.notes_left_out, 0);
}
