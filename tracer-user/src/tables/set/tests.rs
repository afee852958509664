//! [`TableSet`] against the fixtures' tables and a simulated kernel: lookups as each object's
//! own, the global layout, reuse and coalescing of freed rows, capacity refusals, and changes
//! that keep the simulated maps equal to the set through random adds and removes.

use std::collections::HashMap;
use std::path::Path;

use super::*;
use tracer_unwind::elf::find_sframe;
use tracer_unwind::sframe::{Abi, Function, Header, Reg, Row, Rule, Section, testing};
use tracer_unwind::table::{build, build_from_sframe};

fn fixture(name: &str) -> ObjectTable {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/bin/v3/x86_64")
        .join(name);
    let bytes = std::fs::read(&path).expect("read fixture");
    let sframe = find_sframe(&bytes).expect("elf").expect("has .sframe");
    let section = Section::parse(&sframe.data, sframe.vaddr).expect("parses");
    build_from_sframe(&section).expect("builds")
}

/// `functions` functions of 32 bytes from `start`, each with three rows (`CFA = SP + 8`,
/// `+ 16`, `+ 24 + 8 * (i % variety)`): tables larger than a row chunk, across pages, with
/// as many rules as wanted.
fn synthetic(start: u64, functions: u32, variety: u64) -> ObjectTable {
    let header = Header {
        flags: 0x5,
        ..testing::header(Abi::Amd64Le, 2, -8)
    };
    let sp = |at: u32, cfa: u64| testing::row(at, Reg::Sp, cfa as i64, Rule::Unchanged, Rule::Unchanged);
    let functions: Vec<Function> = (0..functions)
        .map(|i| Function {
            num_fres: 3,
            index: i,
            ..testing::function(start + 32 * u64::from(i), 32)
        })
        .collect();
    build(&header, &functions, None, |f| {
        let last: Row = sp(4, 24 + 8 * (u64::from(f.index) % variety));
        Ok(vec![sp(0, 8), sp(1, 16), last])
    })
    .expect("builds")
}

fn rows_of(table: &ObjectTable) -> usize {
    table.pages().iter().map(|(_, rows)| rows.len()).sum()
}

/// Addresses to compare at: every row start, the byte before it, and the byte after each
/// page's end.
fn boundaries(table: &ObjectTable) -> Vec<u64> {
    let mut out = Vec::new();
    for (page, rows) in table.pages() {
        let base = u64::from(*page) << PAGE_SHIFT;
        out.push(base + (1 << PAGE_SHIFT));
        for row in rows {
            let at = base + u64::from(row.addr_lo);
            out.extend([at, at.wrapping_sub(1), at + 1]);
        }
    }
    out
}

/// Everything of the set but the rule table's hash index.
fn snapshot(set: &TableSet) -> String {
    format!(
        "{:?}",
        (
            &set.rows,
            &set.space,
            &set.pages,
            set.rules(),
            &set.objects,
            set.next_id,
            &set.pending
        )
    )
}

/// The maps as the kernel holds them, written only through [`Changes`].
#[derive(Default)]
struct Kernel {
    rows: Vec<RowChunk>,
    pages: HashMap<PageKey, PageEntry>,
    rules: Vec<UnwindRule>,
}

impl Kernel {
    /// Apply `changes` in the documented order.
    fn apply(&mut self, set: &TableSet, changes: &Changes) {
        for key in &changes.pages_removed {
            assert!(self.pages.remove(key).is_some(), "{key:?} was never written");
        }
        assert_eq!(
            changes.rules.start,
            self.rules.len(),
            "rules are written once, in order"
        );
        self.rules.extend_from_slice(&set.rules()[changes.rules.clone()]);
        assert!(changes.chunks.windows(2).all(|w| w[0] < w[1]));
        for &i in &changes.chunks {
            let i = i as usize;
            if self.rows.len() <= i {
                self.rows.resize(i + 1, set.chunk(u32::MAX));
            }
            self.rows[i] = set.chunk(i as u32);
        }
        for (key, entry) in &changes.pages_set {
            assert_eq!(self.pages.insert(*key, *entry), None, "{key:?} written twice");
        }
    }

    /// The kernel's lookup over these maps, as [`TableSet::lookup`] does it.
    fn lookup(&self, object: u32, addr: u64) -> UnwindRule {
        let Ok(page) = u32::try_from(addr >> PAGE_SHIFT) else {
            return UnwindRule::NO_INFO;
        };
        let Some(entry) = self.pages.get(&PageKey { object, page }) else {
            return UnwindRule::NO_INFO;
        };
        let row_at = |i: u32| {
            let index = entry.first_row.wrapping_add(i) as usize;
            let chunk = self.rows.get(index / ROW_CHUNK)?;
            Some(chunk.rows[index % ROW_CHUNK])
        };
        walk::search_page(entry.num_rows, (addr & 0xffff) as u16, row_at)
            .and_then(|rule| self.rules.get(usize::from(rule)).copied())
            .unwrap_or(UnwindRule::NO_INFO)
    }

    /// Take the set's changes, apply them, and check the kernel against the set: the same
    /// pages, and for every loaded object the same rule as its own table at every
    /// boundary; for every removed one, `NO_INFO`.
    fn sync(&mut self, set: &mut TableSet, loaded: &[(u32, &ObjectTable)], removed: &[(u32, &ObjectTable)]) {
        let changes = set.take_changes();
        self.apply(set, &changes);
        if let Some(c) = set.capacity() {
            assert!(self.rows.len() <= c.row_chunks, "ROWS has {} chunks", self.rows.len());
            assert!(self.pages.len() <= c.pages, "PAGES has {} entries", self.pages.len());
            assert!(self.rules.len() <= c.rules, "RULES has {} entries", self.rules.len());
        }
        let mut pages: Vec<_> = self.pages.iter().map(|(k, e)| (*k, *e)).collect();
        pages.sort_by_key(|&(k, _)| k);
        assert_eq!(pages, set.pages());
        for &(id, table) in loaded {
            for addr in boundaries(table) {
                let want = table.lookup(addr);
                assert_eq!(set.lookup(id, addr), want, "set: object {id} at {addr:#x}");
                assert_eq!(self.lookup(id, addr), want, "kernel: object {id} at {addr:#x}");
            }
        }
        for &(id, table) in removed {
            for addr in boundaries(table) {
                assert_eq!(set.lookup(id, addr), UnwindRule::NO_INFO, "set: removed {id}");
                assert_eq!(self.lookup(id, addr), UnwindRule::NO_INFO, "kernel: removed {id}");
            }
        }
    }
}

/// Three objects added to one set: the global lookup equals each object's own lookup at
/// every row boundary, and ids count from 0.
#[test]
fn lookups_match_each_object() {
    let objects = [fixture("chain"), fixture("libshlib.so"), fixture("cfi")];
    let mut set = TableSet::new();
    for (i, table) in objects.iter().enumerate() {
        assert_eq!(set.add(table), Ok(i as u32));
    }
    assert_eq!(set.num_objects(), 3);
    for (id, table) in objects.iter().enumerate() {
        for addr in boundaries(table) {
            assert_eq!(
                set.lookup(id as u32, addr),
                table.lookup(addr),
                "object {id} at {addr:#x}"
            );
        }
    }
    assert_eq!(set.lookup(3, 0x1000), UnwindRule::NO_INFO, "no such object");
}

/// Appended objects are laid out as the kernel maps hold them: pages sorted, slices
/// contiguous and in range, and the byte counts cover whole row chunks.
#[test]
fn layout_is_contiguous_and_sized() {
    let mut set = TableSet::new();
    assert_eq!(
        set.map_bytes(),
        (ROW_CHUNK as u64) * 4 + 16 + RULE_BYTES,
        "empty maps still have one entry"
    );
    for name in ["chain", "cfi"] {
        set.add(&fixture(name)).expect("room");
    }
    assert!(set.pages().windows(2).all(|w| w[0].0 < w[1].0));
    let mut next = 0u32;
    for (_, entry) in set.pages() {
        assert_eq!(entry.first_row, next);
        next += entry.num_rows;
    }
    assert_eq!(next as usize, set.rows().len());
    assert_eq!(set.live_rows(), set.rows().len());
    assert!(set.rows().iter().all(|r| usize::from(r.rule) < set.rules().len()));
    let chunks = set.rows().len().div_ceil(ROW_CHUNK) as u64;
    let expected =
        chunks * ROW_CHUNK as u64 * 4 + set.pages().len() as u64 * 16 + set.rules().len() as u64 * RULE_BYTES;
    assert_eq!(set.map_bytes(), expected);
    assert_eq!(set.capacity_bytes(), expected, "unbounded: maps sized to the set");
    let bounded = TableSet::with_capacity(Capacity {
        row_chunks: 4,
        pages: 100,
        rules: 10,
    });
    assert_eq!(bounded.capacity_bytes(), 4 * 4096 + 100 * 16 + 10 * RULE_BYTES);
}

/// A removed object's rows are reused by the next object that fits them (first fit), a
/// larger one goes to the top, ids are not reused, the removed object looks up as
/// `NO_INFO`, and every remaining object stays exact at every boundary.
#[test]
fn add_remove_add_reuses_the_freed_range() {
    let chain = fixture("chain");
    let big = synthetic(0x1_f000, 700, 5);
    let shlib = fixture("libshlib.so");
    let small = synthetic(0x40_0000, 300, 3);
    let larger = synthetic(0x1000, 800, 4);
    assert!(rows_of(&small) < rows_of(&big) && rows_of(&big) < rows_of(&larger));
    assert!(
        big.pages().len() > 1 && rows_of(&big) > ROW_CHUNK,
        "crosses pages and chunks"
    );

    let mut set = TableSet::new();
    let ids: Vec<u32> = [&chain, &big, &shlib].map(|t| set.add(t).expect("room")).to_vec();
    assert_eq!(ids, [0, 1, 2]);
    let hole = set.objects[&1].clone();
    let mark = set.rows().len();
    assert!(set.remove(1));
    assert!(!set.remove(1), "already removed");
    assert_eq!(set.live_rows(), mark - rows_of(&big));
    assert_eq!(set.add(&small), Ok(3), "ids are not reused");
    assert_eq!(set.objects[&3].start, hole.start, "first fit: the freed range");
    assert_eq!(set.add(&larger), Ok(4));
    assert_eq!(
        set.objects[&4].start as usize, mark,
        "too large for the rest of the hole"
    );
    assert_eq!(set.num_objects(), 4);

    let mut kernel = Kernel::default();
    let loaded = [(0, &chain), (2, &shlib), (3, &small), (4, &larger)];
    kernel.sync(&mut set, &loaded, &[(1, &big)]);
}

/// Adjacent freed ranges coalesce into one that holds an object larger than either, and
/// freeing everything brings the row space back to empty.
#[test]
fn adjacent_frees_coalesce() {
    let a = synthetic(0, 300, 2);
    let b = synthetic(0x10_0000, 400, 2);
    let c = fixture("chain");
    let d = synthetic(0x20_0000, 600, 2);
    assert!(rows_of(&d) > rows_of(&b) && rows_of(&d) <= rows_of(&a) + rows_of(&b));
    let mut set = TableSet::new();
    for table in [&a, &b, &c] {
        set.add(table).expect("room");
    }
    set.remove(0);
    set.remove(1);
    assert_eq!(set.add(&d), Ok(3));
    assert_eq!(set.objects[&3].start, 0, "placed in the coalesced range");
    let mut kernel = Kernel::default();
    kernel.sync(&mut set, &[(2, &c), (3, &d)], &[(0, &a), (1, &b)]);
    set.remove(2);
    set.remove(3);
    assert_eq!((set.rows().len(), set.live_rows(), set.row_chunks()), (0, 0, 1));
    assert_eq!(
        set.map_bytes(),
        (ROW_CHUNK as u64) * 4 + 16 + set.rules().len() as u64 * RULE_BYTES
    );
    kernel.sync(&mut set, &[], &[(2, &c), (3, &d)]);
    assert!(kernel.pages.is_empty());
}

/// Each capacity limit refuses with its own error and leaves the set, pending changes
/// included, exactly as it was; an object that fits is still accepted afterwards.
#[test]
fn capacity_limits_refuse_and_leave_the_set_unchanged() {
    let chain = fixture("chain");
    let roomy = Capacity {
        row_chunks: 1,
        pages: 1000,
        rules: 1000,
    };
    let refused = |set: &mut TableSet, table: &ObjectTable, error: AddError| {
        let before = snapshot(set);
        assert_eq!(set.add(table), Err(error));
        assert_eq!(snapshot(set), before);
    };

    let mut rows = TableSet::with_capacity(roomy);
    let first = synthetic(0, 300, 2);
    let second = synthetic(0x10_0000, 30, 2);
    rows.add(&first).expect("fits one chunk");
    let free = ROW_CHUNK - rows_of(&first);
    let too_many = synthetic(0x20_0000, free as u32 / 3 + 1, 2);
    let needed = rows_of(&too_many);
    refused(&mut rows, &too_many, AddError::RowsFull { needed, free });
    rows.add(&second).expect("fits the rest");

    let mut pages = TableSet::with_capacity(Capacity {
        pages: chain.pages().len() + 1,
        ..roomy
    });
    pages.add(&chain).expect("fits");
    refused(&mut pages, &synthetic(0xffff0, 10, 2), AddError::PagesFull);
    pages.add(&synthetic(0, 10, 2)).expect("one page");

    let many = synthetic(0, 40, 30);
    let mut rules = TableSet::with_capacity(Capacity {
        rules: chain.rules().len() + 10,
        ..roomy
    });
    rules.add(&chain).expect("fits");
    refused(&mut rules, &many, AddError::RulesFull);
    rules.add(&chain).expect("no new rules");
    rules.add(&synthetic(0, 10, 1)).expect("few new rules");

    let mut bounded = TableSet::new();
    bounded.add(&first).expect("unbounded");
    let third = synthetic(0x10_0000, 50, 2);
    bounded.add(&third).expect("unbounded");
    bounded.set_capacity(roomy);
    assert!(bounded.rows().len() > ROW_CHUNK, "already past the new capacity");
    let tiny = synthetic(0x30_0000, 1, 1);
    let needed = rows_of(&tiny);
    refused(&mut bounded, &tiny, AddError::RowsFull { needed, free: 0 });
    bounded.remove(0);
    assert_eq!(bounded.add(&third), Ok(2));
    assert_eq!(bounded.objects[&2].start, 0, "below the capacity again");
    assert_eq!(bounded.capacity_bytes(), 4096 + 1000 * 16 + 1000 * RULE_BYTES);

    let mut ids = TableSet::new();
    ids.next_id = NO_OBJECT - 1;
    assert_eq!(ids.add(&chain), Ok(NO_OBJECT - 1));
    refused(&mut ids, &chain, AddError::IdsExhausted);
}

/// After a sequence of adds and removes, with and without taking changes in between,
/// the changes applied to an empty simulated kernel make its lookups equal the set's for
/// every object at every boundary; the first call reports everything.
#[test]
fn changes_keep_a_simulated_kernel_in_step() {
    let chain = fixture("chain");
    let shlib = fixture("libshlib.so");
    let cfi = fixture("cfi");
    let big = synthetic(0x1_f000, 700, 5);
    let mut set = TableSet::new();
    for table in [&chain, &big, &shlib] {
        set.add(table).expect("room");
    }
    let first = set.clone().take_changes();
    assert_eq!(first.chunks, (0..set.row_chunks() as u32).collect::<Vec<_>>());
    assert_eq!(first.pages_set, set.pages());
    assert!(first.pages_removed.is_empty());
    assert_eq!(first.rules, 0..set.rules().len());
    let mut kernel = Kernel::default();
    kernel.sync(&mut set, &[(0, &chain), (1, &big), (2, &shlib)], &[]);
    let rules = set.rules().len();
    let nothing = Changes {
        rules: rules..rules,
        ..Changes::default()
    };
    assert_eq!(set.take_changes(), nothing, "nothing new");

    set.remove(0);
    set.add(&cfi).expect("room");
    set.remove(3);
    set.add(&chain).expect("room");
    kernel.sync(
        &mut set,
        &[(1, &big), (2, &shlib), (4, &chain)],
        &[(0, &chain), (3, &cfi)],
    );

    set.remove(1);
    set.add(&shlib).expect("room");
    set.add(&big).expect("room");
    let loaded = [(2, &shlib), (4, &chain), (5, &shlib), (6, &big)];
    kernel.sync(&mut set, &loaded, &[(1, &big)]);
}

/// A random (seeded) sequence of adds and removes into a small capacity, changes taken at
/// random points: the simulated kernel stays in step with the set, refused adds change
/// nothing, and freed ranges do get reused.
#[test]
fn random_adds_and_removes_keep_the_kernel_in_step() {
    let pool = [
        fixture("chain"),
        fixture("libshlib.so"),
        fixture("cfi"),
        fixture("chain-g-nopie"),
        synthetic(0x1_f000, 400, 7),
        synthetic(0x40_0000, 150, 3),
        synthetic(0, 700, 40),
    ];
    let mut rng = tracer_unwind::testing::Rng::new(0x5eed_1234_abcd_0001);
    let mut next = move |n: usize| rng.below(n);
    let mut set = TableSet::with_capacity(Capacity {
        row_chunks: 3,
        pages: 24,
        rules: 200,
    });
    let mut kernel = Kernel::default();
    let mut loaded: Vec<(u32, &ObjectTable)> = Vec::new();
    let mut removed = Vec::new();
    let (mut refusals, mut reuses) = (0, 0);
    for _ in 0..300 {
        if !loaded.is_empty() && next(3) == 0 {
            let (id, table) = loaded.swap_remove(next(loaded.len()));
            assert!(set.remove(id));
            removed.push((id, table));
        } else {
            let table = &pool[next(pool.len())];
            let (before, mark) = (snapshot(&set), set.rows().len());
            match set.add(table) {
                Ok(id) => {
                    reuses += usize::from((set.objects[&id].start as usize) < mark);
                    loaded.push((id, table));
                }
                Err(AddError::RowsFull { .. } | AddError::PagesFull) => {
                    refusals += 1;
                    assert_eq!(snapshot(&set), before);
                }
                Err(e) => panic!("unexpected {e}"),
            }
        }
        let live: usize = loaded.iter().map(|(_, t)| rows_of(t)).sum();
        assert_eq!(set.live_rows(), live);
        if next(4) == 0 {
            kernel.sync(&mut set, &loaded, &removed);
            removed.clear();
        }
    }
    kernel.sync(&mut set, &loaded, &removed);
    assert!(refusals > 10 && reuses > 10, "refused {refusals}, reused {reuses}");
}

mod shares;
