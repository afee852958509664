//! [`TableSet`]: the tables of several objects in the kernel's global layout, ready to be
//! written into the `PAGES`, `ROWS` and `RULES` maps (`tracer_common::trace`). Pure: it neither
//! builds tables from SFrame nor talks to the kernel, and it only grows (removing objects
//! means building a new set).
//!
//! 1. Object ids are dense from 0, in the order objects are added.
//! 2. Each object's rules are interned into one shared [`RuleTable`]; its rows, with their rule
//!    indices remapped, are appended to one global row vector.
//! 3. Each of its pages becomes `(PageKey { object, page }, PageEntry { first_row, num_rows })`,
//!    `first_row` being the index of the page's first row in the global vector.
//! 4. [`TableSet::lookup`] finds a rule exactly as the kernel does: the page entry, then
//!    `walk::search_page` over the global rows from `first_row`.

use tracer_common::trace::{NO_OBJECT, ROW_CHUNK};
use tracer_common::unwind::{PAGE_SHIFT, PageEntry, PageKey, UnwindRow, UnwindRule};
use tracer_common::walk;

use super::{ObjectTable, PAGE_ENTRY_BYTES, ROW_BYTES, RULE_BYTES, RuleTable, RulesFull};

/// The unwind tables of every object to load, in the kernel's layout.
#[derive(Clone, Debug, Default)]
pub struct TableSet {
    rows: Vec<UnwindRow>,
    /// Sorted by key: objects are added with ascending ids, each one's pages ascending.
    pages: Vec<(PageKey, PageEntry)>,
    rules: RuleTable,
    num_objects: u32,
}

impl TableSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add `table` as the next object and return its id (steps 1-3). All or nothing: on error
    /// the set is unchanged. Fails when the shared rule table would pass 65536 rules (or, far
    /// beyond any real set, when the global row index or the object id would pass `u32`).
    pub fn add(&mut self, table: &ObjectTable) -> Result<u32, RulesFull> {
        let object = self.num_objects;
        if object == NO_OBJECT {
            return Err(RulesFull);
        }
        let added: usize = table.pages().iter().map(|(_, rows)| rows.len()).sum();
        if u32::try_from(self.rows.len() + added).is_err() {
            return Err(RulesFull);
        }
        let pages = self.rules.remap(table)?;
        self.rows.reserve(added);
        for (page, rows) in pages {
            // Both fit: the total was checked above.
            let entry = PageEntry {
                first_row: self.rows.len() as u32,
                num_rows: rows.len() as u32,
            };
            self.rows.extend(rows);
            self.pages.push((PageKey { object, page }, entry));
        }
        self.num_objects += 1;
        Ok(object)
    }

    /// The global rows (`ROWS`, before chunking).
    pub fn rows(&self) -> &[UnwindRow] {
        &self.rows
    }

    /// The page index (`PAGES`), sorted by key.
    pub fn pages(&self) -> &[(PageKey, PageEntry)] {
        &self.pages
    }

    /// The shared rules (`RULES`).
    pub fn rules(&self) -> &[UnwindRule] {
        self.rules.rules()
    }

    pub fn num_objects(&self) -> u32 {
        self.num_objects
    }

    /// `ROWS` entries: `ceil(rows / ROW_CHUNK)`, at least 1 (a map cannot be empty).
    pub fn row_chunks(&self) -> usize {
        self.rows.len().div_ceil(ROW_CHUNK).max(1)
    }

    /// Kernel memory of the three table maps as sized for this set: whole row chunks, page
    /// entries and rules, each map at least one entry (hash-map bookkeeping not counted).
    pub fn map_bytes(&self) -> u64 {
        let chunks = self.row_chunks() as u64 * ROW_CHUNK as u64 * ROW_BYTES;
        let pages = self.pages.len().max(1) as u64 * PAGE_ENTRY_BYTES;
        let rules = self.rules().len().max(1) as u64 * RULE_BYTES;
        chunks + pages + rules
    }

    /// The rule the kernel finds for object-relative `addr` of `object` (step 4); `NO_INFO`
    /// where no page covers it.
    pub fn lookup(&self, object: u32, addr: u64) -> UnwindRule {
        let Ok(page) = u32::try_from(addr >> PAGE_SHIFT) else {
            return UnwindRule::NO_INFO;
        };
        let key = PageKey { object, page };
        let Ok(at) = self.pages.binary_search_by_key(&key, |&(k, _)| k) else {
            return UnwindRule::NO_INFO;
        };
        let Some(&(_, entry)) = self.pages.get(at) else {
            return UnwindRule::NO_INFO;
        };
        let row_at = |i: u32| {
            let index = usize::try_from(entry.first_row.wrapping_add(i)).ok()?;
            self.rows.get(index).copied()
        };
        walk::search_page(entry.num_rows, (addr & 0xffff) as u16, row_at)
            .and_then(|rule| self.rules().get(usize::from(rule)).copied())
            .unwrap_or(UnwindRule::NO_INFO)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::elf::find_sframe;
    use crate::sframe::Section;
    use crate::table::build_from_sframe;

    fn fixture(name: &str) -> ObjectTable {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/bin/v3/x86_64")
            .join(name);
        let bytes = std::fs::read(&path).expect("read fixture");
        let sframe = find_sframe(&bytes).expect("elf").expect("has .sframe");
        let section = Section::parse(&sframe.data, sframe.vaddr).expect("parses");
        build_from_sframe(&section).expect("builds")
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

    /// Two fixture objects added to one set: the global lookup equals each object's own lookup
    /// at every row boundary, and ids are dense.
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

    /// The layout is what the kernel maps hold: pages sorted, slices contiguous and in range,
    /// and the byte count covers whole row chunks.
    #[test]
    fn layout_is_contiguous_and_sized() {
        let mut set = TableSet::new();
        assert_eq!(
            set.map_bytes(),
            (ROW_CHUNK as u64) * 4 + 16 + 12,
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
        assert!(set.rows().iter().all(|r| usize::from(r.rule) < set.rules().len()));
        let chunks = set.rows().len().div_ceil(ROW_CHUNK) as u64;
        let expected = chunks * ROW_CHUNK as u64 * 4 + set.pages().len() as u64 * 16 + set.rules().len() as u64 * 12;
        assert_eq!(set.map_bytes(), expected);
    }
}
