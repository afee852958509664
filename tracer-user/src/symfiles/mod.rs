//! Which file an object's symbols are read from, for every symbol cache of a session (and for
//! `sframe-trace symbolize`): a separate debug file found by build-id in the debug directories
//! (`--debug-dir`, then /usr/lib/debug and /lib/debug), else the object itself when it has
//! symbols of its own (`.symtab`, MiniDebugInfo or DWARF), else its debug file from a
//! debuginfod server (`DEBUGINFOD_URLS` or `--debuginfod`, through the client cache shared with
//! gdb and perf; see [`debuginfod`]), else the object with what it has (`.dynsym`).
//!
//! Every file chosen is vetted first ([`tracer_unwind::compressed::vet_file`]): blazesym decompresses
//! sections without a bound, so a file whose compressed sections are not what they state is
//! not symbolized from at all (its frames keep their object and offset) and the refusal is
//! counted. Network fetches are never made on the sampling path: while samples are being
//! taken, a missing debug file is fetched by a background thread ([`prefetch`], one request at
//! a time, within the same budget), and the objects waiting for it are named again once it is
//! in the cache; at the end of sampling ([`end_sampling`]) that thread is stopped after its
//! current request and what it did not get to is fetched then.
//!
//! One configuration and one set of figures per process (shared by the session's symbol cache,
//! the background fetcher and offline symbolization), behind a mutex; symbolization is never
//! on a hot path.

pub mod debuginfod;
pub mod dpkg;
mod dwarf;

pub use dwarf::dwarf_usable;

use std::{
    collections::{BTreeMap, HashMap},
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    sync::Mutex,
};

use object::{Object as _, ObjectSection as _, ReadCache};

use crate::sys::objfile::{self, Pread, sealed};

/// How symbols are found, set once from the command line.
#[derive(Clone, Debug, Default)]
pub struct SymbolConfig {
    /// `--symbolize none`: user frames keep their object, address and build-id only.
    pub no_user_symbols: bool,
    /// `--debug-dir`: searched first, like /usr/lib/debug (`DIR/.build-id/xx/yyyy.debug`).
    pub debug_dirs: Vec<PathBuf>,
    /// The debuginfod client: its cache, and its servers unless `--offline`.
    pub debuginfod: Option<debuginfod::Client>,
}

impl SymbolConfig {
    /// The configuration of the command-line flags: debuginfod servers from `urls`, else from
    /// `DEBUGINFOD_URLS`, none when `offline`; the client cache is read either way.
    pub fn from_flags(
        no_user_symbols: bool,
        debug_dirs: Vec<PathBuf>,
        urls: &[String],
        offline: bool,
    ) -> Result<SymbolConfig, String> {
        let from_env;
        let urls: Vec<&str> = if urls.is_empty() {
            from_env = std::env::var("DEBUGINFOD_URLS").unwrap_or_default();
            from_env.split_ascii_whitespace().collect()
        } else {
            urls.iter().map(String::as_str).collect()
        };
        let servers = if offline {
            Vec::new()
        } else {
            urls.iter()
                .map(|url| debuginfod::Server::parse(url))
                .collect::<Result<_, _>>()?
        };
        // The cache is read even without servers (`--offline`, or files fetched by gdb or perf).
        let debuginfod = debuginfod::Client::default_cache()
            .map(|cache| debuginfod::Client::new(servers, cache, debuginfod::Limits::default()));
        Ok(SymbolConfig {
            no_user_symbols,
            debug_dirs,
            debuginfod,
        })
    }
}

/// What happened to the symbol files of the session, for the summary.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SymbolFigures {
    /// Debug files downloaded from a debuginfod server.
    pub fetched: u64,
    /// Debug files found in the debuginfod client cache.
    pub cached: u64,
    /// Objects whose debug file could not be fetched, by reason.
    pub not_fetched_by_reason: BTreeMap<&'static str, u64>,
    /// Files not symbolized from, by reason (hostile or damaged compressed sections, a file
    /// that changed while it was copied).
    pub refused_by_reason: BTreeMap<&'static str, u64>,
    /// Files named from their symbol tables only, their DWARF not read, by reason (inlined
    /// calls nested deeper than [`tracer_unwind::dwarfdepth::MAX_INLINE_DEPTH`], damaged DWARF).
    pub symbol_table_only_by_reason: BTreeMap<&'static str, u64>,
    /// Files others than root could change, read through a sealed copy (see
    /// [`crate::sys::objfile::sealed`]).
    pub sealed_copies: u64,
}

impl SymbolFigures {
    pub fn is_empty(&self) -> bool {
        *self == SymbolFigures::default()
    }
}

struct State {
    config: SymbolConfig,
    sampling: bool,
    figures: SymbolFigures,
    /// Vetting verdicts by (device, inode): `Err` names the reason.
    vetted: HashMap<(u64, u64), Result<(), &'static str>>,
    /// Whether blazesym may read a file's DWARF, by (device, inode) (see [`dwarf`]).
    dwarf: HashMap<(u64, u64), bool>,
    /// Whether a file has symbols of its own, by (device, inode).
    own_symbols: HashMap<(u64, u64), bool>,
    /// The most a MiniDebugInfo file may decompress to: [`tracer_unwind::compressed::MAX_GNU_DEBUGDATA`],
    /// or less under `--max-symbol-memory` ([`bound_memory`]).
    debugdata_cap: u64,
    /// Sealed copies of files others than root could change, by (device, inode): the file as
    /// it was when first read, whatever it became since; `None`: the copy failed.
    copies: HashMap<(u64, u64), Option<std::sync::Arc<std::fs::File>>>,
    /// Build-ids whose fetch waited for the end of sampling, and how many times sampling ended
    /// with some waiting (symbol caches name those objects again then).
    deferred: std::collections::HashSet<Vec<u8>>,
    generation: u64,
    /// Build-ids whose fetch was tried (one try per session).
    tried: HashMap<Vec<u8>, Option<PathBuf>>,
    /// Build-ids waiting for the background fetch, and that thread while it runs.
    queue: std::collections::VecDeque<Vec<u8>>,
    worker: Option<std::thread::JoinHandle<()>>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn with_state<T>(f: impl FnOnce(&mut State) -> T) -> T {
    let mut guard = STATE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let state = guard.get_or_insert_with(|| State {
        config: SymbolConfig::default(),
        sampling: false,
        figures: SymbolFigures::default(),
        vetted: HashMap::new(),
        dwarf: HashMap::new(),
        own_symbols: HashMap::new(),
        debugdata_cap: tracer_unwind::compressed::MAX_GNU_DEBUGDATA,
        copies: HashMap::new(),
        deferred: std::collections::HashSet::new(),
        generation: 0,
        tried: HashMap::new(),
        queue: std::collections::VecDeque::new(),
        worker: None,
    });
    f(state)
}

/// Set how symbols are found (before any symbolization); `sampling`: a session is about to take
/// samples (no fetches until [`end_sampling`]).
pub fn configure(config: SymbolConfig, sampling: bool) {
    with_state(|state| {
        state.config = config;
        state.sampling = sampling;
    });
}

/// What naming may hold (`--max-symbol-memory`): a MiniDebugInfo file larger than that is
/// refused (`minidebuginfo_too_large`) before blazesym decompresses and keeps it.
pub fn bound_memory(max_bytes: u64) {
    with_state(|state| state.debugdata_cap = max_bytes.min(tracer_unwind::compressed::MAX_GNU_DEBUGDATA));
}

/// Sampling is over: missing debug files may be fetched now (the background fetch stops after
/// its current request, waited for here).
pub fn end_sampling() {
    let worker = with_state(|state| {
        state.sampling = false;
        state.queue.clear();
        state.worker.take()
    });
    if let Some(worker) = worker {
        let _ = worker.join();
    }
    with_state(|state| {
        if !state.deferred.is_empty() {
            state.generation += 1;
        }
    });
}

/// The background fetch: while sampling, the queued build-ids one by one, each with a copy of
/// the client (its budget written back after), the lock not held during the request.
fn prefetch() {
    loop {
        let next = with_state(|state| {
            let next = state
                .queue
                .pop_front()
                .filter(|_| state.sampling)
                .zip(state.config.debuginfod.clone());
            if next.is_none() {
                // Done: the next build-id queued starts another thread.
                state.worker = None;
            }
            next
        });
        let Some((id, mut client)) = next else { return };
        let result = client.fetch(&id);
        with_state(|state| {
            let path = match result {
                Ok(path) => {
                    state.figures.fetched += 1;
                    // Symbol caches name the objects that waited for it again.
                    state.generation += 1;
                    Some(path)
                }
                Err(why) => {
                    *state.figures.not_fetched_by_reason.entry(why.reason()).or_default() += 1;
                    None
                }
            };
            state.tried.insert(id, path);
            state.config.debuginfod = Some(client);
        });
    }
}

/// Changes when objects named while sampling may have a debug file now: a symbol cache that
/// saw another value names the objects of [`was_deferred`] build-ids again.
pub fn generation() -> u64 {
    with_state(|state| state.generation)
}

/// Whether the debug file of `id` was wanted while sampling (and fetched only after).
pub fn was_deferred(id: &[u8]) -> bool {
    with_state(|state| state.deferred.contains(id))
}

/// `--symbolize none`: user frames are not named.
pub fn user_symbols() -> bool {
    with_state(|state| !state.config.no_user_symbols)
}

/// The figures so far.
pub fn figures() -> SymbolFigures {
    with_state(|state| state.figures.clone())
}

/// The lengths of its collections, named (see `trace::sizes`).
pub fn sizes(add: &mut dyn FnMut(&'static str, usize)) {
    let lengths = with_state(|state| {
        [
            ("symfiles.vetted", state.vetted.len()),
            ("symfiles.dwarf", state.dwarf.len()),
            ("symfiles.own_symbols", state.own_symbols.len()),
            ("symfiles.deferred", state.deferred.len()),
            ("symfiles.tried", state.tried.len()),
        ]
    });
    for (name, n) in lengths {
        add(name, n);
    }
}

/// The system's debug directories, after those of `--debug-dir`.
const DEBUG_DIRS: &[&str] = &["/usr/lib/debug", "/lib/debug"];

/// The file to read the symbols of an object from (module docs): `build_id` is the object's,
/// `object` where its own bytes can be read (for a traced process, the descriptor held on the
/// mapped file). `None`: no file to read (or every candidate refused).
pub fn symbol_file(build_id: Option<&[u8]>, object: Option<&Path>) -> Option<PathBuf> {
    let dirs: Vec<PathBuf> = with_state(|state| state.config.debug_dirs.clone());
    let local = build_id.and_then(|id| {
        let relative = build_id_path(id)?;
        dirs.iter()
            .map(PathBuf::as_path)
            .chain(DEBUG_DIRS.iter().map(Path::new))
            .map(|dir| dir.join(&relative))
            .find(|path| path.is_file())
    });
    if let Some(path) = local.and_then(|path| mappable(&path)).filter(|path| vet(path)) {
        return Some(path);
    }
    let object_symbols = object.is_some_and(has_symbols);
    if !object_symbols
        && let Some(id) = build_id
        && let Some(path) = fetched(id).and_then(|path| mappable(&path))
        && vet(&path)
    {
        return Some(path);
    }
    object.and_then(mappable).filter(|path| vet(path))
}

/// What blazesym is to read for `path`: `path` itself when only root can change that file,
/// else a sealed copy of it, made when it is first read and kept while the object is known
/// (see [`crate::sys::objfile::sealed`]: blazesym maps the file it reads, and a mapped file that
/// shrinks would end the tracer with SIGBUS; the copy is also the file as its tables were
/// built, whatever its owner does to it afterwards). `None`: no copy could be made (counted).
fn mappable(path: &Path) -> Option<PathBuf> {
    let (file, identity, _) = open(path)?;
    if !sealed::may_change(&file).ok()? && !links_may_lead_out(path) {
        return Some(path.to_path_buf());
    }
    let known = with_state(|state| state.copies.get(&identity).cloned());
    let copy = match known {
        Some(copy) => copy,
        None => {
            let copy = sealed::sealed_copy(&file).ok().map(std::sync::Arc::new);
            with_state(|state| {
                match copy {
                    Some(_) => state.figures.sealed_copies += 1,
                    None => *state.figures.refused_by_reason.entry("not_copied").or_default() += 1,
                }
                state.copies.insert(identity, copy.clone());
            });
            copy
        }
    };
    copy.map(|copy| fd_path(&copy))
}

/// Whether a debug file the symbolizer would find through `path`'s debug link beside it
/// (`DIR/NAME` or `DIR/.debug/NAME`) could be someone else's: that directory or its `.debug`
/// is owned by another user than root or writable by its group or others (a sticky `/tmp`
/// too). Such a file is read through its sealed copy, whose links lead nowhere: a debug file
/// planted there would name the program's frames as its author chose, and one that shrinks
/// while mapped would end the tracer. A directory that cannot be looked at counts as one.
fn links_may_lead_out(path: &Path) -> bool {
    let Some(dir) = path.parent() else { return true };
    let open_to_others = |dir: &Path| match std::fs::metadata(dir) {
        Ok(meta) => meta.uid() != 0 || meta.mode() & 0o022 != 0,
        Err(err) => err.kind() != std::io::ErrorKind::NotFound,
    };
    open_to_others(dir) || open_to_others(&dir.join(".debug"))
}

/// The path of an open file of this process (which holds it open while it is read).
fn fd_path(file: &std::fs::File) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(file)))
}

/// Forget the sealed copy of the file at `path` (an object no longer symbolized): with the
/// path it was read by, for the caller to evict from blazesym before dropping it.
pub fn release(path: &Path) -> Option<(PathBuf, std::sync::Arc<std::fs::File>)> {
    let (_, identity, _) = open(path)?;
    let copy = with_state(|state| state.copies.remove(&identity).flatten())?;
    Some((fd_path(&copy), copy))
}

/// `.build-id/xx/yyyy.debug` for a build-id of at least two bytes.
pub fn build_id_path(id: &[u8]) -> Option<PathBuf> {
    let (first, rest) = id.split_first()?;
    if rest.is_empty() {
        return None;
    }
    Some(PathBuf::from(format!(".build-id/{first:02x}/{}.debug", hex(rest))))
}

/// Lower-case hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The debuginfod debug file of `id`: from the cache, or fetched once sampling is over.
fn fetched(id: &[u8]) -> Option<PathBuf> {
    let mut guard = STATE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let state = guard.as_mut()?;
    if let Some(done) = state.tried.get(id) {
        return done.clone();
    }
    let client = state.config.debuginfod.as_mut()?;
    if let Some(path) = client.cached(id) {
        state.figures.cached += 1;
        state.tried.insert(id.to_vec(), Some(path.clone()));
        return Some(path);
    }
    if !client.has_servers() {
        return None;
    }
    if state.sampling {
        if state.deferred.insert(id.to_vec()) {
            state.queue.push_back(id.to_vec());
            if state.worker.as_ref().is_none_or(std::thread::JoinHandle::is_finished) {
                state.worker = std::thread::Builder::new()
                    .name("debuginfod".to_owned())
                    .spawn(prefetch)
                    .ok();
            }
        }
        return None;
    }
    let result = client.fetch(id);
    let path = match result {
        Ok(path) => {
            state.figures.fetched += 1;
            Some(path)
        }
        Err(why) => {
            *state.figures.not_fetched_by_reason.entry(why.reason()).or_default() += 1;
            None
        }
    };
    state.tried.insert(id.to_vec(), path.clone());
    path
}

/// The regular file at `path` opened for reading, its (device, inode) and its length. A
/// traced object's own bytes are named by the descriptor the catalog holds on them
/// (`/proc/self/fd/N`, see `Catalog::symbol_source`): that descriptor is duplicated rather than
/// the file opened again (a traced file is opened once per session).
fn open(path: &Path) -> Option<(std::fs::File, (u64, u64), u64)> {
    let held = path
        .to_str()
        .and_then(|p| p.strip_prefix("/proc/self/fd/"))
        .and_then(|n| n.parse::<std::os::fd::RawFd>().ok());
    let file = match held {
        Some(fd) => {
            // `fd` names a descriptor of this process that the catalog keeps open while its
            // objects are symbolized (the only `/proc/self/fd/` paths handed here).
            std::fs::File::from(crate::sys::fs::duplicate(fd).ok()?)
        }
        None => objfile::open_regular(path).ok()?,
    };
    let meta = file.metadata().ok()?;
    Some((file, (meta.dev(), meta.ino()), meta.len()))
}

/// Forget what was found of `file` (whether it has symbols, whether it may be given to
/// blazesym): its object is forgotten, and its (device, inode) may name another file later.
pub fn forget_file(file: &std::fs::File) {
    let Ok(meta) = file.metadata() else { return };
    let key = (meta.dev(), meta.ino());
    with_state(|state| {
        state.own_symbols.remove(&key);
        state.vetted.remove(&key);
        state.dwarf.remove(&key);
    });
}

/// Whether the ELF file at `path` has symbols of its own beyond `.dynsym` (asked once per file).
fn has_symbols(path: &Path) -> bool {
    let Some((file, key, len)) = open(path) else {
        return false;
    };
    if let Some(known) = with_state(|state| state.own_symbols.get(&key).copied()) {
        return known;
    }
    let cache = ReadCache::new(Pread::new(&file, len));
    let found = object::File::parse(&cache).is_ok_and(|obj| {
        let present = |name: &str| obj.section_by_name(name).is_some_and(|s| s.size() > 0);
        present(".symtab") || present(".gnu_debugdata") || present(".debug_info") || present(".zdebug_info")
    });
    with_state(|state| state.own_symbols.insert(key, found));
    found
}

/// Whether `path` may be given to blazesym (module docs); refusals are counted once per file.
fn vet(path: &Path) -> bool {
    let Some((file, key, len)) = open(path) else {
        return false;
    };
    if let Some(verdict) = with_state(|state| state.vetted.get(&key).copied()) {
        return verdict.is_ok();
    }
    let cache = ReadCache::new(Pread::new(&file, len));
    let mut read = |offset: u64, size: u64| {
        let mut bytes = vec![0; usize::try_from(size).ok()?];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut bytes, offset).ok()?;
        Some(bytes)
    };
    let cap = with_state(|state| state.debugdata_cap);
    let verdict = tracer_unwind::compressed::vet_file(&cache, &mut read, cap)
        .map(drop)
        .map_err(|e| refusal(&e));
    with_state(|state| {
        if let Err(why) = verdict {
            *state.figures.refused_by_reason.entry(why).or_default() += 1;
        }
        state.vetted.insert(key, verdict);
    });
    verdict.is_ok()
}

/// Naming from the file at `path` panicked (in blazesym): the file is refused from now on,
/// counted as `naming_panicked`.
pub fn naming_panicked(path: &Path) {
    let Some((_, key, _)) = open(path) else { return };
    with_state(|state| {
        *state.figures.refused_by_reason.entry("naming_panicked").or_default() += 1;
        state.vetted.insert(key, Err("naming_panicked"));
    });
}

/// The summary's name for why a file was refused.
fn refusal(error: &tracer_unwind::compressed::DecompressError) -> &'static str {
    use tracer_unwind::compressed::DecompressError as E;
    match error {
        E::TooLarge { section, .. } | E::Unbounded { section, .. } if section == ".gnu_debugdata" => {
            "minidebuginfo_too_large"
        }
        E::TooLarge { .. } | E::Unbounded { .. } => "compressed_section_too_large",
        E::LongerThanStated { .. } | E::ShorterThanStated { .. } => "compressed_section_size_lies",
        _ => "compressed_section_corrupt",
    }
}

#[cfg(test)]
mod tests;
