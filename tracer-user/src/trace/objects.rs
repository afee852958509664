//! The objects the traced processes map, and their unwind tables: each object (keyed by its
//! file's identity, see [`ObjectKey`]; the vDSO by its image) is read from the file discovery
//! opened, and flattened once, however many processes map it,
//! from its `.sframe`, else its `.eh_frame` (or `.debug_frame`), else not at all;
//! each process gets the mapping table the kernel resolves its PCs with, and userspace keeps a
//! copy to tell, per sample, which object and address each frame is in. Objects are counted by
//! the processes that map them; the table of an object no process maps any more is unloaded
//! (the object itself stays, for symbolizing the samples already taken) and rebuilt if a
//! process maps it again. Mappings replaced (a reload, an exit, an exec, code unmapped) are
//! kept a while for the samples taken before they ended, apart from those of whatever took
//! their place (a new image, a new process with the same pid).
//!
//! Its parts: `loader` (building a table, pure, and installing it), `maps` ([`ProcessMaps`]: the
//! current and ended mappings of each process), `vdso` (the vDSO's image, which has no file).
//! Objects no process maps any more are forgotten once nothing refers to them
//! ([`Catalog::idle_objects`], [`Catalog::forget`]).

use std::{collections::HashMap, fs::File, os::fd::AsRawFd as _, path::PathBuf, sync::Arc, time::Duration};

use tracer_common::trace::{ExecMapping, NO_OBJECT};

use crate::{
    procmaps::{self, Mapping, MappingKind, ObjectKey},
    table::TableSet,
};

/// One object the traced processes map.
#[derive(Debug)]
pub struct Object {
    /// Its path as the process that mapped it first sees it (for display only: the file is
    /// read from `file`).
    pub path: PathBuf,
    /// The identity of its file (`None` for the vDSO, which has none).
    pub key: Option<ObjectKey>,
    /// The file as it was mapped, held open: tables and symbols come from it, even once its
    /// path names another file or none. `None` once forgotten ([`Catalog::forget`]).
    pub file: Option<Arc<File>>,
    /// The GNU build-id, for finding separate debug information.
    pub build_id: Option<Box<[u8]>>,
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
    /// vDSO objects by their image (a process can rewrite its own vDSO: only the same bytes
    /// are the same object).
    by_image: HashMap<Box<[u8]>, usize>,
    pub tables: TableSet,
    /// Each process's current mappings and those that ended.
    pub processes: ProcessMaps,
    /// Tables built ahead, by the identity of the file they were read from, waiting to be
    /// installed.
    prebuilt: HashMap<ObjectKey, (std::time::Instant, Result<Prebuilt, NoTable>)>,
    /// Names of JIT-compiled code, from the processes' perf maps.
    pub jit: crate::jit::JitNames,
    /// What the jitdumps of the processes gave (`jitcode`).
    pub jit_dumps: DumpStats,
    /// What code each jitdump image covers, and the reloads samples outside it asked for.
    dump_code: jitcode::DumpCode,
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
        let mut resolved = Vec::with_capacity(mappings.len());
        let mut exec = Vec::with_capacity(mappings.len());
        let dump = self.jit_dump(pid, mappings);
        for m in mappings {
            let (object, bias) = match &m.kind {
                MappingKind::File {
                    key,
                    bias,
                    build_id,
                    file,
                } => (Some(self.object(m, key, build_id, file)), *bias),
                MappingKind::Vdso => match self.vdso(pid, m) {
                    Some((object, bias)) => (Some(object), bias),
                    None => (None, 0),
                },
                MappingKind::Anonymous => match dump.as_ref().and_then(|dump| self.jit_code(m, dump)) {
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
        // Anonymous executable memory (JIT code): the process is looked at now, while it
        // runs, so that a perf map it writes at exit can be read after it is gone.
        // (Not `[vsyscall]`, which every process has.)
        let anonymous = |(m, r): (&Mapping, &ResolvedMapping)| {
            matches!(m.kind, MappingKind::Anonymous)
                && r.object.is_none()
                && m.path != std::path::Path::new("[vsyscall]")
        };
        if mappings.iter().zip(&resolved).any(anonymous) {
            self.jit.watch(pid);
        }
        let old = self.processes.replace(pid, resolved, monotonic_ns());
        self.release(&old);
        exec
    }

    /// Forget a process: its objects lose a user (see [`Catalog::unload_unused`]).
    pub fn remove_process(&mut self, pid: u32) {
        if let Some(old) = self.processes.remove(pid) {
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
        match self.processes.end(pid, at_ns) {
            Some(ended) => {
                self.release(&ended);
                true
            }
            None => false,
        }
    }

    /// Forget the mappings of processes that ended more than `after` ago.
    pub fn expire_ended(&mut self, after: Duration) {
        self.processes.expire(after);
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

    /// The objects no process has mapped for `idle` whose table is unloaded (or which have
    /// none), still held: what [`Catalog::forget`] may free once no stack kept for later
    /// refers to them. No new sample can: they are in no process's mappings, current or ended
    /// (ended mappings are kept for less than `idle`).
    pub fn idle_objects(&self, idle: Duration) -> Vec<usize> {
        self.objects
            .iter()
            .enumerate()
            .filter(|(_, o)| {
                o.file.is_some()
                    && o.users == 0
                    && o.unused_since.is_some_and(|t| t.elapsed() >= idle)
                    && (o.unloaded || o.table.is_err())
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// Free what objects `gone` hold (see [`Catalog::idle_objects`]): the open file, the
    /// build-id and the entry that finds them by identity or image. A process that maps the
    /// same file later gets a new object (indices are never reused, so nothing keyed by the
    /// old index can name the new one). What the summary counts (the path, the table's
    /// source or why there is none) stays: a few bytes per object met.
    pub fn forget(&mut self, gone: &[usize]) {
        for &i in gone {
            let Some(object) = self.objects.get_mut(i) else {
                continue;
            };
            object.file = None;
            object.build_id = None;
            if let Some(key) = &object.key
                && self.by_key.get(key) == Some(&i)
            {
                self.by_key.remove(key);
            }
        }
        if !gone.is_empty() {
            self.by_image.retain(|_, i| !gone.contains(i));
        }
    }

    /// One more process maps object `i`: an unloaded table is built again.
    fn hold(&mut self, i: usize) {
        if self.objects[i].users == 0 && self.objects[i].unloaded {
            self.objects[i].table = self.build(i);
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

    fn object(&mut self, m: &Mapping, key: &ObjectKey, build_id: &Option<Box<[u8]>>, file: &Arc<File>) -> usize {
        if let Some(&i) = self.by_key.get(key) {
            return i;
        }
        let name = m
            .path
            .file_name()
            .map_or_else(|| m.path.display().to_string(), |n| n.to_string_lossy().into_owned());
        self.objects.push(Object {
            path: m.path.clone(),
            key: Some(key.clone()),
            file: Some(Arc::clone(file)),
            build_id: build_id.clone(),
            name,
            table: Err(NoTable::NoUnwindInfo),
            users: 0,
            unused_since: None,
            unloaded: false,
        });
        let index = self.objects.len() - 1;
        self.objects[index].table = self.build(index);
        self.by_key.insert(key.clone(), index);
        index
    }

    /// The file of the object with identity `key`, if there is one (discovery then does not
    /// open it again).
    pub fn known_file(&self, key: &ObjectKey) -> Option<Arc<File>> {
        self.by_key.get(key).and_then(|&i| self.objects[i].file.clone())
    }

    /// Where to read object `index` for symbols: the file that was mapped, through the
    /// descriptor held open on it (its path may name another file by now, or none).
    pub fn symbol_source(&self, index: usize) -> Option<PathBuf> {
        let object = self.objects.get(index)?;
        let file = object.file.as_ref()?;
        Some(PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd())))
    }

    /// The vDSO of `pid`: its image is read from the process (it has no file) and kept in an
    /// anonymous memory file for symbolization. Processes whose vDSO has the same bytes share
    /// one object. `None` when it cannot be read (the mapping then has no table).
    fn vdso(&mut self, pid: u32, m: &Mapping) -> Option<(usize, u64)> {
        let image = read_memory(pid, m.start, m.end).ok()?;
        let facts = procmaps::inspect(image.as_slice(), m.start, m.end, 0).ok()?;
        if let Some(&i) = self.by_image.get(image.as_slice()) {
            return Some((i, facts.bias));
        }
        let file = Arc::new(memory_file("vdso", &image).ok()?);
        let path = PathBuf::from("[vdso]");
        let table = prebuild_bytes(&path, &image).and_then(|p| self.install(p));
        self.objects.push(Object {
            path,
            key: None,
            file: Some(file),
            build_id: facts.build_id,
            name: "[vdso]".to_owned(),
            table,
            users: 0,
            unused_since: None,
            unloaded: false,
        });
        self.by_image.insert(image.into_boxed_slice(), self.objects.len() - 1);
        Some((self.objects.len() - 1, facts.bias))
    }

    /// Object `index`'s table from its `.sframe` and its call-frame information, read from
    /// its file.
    /// Built ahead (see [`Catalog::missing`]) or now.
    fn build(&mut self, index: usize) -> Result<Table, NoTable> {
        let object = &self.objects[index];
        let prebuilt = match object.key.as_ref().and_then(|key| self.prebuilt.remove(key)) {
            Some((_, prebuilt)) => prebuilt,
            None => match &object.file {
                Some(file) => prebuild(file, &object.path),
                None => Err(NoTable::Unreadable(format!("{}: forgotten", object.path.display()))),
            },
        };
        let table = self.install(prebuilt?)?;
        // The kernel may use it for the file's code in processes not read yet (`table::files`).
        if let (Some(key), Some(file)) = (&self.objects[index].key, &self.objects[index].file) {
            crate::table::files::bind(&mut self.tables, table.id, index, key, file);
        }
        Ok(table)
    }

    /// Put a built table into the kernel tables.
    fn install(&mut self, prebuilt: Prebuilt) -> Result<Table, NoTable> {
        loader::install(&mut self.tables, &prebuilt)
    }

    /// The files of `pid`'s mappings whose tables [`Catalog::add_process`] would build: objects
    /// not seen before, or unloaded since, each with its size. Build them with [`prebuild`] (on
    /// another thread: it is pure) and hand the results to [`Catalog::add_prebuilt`] first,
    /// and `add_process` only installs them.
    pub fn missing(&self, mappings: &[Mapping]) -> Vec<Missing> {
        let mut missing: Vec<Missing> = mappings
            .iter()
            .filter_map(|m| {
                let MappingKind::File { key, file, .. } = &m.kind else {
                    return None;
                };
                let unloaded = |i: usize| self.objects[i].unloaded && self.objects[i].users == 0;
                match self.by_key.get(key) {
                    Some(&i) if !unloaded(i) => None,
                    _ if self.prebuilt.contains_key(key) => None,
                    _ => Some(Missing {
                        key: key.clone(),
                        file: Arc::clone(file),
                        path: m.path.clone(),
                    }),
                }
            })
            .collect();
        missing.sort_by(|a, b| a.key.cmp(&b.key));
        missing.dedup_by(|a, b| a.key == b.key);
        missing
    }

    /// A table built ahead for the object `key`, installed when a process maps it.
    pub fn add_prebuilt(&mut self, key: ObjectKey, prebuilt: Result<Prebuilt, NoTable>) {
        self.prebuilt.insert(key, (std::time::Instant::now(), prebuilt));
    }

    /// Drop the tables built ahead more than `after` ago that no process took (it was gone
    /// before it was loaded).
    pub fn expire_prebuilt(&mut self, after: Duration) {
        self.prebuilt.retain(|_, (built, _)| built.elapsed() < after);
    }

    /// The mapping that held `addr` in the process with this `pid` at kernel time `time_ns`
    /// (see [`ProcessMaps::mapping_at`]).
    pub fn mapping_at(&self, pid: u32, addr: u64, time_ns: u64) -> Option<&ResolvedMapping> {
        self.processes.mapping_at(pid, addr, time_ns)
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
pub(super) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

/// An object whose table is to be built: see [`Catalog::missing`].
pub struct Missing {
    pub key: ObjectKey,
    pub file: Arc<File>,
    /// For messages.
    pub path: PathBuf,
}

#[cfg(test)]
mod tests;

mod jitcode;
mod loader;
mod maps;
mod vdso;
pub use jitcode::{DumpStats, JITDUMP_OBJECT};
use loader::prebuild_bytes;
pub use loader::{NoTable, Prebuilt, Table, TableSource, prebuild};
pub use maps::ProcessMaps;
use vdso::{memory_file, read_memory};
