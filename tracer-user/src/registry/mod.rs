//! The registry of what the traced processes map: the thin owner of its three parts, which it
//! keeps in step.
//! - [`ObjectStore`] (`store`): one object per file identity ([`ObjectKey`]; the vDSO and JIT
//!   code by their image), with the file discovery opened, its build-id and how many processes
//!   map it. An object outlives its table (for symbolizing the samples already taken) and is
//!   forgotten once nothing refers to it ([`Catalog::idle_objects`], [`Catalog::forget`]).
//! - [`TableLoader`] (`loader`): each object's table, flattened once however many processes
//!   map it, from its `.sframe`, else its `.eh_frame` (or `.debug_frame`), else not at all;
//!   built ahead or now, installed into the kernel tables ([`TableStore`]) within their room,
//!   unloaded once no process has mapped the object for a while, and built again if a process
//!   maps it again.
//! - [`ProcessMaps`] (`maps`): each process's mappings as userspace resolves frames with them.
//!   Mappings replaced (a reload, an exit, an exec, code unmapped) are kept a while for the
//!   samples taken before they ended, apart from those of whatever took their place (a new
//!   image, a new process with the same pid).
//!
//! Each process gets the mapping table the kernel resolves its PCs with. Besides: `budget` (the
//! room of the table maps), `share` (a process's fair share of that room, and room made from
//! tables no process maps), `vdso` (the vDSO's image, which has no file), `jitcode` (JIT code a
//! jitdump describes, made objects) and `python` (the objects shown to the Python runtime).

use std::{fs::File, path::PathBuf, sync::Arc, time::Duration};

use tracer_common::trace::{ExecMapping, NO_OBJECT};

use crate::{
    jit::{dumps::JITDUMP_OBJECT, hotspot::HOTSPOT_OBJECT},
    procmaps::{self, Mapping, MappingKind, ObjectKey},
    runtime::Mapped,
    runtimes::Runtimes,
    sys::monotonic_ns,
};

use crate::tables::TableSet;

/// One executable mapping of a traced process, as userspace resolves frames with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResolvedMapping {
    pub start: u64,
    pub end: u64,
    pub bias: u64,
    /// Index into [`Catalog::objects`], or `None` for anonymous or unreadable code.
    pub object: Option<usize>,
}

/// Every object seen, the tables built from them, and each process's mappings.
#[derive(Default)]
pub struct Catalog<T = TableSet> {
    pub objects: ObjectStore,
    pub loader: TableLoader<T>,
    /// Each process's current mappings and those that ended.
    pub processes: ProcessMaps,
    /// The language runtimes (JIT code, CPython), told of each process's mappings, its end
    /// and the objects forgotten (`crate::runtime`).
    pub runtimes: Runtimes,
}

impl<T: TableStore + Default> Catalog<T> {
    /// An empty catalog whose tables go into `tables` (which bounds their room).
    pub fn with_tables(tables: T) -> Catalog<T> {
        Catalog {
            loader: TableLoader::new(tables),
            ..Catalog::default()
        }
    }
}

impl<T: TableStore> Catalog<T> {
    /// Register a process's executable mappings (replacing those it had: exec, dlopen),
    /// building tables for objects not seen before or unloaded since. Returns the mapping table
    /// for the kernel.
    pub fn add_process(&mut self, pid: u32, mappings: &[Mapping]) -> Vec<ExecMapping> {
        let mut resolved = Vec::with_capacity(mappings.len());
        let mut exec = Vec::with_capacity(mappings.len());
        let dump = self.jit_dump(pid, mappings);
        // A JVM without a jitdump: its code heaps, read from its memory.
        // A JVM read a moment ago keeps the images of that read ([`Catalog::kept_hotspot`]).
        let jit = &self.runtimes.jit;
        let paced = dump.is_none() && jit.hotspot.paced(pid, jit.names.budget.has_time(pid));
        let from_memory = match dump {
            None if paced => None,
            None => {
                // Its time counts in the JIT-name budget (which paces the reads again).
                let since = std::time::Instant::now();
                let jit = &mut self.runtimes.jit;
                let scan = jit.hotspot.scan(pid, mappings);
                if scan.is_some() {
                    jit.names.budget.spend(pid, since);
                }
                scan
            }
            Some(_) => None,
        };
        // (A JVM starting, not read yet, is read again when its samples land in its code.)
        if from_memory.is_some() || self.runtimes.jit.hotspot.knows(pid) {
            self.runtimes.jit.dumps.read_from_memory(pid);
        }
        let mut claim = self.claim(pid, mappings);
        for m in mappings {
            let (object, bias) = match &m.kind {
                MappingKind::File {
                    key,
                    bias,
                    build_id,
                    file,
                } => (Some(self.object(m, key, build_id, file, &claim)), *bias),
                MappingKind::Vdso => match self.vdso(pid, m) {
                    Some((object, bias)) => (Some(object), bias),
                    None => (None, 0),
                },
                MappingKind::Anonymous => match dump
                    .as_ref()
                    .map(|d| (&d.dump, JITDUMP_OBJECT))
                    .or(from_memory.as_ref().map(|d| (d, HOTSPOT_OBJECT)))
                    .and_then(|(d, name)| self.jit_code(pid, m, d, name))
                    .or_else(|| paced.then(|| self.kept_hotspot(pid, m)).flatten())
                {
                    Some((object, bias)) => (Some(object), bias),
                    None => (None, 0),
                },
                _ => (None, 0),
            };
            if let Some(i) = object {
                self.hold(i, &claim);
                self.count(&mut claim, i);
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
                frame_word: 0,
            });
        }
        self.mark_v8(pid, mappings, &mut exec);
        let exec = self.hotspot_mappings(pid, &resolved, exec);
        // What the runtimes learn from them: executable memory without an object is JIT
        // code, or a runtime's stubs (not `[vsyscall]`, which every process has).
        let shown: Vec<Mapped> = mappings
            .iter()
            .zip(&resolved)
            .map(|(m, r)| Mapped {
                anonymous_code: matches!(m.kind, MappingKind::Anonymous)
                    && r.object.is_none()
                    && m.path != std::path::Path::new("[vsyscall]"),
            })
            .collect();
        self.runtimes.attach(pid, &shown);
        if let Some(dump) = dump {
            self.runtimes.jit.dumps.keep(pid, dump);
        }
        let old = self.processes.replace(pid, resolved, monotonic_ns());
        self.release(&old);
        exec
    }

    /// When `pid` runs a V8 whose frames are named (`v8/`): its JIT code's mappings (executable
    /// memory without an object) and the V8's own are marked in `exec`, for the kernel's walk
    /// to keep the functions of the JavaScript frames it finds there.
    fn mark_v8(&mut self, pid: u32, mappings: &[Mapping], exec: &mut [ExecMapping]) {
        let files = mappings.iter().filter_map(|m| match &m.kind {
            MappingKind::File { key, file, .. } => Some((key, &**file)),
            _ => None,
        });
        let Some((config, v8_key)) = self.runtimes.v8.attach_files(pid, files) else {
            return;
        };
        for (m, e) in mappings.iter().zip(exec.iter_mut()) {
            let marked = match &m.kind {
                MappingKind::Anonymous => e.object == NO_OBJECT,
                MappingKind::File { key, .. } => *key == v8_key,
                _ => false,
            };
            if marked {
                e.frame_word = config;
            }
        }
    }

    /// Forget a process: its objects lose a user (see [`Catalog::unload_unused`]).
    pub fn remove_process(&mut self, pid: u32) {
        if let Some(old) = self.processes.remove(pid) {
            self.release(&old);
        }
        self.runtimes.detach(pid);
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
    /// again and again keeps its table meanwhile), or maps at all when their file has no name
    /// left (see `share`); returns how many.
    pub fn unload_unused(&mut self, idle: Duration) -> usize {
        self.unload_unused_after(idle, store::UNLINKED_AFTER)
    }

    /// [`Catalog::unload_unused`], with the grace of unlinked files `unlinked` (tests).
    pub fn unload_unused_after(&mut self, idle: Duration, unlinked: Duration) -> usize {
        let mut unloaded = 0;
        for object in self.objects.unloadable(idle, unlinked) {
            if let Ok(table) = &object.table {
                self.loader.unload(object.key.as_ref(), table);
                object.unloaded = true;
                unloaded += 1;
            }
        }
        if unloaded > 0 {
            self.log_tables();
        }
        unloaded
    }

    /// The objects no process has mapped for `idle` whose table is unloaded (or which have
    /// none), still held: what [`Catalog::forget`] may free once no stack kept for later
    /// refers to them. No new sample can: they are in no process's mappings, current or ended
    /// (ended mappings are kept for less than `idle`).
    pub fn idle_objects(&self, idle: Duration) -> Vec<usize> {
        self.objects.idle(idle)
    }

    /// Free objects `gone` (see [`ObjectStore::forget`]): their slots go to the next objects
    /// met, so nothing may refer to them any more (no process's mappings do, and whoever
    /// keeps stacks or names by object forgot them first).
    pub fn forget(&mut self, gone: &[usize]) {
        let forgotten = self.objects.forget(gone);
        self.runtimes.forget_objects(&forgotten);
    }

    /// The tables of every object met: those known now and those forgotten.
    pub fn table_counts(&self) -> TableCounts {
        self.objects.table_counts()
    }

    /// One more process (`claim`'s) maps object `i`: an unloaded table is built again, and one
    /// refused over a process's share tried again (for another process, or for the same once
    /// no process mapped it meanwhile).
    fn hold(&mut self, i: usize, claim: &share::Claim) {
        let object = &self.objects[i];
        let retry = matches!(object.table, Err(NoTable::OverShare(_)))
            && (object.refused_for != Some(claim.pid) || (object.users == 0 && object.unused_since.is_some()));
        if self.objects.hold(i) || retry {
            let object = &self.objects[i];
            let table = match (object.key.clone(), object.file.clone()) {
                (Some(key), Some(file)) => {
                    let path = object.path.clone();
                    self.load_table(&key, &file, &path, claim)
                }
                _ => Err(NoTable::Unreadable(format!("{}: forgotten", object.path.display()))),
            };
            if let Some(object) = self.objects.get_mut(i) {
                object.refused_for = matches!(table, Err(NoTable::OverShare(_))).then_some(claim.pid);
                object.table = table;
                object.unloaded = false;
            }
            self.bind_file(i);
        }
    }

    /// The kernel may use object `i`'s table for its file's code in processes not read yet
    /// (`tables::files`): bind the table to the file's identity.
    fn bind_file(&mut self, i: usize) {
        let object = &self.objects[i];
        if let (Ok(table), Some(key), Some(file)) = (&object.table, &object.key, &object.file) {
            self.loader.tables.bind_file(table.id, i, key, file);
        }
    }

    /// The objects of `mappings` lose a user each.
    fn release(&mut self, mappings: &[ResolvedMapping]) {
        for i in mappings.iter().filter_map(|m| m.object) {
            self.objects.release(i);
        }
    }

    /// The object of the file `key` that `m` maps, found or added (its table built).
    fn object(
        &mut self,
        m: &Mapping,
        key: &ObjectKey,
        build_id: &Option<Box<[u8]>>,
        file: &Arc<File>,
        claim: &share::Claim,
    ) -> usize {
        if let Some(i) = self.objects.find(key) {
            return i;
        }
        let mut object = Object::new(
            m.path.clone(),
            Some(key.clone()),
            Some(Arc::clone(file)),
            build_id.clone(),
        );
        object.table = self.load_table(key, file, &m.path, claim);
        object.refused_for = matches!(object.table, Err(NoTable::OverShare(_))).then_some(claim.pid);
        let index = self.objects.push(object);
        self.bind_file(index);
        index
    }

    /// The file of the object with identity `key`, if there is one (discovery then does not
    /// open it again).
    pub fn known_file(&self, key: &ObjectKey) -> Option<Arc<File>> {
        self.objects.known_file(key)
    }

    /// Where to read object `index` for symbols (see [`ObjectStore::symbol_source`]).
    pub fn symbol_source(&self, index: usize) -> Option<PathBuf> {
        self.objects.symbol_source(index)
    }

    /// The vDSO of `pid`: its image is read from the process (it has no file) and kept in an
    /// anonymous memory file for symbolization. Processes whose vDSO has the same bytes share
    /// one object. `None` when it cannot be read (the mapping then has no table).
    fn vdso(&mut self, pid: u32, m: &Mapping) -> Option<(usize, u64)> {
        let image = read_memory(pid, m.start, m.end).ok()?;
        let facts = procmaps::inspect(image.as_slice(), m.start, m.end, 0).ok()?;
        if let Some(i) = self.objects.find_image(&image) {
            return Some((i, facts.bias));
        }
        let file = Arc::new(memory_file("vdso", &image).ok()?);
        let path = PathBuf::from("[vdso]");
        let mut object = Object::new(path, None, Some(file), facts.build_id);
        object.table = self.loader.load_image(&image, &object.path);
        Some((self.objects.push_image(image, object), facts.bias))
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
                match self.objects.find(key) {
                    Some(i) if !unloaded(i) => None,
                    _ if self.loader.is_prebuilt(key) => None,
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
        self.loader.add_prebuilt(key, prebuilt);
    }

    /// Drop the tables built ahead more than `after` ago that no process took.
    pub fn expire_prebuilt(&mut self, after: Duration) {
        self.loader.expire_prebuilt(after);
    }

    /// The mapping that held `addr` in the process with this `pid` at kernel time `time_ns`
    /// (see [`ProcessMaps::mapping_at`]).
    pub fn mapping_at(&self, pid: u32, addr: u64, time_ns: u64) -> Option<&ResolvedMapping> {
        self.processes.mapping_at(pid, addr, time_ns)
    }
}

impl Catalog<TableSet> {
    /// The lengths of its collections, named (see `trace::sizes`).
    pub fn sizes(&self, add: &mut dyn FnMut(&'static str, usize)) {
        self.objects.sizes(add);
        add("objects.prebuilt", self.loader.prebuilt_len());
        self.processes.sizes(add);
        self.runtimes.sizes(add);
        self.loader.tables.sizes(add);
    }
}

/// An object whose table is to be built: see [`Catalog::missing`].
pub struct Missing {
    pub key: ObjectKey,
    pub file: Arc<File>,
    /// For messages.
    pub path: PathBuf,
}

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

pub mod budget;
mod counts;
mod jitcode;
mod loader;
mod maps;
mod python;
mod share;
mod store;
mod vdso;
pub use counts::{NoTableKind, TableCounts};
pub use loader::{NoTable, Prebuilt, Table, TableLoader, TableSource, TableStore, prebuild};
pub use maps::ProcessMaps;
pub use share::{SHARE_DIVISOR, TABLES_LOG, share_of};
pub use store::{Object, ObjectStore};
use vdso::{memory_file, read_memory};
