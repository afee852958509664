//! Language runtimes as plugins. What a runtime adds to native stacks (names for JIT-compiled
//! code, an interpreter's own frames) lives in its folder (`jit/`, `python/`) behind the
//! [`Runtime`] trait, and the catalog, the process manager, the session and the symbolizer
//! call every runtime the same way: when a process's mappings are read ([`Runtime::attach`]),
//! when it exits or is forgotten, when objects are freed, on the housekeeping tick and at the
//! end, and to name a frame. What is particular to one runtime (Python's kernel map and frame
//! merging, the JIT code images the catalog builds) is called on it by name.
//!
//! Adding a runtime: its folder with a type that implements [`Runtime`], and one line in the
//! list of [`crate::runtimes`]. Its figures go into the summary under [`Runtime::name`] (each
//! runtime's are typed, part of the summary's schema).

use crate::{export::model::FrameSource, frame::Frame};

/// One of a process's executable mappings, as a runtime is shown it.
#[derive(Clone, Copy, Debug)]
pub struct Mapped {
    /// Executable memory without an object: JIT-compiled code, or a runtime's stubs.
    pub anonymous_code: bool,
}

/// A frame a runtime names: shown in a pseudo-object of its own (`[jit]`, `[python]`), at
/// `offset` in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeFrame {
    pub object: &'static str,
    pub addr: u64,
    pub offset: u64,
    pub symbol: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub source: FrameSource,
    /// Inlined into the frame after it (a compiled Java method's inlined callees).
    pub inlined: bool,
}

/// What a runtime does for the session (module docs). Every hook but [`Runtime::name`] has a
/// default that does nothing.
pub trait Runtime {
    /// Its name: the summary section of its figures, and the prefix of its sizes.
    fn name(&self) -> &'static str;

    /// Process `pid`'s executable mappings were read (its first look, an exec, new code):
    /// what they reveal, while the process surely runs.
    fn attach(&mut self, _pid: u32, _mappings: &[Mapped]) {}

    /// Process `pid` exited at kernel time `at_ns` (its samples still queued are its own).
    fn exited(&mut self, _pid: u32, _at_ns: u64) {}

    /// Process `pid` is forgotten: what the runtime holds for it goes.
    fn detach(&mut self, _pid: u32) {}

    /// Catalog objects `gone` were freed: their indexes go to the next objects met.
    fn forget_objects(&mut self, _gone: &[usize]) {}

    /// The periodic work, at kernel time `now_ns`; `end`: the session's last, before the
    /// outputs are written.
    fn housekeep(&mut self, _end: bool, _now_ns: u64) {}

    /// `frame`'s name, if it is one of this runtime's frames.
    fn resolve(&self, _frame: &Frame) -> Option<RuntimeFrame> {
        None
    }

    /// The lengths of its collections, named (see `trace::sizes`).
    fn sizes(&self, _add: &mut dyn FnMut(&'static str, usize)) {}
}

/// What a runtime names its frames with (functions, methods), each kept once and known by its
/// index: frames carry the index, the runtime resolves it when the profile is written.
#[derive(Debug)]
pub struct Interned<T> {
    items: Vec<T>,
    index: std::collections::HashMap<T, u32>,
    max: usize,
}

impl<T: Clone + Eq + std::hash::Hash> Interned<T> {
    /// At most `max` items (then new ones are refused: `too_many_functions`).
    pub fn new(max: usize) -> Interned<T> {
        Interned {
            items: Vec::new(),
            index: std::collections::HashMap::new(),
            max,
        }
    }

    /// The index of `item`, added if new; the error names why it was not.
    pub fn intern(&mut self, item: T) -> Result<u32, &'static str> {
        if let Some(&i) = self.index.get(&item) {
            return Ok(i);
        }
        if self.items.len() >= self.max {
            return Err("too_many_functions");
        }
        let i = self.items.len() as u32;
        self.items.push(item.clone());
        self.index.insert(item, i);
        Ok(i)
    }

    /// Item `index`.
    pub fn get(&self, index: u32) -> Option<&T> {
        self.items.get(index as usize)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}
