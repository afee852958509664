//! The objects the traced processes map, and their unwind tables: each object (keyed by
//! build-id, else file identity) is read and flattened once, however many processes map it,
//! from its `.sframe`, else its `.eh_frame` (or `.debug_frame`), else not at all;
//! each process gets the mapping table the kernel resolves its PCs with, and userspace keeps a
//! copy to tell, per sample, which object and address each frame is in. Objects are counted by
//! the processes that map them; the table of an object no process maps any more is unloaded
//! (the object itself stays, for symbolizing the samples already taken) and rebuilt if a
//! process maps it again. A process that exits or execs keeps its mappings a while for the
//! samples taken before that moment, apart from those of whatever takes its pid next.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use tracer_common::trace::{ExecMapping, NO_OBJECT};

use crate::{
    procmaps::{self, Mapping, MappingKind, ObjectKey},
    table::{ObjectTable, TableSet, build_object},
};

/// Why an object has no table (counted in the summary).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NoTable {
    /// Neither `.sframe` nor call-frame information (frame pointers are the fallback).
    NoUnwindInfo,
    /// The file could not be read or parsed; the message says why.
    Unreadable(String),
    /// The table maps have no room left (`--max-table-memory`, or the shared rule table); the
    /// message says which part is full.
    NoRoom(String),
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
    /// Processes that map it now.
    pub users: u32,
    /// Since when no process maps it (`None` while one does).
    pub unused_since: Option<std::time::Instant>,
    /// Its table was unloaded (no process mapped it any more).
    pub unloaded: bool,
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
    /// The mappings of processes that exited or exec'ed, oldest first per pid (see
    /// [`Catalog::end_process`]).
    ended: HashMap<u32, Vec<Ended>>,
    /// Tables built ahead, by the path they were read from, waiting to be installed.
    prebuilt: HashMap<PathBuf, Result<Prebuilt, NoTable>>,
}

/// The mappings a process had until it exited or exec'ed.
#[derive(Debug)]
struct Ended {
    /// When, in kernel time (`bpf_ktime_get_ns`, as samples carry it).
    at_ns: u64,
    /// When it was heard of, to forget it after a while.
    noted: Instant,
    mappings: Vec<ResolvedMapping>,
}

/// An object's table, built but not yet in the kernel tables.
#[derive(Debug)]
pub struct Prebuilt {
    table: ObjectTable,
    source: TableSource,
    rows: u64,
}

/// Read and build the table of the object at `path` (pure; any thread).
pub fn prebuild(path: &Path) -> Result<Prebuilt, NoTable> {
    let bytes = std::fs::read(path).map_err(|e| NoTable::Unreadable(format!("{}: {e}", path.display())))?;
    prebuild_bytes(path, &bytes)
}

fn prebuild_bytes(path: &Path, bytes: &[u8]) -> Result<Prebuilt, NoTable> {
    let (table, built) = build_object(bytes)
        .map_err(|e| NoTable::Unreadable(format!("{}: {e}", path.display())))?
        .ok_or(NoTable::NoUnwindInfo)?;
    let source = if built.sframe {
        TableSource::Sframe
    } else {
        TableSource::Cfi
    };
    let rows = table.stats().sframe_rows;
    Ok(Prebuilt { table, source, rows })
}

impl Catalog {
    /// An empty catalog whose tables go into `tables` (which bounds their room).
    pub fn with_tables(tables: TableSet) -> Catalog {
        Catalog {
            tables,
            ..Catalog::default()
        }
    }

    /// Register a process's executable mappings (replacing those it had: exec, dlopen),
    /// building tables for objects not seen before or unloaded since. Returns the mapping table
    /// for the kernel.
    pub fn add_process(&mut self, pid: u32, mappings: &[Mapping]) -> Vec<ExecMapping> {
        let old = self.processes.remove(&pid).unwrap_or_default();
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
            if let Some(i) = object {
                self.hold(i);
            }
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
        self.release(&old);
        exec
    }

    /// Forget a process: its objects lose a user (see [`Catalog::unload_unused`]).
    pub fn remove_process(&mut self, pid: u32) {
        if let Some(old) = self.processes.remove(&pid) {
            self.release(&old);
        }
    }

    /// `pid` exited or exec'ed at kernel time `at_ns`: its mappings now serve only samples
    /// taken before then, and samples taken after are resolved through the mappings loaded
    /// next (the new image, or a new process that got the same pid), or not at all. Its
    /// objects lose a user. Nothing happens for a process that is not known.
    pub fn end_process(&mut self, pid: u32, at_ns: u64) {
        if let Some(mappings) = self.processes.remove(&pid) {
            self.release(&mappings);
            self.ended.entry(pid).or_default().push(Ended {
                at_ns,
                noted: Instant::now(),
                mappings,
            });
        }
    }

    /// Forget the mappings of processes that ended more than `after` ago.
    pub fn expire_ended(&mut self, after: Duration) {
        self.ended.retain(|_, ended| {
            ended.retain(|e| e.noted.elapsed() < after);
            !ended.is_empty()
        });
    }

    /// Unload the tables of objects no process has mapped for `idle` (a program started
    /// again and again keeps its table meanwhile); returns how many.
    pub fn unload_unused(&mut self, idle: std::time::Duration) -> usize {
        let mut unloaded = 0;
        for object in &mut self.objects {
            if object.users == 0
                && object.unused_since.is_some_and(|t| t.elapsed() >= idle)
                && !object.unloaded
                && let Ok(table) = &object.table
            {
                self.tables.remove(table.id);
                object.unloaded = true;
                unloaded += 1;
            }
        }
        unloaded
    }

    /// One more process maps object `i`: an unloaded table is built again.
    fn hold(&mut self, i: usize) {
        if self.objects[i].users == 0 && self.objects[i].unloaded {
            let path = self.objects[i].path.clone();
            self.objects[i].table = self.build(&path);
            self.objects[i].unloaded = false;
        }
        self.objects[i].users += 1;
        self.objects[i].unused_since = None;
    }

    /// The objects of `mappings` lose a user each.
    fn release(&mut self, mappings: &[ResolvedMapping]) {
        for i in mappings.iter().filter_map(|m| m.object) {
            let object = &mut self.objects[i];
            object.users = object.users.saturating_sub(1);
            if object.users == 0 {
                object.unused_since = Some(std::time::Instant::now());
            }
        }
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
        self.objects.push(Object {
            path,
            name,
            table,
            users: 0,
            unused_since: None,
            unloaded: false,
        });
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
            users: 0,
            unused_since: None,
            unloaded: false,
        });
        self.by_key.insert(key, self.objects.len() - 1);
        Some((self.objects.len() - 1, facts.bias))
    }

    /// The object's table from its `.sframe` and its call-frame information: built ahead
    /// (see [`Catalog::missing`]) or now.
    fn build(&mut self, path: &Path) -> Result<Table, NoTable> {
        let prebuilt = match self.prebuilt.remove(path) {
            Some(prebuilt) => prebuilt,
            None => prebuild(path),
        };
        self.install(prebuilt?)
    }

    fn build_from_bytes(&mut self, path: &Path, bytes: &[u8]) -> Result<Table, NoTable> {
        self.install(prebuild_bytes(path, bytes)?)
    }

    /// Put a built table into the kernel tables.
    fn install(&mut self, prebuilt: Prebuilt) -> Result<Table, NoTable> {
        let id = self
            .tables
            .add(&prebuilt.table)
            .map_err(|e| NoTable::NoRoom(e.to_string()))?;
        Ok(Table {
            id,
            source: prebuilt.source,
            rows: prebuilt.rows,
        })
    }

    /// The files of `pid`'s mappings whose tables [`Catalog::add_process`] would build: objects
    /// not seen before, or unloaded since. Build them with [`prebuild`] (on another thread:
    /// it is pure) and hand the results to [`Catalog::add_prebuilt`] first, and `add_process`
    /// only installs them.
    pub fn missing(&self, pid: u32, mappings: &[Mapping]) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = mappings
            .iter()
            .filter_map(|m| {
                let MappingKind::File { key, .. } = &m.kind else {
                    return None;
                };
                match self.by_key.get(key) {
                    None => Some(readable_path(pid, m)),
                    Some(&i) if self.objects[i].unloaded && self.objects[i].users == 0 => {
                        Some(self.objects[i].path.clone())
                    }
                    Some(_) => None,
                }
            })
            .filter(|path| !self.prebuilt.contains_key(path))
            .collect();
        paths.sort();
        paths.dedup();
        paths
    }

    /// A table built ahead for the object at `path`.
    pub fn add_prebuilt(&mut self, path: PathBuf, prebuilt: Result<Prebuilt, NoTable>) {
        self.prebuilt.insert(path, prebuilt);
    }

    /// The mapping of `pid` that holds `addr`.
    pub fn mapping(&self, pid: u32, addr: u64) -> Option<&ResolvedMapping> {
        find_mapping(self.processes.get(&pid)?, addr)
    }

    /// The mapping that held `addr` in the process with this `pid` at kernel time `time_ns`:
    /// that of the first image ended after `time_ns` (see [`Catalog::end_process`]), else the
    /// current one.
    pub fn mapping_at(&self, pid: u32, addr: u64, time_ns: u64) -> Option<&ResolvedMapping> {
        let ended = self
            .ended
            .get(&pid)
            .and_then(|ended| ended.iter().find(|e| time_ns < e.at_ns));
        match ended {
            Some(ended) => find_mapping(&ended.mappings, addr),
            None => self.mapping(pid, addr),
        }
    }
}

/// The mapping of `maps` (sorted by start, not overlapping) that holds `addr`.
fn find_mapping(maps: &[ResolvedMapping], addr: u64) -> Option<&ResolvedMapping> {
    let i = maps.partition_point(|m| m.start <= addr).checked_sub(1)?;
    maps.get(i).filter(|m| addr < m.end)
}

/// The file behind a mapping, as this process can open it: the first of these that is the
/// mapped file (same inode): the path as `/proc/PID/maps` shows it (relative to this
/// process's root; it outlives the process), the same path inside the process's own root
/// (containers: another mount namespace), or the process's `map_files` link (deleted or
/// replaced files, and anything else).
fn readable_path(pid: u32, m: &Mapping) -> PathBuf {
    use std::os::unix::fs::MetadataExt as _;
    let map_file = PathBuf::from(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end));
    if m.deleted {
        return map_file;
    }
    let rooted = PathBuf::from(format!("/proc/{pid}/root")).join(m.path.strip_prefix("/").unwrap_or(&m.path));
    [m.path.clone(), rooted]
        .into_iter()
        .find(|path| std::fs::metadata(path).is_ok_and(|meta| meta.ino() == m.inode))
        .unwrap_or(map_file)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Objects are counted by the processes that map them: a table is unloaded only once no
    /// process maps it, after the idle time, and built again when a process maps it again.
    #[test]
    fn tables_follow_the_processes_that_map_them() {
        let mappings = procmaps::executable_mappings(std::process::id()).expect("own mappings");
        let mut catalog = Catalog::default();
        catalog.add_process(1, &mappings);
        catalog.add_process(2, &mappings);
        let loaded = catalog.tables.num_objects();
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
        assert_eq!(catalog.tables.num_objects(), 0);
        assert_eq!(catalog.tables.live_rows(), 0);
        let objects = catalog.objects.len();
        let exec = catalog.add_process(3, &mappings);
        assert_eq!(catalog.tables.num_objects(), loaded, "built again");
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
        let mut catalog = Catalog::default();
        catalog.processes.insert(5, image(1));
        assert_eq!(bias_at(&catalog, 50), Some(1));
        catalog.end_process(5, 100);
        assert_eq!(bias_at(&catalog, 99), Some(1));
        assert_eq!(bias_at(&catalog, 100), None, "ended, nothing loaded since");
        catalog.processes.insert(5, image(2));
        assert_eq!(bias_at(&catalog, 99), Some(1));
        assert_eq!(bias_at(&catalog, 150), Some(2));
        catalog.end_process(5, 200);
        assert_eq!((bias_at(&catalog, 99), bias_at(&catalog, 150)), (Some(1), Some(2)));
        assert_eq!(bias_at(&catalog, 250), None);
        catalog.end_process(5, 300);
        assert_eq!(
            bias_at(&catalog, 250),
            None,
            "a second end without a process changes nothing"
        );
        catalog.expire_ended(Duration::ZERO);
        assert_eq!(bias_at(&catalog, 99), None, "forgotten");
    }
}
