//! Symbolization with blazesym: one cached symbolizer for the whole session, and a cache of
//! every (object, address) already named, so that exporters can resolve the profile again and
//! again and the streaming formats can name each sample as it arrives. User frames are named
//! from their object by object-relative address (ELF symbols; DWARF file:line and inlined
//! functions when the object or its debug file has them: through `.gnu_debuglink`, or by
//! build-id in the debug directories or from debuginfod, as `symfiles` finds them), kernel frames
//! from kallsyms. A frame without a symbol keeps none: formats name it by object and offset,
//! never by a guessed neighbour.

use std::{
    collections::{BTreeMap, HashMap},
    path::PathBuf,
    time::{Duration, SystemTime},
};

use blazesym::symbolize::{
    CodeInfo, Input, Symbolized, Symbolizer,
    source::{Elf, Kernel, Source},
};

use super::{
    objects::Catalog,
    profile::{Frame, Profile, Stack},
};
use crate::export::model::{FrameSource, ObjectInfo, Resolved, ResolvedFrame, ResolvedStack};

/// The object name and path of kernel frames, as perf prints them.
const KERNEL_OBJECT: &str = "[kernel.kallsyms]";
/// The object (and pprof or OTLP mapping) of JIT code named by perf maps, as perf calls it.
pub const JIT_OBJECT: &str = "[jit]";

/// A symbol name for people: Rust (`_R`, legacy `_ZN...E`) and Itanium C++ (`_Z`) names
/// demangled, anything else (C) as it is.
pub fn demangle(name: &str) -> String {
    if let Ok(rust) = rustc_demangle::try_demangle(name) {
        return format!("{rust:#}");
    }
    if name.starts_with("_Z")
        && let Ok(symbol) = cpp_demangle::Symbol::new(name)
        && let Ok(text) = symbol.demangle()
    {
        return text;
    }
    name.to_owned()
}

/// One function at an address: the function itself, or one inlined into it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Named {
    pub(crate) symbol: Option<String>,
    pub(crate) file: Option<String>,
    pub(crate) line: Option<u32>,
    pub(crate) inlined: bool,
}

/// The symbolizer and everything it has named so far. Not `Send` (blazesym's symbolizer is
/// not): it lives on the session's thread.
pub struct SymbolCache {
    symbolizer: Symbolizer,
    /// Functions at (catalog object, object-relative address), innermost (inlined) first.
    user: HashMap<(usize, u64), Vec<Named>>,
    /// Functions at kernel addresses.
    kernel: HashMap<u64, Vec<Named>>,
    /// The objects frames have been resolved in, in the order first seen: indices handed out
    /// stay valid for the whole session.
    objects: Vec<ObjectInfo>,
    by_catalog: HashMap<usize, usize>,
    kernel_object: Option<usize>,
    jit_object: Option<usize>,
    /// `symfiles::generation` when last looked at.
    generation: u64,
}

impl SymbolCache {
    /// A cache whose frames include inlined functions (when debug information has them) if
    /// `inline`.
    pub fn new(inline: bool) -> SymbolCache {
        // blazesym would demangle plain C names that happen to read as mangled types (`c` ->
        // `char`); names are demangled here, and only when they carry a mangling prefix.
        // Debug files are looked up through `.gnu_debuglink` and build-id in blazesym's default
        // directories, /usr/lib/debug and /lib/debug (and their `.build-id/`).
        SymbolCache {
            symbolizer: symbolizer(inline),
            user: HashMap::new(),
            kernel: HashMap::new(),
            objects: Vec::new(),
            by_catalog: HashMap::new(),
            kernel_object: None,
            jit_object: None,
            generation: 0,
        }
    }

    /// The objects [`ResolvedFrame::object`] indexes.
    pub fn objects(&self) -> &[ObjectInfo] {
        &self.objects
    }

    /// Name every frame of `frames` not named before: one blazesym batch per object, one for
    /// the kernel.
    pub fn prepare<'a>(&mut self, frames: impl IntoIterator<Item = &'a Frame>, catalog: &Catalog) {
        self.forget_deferred();
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
            let named = name_in_file(&self.symbolizer, file, &offsets);
            for (&offset, names) in offsets.iter().zip(named) {
                self.user.insert((object, offset), names);
            }
        }
        if !kernel.is_empty() {
            kernel.sort_unstable();
            kernel.dedup();
            let src = Source::Kernel(Kernel::default());
            let symbolized = self
                .symbolizer
                .symbolize(&src, Input::AbsAddr(&kernel))
                .unwrap_or_default();
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

    /// Forget the names of objects whose debug file had to wait for the end of sampling, once
    /// it has ended (they are named again, from the fetched file).
    fn forget_deferred(&mut self) {
        let generation = super::symfiles::generation();
        if generation == self.generation {
            return;
        }
        self.generation = generation;
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
        if let Frame::UserUnknown { addr, process } = *frame
            && let Some(name) = catalog.jit.name(process, addr)
        {
            frames.push(ResolvedFrame {
                addr,
                object: Some(self.jit_index()),
                offset: addr,
                symbol: Some(name.to_owned()),
                file: None,
                line: None,
                inlined: false,
                source: FrameSource::Jit,
            });
            return;
        }
        // JIT code a jitdump describes says so, however it was found.
        let source = match *frame {
            Frame::User { object, .. }
                if catalog
                    .objects
                    .get(object)
                    .is_some_and(|o| o.name == super::objects::JITDUMP_OBJECT) =>
            {
                FrameSource::JitDump
            }
            _ => source,
        };
        let (object, offset, addr) = match *frame {
            Frame::User { object, offset, addr } => (Some(self.object_index(object, catalog)), offset, addr),
            Frame::Kernel { addr } => (Some(self.kernel_index()), addr, addr),
            Frame::UserUnknown { addr, .. } => (None, addr, addr),
        };
        let names = match *frame {
            Frame::User { object, offset, .. } => self.user.get(&(object, offset)),
            Frame::Kernel { addr } => self.kernel.get(&addr),
            Frame::UserUnknown { .. } => None,
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
        let info = match catalog.objects.get(index) {
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
        self.objects.push(info);
        self.by_catalog.insert(index, self.objects.len() - 1);
        self.objects.len() - 1
    }

    /// The index in [`Self::objects`] of JIT code named by perf maps: one object,
    /// [`JIT_OBJECT`], whose offsets are the code's addresses in its process.
    fn jit_index(&mut self) -> usize {
        if let Some(i) = self.jit_object {
            return i;
        }
        self.objects.push(ObjectInfo {
            path: JIT_OBJECT.to_owned(),
            name: JIT_OBJECT.to_owned(),
            build_id: None,
        });
        self.jit_object = Some(self.objects.len() - 1);
        self.objects.len() - 1
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

/// The symbolizer of user and kernel frames; inlined functions if `inline`.
pub(crate) fn symbolizer(inline: bool) -> Symbolizer {
    Symbolizer::builder()
        .enable_demangling(false)
        .enable_code_info(true)
        .enable_inlined_fns(inline)
        .build()
}

/// The functions at each of `offsets` (object-relative addresses) in the ELF file `file`
/// (`None`: no file, every frame unnamed), one entry per offset.
pub(crate) fn name_in_file(symbolizer: &Symbolizer, file: Option<PathBuf>, offsets: &[u64]) -> Vec<Vec<Named>> {
    let symbolized = match file {
        Some(path) => symbolizer
            .symbolize(&Source::Elf(Elf::new(path)), Input::VirtOffset(offsets))
            .unwrap_or_default(),
        None => Vec::new(),
    };
    (0..offsets.len()).map(|i| names_of(symbolized.get(i))).collect()
}

/// Kernel functions that only run because the tracer does: the BPF program itself, the code
/// that runs programs on raw tracepoints, tracepoints' perf and BPF glue.
fn is_tracing_machinery(symbol: &str) -> bool {
    const PREFIXES: [&str; 6] = [
        "bpf_prog_",
        "bpf_trace_run",
        "__bpf_trace_",
        "__traceiter_",
        "perf_trace_",
        "perf_syscall_",
    ];
    symbol == "trace_call_bpf" || PREFIXES.iter().any(|prefix| symbol.starts_with(prefix))
}

/// The functions blazesym found at one address, innermost first: the inlined ones (when asked
/// for and present), then the function they are inlined into. Unknown: one frame without name.
fn names_of(symbolized: Option<&Symbolized<'_>>) -> Vec<Named> {
    let Some(Symbolized::Sym(sym)) = symbolized else {
        return vec![Named::default()];
    };
    if sym.name.is_empty() {
        return vec![Named::default()];
    }
    let located = |code_info: Option<&CodeInfo<'_>>| {
        (
            code_info.map(|c| c.to_path().display().to_string()),
            code_info.and_then(|c| c.line),
        )
    };
    let mut names = Vec::with_capacity(sym.inlined.len() + 1);
    // blazesym lists inlined calls outermost first, each with the location inside it.
    for inlined in sym.inlined.iter().rev() {
        let (file, line) = located(inlined.code_info.as_ref());
        names.push(Named {
            symbol: Some(demangle(&inlined.name)),
            file,
            line,
            inlined: true,
        });
    }
    let (file, line) = located(sym.code_info.as_deref());
    names.push(Named {
        symbol: Some(demangle(&sym.name)),
        file,
        line,
        inlined: false,
    });
    names
}

/// The GNU build-id in a sequence of ELF notes (`/sys/kernel/notes`, native byte order).
pub fn gnu_build_id(notes: &[u8]) -> Option<Vec<u8>> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let word = |at: usize| -> Option<u32> { Some(u32::from_ne_bytes(notes.get(at..at + 4)?.try_into().ok()?)) };
    let mut at = 0;
    while at + 12 <= notes.len() {
        let (name_size, desc_size, kind) = (word(at)? as usize, word(at + 4)? as usize, word(at + 8)?);
        let name = at + 12;
        let desc = name.checked_add(name_size.checked_next_multiple_of(4)?)?;
        let next = desc.checked_add(desc_size.checked_next_multiple_of(4)?)?;
        if kind == NT_GNU_BUILD_ID && notes.get(name..name + name_size) == Some(b"GNU\0") {
            return notes.get(desc..desc + desc_size).map(<[u8]>::to_vec);
        }
        at = next;
    }
    None
}

/// When and how the samples of a profile were taken.
#[derive(Clone, Copy, Debug)]
pub struct Collection {
    pub start: SystemTime,
    pub duration: Duration,
    /// The cpu-clock sampling period in nanoseconds.
    pub period_ns: u64,
}

/// The profile symbolized: what every exporter writes. Frames named before are taken from the
/// cache, so calling this periodically only symbolizes what is new.
pub fn resolve(profile: &Profile, catalog: &Catalog, cache: &mut SymbolCache, collection: &Collection) -> Resolved {
    cache.prepare(profile.stacks.keys().flat_map(Stack::frames), catalog);
    let mut stacks: Vec<ResolvedStack> = profile
        .stacks
        .iter()
        .map(|(stack, tally)| ResolvedStack {
            pid: stack.pid,
            tid: stack.tid,
            comm: stack.comm.clone(),
            event: stack.event.to_string(),
            frames: cache.prepared_frames(stack, catalog),
            count: tally.count,
            weight_ns: tally.weight_ns,
        })
        .collect();
    stacks.sort_by(|a, b| (a.pid, a.tid, b.count).cmp(&(b.pid, b.tid, a.count)));
    Resolved {
        objects: cache.objects().to_vec(),
        stacks,
        start_unix_ns: unix_ns(collection.start),
        duration_ns: u64::try_from(collection.duration.as_nanos()).unwrap_or(u64::MAX),
        period_ns: collection.period_ns,
    }
}

/// [`resolve`] `profile` together with `kept`, the stacks an OTLP export took out of it
/// earlier (nothing is copied when there are none).
pub fn resolve_with_kept(
    kept: &super::profile::Stacks,
    profile: &Profile,
    catalog: &Catalog,
    cache: &mut SymbolCache,
    collection: &Collection,
) -> Resolved {
    if kept.is_empty() {
        resolve(profile, catalog, cache, collection)
    } else {
        resolve(&super::profile::whole(kept, profile), catalog, cache, collection)
    }
}

/// Nanoseconds since the Unix epoch (0 before it).
pub fn unix_ns(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
