//! Interpreted Java frames named: the kernel's walk keeps, with each frame it finds by frame
//! pointer in a JVM's code heaps, the word where an interpreted frame keeps its `Method*`
//! ([`METHOD_SLOT`] bytes below the frame pointer, `tracer_common::frame_word::slot_config`); here
//! that word is named `Class.method` ([`super::methods::method_name`]) through the reader thread
//! of `python::pymem` (bounded in time, per user), and cached by process and address (a
//! `Method` lives in metaspace, freed only when its class is unloaded). A word that names no
//! method leaves the frame `Interpreter`, counted.

use std::{
    cell::RefCell,
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

use super::{
    methods::method_name,
    vmstructs::{Layout, Memory},
};
use crate::{python::pymem::MemReader, runtime::Interned};

/// Where an interpreted frame keeps its `Method*`: below the frame pointer, past the sender's
/// stack pointer and the last one (`frame_x86.hpp`, JDK 17 to 25).
pub const METHOD_SLOT: u8 = 24;
/// Where it keeps its bytecode pointer (`frame_x86.hpp`: `interpreter_frame_bcp_offset`, -8
/// words, JDK 17 to 25).
pub const BCP_SLOT: u8 = 64;
/// Methods read per sample at most (the rest of its frames stay `Interpreter` for it).
const READS_PER_SAMPLE: u32 = 32;
/// Cached methods at most (then emptied), names at most (then new ones stay unnamed).
const MAX_CACHED: usize = 1 << 18;
const MAX_NAMES: usize = 1 << 20;

/// What became of interpreted frames (the summary's `hotspot.interpreted`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct InterpretedStats {
    /// Interpreted frames put into stacks named.
    pub named: u64,
    /// Left `Interpreter`, by why: `unreadable` (no method there), `stuck`, `over_budget`.
    pub unnamed_by_reason: BTreeMap<&'static str, u64>,
}

/// A method as read: its name's index, and its line table.
type Read = (u32, Arc<[u8]>);

/// The names of interpreted frames' methods (module docs).
#[derive(Default)]
pub struct Interpreted {
    inner: RefCell<Inner>,
}

struct Inner {
    names: Interned<String>,
    cache: HashMap<(u32, u64), Result<Read, &'static str>>,
    reader: MemReader,
    /// The sample being resolved and the reads it made.
    sample: (u64, u32),
    stats: InterpretedStats,
}

impl Default for Inner {
    fn default() -> Inner {
        Inner {
            names: Interned::new(MAX_NAMES),
            cache: HashMap::new(),
            reader: MemReader::default(),
            sample: (0, 0),
            stats: InterpretedStats::default(),
        }
    }
}

impl std::fmt::Debug for Interpreted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interpreted")
            .field("names", &self.inner.borrow().names.len())
            .finish()
    }
}

/// A reading function as HotSpot's reader reads.
struct ReadMem<'a>(&'a mut dyn FnMut(u64, &mut [u8]) -> bool);

impl Memory for ReadMem<'_> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        (self.0)(addr, buf)
    }
}

impl Interpreted {
    /// The name of the method at `method` in `pid` (owned by `uid`, laid out as `layout`
    /// says), for a frame of a sample taken at `time_ns` at bytecode index `bci` (if known):
    /// its index for [`Self::name`], and the line (0: not known).
    pub fn frame(
        &self,
        pid: u32,
        uid: u32,
        layout: &Arc<Layout>,
        (method, bci): (u64, Option<i32>),
        time_ns: u64,
    ) -> Option<(u32, u32)> {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        if inner.sample.0 != time_ns {
            inner.sample = (time_ns, 0);
        }
        let result = match inner.cache.get(&(pid, method)) {
            Some(cached) => cached.clone(),
            None if inner.sample.1 >= READS_PER_SAMPLE => Err("over_budget"),
            None => {
                inner.sample.1 += 1;
                let layout = Arc::clone(layout);
                let read = inner.reader.run(pid, uid, move |read| {
                    let mut mem = ReadMem(read);
                    let name = method_name(&mut mem, &layout, method)?;
                    let lines = layout
                        .scopes
                        .as_ref()
                        .and_then(|l| super::methods::line_table(&mut mem, &layout, l, method));
                    Some((name, lines.unwrap_or_default()))
                });
                let result = match read {
                    Ok(Some((name, lines))) => inner.names.intern(name).map(|i| (i, Arc::from(lines))),
                    Ok(None) => Err("unreadable"),
                    Err(_) => Err("stuck"),
                };
                if inner.cache.len() >= MAX_CACHED {
                    inner.cache.clear();
                }
                inner.cache.insert((pid, method), result.clone());
                result
            }
        };
        match result {
            Ok((index, lines)) => {
                inner.stats.named += 1;
                let line = bci
                    .zip(layout.scopes.as_ref())
                    .and_then(|(bci, l)| super::scopes::line_at(&lines, bci, l.coding))
                    .unwrap_or(0);
                Some((index, line))
            }
            Err(reason) => {
                *inner.stats.unnamed_by_reason.entry(reason).or_default() += 1;
                None
            }
        }
    }

    /// The index of method name `name` for [`Self::name`] (`None` once the names are full).
    pub fn intern(&self, name: String) -> Option<u32> {
        self.inner.borrow_mut().names.intern(name).ok()
    }

    /// Method `index`'s name.
    pub fn name(&self, index: u32) -> Option<String> {
        self.inner.borrow().names.get(index).cloned()
    }

    pub fn stats(&self) -> InterpretedStats {
        self.inner.borrow().stats.clone()
    }

    /// Process `pid` is forgotten.
    pub fn forget(&mut self, pid: u32) {
        let inner = self.inner.get_mut();
        inner.cache.retain(|&(p, _), _| p != pid);
        inner.reader.forget(pid);
    }

    /// A reader of a fake memory (tests).
    #[cfg(test)]
    pub fn with_reader(reader: MemReader) -> Interpreted {
        Interpreted {
            inner: RefCell::new(Inner {
                reader,
                ..Inner::default()
            }),
        }
    }
}
