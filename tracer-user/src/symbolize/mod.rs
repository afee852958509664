//! Symbolization with blazesym: one cached symbolizer for the whole session, and a cache of
//! every (object, address) already named, shared by every consumer (the outputs, OTLP, the live
//! view), so that exporters can resolve the profile again and again (`resolve`) and the
//! streaming formats can name each sample as it arrives. An object the session forgets (see
//! [`SymbolCache::forget`]) takes its names and blazesym's data for its file with it. User
//! frames are named from their object by object-relative address (ELF symbols; DWARF file:line
//! and inlined functions when the object or its debug file has them: through `.gnu_debuglink`,
//! or by build-id in the debug directories or from debuginfod, as `symfiles` finds them), JIT
//! code from perf maps, kernel frames from kallsyms (`names`). A frame without a symbol keeps
//! none: formats name it by object and offset, never by a guessed neighbour.

use std::collections::{BTreeMap, HashMap};

use blazesym::symbolize::{
    Input, Symbolizer,
    evict::{Elf as EvictElf, Evict},
    source::{Kernel, Source},
};

use super::profile::{Frame, Stack};
use crate::export::model::{FrameSource, ObjectInfo, ResolvedFrame};
use crate::python::PyFrame;
use crate::registry::Catalog;

/// Addresses whose names the cache keeps at most. Past it, or past the memory the cache may
/// use (`--max-symbol-memory`), the names and everything blazesym parsed (DWARF units, line
/// programs, abbreviations: hundreds of megabytes for a large debug build that runs for good)
/// are dropped and rebuilt as frames ask for them, so that a session of any length on a host
/// of any churn stays within a bounded size.
const MAX_NAMES: usize = 1 << 17;
/// `--max-symbol-memory` unless given: what naming may hold (blazesym's parsed DWARF above
/// all: a few large debug builds reach it with far fewer names than [`MAX_NAMES`]).
pub const DEFAULT_MAX_SYMBOL_MEMORY: u64 = 128 << 20;

/// The log target of what naming each batch of addresses cost the heap.
const NAMING_LOG: &str = "sframe_trace::naming";

/// The object name and path of kernel frames, as perf prints them.
const KERNEL_OBJECT: &str = "[kernel.kallsyms]";
/// The object (and pprof or OTLP mapping) of JIT code named by perf maps, as perf calls it.
pub use crate::jit::JIT_OBJECT;

/// The symbolizer and everything it has named so far. Not `Send` (blazesym's symbolizer is
/// not): it lives on the session's thread.
pub struct SymbolCache {
    symbolizer: Symbolizer,
    /// Inlined functions are frames (for rebuilding the symbolizer).
    inline: bool,
    /// Names kept at most ([`MAX_NAMES`]; tests lower it).
    max_names: usize,
    /// What naming holds: the heap bytes this thread allocated while naming (and did not give
    /// back by forgetting) since the symbolizer was made, and the most it may.
    naming_bytes: usize,
    max_naming_bytes: usize,
    /// This thread's heap count ([`crate::heap::thread_bytes`]; tests count instead).
    heap: fn() -> usize,
    /// Functions at (catalog object, object-relative address), innermost (inlined) first.
    user: HashMap<(usize, u64), Vec<Named>>,
    /// Functions at kernel addresses.
    kernel: HashMap<u64, Vec<Named>>,
    /// The PLT stubs of each catalog object named so far.
    plt: HashMap<usize, Plt>,
    /// The `.gopclntab` of each catalog object named so far (`None`: not Go, or unreadable).
    go: HashMap<usize, Option<GoText>>,
    /// The objects frames have been resolved in: indices handed out stay valid until the
    /// object is forgotten, when its slot goes to the next object (see `free_slots`).
    objects: Vec<ObjectInfo>,
    by_catalog: HashMap<usize, usize>,
    /// Slots of `objects` whose object was forgotten.
    free_slots: Vec<usize>,
    kernel_object: Option<usize>,
    /// The pseudo-objects' indices, by name (see [`Self::pseudo_index`]).
    pseudo: HashMap<&'static str, usize>,
    /// `symfiles::generation` when last looked at.
    generation: u64,
    /// Everything was dropped since [`Self::take_dropped`] last said so.
    dropped: bool,
}

impl SymbolCache {
    /// A cache whose frames include inlined functions (when debug information has them) if
    /// `inline`, and whose naming may hold `max_bytes` (see [`DEFAULT_MAX_SYMBOL_MEMORY`]).
    /// The bound also caps the MiniDebugInfo files naming reads (see `symfiles::bound_memory`).
    pub fn new(inline: bool, max_bytes: u64) -> SymbolCache {
        super::symfiles::bound_memory(max_bytes);
        SymbolCache::unbound(inline, max_bytes)
    }

    /// [`Self::new`] without bounding MiniDebugInfo files (the process-wide setting).
    fn unbound(inline: bool, max_bytes: u64) -> SymbolCache {
        SymbolCache {
            symbolizer: symbolizer(inline),
            inline,
            max_names: MAX_NAMES,
            naming_bytes: 0,
            max_naming_bytes: usize::try_from(max_bytes).unwrap_or(usize::MAX),
            heap: crate::heap::thread_bytes,
            user: HashMap::new(),
            kernel: HashMap::new(),
            plt: HashMap::new(),
            go: HashMap::new(),
            objects: Vec::new(),
            by_catalog: HashMap::new(),
            free_slots: Vec::new(),
            kernel_object: None,
            pseudo: HashMap::new(),
            generation: 0,
            dropped: false,
        }
    }

    /// A cache that keeps at most `max_names` names (see [`MAX_NAMES`]).
    #[cfg(test)]
    pub fn with_max_names(inline: bool, max_names: usize) -> SymbolCache {
        SymbolCache {
            max_names,
            ..SymbolCache::new(inline, DEFAULT_MAX_SYMBOL_MEMORY)
        }
    }

    /// A cache whose naming may hold `max_naming_bytes`, the heap counted by `heap`.
    #[cfg(test)]
    pub fn with_naming_bound(inline: bool, max_naming_bytes: usize, heap: fn() -> usize) -> SymbolCache {
        SymbolCache {
            heap,
            ..SymbolCache::unbound(inline, max_naming_bytes as u64)
        }
    }

    /// Addresses whose names are cached.
    pub fn cached_names(&self) -> usize {
        self.user.len() + self.kernel.len()
    }

    /// The lengths of its collections, named (see `trace::sizes`).
    pub fn sizes(&self, add: &mut dyn FnMut(&'static str, usize)) {
        add("symbols.user", self.user.len());
        add("symbols.kernel", self.kernel.len());
        add("symbols.plt", self.plt.len());
        add("symbols.go", self.go.len());
        add("symbols.objects", self.objects.len());
        add("symbols.by_catalog", self.by_catalog.len());
        add("symbols.free_slots", self.free_slots.len());
        add("symbols.naming_kib", self.naming_bytes >> 10);
    }

    /// Drop every name and blazesym's parsed data when the names or what naming holds passed
    /// their bounds (objects keep their slots).
    fn bound(&mut self) {
        if self.cached_names() > self.max_names || self.naming_bytes > self.max_naming_bytes {
            log::debug!(
                "symbol cache: {} names, {} KiB held by naming: dropped",
                self.cached_names(),
                self.naming_bytes >> 10
            );
            self.shed();
        }
    }

    /// Drop every name and blazesym's parsed data (objects keep their slots): frames are named
    /// again as they ask (`--max-memory`).
    pub fn shed(&mut self) {
        self.user = HashMap::new();
        self.kernel = HashMap::new();
        self.plt = HashMap::new();
        self.go = HashMap::new();
        self.symbolizer = symbolizer(self.inline);
        self.naming_bytes = 0;
        self.dropped = true;
    }

    /// Whether the names and parsed data were dropped since the last call: the memory they
    /// held is free in the allocator, to be handed back to the system.
    pub fn take_dropped(&mut self) -> bool {
        std::mem::take(&mut self.dropped)
    }

    /// What naming holds now, in bytes.
    #[cfg(test)]
    pub fn naming_bytes(&self) -> usize {
        self.naming_bytes
    }
}

impl SymbolCache {
    /// The objects [`ResolvedFrame::object`] indexes (in the frames of [`Self::frames`]).
    pub fn objects(&self) -> &[ObjectInfo] {
        &self.objects
    }

    /// Forget catalog objects `gone` before the catalog frees them (their files are still
    /// open): their names, their slots, and blazesym's parsed data and descriptor for their
    /// files. No stack that still refers to them may be resolved afterwards.
    pub fn forget(&mut self, gone: &[usize], catalog: &Catalog) {
        if gone.is_empty() {
            return;
        }
        let before = (self.heap)();
        let gone_set: std::collections::HashSet<usize> = gone.iter().copied().collect();
        self.user.retain(|(object, _), _| !gone_set.contains(object));
        for &object in gone {
            self.plt.remove(&object);
            self.go.remove(&object);
            if let Some(slot) = self.by_catalog.remove(&object) {
                self.objects[slot] = ObjectInfo {
                    path: String::new(),
                    name: String::new(),
                    build_id: None,
                };
                self.free_slots.push(slot);
            }
            if let Some(path) = catalog.symbol_source(object) {
                if let Some((copy, _open_until_evicted)) = super::symfiles::release(&path) {
                    let _ = self.symbolizer.evict(&Evict::Elf(EvictElf::new(copy)));
                }
                let _ = self.symbolizer.evict(&Evict::Elf(EvictElf::new(path)));
            }
            if let Some(file) = catalog.objects.get(object).and_then(|o| o.file.as_deref()) {
                super::symfiles::forget_file(file);
            }
        }
        // What forgetting gave back was naming's: the bound counts what naming still holds.
        self.gave_back(before);
    }

    /// Name every frame of `frames` not named before: one blazesym batch per object, one for
    /// the kernel.
    pub fn prepare<'a>(&mut self, frames: impl IntoIterator<Item = &'a Frame>, catalog: &Catalog) {
        self.bound();
        self.forget_deferred();
        // Measured around everything naming allocates, its scratch too: scratch allocated
        // before the first reading and freed before the last would count as memory given back.
        let before = (self.heap)();
        self.name_new(frames, catalog);
        let after = (self.heap)();
        self.naming_bytes = if after >= before {
            self.naming_bytes.saturating_add(after - before)
        } else {
            self.naming_bytes.saturating_sub(before - after)
        };
    }

    /// Name the frames of `frames` not named before (see [`Self::prepare`]).
    fn name_new<'a>(&mut self, frames: impl IntoIterator<Item = &'a Frame>, catalog: &Catalog) {
        let mut by_object: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
        let mut kernel = Vec::new();
        for frame in frames {
            match *frame {
                Frame::User { object, offset, .. } if !self.user.contains_key(&(object, offset)) => {
                    by_object.entry(object).or_default().push(offset);
                }
                Frame::Kernel { addr } if !self.kernel.contains_key(&addr) => kernel.push(addr),
                _ => {}
            }
        }
        if by_object.is_empty() && kernel.is_empty() {
            return;
        }
        for (object, mut offsets) in by_object {
            offsets.sort_unstable();
            offsets.dedup();
            // Read from the file that was mapped, even if its path names another one now, or
            // from its separate debug file named by build-id.
            let info = self.object_index(object, catalog);
            let source = catalog.symbol_source(object);
            let file = super::symfiles::user_symbols()
                .then(|| super::symfiles::symbol_file(self.objects[info].build_id.as_deref(), source.as_deref()))
                .flatten();
            let at = self.cost_from();
            let plt = self.plt.entry(object).or_insert_with(|| {
                catalog
                    .objects
                    .get(object)
                    .and_then(|o| o.file.as_deref())
                    .map_or_else(Plt::default, Plt::of_file)
            });
            let go = self
                .go
                .entry(object)
                .or_insert_with(|| {
                    catalog
                        .objects
                        .get(object)
                        .and_then(|o| o.file.as_deref())
                        .and_then(|file| GoText::of_file(file, self.inline))
                })
                .as_ref();
            let named = name_in_file(&self.symbolizer, file, plt, go, &offsets);
            self.log_cost(&self.objects[info].path, offsets.len(), at);
            for (&offset, names) in offsets.iter().zip(named) {
                self.user.insert((object, offset), names);
            }
        }
        if !kernel.is_empty() {
            kernel.sort_unstable();
            kernel.dedup();
            let at = self.cost_from();
            let src = Source::Kernel(Kernel::default());
            let symbolized = self
                .symbolizer
                .symbolize(&src, Input::AbsAddr(&kernel))
                .unwrap_or_default();
            self.log_cost(KERNEL_OBJECT, kernel.len(), at);
            for (i, &addr) in kernel.iter().enumerate() {
                self.kernel.insert(addr, names_of(symbolized.get(i)));
            }
        }
    }

    /// The frames of `stack`, innermost first (kernel, then user), each address expanded into
    /// its inlined functions.
    pub fn frames(&mut self, stack: &Stack, catalog: &Catalog) -> Vec<ResolvedFrame> {
        self.prepare(stack.frames(), catalog);
        self.prepared_frames(stack, catalog)
    }

    /// [`Self::frames`] of a stack whose frames were prepared.
    fn prepared_frames(&mut self, stack: &Stack, catalog: &Catalog) -> Vec<ResolvedFrame> {
        let mut frames = Vec::with_capacity(stack.kernel.len() + stack.user.len());
        // The innermost kernel frames of an event can be the tracer's own (its program and
        // what ran it): the stack starts where the kernel itself was.
        let machinery = stack
            .kernel
            .iter()
            .take_while(|frame| match frame {
                Frame::Kernel { addr } => self
                    .kernel
                    .get(addr)
                    .and_then(|names| names.last()?.symbol.as_deref())
                    .is_some_and(is_tracing_machinery),
                _ => false,
            })
            .count();
        for frame in &stack.kernel[machinery..] {
            self.push_frame(&mut frames, frame, FrameSource::Kernel, catalog);
        }
        for (frame, &source) in stack.user.iter().zip(&stack.sources) {
            self.push_frame(&mut frames, frame, source, catalog);
        }
        frames
    }

    fn push_frame(&mut self, frames: &mut Vec<ResolvedFrame>, frame: &Frame, source: FrameSource, catalog: &Catalog) {
        // A frame a runtime names (JIT code a perf map names, a Python function).
        if let Some(named) = catalog.runtimes.resolve(frame) {
            frames.push(ResolvedFrame {
                addr: named.addr,
                object: Some(self.pseudo_index(named.object)),
                offset: named.offset,
                symbol: named.symbol,
                file: named.file,
                line: named.line,
                inlined: named.inlined,
                source: named.source,
            });
            return;
        }
        // JIT code a jitdump describes, or read from a JVM's code heaps, says so, however it
        // was found.
        let source = match *frame {
            Frame::User { object, .. } => match catalog.objects.get(object).map(|o| o.name.as_str()) {
                Some(crate::jit::dumps::JITDUMP_OBJECT) => FrameSource::JitDump,
                Some(crate::jit::hotspot::HOTSPOT_OBJECT) => FrameSource::HotSpot,
                _ => source,
            },
            _ => source,
        };
        let (object, offset, addr) = match *frame {
            Frame::User { object, offset, addr } => (Some(self.object_index(object, catalog)), offset, addr),
            Frame::Kernel { addr } => (Some(self.kernel_index()), addr, addr),
            Frame::UserUnknown { addr, .. } | Frame::Python(PyFrame { code: addr, .. }) => (None, addr, addr),
            Frame::V8 { function: at, .. } | Frame::Java { method: at, .. } => (None, u64::from(at), u64::from(at)),
        };
        let names = match *frame {
            Frame::User { object, offset, .. } => self.user.get(&(object, offset)),
            Frame::Kernel { addr } => self.kernel.get(&addr),
            Frame::UserUnknown { .. } | Frame::Python(_) | Frame::V8 { .. } | Frame::Java { .. } => None,
        };
        let unknown = [Named::default()];
        for named in names.map_or(&unknown[..], Vec::as_slice) {
            frames.push(ResolvedFrame {
                addr,
                object,
                offset,
                symbol: named.symbol.clone(),
                file: named.file.clone(),
                line: named.line,
                inlined: named.inlined,
                source,
            });
        }
    }

    /// The index in [`Self::objects`] of catalog object `index`.
    fn object_index(&mut self, index: usize, catalog: &Catalog) -> usize {
        if let Some(&i) = self.by_catalog.get(&index) {
            return i;
        }
        let info = match catalog.objects.get(index).filter(|obj| obj.file.is_some()) {
            Some(obj) => ObjectInfo {
                // Images without a file (the vDSO) are kept in memory: show their name.
                path: if obj.name.starts_with('[') {
                    obj.name.clone()
                } else {
                    obj.path.display().to_string()
                },
                name: obj.name.clone(),
                build_id: obj.build_id.as_ref().map(|id| id.to_vec()),
            },
            None => ObjectInfo {
                path: "[unknown]".to_owned(),
                name: "[unknown]".to_owned(),
                build_id: None,
            },
        };
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                self.objects[slot] = info;
                slot
            }
            None => {
                self.objects.push(info);
                self.objects.len() - 1
            }
        };
        self.by_catalog.insert(index, slot);
        slot
    }

    /// The index in [`Self::objects`] of a pseudo-object, a runtime's (`[jit]`: JIT code named
    /// by perf maps, whose offsets are the code's addresses in its process; `[python]`).
    fn pseudo_index(&mut self, name: &'static str) -> usize {
        if let Some(&i) = self.pseudo.get(name) {
            return i;
        }
        self.objects.push(ObjectInfo {
            path: name.to_owned(),
            name: name.to_owned(),
            build_id: None,
        });
        self.pseudo.insert(name, self.objects.len() - 1);
        self.objects.len() - 1
    }

    /// Forget the names of objects whose debug file had to wait for the end of sampling, once
    /// it has ended (they are named again, from the fetched file).
    fn forget_deferred(&mut self) {
        let generation = super::symfiles::generation();
        if generation == self.generation {
            return;
        }
        self.generation = generation;
        let before = (self.heap)();
        let deferred: std::collections::HashSet<usize> = self
            .by_catalog
            .iter()
            .filter(|&(_, &info)| {
                self.objects[info]
                    .build_id
                    .as_deref()
                    .is_some_and(super::symfiles::was_deferred)
            })
            .map(|(&catalog, _)| catalog)
            .collect();
        self.user.retain(|(object, _), _| !deferred.contains(object));
        self.gave_back(before);
    }

    /// The heap count to log the cost of naming from, if that log is on
    /// (`RUST_LOG=sframe_trace::naming=trace`: which files make the cache large).
    fn cost_from(&self) -> Option<usize> {
        log::log_enabled!(target: NAMING_LOG, log::Level::Trace).then(|| (self.heap)())
    }

    /// Log what naming `count` addresses of `object` cost the heap since `from`.
    fn log_cost(&self, object: &str, count: usize, from: Option<usize>) {
        if let Some(from) = from {
            let kib = (self.heap)().wrapping_sub(from) as isize >> 10;
            log::trace!(target: NAMING_LOG, "{count} addresses in {object}: {kib} KiB");
        }
    }

    /// Take what the heap count fell by since `before` off what naming holds.
    fn gave_back(&mut self, before: usize) {
        self.naming_bytes = self.naming_bytes.saturating_sub(before.saturating_sub((self.heap)()));
    }

    /// The index in [`Self::objects`] of the kernel.
    fn kernel_index(&mut self) -> usize {
        if let Some(i) = self.kernel_object {
            return i;
        }
        self.objects.push(ObjectInfo {
            path: KERNEL_OBJECT.to_owned(),
            name: KERNEL_OBJECT.to_owned(),
            build_id: std::fs::read("/sys/kernel/notes")
                .ok()
                .and_then(|notes| gnu_build_id(&notes)),
        });
        self.kernel_object = Some(self.objects.len() - 1);
        self.objects.len() - 1
    }
}

mod go;
mod named;
mod names;
mod plt;
mod resolve;

pub(crate) use go::GoText;
pub(crate) use named::Named;
#[cfg(test)]
pub(crate) use named::demangle;
pub use names::gnu_build_id;
use names::{is_tracing_machinery, names_of};
pub(crate) use names::{name_in_file, symbolizer};
pub(crate) use plt::Plt;
pub use resolve::{Collection, resolve};
