//! Node.js: JavaScript frames named without a flag. A process whose executable (or
//! `libnode.so`) is a V8 of a known version ([`layout`]) has its mappings marked for the
//! kernel's walk, which keeps with each JavaScript frame the address of its function's shared
//! part (`tracer_common::frame_word`); here that address is read from the process's memory into a
//! function name, script and line ([`read`]), on the reader thread of
//! `python::pymem::MemReader` (bounded in time, per user). A frame whose function cannot be
//! read stays the native (JIT or builtin) frame it was, counted by reason.
//!
//! Names are cached by process and address. A shared part seldom moves (it lives in V8's old
//! generation), but one that did leaves its address to another: a cached name is checked
//! again (its name-or-scope and script words read afresh) once it is [`RECHECK_NS`] old, and
//! read anew when they changed (counted `replaced`).

mod bytecodes;
pub mod code;
pub mod layout;
mod lines;
pub mod read;
mod runtime;

use std::{
    cell::RefCell,
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

use crate::{procmaps::ObjectKey, python::pymem::MemReader, runtime::Interned};
use layout::Layout;
use read::{Identity, JsFunction};

pub use lines::FrameAt;
pub use runtime::V8_OBJECT;

/// Why a V8 is not read, or a function not named.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum V8Error {
    #[error("the V8 exports no {0}")]
    Missing(&'static str),
    #[error("the V8's {0} is out of range")]
    Malformed(&'static str),
    #[error("V8 {0} is not one whose frames are known (known: {known:?})", known = layout::KNOWN_MAJORS)]
    UnknownVersion(u32),
    #[error("the V8 compresses its pointers")]
    PointerCompression,
    #[error("the process's memory cannot be read there")]
    Unreadable,
    #[error("no heap object there")]
    NotAnObject,
    #[error("no function's shared part there")]
    NotShared,
    #[error("a name that is no string V8 keeps inline")]
    NotAString,
    #[error("a scope description of another layout")]
    ScopeInfo,
    #[error("reading the process's memory did not answer in time")]
    Stuck,
    #[error("no compiled function's code there")]
    NotCode,
    #[error("a source position table out of bounds")]
    Table,
    #[error("a function without bytecode")]
    NoBytecode,
}

impl V8Error {
    /// The name the summary counts it by.
    pub fn reason(&self) -> &'static str {
        match self {
            V8Error::Missing(_) => "missing_constant",
            V8Error::Malformed(_) => "malformed_constant",
            V8Error::UnknownVersion(_) => "unknown_version",
            V8Error::PointerCompression => "pointer_compression",
            V8Error::Unreadable => "unreadable",
            V8Error::NotAnObject => "not_an_object",
            V8Error::NotShared => "not_shared_info",
            V8Error::NotAString => "not_a_string",
            V8Error::ScopeInfo => "scope_info",
            V8Error::Stuck => "stuck",
            V8Error::NotCode => "not_code",
            V8Error::Table => "position_table",
            V8Error::NoBytecode => "no_bytecode",
        }
    }
}

/// A cached name is checked again once this old (sample time).
pub const RECHECK_NS: u64 = 1_000_000_000;
/// New functions read per sample at most (the rest of its frames stay native, counted; later
/// samples name them).
pub const READS_PER_SAMPLE: u32 = 64;
/// Objects whose V8-ness is remembered at most (then forgotten, and looked at again).
const MAX_IMAGES: usize = 4096;
/// Cached functions at most, all processes together (then the cache is emptied).
const MAX_CACHED: usize = 1 << 18;
/// Distinct functions named at most in a session (then frames of new ones stay native).
const MAX_FUNCTIONS: usize = 1 << 20;
/// Processes remembered as marked at most (`V8::was_marked`).
const MAX_MARKED: usize = 4096;

/// What became of JavaScript frames and V8s (the summary's `v8` object).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct V8Stats {
    /// Processes whose JavaScript frames were marked for the walk.
    pub processes: u64,
    /// JavaScript frames put into stacks, named.
    pub frames: u64,
    /// JavaScript frames whose function could not be named (kept native), by reason.
    pub unnamed_by_reason: BTreeMap<&'static str, u64>,
    /// Distinct functions named.
    pub functions: u64,
    /// JavaScript frames put into stacks with the line running in them, and frames of
    /// functions inlined into compiled code (counted in `frames` too).
    pub lined: u64,
    pub inlined: u64,
    /// JavaScript frames whose running line could not be read (named without one), by reason.
    pub unlined_by_reason: BTreeMap<&'static str, u64>,
    /// Cached functions found changed when checked again (read anew).
    pub replaced: u64,
    /// Reads of the processes' memory (functions read, and checked again), and the time the
    /// session waited for them in all (µs).
    pub reads: u64,
    pub read_us: u64,
    /// V8s found and not read, by reason (per process).
    pub refused_by_reason: BTreeMap<&'static str, u64>,
}

/// A process running a V8.
#[derive(Debug)]
struct Proc {
    layout: Arc<Layout>,
    uid: u32,
}

/// A cached function: its index in the session's functions (or why none), what told it apart,
/// and when that was last checked.
#[derive(Clone, Copy, Debug)]
struct Cached {
    function: Result<u32, &'static str>,
    identity: Identity,
    checked_ns: u64,
}

/// The V8 runtime (module docs).
#[derive(Default)]
pub struct V8 {
    /// Whether an object is a V8, by its key.
    images: HashMap<ObjectKey, Result<Option<Arc<Layout>>, V8Error>>,
    procs: HashMap<u32, Proc>,
    /// Processes whose frames were marked this session (at most [`MAX_MARKED`]), for the
    /// diagnosis: their JavaScript frames are named without a flag.
    marked: std::collections::HashSet<u32>,
    /// Processes whose V8 was refused (counted once each), until forgotten.
    refused: std::collections::HashSet<u32>,
    /// `--no-javascript`: no process is marked.
    disabled: bool,
    inner: RefCell<Inner>,
}

struct Inner {
    functions: Interned<JsFunction>,
    cache: HashMap<(u32, u64), Cached>,
    /// Where frames are in their functions (`lines.rs`).
    lines: lines::Lines,
    reader: MemReader,
    /// The sample being resolved and the reads it made.
    sample: (u64, u32),
    stats: V8Stats,
}

impl Default for Inner {
    fn default() -> Inner {
        Inner {
            functions: Interned::new(MAX_FUNCTIONS),
            cache: HashMap::new(),
            lines: lines::Lines::default(),
            reader: MemReader::default(),
            sample: (0, 0),
            stats: V8Stats::default(),
        }
    }
}

impl std::fmt::Debug for V8 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("V8").field("procs", &self.procs.len()).finish()
    }
}

impl V8 {
    /// Process `pid` maps the files `files` (key and open file each): the kernel's word for
    /// its mappings and the key of the V8 among them, if one is a V8 whose frames are named
    /// (refusals counted once per process).
    pub fn attach_files<'a>(
        &mut self,
        pid: u32,
        files: impl Iterator<Item = (&'a ObjectKey, &'a std::fs::File)>,
    ) -> Option<(u32, ObjectKey)> {
        if self.disabled {
            return None;
        }
        let mut found = None;
        for (key, file) in files {
            if self.images.len() >= MAX_IMAGES && !self.images.contains_key(key) {
                self.images.clear();
            }
            let image = self
                .images
                .entry(key.clone())
                .or_insert_with(|| layout::detect_file(file).map(|l| l.map(Arc::new)));
            match image {
                Ok(Some(layout)) => {
                    found = Some((Arc::clone(layout), key.clone()));
                    break;
                }
                Ok(None) => {}
                Err(error) => {
                    let error = error.clone();
                    self.procs.remove(&pid);
                    // Once per process (while there is room to remember it).
                    if !self.refused.contains(&pid) {
                        if self.refused.len() < MAX_MARKED {
                            self.refused.insert(pid);
                        }
                        log::debug!("pid {pid}: its V8's frames are not named: {error}");
                        *self
                            .inner
                            .get_mut()
                            .stats
                            .refused_by_reason
                            .entry(error.reason())
                            .or_default() += 1;
                    }
                    return None;
                }
            }
        }
        let Some((layout, key)) = found else {
            self.procs.remove(&pid);
            return None;
        };
        let config = layout.config();
        if !self.procs.contains_key(&pid) {
            self.inner.get_mut().stats.processes += 1;
        }
        if self.marked.len() < MAX_MARKED {
            self.marked.insert(pid);
        }
        let uid = crate::python::pycode::proc_owner(pid);
        self.procs.insert(pid, Proc { layout, uid });
        Some((config, key))
    }

    /// Name JavaScript frames (the default), or not (`--no-javascript`).
    pub fn set_enabled(&mut self, enabled: bool) {
        self.disabled = !enabled;
    }

    /// Whether `pid` had its JavaScript frames marked for the walk in this session.
    pub fn was_marked(&self, pid: u32) -> bool {
        self.marked.contains(&pid)
    }

    /// Whether `pid` runs a V8 whose frames are named.
    pub fn runs(&self, pid: u32) -> bool {
        self.procs.contains_key(&pid)
    }

    /// The function of the JavaScript frame whose shared part the kernel found at `shared`,
    /// in a sample of `pid` taken at `time_ns`: its index for [`V8::function`], or `None`
    /// (counted) when it cannot be named.
    pub fn frame(&self, pid: u32, shared: u64, time_ns: u64) -> Option<u32> {
        let proc = self.procs.get(&pid)?;
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        if inner.sample.0 != time_ns {
            inner.sample = (time_ns, 0);
        }
        let result = lookup(inner, proc, pid, shared, time_ns);
        match result {
            Ok(function) => {
                inner.stats.frames += 1;
                Some(function)
            }
            Err(reason) => {
                *inner.stats.unnamed_by_reason.entry(reason).or_default() += 1;
                None
            }
        }
    }

    /// Function `index`'s name, script and line.
    pub fn function(&self, index: u32) -> Option<JsFunction> {
        self.inner.borrow().functions.get(index).cloned()
    }

    /// What became of JavaScript frames and V8s so far.
    pub fn stats(&self) -> V8Stats {
        self.inner.borrow().stats.clone()
    }

    /// The figures, to set (tests).
    #[cfg(test)]
    pub fn stats_mut(&mut self) -> &mut V8Stats {
        &mut self.inner.get_mut().stats
    }

    /// Process `pid` is forgotten.
    pub fn forget(&mut self, pid: u32) {
        self.procs.remove(&pid);
        self.refused.remove(&pid);
        let inner = self.inner.get_mut();
        inner.cache.retain(|&(p, _), _| p != pid);
        inner.lines.forget(pid);
        inner.reader.forget(pid);
    }
}

/// [`V8::frame`]'s work: the cached function, checked again when old, or read.
fn lookup(inner: &mut Inner, proc: &Proc, pid: u32, shared: u64, time_ns: u64) -> Result<u32, &'static str> {
    if let Some(cached) = inner.cache.get(&(pid, shared)).copied() {
        if time_ns.saturating_sub(cached.checked_ns) < RECHECK_NS {
            return cached.function;
        }
        // What could not be named is read again (a function being made, or still forged).
        if cached.function.is_err() {
            inner.cache.remove(&(pid, shared));
            return read_new(inner, proc, pid, shared, time_ns);
        }
        let layout = Arc::clone(&proc.layout);
        let now =
            budget(inner).and_then(|()| timed(inner, pid, proc.uid, move |read| read::identity(&layout, shared, read)));
        match now {
            Ok(identity) if identity == cached.identity => {
                if let Some(entry) = inner.cache.get_mut(&(pid, shared)) {
                    entry.checked_ns = time_ns;
                }
                return cached.function;
            }
            // Over this sample's reads: named as it was (checked by a later sample).
            Err(V8Error::Stuck) if inner.sample.1 >= READS_PER_SAMPLE => return cached.function,
            _ => {
                inner.stats.replaced += 1;
                inner.cache.remove(&(pid, shared));
            }
        }
    }
    read_new(inner, proc, pid, shared, time_ns)
}

/// The function at `shared`, read and cached (an error too, for [`RECHECK_NS`]).
fn read_new(inner: &mut Inner, proc: &Proc, pid: u32, shared: u64, time_ns: u64) -> Result<u32, &'static str> {
    budget(inner).map_err(|_| "over_budget")?;
    let layout = Arc::clone(&proc.layout);
    let read = timed(inner, pid, proc.uid, move |read| read::function(&layout, shared, read));
    let (function, identity) = match read {
        Ok((function, identity)) => (intern(inner, function), identity),
        Err(error) => (Err(error.reason()), [0; 2]),
    };
    if inner.cache.len() >= MAX_CACHED {
        inner.cache.clear();
    }
    inner.cache.insert(
        (pid, shared),
        Cached {
            function,
            identity,
            checked_ns: time_ns,
        },
    );
    function
}

/// One more read for the sample being resolved, if it has reads left.
fn budget(inner: &mut Inner) -> Result<(), V8Error> {
    if inner.sample.1 >= READS_PER_SAMPLE {
        return Err(V8Error::Stuck);
    }
    inner.sample.1 += 1;
    inner.stats.reads += 1;
    Ok(())
}

/// `work` on `pid`'s memory through the reader thread, its time counted.
fn timed<R: Send + 'static>(
    inner: &mut Inner,
    pid: u32,
    uid: u32,
    work: impl FnOnce(&mut dyn FnMut(u64, &mut [u8]) -> bool) -> Result<R, V8Error> + Send + 'static,
) -> Result<R, V8Error> {
    let since = std::time::Instant::now();
    let result = inner
        .reader
        .run(pid, uid, work)
        .map_err(|_| V8Error::Stuck)
        .and_then(|r| r);
    inner.stats.read_us += since.elapsed().as_micros() as u64;
    result
}

/// The index of `function` among the session's, added if new (none past [`MAX_FUNCTIONS`]).
fn intern(inner: &mut Inner, function: JsFunction) -> Result<u32, &'static str> {
    let before = inner.functions.len();
    let i = inner.functions.intern(function)?;
    inner.stats.functions += (inner.functions.len() - before) as u64;
    Ok(i)
}

#[cfg(test)]
mod tests;
