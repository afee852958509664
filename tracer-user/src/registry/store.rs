//! [`ObjectStore`]: one entry per object the traced processes map, found by its file's
//! identity ([`ObjectKey`], never by build-id: two files with one build-id are two objects) or,
//! for code without a file (the vDSO, JIT code), by its image. An entry holds the open file
//! (tables and symbols are read from it, whatever its path names by now), the build-id, the
//! state of its table, and how many processes map it (its pins). A forgotten object's slot goes
//! to the next object met, its table counted ([`TableCounts`]), so a session of any length keeps
//! state only for the objects it holds: whoever keys by index forgets the object first.
//! It builds and installs nothing (that is the [`super::TableLoader`]'s part).

use std::{
    collections::HashMap,
    fs::File,
    os::fd::AsRawFd as _,
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use super::{NoTable, Table, TableCounts};
use crate::procmaps::ObjectKey;

/// How long the table of an object whose file has no name left stays loaded once no process
/// maps it: time for a process that unmapped and maps its code again (its mappings read anew)
/// to take it back, far less than a file's grace.
pub const UNLINKED_AFTER: Duration = Duration::from_secs(1);

/// One object the traced processes map.
#[derive(Debug)]
pub struct Object {
    /// Its path as the process that mapped it first sees it (for display only: the file is
    /// read from `file`).
    pub path: PathBuf,
    /// The identity of its file (`None` for the vDSO and JIT code, which have none).
    pub key: Option<ObjectKey>,
    /// The file as it was mapped, held open: tables and symbols come from it, even once its
    /// path names another file or none. `None` once forgotten ([`ObjectStore::forget`]).
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
    pub unused_since: Option<Instant>,
    /// Its table was unloaded (no process mapped it any more).
    pub unloaded: bool,
    /// The process whose share its table was refused over (`NoTable::OverShare`): another
    /// process mapping it tries again.
    pub refused_for: Option<u32>,
}

impl Object {
    /// An object no process maps yet, without a table so far.
    pub fn new(path: PathBuf, key: Option<ObjectKey>, file: Option<Arc<File>>, build_id: Option<Box<[u8]>>) -> Object {
        let name = path
            .file_name()
            .map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        Object {
            path,
            key,
            file,
            build_id,
            name,
            table: Err(NoTable::NoUnwindInfo),
            users: 0,
            unused_since: None,
            unloaded: false,
            refused_for: None,
        }
    }

    /// Whether it is an image of a runtime's JIT code (a jitdump's, a JVM's code heaps).
    pub fn jit_image(&self) -> bool {
        self.key.is_none()
            && (self.name == crate::jit::dumps::JITDUMP_OBJECT || self.name == crate::jit::hotspot::HOTSPOT_OBJECT)
    }

    /// What a forgotten object's slot holds until another object takes it: no file, so
    /// nothing counts or symbolizes it.
    fn forgotten() -> Object {
        let mut object = Object::new(PathBuf::new(), None, None, None);
        object.unloaded = true;
        object
    }

    /// No process has mapped it for `idle`.
    fn idle_for(&self, idle: Duration) -> bool {
        self.users == 0 && self.unused_since.is_some_and(|t| t.elapsed() >= idle)
    }

    /// No process maps it now (it was mapped before).
    pub(super) fn unused(&self) -> bool {
        self.users == 0 && self.unused_since.is_some()
    }

    /// Its file has no name left (a memfd, a deleted file, the memory file of code without
    /// one): no process can map it anew by a path, so its table, once unused, is not kept for
    /// a program started again.
    fn unlinked(&self) -> bool {
        self.file.as_ref().is_some_and(|f| {
            f.metadata().is_ok_and(|m| {
                use std::os::unix::fs::MetadataExt as _;
                m.nlink() == 0
            })
        })
    }
}

/// Every object seen, by index.
#[derive(Debug, Default)]
pub struct ObjectStore {
    objects: Vec<Object>,
    by_key: HashMap<ObjectKey, usize>,
    /// Objects without a file by their image (a process can rewrite its own vDSO: only the
    /// same bytes are the same object).
    by_image: HashMap<Box<[u8]>, usize>,
    /// Slots whose object was forgotten, for the next objects met.
    free: Vec<usize>,
    /// The tables of the objects forgotten (see [`ObjectStore::table_counts`]).
    forgotten: TableCounts,
}

impl ObjectStore {
    /// Add `object`, found from now on by its identity if it has one; returns its index.
    pub fn push(&mut self, object: Object) -> usize {
        if let Some(key) = &object.key {
            let index = self.free.last().copied().unwrap_or(self.objects.len());
            self.by_key.insert(key.clone(), index);
        }
        match self.free.pop() {
            Some(index) => {
                self.objects[index] = object;
                index
            }
            None => {
                self.objects.push(object);
                self.objects.len() - 1
            }
        }
    }

    /// Add `object`, which has no file, found from now on by `image`; returns its index.
    pub(super) fn push_image(&mut self, image: Vec<u8>, object: Object) -> usize {
        let index = self.push(object);
        self.by_image.insert(image.into_boxed_slice(), index);
        index
    }

    /// The object of the file with identity `key`, if known.
    pub fn find(&self, key: &ObjectKey) -> Option<usize> {
        self.by_key.get(key).copied()
    }

    /// The object without a file whose image is `image`, if known.
    pub(super) fn find_image(&self, image: &[u8]) -> Option<usize> {
        self.by_image.get(image).copied()
    }

    pub fn get(&self, index: usize) -> Option<&Object> {
        self.objects.get(index)
    }

    pub(super) fn get_mut(&mut self, index: usize) -> Option<&mut Object> {
        self.objects.get_mut(index)
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Object> {
        self.objects.iter()
    }

    /// Slots (forgotten objects' included).
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// One more process maps object `index`; returns whether its table was unloaded and is to
    /// be built again.
    pub(super) fn hold(&mut self, index: usize) -> bool {
        let object = &mut self.objects[index];
        let reload = object.users == 0 && object.unloaded;
        object.users += 1;
        object.unused_since = None;
        reload
    }

    /// One process fewer maps object `index`.
    pub(super) fn release(&mut self, index: usize) {
        let object = &mut self.objects[index];
        object.users = object.users.saturating_sub(1);
        if object.users == 0 {
            object.unused_since = Some(Instant::now());
        }
    }

    /// Objects whose table is still loaded though no process has mapped them for `idle`, or
    /// for `unlinked` ([`UNLINKED_AFTER`]) when their file is unlinked ([`Object::unlinked`]).
    pub(super) fn unloadable(&mut self, idle: Duration, unlinked: Duration) -> impl Iterator<Item = &mut Object> {
        let unlinked = idle.min(unlinked);
        self.objects.iter_mut().filter(move |o| {
            !o.unloaded && o.table.is_ok() && (o.idle_for(idle) || (o.idle_for(unlinked) && o.unlinked()))
        })
    }

    /// Objects whose table is still loaded though no process maps them now: room to make
    /// when the table maps are full.
    pub(super) fn unused_loaded(&mut self) -> impl Iterator<Item = &mut Object> {
        self.objects
            .iter_mut()
            .filter(|o| !o.unloaded && o.table.is_ok() && o.unused())
    }

    /// The objects no process has mapped for `idle` whose table is unloaded (or which have
    /// none), still holding their file: what [`ObjectStore::forget`] may free.
    pub fn idle(&self, idle: Duration) -> Vec<usize> {
        self.objects
            .iter()
            .enumerate()
            .filter(|(_, o)| o.file.is_some() && o.idle_for(idle) && (o.unloaded || o.table.is_err()))
            .map(|(i, _)| i)
            .collect()
    }

    /// Forget objects `gone` (those still held): their file, the entries that find them, and
    /// their slot, which the next object met takes; their table is counted. Returns those
    /// forgotten.
    pub fn forget(&mut self, gone: &[usize]) -> Vec<usize> {
        let mut forgotten = Vec::new();
        for &i in gone {
            let Some(slot) = self.objects.get_mut(i).filter(|o| o.file.is_some()) else {
                continue;
            };
            let object = std::mem::replace(slot, Object::forgotten());
            self.forgotten.add(&object.table);
            if let Some(key) = &object.key
                && self.by_key.get(key) == Some(&i)
            {
                self.by_key.remove(key);
            }
            self.free.push(i);
            forgotten.push(i);
        }
        if !forgotten.is_empty() {
            self.by_image.retain(|_, i| !forgotten.contains(i));
        }
        forgotten
    }

    /// The tables of every object met: those held now and those forgotten.
    pub fn table_counts(&self) -> TableCounts {
        let mut counts = self.forgotten.clone();
        for object in self.objects.iter().filter(|o| o.file.is_some()) {
            counts.add(&object.table);
        }
        counts
    }

    /// The lengths of its collections, named (see `trace::sizes`).
    pub fn sizes(&self, add: &mut dyn FnMut(&'static str, usize)) {
        add("objects", self.objects.len());
        add("objects.open", self.objects.iter().filter(|o| o.file.is_some()).count());
        add("objects.by_key", self.by_key.len());
        add("objects.by_image", self.by_image.len());
    }

    /// The file of the object with identity `key`, if it is held (discovery then does not open
    /// it again).
    pub fn known_file(&self, key: &ObjectKey) -> Option<Arc<File>> {
        self.find(key).and_then(|i| self.objects[i].file.clone())
    }

    /// Where to read object `index` for symbols: the file that was mapped, through the
    /// descriptor held open on it (its path may name another file by now, or none).
    pub fn symbol_source(&self, index: usize) -> Option<PathBuf> {
        let file = self.objects.get(index)?.file.as_ref()?;
        Some(PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd())))
    }
}

impl std::ops::Index<usize> for ObjectStore {
    type Output = Object;

    fn index(&self, index: usize) -> &Object {
        &self.objects[index]
    }
}

impl<'a> IntoIterator for &'a ObjectStore {
    type Item = &'a Object;
    type IntoIter = std::slice::Iter<'a, Object>;

    fn into_iter(self) -> Self::IntoIter {
        self.objects.iter()
    }
}
