//! The unwind-table maps (`ROWS`, `PAGES`, `RULES`): their sizes for a [`TableSet`] and
//! writing the set into them once, after load. One update per row chunk, page and rule (aya
//! 0.14 has no batch updates). It does not build tables or decide which objects to load.

use anyhow::Context as _;
use aya::{
    Ebpf,
    maps::{Array, HashMap},
};
use tracer_common::{
    trace::{MAP_PAGES, MAP_ROWS, MAP_RULES, ROW_CHUNK, RowChunk},
    unwind::{PageEntry, PageKey, UnwindRow, UnwindRule},
};

use super::map_mut;
use crate::table::TableSet;

/// `max_entries` of each table map: at least one (a map cannot be empty).
pub(super) struct MapSizes {
    pub rows: u32,
    pub pages: u32,
    pub rules: u32,
}

impl MapSizes {
    pub fn of(tables: &TableSet) -> anyhow::Result<MapSizes> {
        let entries = |n: usize, what: &str| {
            u32::try_from(n.max(1)).with_context(|| format!("{n} {what} do not fit one BPF map"))
        };
        Ok(MapSizes {
            rows: entries(tables.row_chunks(), "row chunks")?,
            pages: entries(tables.pages().len(), "pages")?,
            rules: entries(tables.rules().len(), "rules")?,
        })
    }
}

/// Write `tables` into the maps of `ebpf`, sized by [`MapSizes::of`] the same set.
pub(super) fn fill(ebpf: &mut Ebpf, tables: &TableSet) -> anyhow::Result<()> {
    let mut rows: Array<_, RowChunk> = Array::try_from(map_mut(ebpf, MAP_ROWS)?)?;
    let mut chunk = RowChunk {
        rows: [UnwindRow { addr_lo: 0, rule: 0 }; ROW_CHUNK],
    };
    for (i, part) in tables.rows().chunks(ROW_CHUNK).enumerate() {
        chunk.rows[..part.len()].copy_from_slice(part);
        chunk.rows[part.len()..].fill(UnwindRow { addr_lo: 0, rule: 0 });
        let index = u32::try_from(i).context("row chunk index past u32")?;
        rows.set(index, chunk, 0)
            .with_context(|| format!("writing row chunk {i} into {MAP_ROWS}"))?;
    }
    let mut pages: HashMap<_, PageKey, PageEntry> = HashMap::try_from(map_mut(ebpf, MAP_PAGES)?)?;
    for (key, entry) in tables.pages() {
        pages
            .insert(key, entry, 0)
            .with_context(|| format!("writing page {:#x} of object {} into {MAP_PAGES}", key.page, key.object))?;
    }
    let mut rules: Array<_, UnwindRule> = Array::try_from(map_mut(ebpf, MAP_RULES)?)?;
    for (i, rule) in tables.rules().iter().enumerate() {
        let index = u32::try_from(i).context("rule index past u32")?;
        rules
            .set(index, rule, 0)
            .with_context(|| format!("writing rule {i} into {MAP_RULES}"))?;
    }
    Ok(())
}
