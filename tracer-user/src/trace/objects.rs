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
    procmaps::{self, Mapping, MappingKind, ObjectKey},
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
    /// Where images without a file (the vDSO) are kept for symbolization.
    scratch: Option<Scratch>,
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
                MappingKind::Vdso => match self.vdso(pid, m) {
                    Some((object, bias)) => (Some(object), bias),
                    None => (None, 0),
                },
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

    /// The vDSO of `pid`: its image is read from the process (it has no file) and kept in a
    /// private file for symbolization; the kernel's vDSO is one object for every process.
    /// `None` when it cannot be read (the mapping then has no table).
    fn vdso(&mut self, pid: u32, m: &Mapping) -> Option<(usize, u64)> {
        let image = read_memory(pid, m.start, m.end).ok()?;
        let facts = procmaps::inspect(image.as_slice(), m.start, m.end, 0).ok()?;
        let key = ObjectKey::BuildId(facts.build_id.clone()?);
        if let Some(&i) = self.by_key.get(&key) {
            return Some((i, facts.bias));
        }
        let path = self
            .scratch
            .get_or_insert_with(Scratch::new)
            .keep("vdso", &image)
            .ok()?;
        let table = self.build_from_bytes(&path, &image);
        self.objects.push(Object {
            path,
            name: "[vdso]".to_owned(),
            table,
        });
        self.by_key.insert(key, self.objects.len() - 1);
        Some((self.objects.len() - 1, facts.bias))
    }

    /// The object's table from its `.sframe` and its call-frame information.
    fn build(&mut self, path: &Path) -> Result<Table, NoTable> {
        let bytes = std::fs::read(path).map_err(|e| NoTable::Unreadable(format!("{}: {e}", path.display())))?;
        self.build_from_bytes(path, &bytes)
    }

    fn build_from_bytes(&mut self, path: &Path, bytes: &[u8]) -> Result<Table, NoTable> {
        let unreadable = |what: &dyn std::fmt::Display| NoTable::Unreadable(format!("{}: {what}", path.display()));
        let (table, built) = build_object(bytes)
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

/// `[start, end)` of a process's memory (at most 1 MiB: a vDSO is a few pages).
fn read_memory(pid: u32, start: u64, end: u64) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt as _;
    let len = usize::try_from(end.saturating_sub(start)).unwrap_or(0).min(1 << 20);
    let mut image = vec![0; len];
    std::fs::File::open(format!("/proc/{pid}/mem"))?.read_exact_at(&mut image, start)?;
    Ok(image)
}

/// A private directory for images that have no file, removed with the catalog.
#[derive(Debug)]
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            dir: std::env::temp_dir().join(format!("sframe-trace.{}", std::process::id())),
        }
    }

    /// Write `bytes` to a file named `name` in the directory, and return its path.
    fn keep(&self, name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.dir.join(name);
        std::fs::write(&path, bytes)?;
        Ok(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
