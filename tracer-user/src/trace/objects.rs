//! The objects the traced processes map, and their unwind tables: each object (keyed by
//! build-id, else file identity) is read and flattened once, however many processes map it,
//! from its `.sframe`, else its `.eh_frame` (or `.debug_frame`), else not at all;
//! each process gets the mapping table the kernel resolves its PCs with, and userspace keeps a
//! copy to tell, per sample, which object and address each frame is in.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use tracer_common::trace::{ExecMapping, NO_OBJECT};

use crate::{
    procmaps::{Mapping, MappingKind, ObjectKey},
    table::{TableSet, build_object},
};

/// Why an object has no table (counted in the summary).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NoTable {
    /// Neither `.sframe` nor call-frame information (frame pointers are the fallback).
    NoUnwindInfo,
    /// The file could not be read or parsed; the message says why.
    Unreadable(String),
    /// The shared rule table is full.
    RulesFull,
}

/// Where an object's table came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TableSource {
    /// `.sframe` (gaps in it filled from the call-frame information).
    Sframe,
    /// `.eh_frame`, or `.debug_frame` when there is no `.eh_frame`.
    Cfi,
}

/// An object's table in the kernel maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Table {
    /// Its id in the kernel tables (`PageKey::object`).
    pub id: u32,
    pub source: TableSource,
    /// Rows of its sources (SFrame FREs and CFI rows) flattened for it.
    pub rows: u64,
}

/// One object the traced processes map.
#[derive(Debug)]
pub struct Object {
    /// Where to read it for symbolization (container paths resolved through `/proc/PID/root`).
    pub path: PathBuf,
    /// Short name for frames without a symbol.
    pub name: String,
    /// Its table, or why it has none.
    pub table: Result<Table, NoTable>,
}

/// One executable mapping of a traced process, as userspace resolves frames with it.
#[derive(Clone, Copy, Debug)]
pub struct ResolvedMapping {
    pub start: u64,
    pub end: u64,
    pub bias: u64,
    /// Index into [`Catalog::objects`], or `None` for anonymous or unreadable code.
    pub object: Option<usize>,
}

/// Every object seen, the kernel tables built from them, and each process's mappings.
#[derive(Default)]
pub struct Catalog {
    pub objects: Vec<Object>,
    by_key: HashMap<ObjectKey, usize>,
    pub tables: TableSet,
    pub processes: HashMap<u32, Vec<ResolvedMapping>>,
}

impl Catalog {
    /// Register a process's executable mappings, building tables for objects not seen before.
    /// Returns the mapping table for the kernel.
    pub fn add_process(&mut self, pid: u32, mappings: &[Mapping]) -> Vec<ExecMapping> {
        let mut resolved = Vec::with_capacity(mappings.len());
        let mut exec = Vec::with_capacity(mappings.len());
        for m in mappings {
            let (object, bias) = match &m.kind {
                MappingKind::File { key, bias } => (Some(self.object(pid, m, key)), *bias),
                _ => (None, 0),
            };
            let table = object.and_then(|i| self.objects[i].table.as_ref().ok().map(|t| t.id));
            resolved.push(ResolvedMapping {
                start: m.start,
                end: m.end,
                bias,
                object,
            });
            exec.push(ExecMapping {
                start: m.start,
                end: m.end,
                bias,
                object: table.unwrap_or(NO_OBJECT),
                _pad: 0,
            });
        }
        self.processes.insert(pid, resolved);
        exec
    }

    fn object(&mut self, pid: u32, m: &Mapping, key: &ObjectKey) -> usize {
        if let Some(&i) = self.by_key.get(key) {
            return i;
        }
        let path = readable_path(pid, m);
        let table = self.build(&path);
        let name = m
            .path
            .file_name()
            .map_or_else(|| m.path.display().to_string(), |n| n.to_string_lossy().into_owned());
        self.objects.push(Object { path, name, table });
        let index = self.objects.len() - 1;
        self.by_key.insert(key.clone(), index);
        index
    }

    /// The object's table from its `.sframe` and its call-frame information.
    fn build(&mut self, path: &Path) -> Result<Table, NoTable> {
        let unreadable = |what: &dyn std::fmt::Display| NoTable::Unreadable(format!("{}: {what}", path.display()));
        let bytes = std::fs::read(path).map_err(|e| unreadable(&e))?;
        let (table, built) = build_object(&bytes)
            .map_err(|e| unreadable(&e))?
            .ok_or(NoTable::NoUnwindInfo)?;
        let source = if built.sframe {
            TableSource::Sframe
        } else {
            TableSource::Cfi
        };
        let rows = table.stats().sframe_rows;
        let id = self.tables.add(&table).map_err(|_| NoTable::RulesFull)?;
        Ok(Table { id, source, rows })
    }

    /// The mapping of `pid` that holds `addr`.
    pub fn mapping(&self, pid: u32, addr: u64) -> Option<&ResolvedMapping> {
        let maps = self.processes.get(&pid)?;
        let i = maps.partition_point(|m| m.start <= addr).checked_sub(1)?;
        maps.get(i).filter(|m| addr < m.end)
    }
}

/// The file behind a mapping, as this process can open it: through the traced process's root
/// (containers), or its `map_files` link when the file was deleted or replaced.
fn readable_path(pid: u32, m: &Mapping) -> PathBuf {
    if m.deleted {
        return PathBuf::from(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end));
    }
    let rooted = PathBuf::from(format!("/proc/{pid}/root")).join(m.path.strip_prefix("/").unwrap_or(&m.path));
    // Outside a container the plain path is the same file and outlives the process.
    if std::fs::canonicalize(format!("/proc/{pid}/root")).is_ok_and(|r| r == std::path::Path::new("/")) {
        m.path.clone()
    } else {
        rooted
    }
}
