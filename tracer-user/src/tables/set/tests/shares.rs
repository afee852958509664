//! The registry's fair shares of the row space (`registry::share`) against the simulated
//! kernel of the set's tests.

use super::*;

/// Processes that map and unmap copies of the fixtures at random through the registry, into
/// a small row space, with a simulated kernel taking every change: the kernel stays in step
/// with the set (tables unloaded to make room and tables refused leave nothing behind), no
/// process's loaded tables pass its share of the rows, the rows loaded never pass the room,
/// and both the share and the room do refuse or make room along the way.
#[test]
fn processes_share_the_row_space_against_the_kernel() {
    use crate::registry::{
        Catalog, NoTable, share_of,
        testing::{Fixture, mapped, object},
    };
    let names = ["chain", "libshlib.so"];
    let own: Vec<ObjectTable> = names
        .iter()
        .map(|name| {
            let f = object(name, 1, 0);
            let bytes = std::fs::read(&f.path).expect("read the fixture");
            tracer_unwind::table::build_object(&bytes)
                .expect("builds")
                .expect("a table")
                .0
        })
        .collect();
    let largest = own.iter().map(rows_of).max().expect("tables") as u64;
    let smallest = own.iter().map(rows_of).min().expect("tables") as u64;
    // Room for about eight of the largest (at least a chunk): a process's share is half.
    let chunks = (8 * largest).div_ceil(ROW_CHUNK as u64) as usize;
    let mut catalog: Catalog = Catalog::with_tables(TableSet::with_capacity(Capacity {
        row_chunks: chunks,
        pages: 1 << 16,
        rules: 4096,
    }));
    let room = (chunks * ROW_CHUNK) as u64;
    let share = share_of(Some(room));
    // Copies (distinct identities) of the two fixtures: each process has enough of its own
    // that half of them pass its share.
    let per_process = (4 * share / smallest + 4) as usize;
    let copies: Vec<(Fixture, usize)> = (0..3 * per_process as u64)
        .map(|i| (object(names[i as usize % 2], 100 + i, 0), i as usize % 2))
        .collect();
    let mut rng = tracer_unwind::testing::Rng::new(0x5eed_5a4e_0000_0006);
    let mut kernel = Kernel::default();
    // Each process's copies (distinct per process: none shared).
    let mut mapped_by: HashMap<u32, Vec<usize>> = HashMap::new();
    let (mut over_share, mut room_made) = (0, 0);
    for step in 0..200 {
        let pid = 1 + rng.below(3) as u32;
        // Copies pid % 3 of the pool are pid's own.
        let mine: Vec<usize> = (0..copies.len()).filter(|i| i % 3 == (pid as usize - 1)).collect();
        let chosen: Vec<usize> = mine.into_iter().filter(|_| rng.below(2) == 0).collect();
        let before = catalog.loader.tables.num_objects();
        let mappings: Vec<_> = chosen
            .iter()
            .enumerate()
            .map(|(n, &i)| mapped(&copies[i].0, 0x10_0000 * (n as u64 + 1)))
            .collect();
        if rng.below(5) == 0 {
            catalog.remove_process(pid);
            mapped_by.remove(&pid);
        } else {
            catalog.add_process(pid, &mappings);
            mapped_by.insert(pid, chosen);
        }
        if catalog.loader.tables.num_objects() < before {
            room_made += 1;
        }
        let tables = &mut catalog.loader.tables;
        // The kernel in step: every loaded object looks up as its own table.
        let mut loaded = Vec::new();
        for object in &catalog.objects {
            if let (Ok(table), false) = (&object.table, object.unloaded) {
                let which = copies
                    .iter()
                    .position(|(f, _)| Some(&f.key) == object.key.as_ref())
                    .expect("a copy");
                loaded.push((table.id, &own[copies[which].1]));
            }
        }
        kernel.sync(tables, &loaded, &[]);
        assert!(tables.live_rows() as u64 <= room, "step {step}: rows past the room");
        for (pid, chosen) in &mapped_by {
            let held: u64 = catalog
                .objects
                .iter()
                .filter(|o| !o.unloaded && chosen.iter().any(|&i| Some(&copies[i].0.key) == o.key.as_ref()))
                .filter_map(|o| o.table.as_ref().ok())
                .map(|t| tables.object_rows(t.id))
                .sum();
            assert!(
                held <= share,
                "step {step}: process {pid} holds {held} rows, its share is {share}"
            );
        }
        over_share = catalog
            .objects
            .iter()
            .filter(|o| matches!(o.table, Err(NoTable::OverShare(_))))
            .count()
            .max(over_share);
    }
    assert!(over_share > 0, "the share never refused a table");
    assert!(room_made > 0, "no table was ever unloaded to make room");
}
