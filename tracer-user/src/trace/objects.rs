//! The objects the traced processes map, and their unwind tables: each object (keyed by
//! build-id, else file identity) is read and flattened once, however many processes map it,
//! from its `.sframe`, else its `.eh_frame` (or `.debug_frame`), else not at all;
//! each process gets the mapping table the kernel resolves its PCs with, and userspace keeps a
//! copy to tell, per sample, which object and address each frame is in. Objects are counted by
//! the processes that map them; the table of an object no process maps any more is unloaded
//! (the object itself stays, for symbolizing the samples already taken) and rebuilt if a
//! process maps it again. Mappings replaced (a reload, an exit, an exec, code unmapped) are
//! kept a while for the samples taken before they ended, apart from those of whatever took
//! their place (a new image, a new process with the same pid).

use std::{
    collections::HashMap,
    os::{fd::AsRawFd as _, unix::fs::MetadataExt as _},
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    /// When each process's mappings were loaded, in kernel time (`CLOCK_MONOTONIC`).
    loaded_at: HashMap<u32, u64>,
    /// The mappings processes had before, by when they ended, per pid (see
    /// [`Catalog::end_process`]).
    ended: HashMap<u32, Vec<Ended>>,
    /// The files of objects, held open (by object index) so that they symbolize from what was
    /// mapped even once their path names another file (see [`Catalog::symbol_source`]).
    pins: HashMap<usize, Pin>,
    /// Tables built ahead, by the path they were read from, waiting to be installed.
    prebuilt: HashMap<PathBuf, Result<Prebuilt, NoTable>>,
}

/// An object's file as it was mapped: held open, or, when no descriptor was to be had, its
/// inode.
#[derive(Debug)]
enum Pin {
    Open(std::fs::File),
    Inode(u64),
}

/// The mappings a process had until they were replaced, or it exited or exec'ed.
#[derive(Debug)]
struct Ended {
    /// When, in kernel time (`bpf_ktime_get_ns`: `CLOCK_MONOTONIC`, as samples carry it).
    at_ns: u64,
    /// When they were loaded (`at_ns` for a process never loaded).
    loaded_ns: u64,
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
        raise_open_files_limit();
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
        // Samples taken before now resolve through the old mappings, unless the new ones
        // still have them all (code was only added, as by dlopen): then the new ones serve
        // them as well, and name the code that was added before it was known.
        let now = monotonic_ns();
        if !old.iter().all(|o| resolved.contains(o)) {
            let loaded = self.loaded_at.get(&pid).copied().unwrap_or(0);
            self.keep_ended(pid, now, loaded, old.clone());
        }
        self.loaded_at.insert(pid, now);
        self.processes.insert(pid, resolved);
        self.release(&old);
        exec
    }

    /// Forget a process: its objects lose a user (see [`Catalog::unload_unused`]).
    pub fn remove_process(&mut self, pid: u32) {
        self.loaded_at.remove(&pid);
        if let Some(old) = self.processes.remove(&pid) {
            self.release(&old);
        }
    }

    /// `pid` exited, exec'ed or unmapped code at kernel time `at_ns`: the mappings it had then
    /// serve only samples taken before, and samples taken after are resolved through the
    /// mappings loaded next (the new image, or a new process that got the same pid), or not at
    /// all. Its objects lose a user. A process that was never loaded leaves empty mappings:
    /// its samples resolve through nothing rather than through its successor's.
    ///
    /// Heard of late, after newer mappings were loaded (which can only be a successor's, read
    /// from `/proc` once the pid had been taken again), it ends the mappings that were current
    /// then, if they had been loaded before, else leaves empty ones. Returns whether the
    /// process's current mappings ended.
    pub fn end_process(&mut self, pid: u32, at_ns: u64) -> bool {
        if self.loaded_at.get(&pid).is_some_and(|&loaded| loaded > at_ns) {
            let ended = self.ended.entry(pid).or_default();
            match ended.iter_mut().find(|e| e.at_ns >= at_ns) {
                Some(then) if then.loaded_ns <= at_ns => then.at_ns = at_ns,
                _ => self.keep_ended(pid, at_ns, at_ns, Vec::new()),
            }
            return false;
        }
        let loaded = self.loaded_at.remove(&pid).unwrap_or(at_ns);
        let mappings = self.processes.remove(&pid);
        if let Some(mappings) = &mappings {
            self.release(mappings);
        }
        let known = mappings.is_some();
        self.keep_ended(pid, at_ns, loaded, mappings.unwrap_or_default());
        known
    }

    /// Keep `mappings`, which `pid` had from `loaded_ns` until `at_ns`, in order of their end.
    fn keep_ended(&mut self, pid: u32, at_ns: u64, loaded_ns: u64, mappings: Vec<ResolvedMapping>) {
        let ended = self.ended.entry(pid).or_default();
        let at = ended.partition_point(|e| e.at_ns <= at_ns);
        ended.insert(
            at,
            Ended {
                at_ns,
                loaded_ns,
                noted: Instant::now(),
                mappings,
            },
        );
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
        let pin = match std::fs::File::open(&path) {
            Ok(file) if file.metadata().is_ok_and(|meta| meta.ino() == m.inode) => Pin::Open(file),
            _ => Pin::Inode(m.inode),
        };
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
        self.pins.insert(index, pin);
        index
    }

    /// Where to read object `index` for symbols: its path while that is still the file that
    /// was mapped; once the file was replaced or deleted, the descriptor held open on it; and
    /// `None` when neither is to be had (another file's symbols would be wrong ones).
    pub fn symbol_source(&self, index: usize) -> Option<PathBuf> {
        let object = self.objects.get(index)?;
        let current = std::fs::metadata(&object.path)
            .ok()
            .map(|meta| (meta.dev(), meta.ino()));
        match self.pins.get(&index) {
            // Images kept in the private scratch directory (the vDSO) are never replaced.
            None => Some(object.path.clone()),
            Some(Pin::Open(file)) => {
                let pinned = file.metadata().ok().map(|meta| (meta.dev(), meta.ino()));
                Some(if current.is_some() && current == pinned {
                    object.path.clone()
                } else {
                    PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
                })
            }
            Some(Pin::Inode(inode)) => current
                .is_some_and(|(_, ino)| ino == *inode)
                .then(|| object.path.clone()),
        }
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

/// Every object holds its file open (see [`Catalog::symbol_source`]): lift the soft limit on
/// open files to the hard one.
fn raise_open_files_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 && limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: setrlimit reads the struct we pass; failure leaves the old limit in place.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    }
}

/// Now on the kernel's clock (`bpf_ktime_get_ns` is `CLOCK_MONOTONIC`).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
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
        assert!(catalog.end_process(5, 100));
        assert_eq!(bias_at(&catalog, 99), Some(1));
        assert_eq!(bias_at(&catalog, 100), None, "ended, nothing loaded since");
        catalog.processes.insert(5, image(2));
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
        catalog.processes.insert(5, image(3));
        catalog.loaded_at.insert(5, 400);
        catalog.keep_ended(5, 400, 320, image(4));
        assert!(!catalog.end_process(5, 350));
        assert_eq!((bias_at(&catalog, 340), bias_at(&catalog, 360)), (Some(4), Some(3)));
        // ... and else nothing: the newer ones are a successor's.
        catalog.processes.insert(5, image(6));
        catalog.loaded_at.insert(5, 600);
        catalog.keep_ended(5, 600, 500, image(5));
        assert!(!catalog.end_process(5, 450));
        assert_eq!(bias_at(&catalog, 440), None, "ended before the older ones were loaded");
        assert_eq!((bias_at(&catalog, 550), bias_at(&catalog, 650)), (Some(5), Some(6)));
        catalog.expire_ended(Duration::ZERO);
        assert_eq!(bias_at(&catalog, 99), Some(6), "the older ones forgotten");
    }
}
