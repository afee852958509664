//! The unwind-table maps (`ROWS`, `PAGES`, `RULES`): their sizes, and keeping them equal to a
//! [`TableSet`] as it grows and shrinks (writing only what changed since the last sync: one
//! update per row chunk, page and rule; aya 0.14 has no batch updates). It does not build
//! tables or decide which objects to load.

use anyhow::Context as _;
use aya::{
    Ebpf,
    maps::{Array, HashMap},
};
use tracer_common::{
    trace::{MAP_PAGES, MAP_ROWS, MAP_RULES, RowChunk},
    unwind::{PageEntry, PageKey, UnwindRule},
    vma::{FileKey, FileTable, MAP_FILES},
};

use super::{is_missing, map_mut};
use crate::tables::{Capacity, TableSet};

/// `max_entries` of each table map: at least one (a map cannot be empty).
pub(super) struct MapSizes {
    pub rows: u32,
    pub pages: u32,
    pub rules: u32,
}

impl MapSizes {
    /// Room for `capacity`, or exactly for what `tables` holds now when there is none.
    pub fn of(tables: &TableSet, capacity: Option<&Capacity>) -> anyhow::Result<MapSizes> {
        let entries = |n: usize, what: &str| {
            u32::try_from(n.max(1)).with_context(|| format!("{n} {what} do not fit one BPF map"))
        };
        let (rows, pages, rules) = match capacity {
            Some(c) => (c.row_chunks, c.pages, c.rules),
            None => (tables.row_chunks(), tables.pages().len(), tables.rules().len()),
        };
        Ok(MapSizes {
            rows: entries(rows, "row chunks")?,
            pages: entries(pages, "pages")?,
            rules: entries(rules, "rules")?,
        })
    }
}

/// Write what changed in `tables` since the last sync into the maps of `ebpf`.
pub(super) fn sync(ebpf: &mut Ebpf, tables: &mut TableSet) -> anyhow::Result<()> {
    let changes = tables.take_changes();
    // Order matters to a walk running meanwhile: the files and pages of removed objects go
    // first (their rows may be reused below), new pages and files last (their rows and rules
    // are then in place).
    if let Some(files) = ebpf.map_mut(MAP_FILES) {
        let mut files: HashMap<_, FileKey, FileTable> = HashMap::try_from(files)?;
        for key in &changes.files.removed {
            log::trace!("{MAP_FILES}: {key:?} removed");
            match files.remove(key) {
                Err(err) if !is_missing(&err) => {
                    return Err(err).with_context(|| format!("removing a file from {MAP_FILES}"));
                }
                _ => {}
            }
        }
    }
    let mut pages: HashMap<_, PageKey, PageEntry> = HashMap::try_from(map_mut(ebpf, MAP_PAGES)?)?;
    for key in &changes.pages_removed {
        match pages.remove(key) {
            Err(err) if !is_missing(&err) => {
                return Err(err).with_context(|| {
                    format!(
                        "removing page {:#x} of object {} from {MAP_PAGES}",
                        key.page, key.object
                    )
                });
            }
            _ => {}
        }
    }
    let mut rows: Array<_, RowChunk> = Array::try_from(map_mut(ebpf, MAP_ROWS)?)?;
    for &index in &changes.chunks {
        rows.set(index, tables.chunk(index), 0)
            .with_context(|| format!("writing row chunk {index} into {MAP_ROWS}"))?;
    }
    let mut rules: Array<_, UnwindRule> = Array::try_from(map_mut(ebpf, MAP_RULES)?)?;
    for i in changes.rules {
        let rule = tables.rules()[i];
        let index = u32::try_from(i).context("rule index past u32")?;
        rules
            .set(index, rule, 0)
            .with_context(|| format!("writing rule {i} into {MAP_RULES}"))?;
    }
    let mut pages: HashMap<_, PageKey, PageEntry> = HashMap::try_from(map_mut(ebpf, MAP_PAGES)?)?;
    for (key, entry) in &changes.pages_set {
        pages
            .insert(key, entry, 0)
            .with_context(|| format!("writing page {:#x} of object {} into {MAP_PAGES}", key.page, key.object))?;
    }
    if let Some(files) = ebpf.map_mut(MAP_FILES) {
        let mut files: HashMap<_, FileKey, FileTable> = HashMap::try_from(files)?;
        for (key, value) in &changes.files.set {
            log::trace!("{MAP_FILES}: {key:?} -> {value:?}");
            // A full map (more files loaded than it holds) leaves the file to stack copies.
            if let Err(err) = files.insert(key, value, 0) {
                log::debug!("{MAP_FILES}: table {} not entered: {err}", value.object);
            }
        }
    }
    Ok(())
}
