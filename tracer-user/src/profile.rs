//! Samples folded into a profile: each distinct stack (process, thread, command name, event,
//! frames; in the export window also the CPU) with its count and weight, every user frame recorded as (object, object-relative
//! address) at sample time so it symbolizes after the process is gone, with how it was found;
//! plus the tallies the summary prints. No I/O, no symbolization here.

use std::{collections::HashMap, sync::Arc};

use tracer_common::{sample::Sample, trace::SOURCE_FP, walk::StopReason};

use crate::python::merge::{Merged, split};
use crate::registry::{Catalog, ResolvedMapping, TableSource};
use crate::{event::EventNames, export::model::FrameSource};

pub use crate::frame::Frame;

/// A distinct stack: who and what took it, user frames innermost first with how each was found,
/// then kernel frames innermost first (as the kernel records them).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Stack {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// The event's name as given on the command line (`cpu-clock`, `offcpu`, `uprobe:...`).
    pub event: Arc<str>,
    pub user: Vec<Frame>,
    /// How each user frame was found, one per entry of `user`.
    pub sources: Vec<FrameSource>,
    pub kernel: Vec<Frame>,
    /// Why the user stack ends before its outermost frame, when it does.
    pub truncated: Option<StopReason>,
    /// The CPU the sample was taken on: set in the stack of a sample and in the window's
    /// stacks (exported per CPU), `None` in the whole session's (which the other outputs fold
    /// without it).
    pub cpu: Option<u32>,
}

impl Stack {
    /// Make this the stack of `sample`, its user frames resolved through the process's mappings
    /// and its event named through `events`, reusing its buffers: a profile resolves every
    /// sample into one stack and copies it only when it is new.
    pub fn set_to(&mut self, sample: &Sample, catalog: &Catalog, events: &EventNames) {
        let num_user = (sample.num_user as usize).min(sample.user.len());
        let user = &sample.user[..num_user];
        // The native frames, then the runs of CPython frames the kernel appended, which take
        // the place of the evaluation-loop frames that ran them.
        let native = split(user);
        self.user.clear();
        self.sources.clear();
        let mut walk = NativeWalk {
            native,
            untrusted_fp: catalog.runtimes.jit.keeps_no_frame_pointers(sample.tgid),
            ..NativeWalk::default()
        };
        let lookup = |i: usize| if i == 0 { user[0] } else { user[i].wrapping_sub(1) };
        let native_whole = sample.stop == StopReason::Outermost as u32;
        match catalog
            .runtimes
            .python
            .code
            .merge(sample.tgid, user, native, native_whole, lookup)
        {
            Some(merged) => {
                for frame in merged {
                    if walk.cut {
                        break;
                    }
                    match frame {
                        Merged::Native(i) => walk.push(self, sample, catalog, i, lookup(i)),
                        Merged::Python(frame) => {
                            // None: left out by the sample's output bound.
                            if let Some(frame) = catalog.runtimes.python.code.frame(sample.tgid, frame) {
                                self.user.push(Frame::Python(frame));
                                self.sources.push(FrameSource::Python);
                            }
                        }
                    }
                }
            }
            None => {
                for i in 0..native {
                    walk.push(self, sample, catalog, i, lookup(i));
                    if walk.cut {
                        break;
                    }
                }
            }
        }
        let num_kernel = (sample.num_kernel as usize).min(sample.kernel.len());
        self.kernel.clear();
        self.kernel
            .extend(sample.kernel[..num_kernel].iter().map(|&addr| Frame::Kernel { addr }));
        self.pid = sample.tgid;
        self.tid = sample.tid;
        self.truncated = if walk.cut {
            Some(StopReason::BadFramePointer)
        } else {
            StopReason::try_from(sample.stop)
                .ok()
                .filter(|reason| *reason != StopReason::Outermost)
        };
        set_comm(&mut self.comm, &sample.comm);
        self.event = events.name(sample.event);
        self.cpu = Some(sample.cpu);
    }

    /// Every frame, user then kernel.
    pub fn frames(&self) -> impl Iterator<Item = &Frame> {
        self.user.iter().chain(&self.kernel)
    }
}

/// The native frames of a sample resolved one after the other.
#[derive(Default)]
struct NativeWalk {
    /// The mapping of the frame before: the mappings `mapping_at` searches are disjoint and
    /// the same for every frame of the sample (same process, same time), so an address in
    /// its range resolves to it again, without the search (most frames are in one object).
    last: Option<ResolvedMapping>,
    /// The native frame before.
    before: Option<Frame>,
    /// The sample's native frames.
    native: usize,
    /// The process's JIT code keeps no frame pointers (`jit::java`): a frame the kernel found
    /// by the frame-pointer fallback from JIT code is not its caller.
    untrusted_fp: bool,
    /// The stack ends at the frame pushed last: its caller was found that way.
    cut: bool,
    /// The JavaScript frames a frame stands for (`v8::V8::frames`).
    functions: Vec<(u32, bool)>,
}

impl NativeWalk {
    /// Push native frame `i` of `sample`, looked up at `lookup` (a return address points
    /// after its call: the call itself), onto `stack`.
    fn push(&mut self, stack: &mut Stack, sample: &Sample, catalog: &Catalog, i: usize, lookup: u64) {
        let mapping = match self.last {
            Some(m) if m.start <= lookup && lookup < m.end => Some(m),
            // What the kernel walked with first (the process may not be read yet, or gone).
            _ => kernel_found(sample, catalog, lookup).or_else(|| {
                catalog
                    .code_mapping_at(sample.tgid, lookup, sample.time_ns)
                    .map(|(m, _)| *m)
            }),
        };
        self.last = mapping.or(self.last);
        // JIT code: without an object, or in an image of a runtime's code; the interpreter's
        // and the stubs' frames keep frame pointers, except, maybe, the sampled one (in an
        // entry, before its frame is built).
        let jit_code = match mapping {
            Some(ResolvedMapping { object: None, .. }) => true,
            Some(ResolvedMapping { object: Some(o), .. }) => catalog.objects.get(o).is_some_and(|o| o.jit_image()),
            None => false,
        };
        let keeps_fp = i > 0 && catalog.runtimes.jit.hotspot.keeps_frame_pointer(sample.tgid, lookup);
        self.cut = self.untrusted_fp
            && jit_code
            && !keeps_fp
            && i + 1 < self.native
            && sample.user_source.get(i + 1) == Some(&SOURCE_FP);
        // A JavaScript frame whose function the kernel found (`v8/`). (Its code, when JIT
        // code, still asks for the process's perf map as any other: the samples the kernel
        // could not walk, stack copies, are named by it.)
        let at = crate::v8::FrameAt {
            lookup,
            jit: matches!(mapping, Some(ResolvedMapping { object: None, .. })),
            sampled: i == 0,
        };
        self.functions.clear();
        if sample.user_word[i] != 0
            && mapping.is_some()
            && catalog.runtimes.v8.frames(
                sample.tgid,
                sample.user_word[i],
                at,
                sample.time_ns,
                &mut self.functions,
            )
        {
            if at.jit {
                catalog.runtimes.jit.dumps.note_unknown_code(sample.tgid);
                catalog.runtimes.jit.names.want(sample.tgid, lookup, sample.time_ns);
            }
            for &(function, inlined) in &self.functions {
                stack.user.push(Frame::V8 { function, inlined });
                stack.sources.push(FrameSource::V8);
            }
            self.before = stack.user.last().copied();
            return;
        }
        // An interpreted Java frame whose `Method*` the kernel kept (not the sampled one: it
        // may be an entry whose frame is not built yet).
        if sample.user_word[i] != 0
            && keeps_fp
            && let Some((method, line)) =
                catalog
                    .runtimes
                    .jit
                    .hotspot
                    .interpreted_frame(sample.tgid, lookup, sample.user_word[i], sample.time_ns)
        {
            let frame = Frame::Java {
                method,
                line,
                inlined: false,
            };
            self.before = Some(frame);
            stack.user.push(frame);
            stack.sources.push(FrameSource::HotSpot);
            return;
        }
        // A compiled Java method's frame: the Java frames it stands for at this PC (its own
        // method's and those inlined into it, innermost first), at their lines.
        if let Some(ResolvedMapping {
            object: Some(object),
            bias,
            ..
        }) = mapping
            && catalog.hotspot_image(Some(object))
            && let Some(frames) = catalog.runtimes.jit.hotspot.java_frames(sample.tgid, lookup)
        {
            for (i, &(method, line)) in frames.iter().enumerate() {
                let inlined = i + 1 < frames.len();
                stack.user.push(Frame::Java { method, line, inlined });
                stack.sources.push(FrameSource::HotSpot);
            }
            // (Its caller was found with the table of its code.)
            self.before = Some(Frame::User {
                object,
                offset: lookup.wrapping_sub(bias),
                addr: lookup,
            });
            return;
        }
        let frame = match mapping {
            Some(ResolvedMapping {
                object: Some(object),
                bias,
                ..
            }) => {
                // JIT code compiled after its jitdump was read asks for it again.
                catalog
                    .runtimes
                    .jit
                    .dumps
                    .note_frame(sample.tgid, object, lookup.wrapping_sub(bias));
                Frame::User {
                    object,
                    offset: lookup.wrapping_sub(bias),
                    addr: lookup,
                }
            }
            // Executable memory without an object (JIT code): its perf map may name it.
            // (Not an address in no mapping at all: a frame-pointer walk's guess.)
            Some(_) => {
                catalog.runtimes.jit.dumps.note_unknown_code(sample.tgid);
                Frame::UserUnknown {
                    addr: lookup,
                    process: catalog.runtimes.jit.names.want(sample.tgid, lookup, sample.time_ns),
                }
            }
            None => Frame::UserUnknown {
                addr: lookup,
                process: 0,
            },
        };
        // Frame i was found by unwinding frame i - 1 with the table of that frame's object;
        // frame 0 is attributed to the table of its own object.
        let source = if i > 0 && sample.user_source[i] == SOURCE_FP {
            FrameSource::Fp
        } else {
            match table_source(self.before.as_ref().unwrap_or(&frame), catalog) {
                Some(TableSource::Cfi) => FrameSource::EhFrame,
                Some(TableSource::Sframe) => FrameSource::Sframe,
                Some(TableSource::Leaves) => FrameSource::Leaf,
                Some(TableSource::Gopclntab) => FrameSource::Gopclntab,
                None if i == 0 => FrameSource::Fp,
                None => FrameSource::Sframe,
            }
        };
        self.before = Some(frame);
        stack.user.push(frame);
        stack.sources.push(source);
    }
}

/// The mapping holding `addr` among those the kernel found through the process's VMAs for
/// `sample` (`tracer_common::vma`), with the object its table was built for.
fn kernel_found(sample: &Sample, catalog: &Catalog, addr: u64) -> Option<ResolvedMapping> {
    let found = &sample.vma_mappings[..(sample.vmas as usize).min(sample.vma_mappings.len())];
    let m = found.iter().find(|m| m.start <= addr && addr < m.end)?;
    Some(ResolvedMapping {
        start: m.start,
        end: m.end,
        bias: m.bias,
        object: Some(catalog.loader.tables.owner(m.object)?),
    })
}

/// How often a stack was taken, and the nanoseconds it stands for (`Sample::weight`: cpu-clock
/// periods, time blocked; 0 for probes and tracepoints).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub count: u64,
    pub weight_ns: u64,
}

/// Stacks and their tallies, hashed with foldhash (per-process seeded; far cheaper than SipHash
/// on a stack of dozens of frames, and the map is hashed once per sample).
pub type Stacks = HashMap<Stack, Tally, foldhash::fast::RandomState>;

/// Everything collected. Each sample is resolved once ([`Profile::add`]) and its stack tallied
/// for the consumers that keep stacks: the whole session's (`stacks`, for the outputs written at
/// the end and the live view) and the window since the last export (`window`, for OTLP, which
/// takes it). A consumer nobody asked for keeps nothing, so a session that only exports (or only
/// streams) holds no stacks between exports, however long it runs.
#[derive(Debug, Default)]
pub struct Profile {
    /// Every stack of the session, when [`Keep::whole`].
    pub stacks: Stacks,
    /// The stacks since the last [`Profile::take_window`], when [`Keep::window`].
    window: Stacks,
    keep: Keep,
    /// The names of the session's events (default: cpu-clock only).
    pub events: EventNames,
    pub samples: u64,
    /// Caller frames found with an SFrame table, a CFI table, the frame-pointer fallback, or
    /// a leaf function's rule (`FrameSource::Leaf`).
    pub sframe_frames: u64,
    pub cfi_frames: u64,
    pub fp_frames: u64,
    pub leaf_frames: u64,
    /// Caller frames found with a Go table's rule (`FrameSource::Gopclntab`).
    pub gopclntab_frames: u64,
    /// Samples the kernel walked with mappings it found through the process's VMAs
    /// (`tracer_common::vma`: code of a process userspace had not read).
    pub vma_samples: u64,
    /// Samples whose stack was cut at a JIT frame whose caller the frame-pointer fallback
    /// found in a process whose JIT code keeps no frame pointers (`NativeWalk::cut`), by how
    /// the kernel's walk had ended: the summary counts them as `BadFramePointer` instead.
    pub fp_cuts: [u64; StopReason::COUNT as usize],
    /// The stack [`Profile::add`] resolves samples into.
    scratch: Stack,
}

/// Which stacks a profile keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Keep {
    /// The whole session's, in [`Profile::stacks`].
    pub whole: bool,
    /// Those since the last [`Profile::take_window`].
    pub window: bool,
}

impl Profile {
    /// An empty profile of the events named by `events`, keeping the whole session's stacks.
    #[cfg(test)]
    pub fn new(events: EventNames) -> Profile {
        Profile::keeping(
            events,
            Keep {
                whole: true,
                window: false,
            },
        )
    }

    /// An empty profile of the events named by `events`, keeping the stacks `keep` says.
    pub fn keeping(events: EventNames, keep: Keep) -> Profile {
        Profile {
            events,
            keep,
            ..Profile::default()
        }
    }

    /// Fold one sample in and return its stack, resolved once for every consumer. The stack is
    /// resolved into `scratch` and copied into a map only when the map does not have it yet
    /// (most samples repeat a stack).
    pub fn add(&mut self, sample: &Sample, catalog: &Catalog) -> &Stack {
        let mut stack = std::mem::take(&mut self.scratch);
        stack.set_to(sample, catalog, &self.events);
        self.vma_samples += u64::from(sample.vmas != 0);
        if stack.truncated == Some(StopReason::BadFramePointer)
            && sample.stop != StopReason::BadFramePointer as u32
            && let Some(cuts) = self.fp_cuts.get_mut(sample.stop as usize)
        {
            *cuts += 1;
        }
        self.tally(&mut stack, sample.weight);
        self.scratch = stack;
        &self.scratch
    }

    /// The stacks since the last call (none unless the profile keeps a window); the whole
    /// session's stay.
    pub fn take_window(&mut self) -> Stacks {
        std::mem::take(&mut self.window)
    }

    /// The lengths of its collections, named (see `trace::sizes`).
    pub fn sizes(&self, add: &mut dyn FnMut(&'static str, usize)) {
        add("profile.stacks", self.stacks.len());
        add("profile.window", self.window.len());
    }

    /// Fold in a stack taken once, standing for `weight_ns`: in the whole session's stacks
    /// without its CPU, in the window's with it.
    fn tally(&mut self, stack: &mut Stack, weight_ns: u64) {
        // Frame 0 was sampled, not found by unwinding.
        for source in stack.sources.iter().skip(1) {
            match source {
                FrameSource::Fp => self.fp_frames += 1,
                FrameSource::EhFrame => self.cfi_frames += 1,
                FrameSource::Leaf => self.leaf_frames += 1,
                FrameSource::Gopclntab => self.gopclntab_frames += 1,
                // Kernel and JIT sources are given when symbolizing, never while walking.
                FrameSource::Sframe
                | FrameSource::Kernel
                | FrameSource::Jit
                | FrameSource::JitDump
                | FrameSource::HotSpot => self.sframe_frames += 1,
                // Counted by the registry (`PyFrameStats`).
                FrameSource::Python => {}
                // A JavaScript frame is found by its frame pointer.
                FrameSource::V8 => self.fp_frames += 1,
            }
        }
        self.samples += 1;
        if self.keep.whole {
            let cpu = stack.cpu.take();
            count(&mut self.stacks, stack, weight_ns);
            stack.cpu = cpu;
        }
        if self.keep.window {
            count(&mut self.window, stack, weight_ns);
        }
    }
}

/// Count `stack` once more in `stacks`, standing for `weight_ns`.
fn count(stacks: &mut Stacks, stack: &Stack, weight_ns: u64) {
    let tally = match stacks.get_mut(stack) {
        Some(tally) => tally,
        None => stacks.entry(stack.clone()).or_default(),
    };
    tally.count += 1;
    tally.weight_ns = tally.weight_ns.saturating_add(weight_ns);
}

/// Set `comm` to the NUL-terminated command name of a sample.
fn set_comm(comm: &mut String, raw: &[u8; 16]) {
    let len = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    let name = String::from_utf8_lossy(&raw[..len]);
    if *comm != name {
        comm.clear();
        comm.push_str(&name);
    }
}

/// The source of the table that unwinds `frame`.
fn table_source(frame: &Frame, catalog: &Catalog) -> Option<TableSource> {
    let Frame::User { object, .. } = frame else { return None };
    catalog.objects.get(*object)?.table.as_ref().ok().map(|t| t.source)
}
