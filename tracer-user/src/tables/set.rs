//! [`TableSet`]: the tables of the loaded objects in the kernel's global layout, kept in step
//! with the `PAGES`, `ROWS` and `RULES` maps (`tracer_common::trace`) while objects come and go.
//! Pure: it neither builds tables from SFrame nor talks to the kernel; it says what changed
//! ([`TableSet::take_changes`]) and someone else writes that into the maps.
//!
//! 1. Object ids count up from 0 and are never reused, so a stale id in the kernel finds no
//!    page instead of another object's.
//! 2. Each object's rules are interned into one shared [`RuleTable`] (never shrinks); its rows,
//!    with their rule indices remapped, take one contiguous range of the global row space:
//!    the first free range large enough, else the top ([`RowSpace`]).
//! 3. Each of its pages becomes `(PageKey { object, page }, PageEntry { first_row, num_rows })`,
//!    `first_row` being the index of the page's first row in the global row space.
//! 4. Removing an object deletes its pages and frees its rows; the rows keep their values
//!    (no page reaches them) until an added object overwrites them.
//! 5. [`TableSet::lookup`] finds a rule exactly as the kernel does: the page entry, then
//!    `walk::search_page` over the global rows from `first_row`.
//!
//! With a [`Capacity`] (the sizes of maps created once), `add` refuses what would not fit.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use tracer_common::trace::{NO_OBJECT, ROW_CHUNK, RowChunk};
use tracer_common::unwind::{PAGE_SHIFT, PageEntry, PageKey, UnwindRow, UnwindRule};
use tracer_common::walk;

use super::files::{FileChanges, FileTables};
use super::rowspace::RowSpace;
use crate::procmaps::ObjectKey;
use tracer_common::vma::FileSegment;
use tracer_unwind::table::{ObjectTable, PAGE_ENTRY_BYTES, ROW_BYTES, RULE_BYTES, RuleTable, RulesFull};

/// Rules a row's 16-bit index can name.
const MAX_RULES: usize = 1 << 16;

/// `max_entries` of the table maps, created once: `ROWS` (chunks of [`ROW_CHUNK`] rows),
/// `PAGES` and `RULES`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    pub row_chunks: usize,
    pub pages: usize,
    pub rules: usize,
}

/// Why [`TableSet::add`] refused an object; the set is unchanged.
#[derive(Debug, thiserror::Error, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AddError {
    /// The shared rule table would pass its capacity (at most 65536 rules).
    #[error("the shared rule table is full")]
    RulesFull,
    /// No free range of the row space holds the object's rows (`free` counts all free rows,
    /// which may be fragmented into smaller ranges).
    #[error("row space full: {needed} contiguous rows needed, {free} rows free")]
    RowsFull { needed: usize, free: usize },
    /// The page index would pass its capacity.
    #[error("the page index is full")]
    PagesFull,
    /// Every object id has been used.
    #[error("object ids exhausted")]
    IdsExhausted,
}

impl From<RulesFull> for AddError {
    fn from(_: RulesFull) -> Self {
        AddError::RulesFull
    }
}

/// What to write into the kernel maps to bring them from the state of the previous
/// [`TableSet::take_changes`] (or empty maps) to the current one. Applied in this order, no
/// page ever points at rows of another object or at rules not written yet:
/// 1. delete `pages_removed` (their rows may be overwritten in step 3);
/// 2. write the rules of `rules` ([`TableSet::rules`]);
/// 3. write every chunk of `chunks` ([`TableSet::chunk`]);
/// 4. insert `pages_set`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Indices of the `ROWS` chunks whose content changed, ascending, without repeats.
    pub chunks: Vec<u32>,
    /// Pages added, by key.
    pub pages_set: Vec<(PageKey, PageEntry)>,
    /// Pages the kernel has and must forget, by key.
    pub pages_removed: Vec<PageKey>,
    /// Indices of the rules added.
    pub rules: Range<usize>,
    /// `FILES` entries (written after the pages, deleted before them).
    pub files: FileChanges,
}

/// Changes not yet taken.
#[derive(Clone, Debug, Default)]
struct Pending {
    chunks: BTreeSet<u32>,
    pages_set: BTreeMap<PageKey, PageEntry>,
    pages_removed: BTreeSet<PageKey>,
    /// Rules from this index on are new.
    rules_from: usize,
}

/// The unwind tables of the loaded objects, in the kernel's layout.
#[derive(Clone, Debug, Default)]
pub struct TableSet {
    /// The row space up to its high-water mark (free ranges keep stale rows).
    rows: Vec<UnwindRow>,
    space: RowSpace,
    /// Live pages, sorted by key: ids only grow, so an added object's pages go at the end.
    pages: Vec<(PageKey, PageEntry)>,
    rules: RuleTable,
    /// Loaded objects and the rows they take.
    objects: BTreeMap<u32, Range<u32>>,
    next_id: u32,
    /// `None`: unbounded (maps sized to the set when it is loaded).
    capacity: Option<Capacity>,
    pending: Pending,
    /// The files the loaded tables were built from (`FILES`).
    files: FileTables,
}

impl TableSet {
    /// An unbounded set: what one-shot users load into maps sized for it.
    pub fn new() -> Self {
        Self::default()
    }

    /// A set that fits maps created with `capacity`.
    pub fn with_capacity(capacity: Capacity) -> Self {
        let mut set = Self::default();
        set.set_capacity(capacity);
        set
    }

    /// From now on, fit maps created with `capacity` (typically: a set filled under a large
    /// budget, then bounded to what it holds plus headroom before the maps are created).
    /// Nothing loaded is removed: past a capacity already exceeded, `add` refuses until
    /// enough is removed.
    pub fn set_capacity(&mut self, capacity: Capacity) {
        let rows = capacity.row_chunks.saturating_mul(ROW_CHUNK);
        self.space.set_limit(u32::try_from(rows).unwrap_or(u32::MAX));
        self.capacity = Some(capacity);
    }

    /// Rows loaded object `object` takes in the row space (0 when it is not loaded).
    pub fn object_rows(&self, object: u32) -> u64 {
        self.objects.get(&object).map_or(0, |r| u64::from(r.end - r.start))
    }

    /// The capacity set; `None` when unbounded.
    pub fn capacity(&self) -> Option<Capacity> {
        self.capacity
    }

    /// Add `table` as a new object and return its id (steps 1-3). All or nothing: on error
    /// the set is unchanged.
    pub fn add(&mut self, table: &ObjectTable) -> Result<u32, AddError> {
        let object = self.next_id;
        if object == NO_OBJECT {
            return Err(AddError::IdsExhausted);
        }
        let page_limit = self.capacity.map_or(usize::MAX, |c| c.pages);
        if self.pages.len().saturating_add(table.pages().len()) > page_limit {
            return Err(AddError::PagesFull);
        }
        let needed: usize = table.pages().iter().map(|(_, rows)| rows.len()).sum();
        let rows_full = AddError::RowsFull {
            needed,
            free: self.space.free() as usize,
        };
        let n = u32::try_from(needed).map_err(|_| rows_full)?;
        let start = self.space.find(n).ok_or(rows_full)?;
        let pages = self.remap(table)?;

        // Nothing can fail from here on.
        self.space.take(start, n);
        let end = start + n;
        if self.rows.len() < end as usize {
            self.rows.resize(end as usize, UnwindRow { addr_lo: 0, rule: 0 });
        }
        let mut first_row = start;
        for (page, rows) in pages {
            // Fits: the object's rows end at `end`, a `u32`.
            let num_rows = rows.len() as u32;
            let at = first_row as usize;
            self.rows[at..at + rows.len()].copy_from_slice(&rows);
            let key = PageKey { object, page };
            let entry = PageEntry { first_row, num_rows };
            self.pages.push((key, entry));
            self.pending.pages_set.insert(key, entry);
            first_row += num_rows;
        }
        if n > 0 {
            let chunk = |row: u32| row / ROW_CHUNK as u32;
            self.pending.chunks.extend(chunk(start)..=chunk(end - 1));
        }
        self.objects.insert(object, start..end);
        self.next_id += 1;
        Ok(object)
    }

    /// `table`'s pages with rule indices of the shared table, whose capacity it may not pass
    /// (if it would, the shared table is left as it was).
    fn remap(&mut self, table: &ObjectTable) -> Result<Vec<(u32, Vec<UnwindRow>)>, AddError> {
        let limit = self.capacity.map_or(MAX_RULES, |c| c.rules.min(MAX_RULES));
        // An object adds at most its local rules: only a set near its limit needs a trial copy.
        if self.rules().len() + table.rules().len() <= limit {
            return Ok(self.rules.remap(table)?);
        }
        let mut rules = self.rules.clone();
        let pages = rules.remap(table)?;
        if rules.rules().len() > limit {
            return Err(AddError::RulesFull);
        }
        self.rules = rules;
        Ok(pages)
    }

    /// Unload `object` (step 4); `false` when it is not loaded.
    pub fn remove(&mut self, object: u32) -> bool {
        let Some(rows) = self.objects.remove(&object) else {
            return false;
        };
        self.files.unbind(object);
        let from = self.pages.partition_point(|(k, _)| k.object < object);
        let to = self.pages.partition_point(|(k, _)| k.object <= object);
        for (key, _) in self.pages.drain(from..to) {
            // A page the kernel never saw needs no deleting.
            if self.pending.pages_set.remove(&key).is_none() {
                self.pending.pages_removed.insert(key);
            }
        }
        self.space.release(rows);
        self.rows.truncate(self.space.end() as usize);
        true
    }

    /// What changed since the previous call (everything, on the first).
    pub fn take_changes(&mut self) -> Changes {
        let pending = std::mem::take(&mut self.pending);
        self.pending.rules_from = self.rules().len();
        Changes {
            chunks: pending.chunks.into_iter().collect(),
            pages_set: pending.pages_set.into_iter().collect(),
            pages_removed: pending.pages_removed.into_iter().collect(),
            rules: pending.rules_from..self.rules().len(),
            files: self.files.take_changes(),
        }
    }

    /// Loaded table `object` (of the caller's object `owner`) is the table of the file `key`,
    /// with these executable segments: the kernel may use it for that file's code in processes
    /// it finds through their VMAs (`files`). Undone when the table is removed.
    pub fn bind_file(&mut self, object: u32, owner: usize, key: &ObjectKey, segments: &[FileSegment]) {
        if self.objects.contains_key(&object) {
            self.files.bind(object, owner, key, segments);
        }
    }

    /// The owner [`TableSet::bind_file`] gave loaded table `object`.
    pub fn owner(&self, object: u32) -> Option<usize> {
        self.files.owner(object)
    }

    /// The current content of `ROWS` chunk `index`: rows past the high-water mark are zero.
    pub fn chunk(&self, index: u32) -> RowChunk {
        let mut chunk = RowChunk {
            rows: [UnwindRow { addr_lo: 0, rule: 0 }; ROW_CHUNK],
        };
        let start = (index as usize).saturating_mul(ROW_CHUNK);
        if let Some(rows) = self.rows.get(start..) {
            let part = &rows[..rows.len().min(ROW_CHUNK)];
            chunk.rows[..part.len()].copy_from_slice(part);
        }
        chunk
    }

    /// The global rows (`ROWS`, before chunking) up to the high-water mark; freed ranges
    /// hold stale rows no page reaches.
    pub fn rows(&self) -> &[UnwindRow] {
        &self.rows
    }

    /// The live page index (`PAGES`), sorted by key.
    pub fn pages(&self) -> &[(PageKey, PageEntry)] {
        &self.pages
    }

    /// The shared rules (`RULES`).
    pub fn rules(&self) -> &[UnwindRule] {
        self.rules.rules()
    }

    /// Objects loaded now.
    pub fn num_objects(&self) -> u32 {
        // Fits: ids are `u32`s.
        self.objects.len() as u32
    }

    /// Rows of the loaded objects.
    pub fn live_rows(&self) -> usize {
        self.space.live() as usize
    }

    /// `ROWS` entries in use: `ceil(high-water mark / ROW_CHUNK)`, at least 1 (a map cannot be
    /// empty).
    pub fn row_chunks(&self) -> usize {
        (self.space.end() as usize).div_ceil(ROW_CHUNK).max(1)
    }

    /// Kernel memory of what is in use: whole row chunks up to the high-water mark, live page
    /// entries and rules, each map at least one entry (hash-map bookkeeping not counted).
    pub fn map_bytes(&self) -> u64 {
        bytes(self.row_chunks(), self.pages.len(), self.rules().len())
    }

    /// Kernel memory of the maps as created with the capacity, counted as
    /// [`TableSet::map_bytes`] does; an unbounded set's maps are sized to it, so the same.
    pub fn capacity_bytes(&self) -> u64 {
        match self.capacity {
            Some(c) => bytes(c.row_chunks, c.pages, c.rules),
            None => self.map_bytes(),
        }
    }

    /// The rule the kernel finds for object-relative `addr` of `object` (step 5); `NO_INFO`
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

impl TableSet {
    /// The lengths of its collections, named (for watching a long session's memory).
    pub fn sizes(&self, add: &mut dyn FnMut(&'static str, usize)) {
        add("tables.rows", self.rows.len());
        add("tables.rows_capacity", self.rows.capacity());
        add("tables.pages", self.pages.len());
        add("tables.pages_capacity", self.pages.capacity());
        add("tables.rules", self.rules().len());
        add("tables.objects", self.objects.len());
    }
}

/// Bytes of `chunks` row chunks, `pages` page entries and `rules` rules, each at least one.
fn bytes(chunks: usize, pages: usize, rules: usize) -> u64 {
    let entries = |n: usize, size: u64| (n.max(1) as u64).saturating_mul(size);
    entries(chunks, ROW_CHUNK as u64 * ROW_BYTES)
        .saturating_add(entries(pages, PAGE_ENTRY_BYTES))
        .saturating_add(entries(rules, RULE_BYTES))
}

#[cfg(test)]
mod tests;
