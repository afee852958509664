//! The symbolized profile every output format is written from: distinct stacks with their
//! process, thread and event, each frame already named (with file:line and inlined frames
//! when debug information has them) and tagged with the object it is in and how it was found.
//! Formats only translate this model; they never symbolize or look at kernel records.

use std::borrow::Cow;

/// How a frame was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameSource {
    /// Its callee was unwound with an SFrame table (frame 0 of a user stack is `Sframe` when its
    /// own object has an SFrame table, like the frames found through it).
    Sframe,
    /// Its callee was unwound with a table converted from `.eh_frame` / `.debug_frame`.
    EhFrame,
    /// The frame-pointer fallback.
    Fp,
    /// Its callee was unwound as a leaf function its code proves one (aarch64 code without
    /// unwind information: the return address in the link register).
    Leaf,
    /// Its callee was unwound with the stack-pointer deltas of a Go object's `.gopclntab`.
    Gopclntab,
    /// A kernel frame.
    Kernel,
    /// JIT-compiled code named by its process's perf map (however it was found).
    Jit,
    /// JIT-compiled code named by its process's jitdump (however it was found).
    JitDump,
    /// Java code read from a JVM's code heaps (however it was found).
    HotSpot,
    /// A CPython function, from the interpreter's frame chain (in place of the
    /// evaluation-loop frame that ran it).
    Python,
    /// A JavaScript function, from its V8 frame (in place of the JIT or builtin frame that
    /// ran it).
    V8,
}

impl FrameSource {
    /// The name formats print: `sframe`, `eh_frame`, `fp`, `leaf`, `gopclntab`, `kernel`, `jit`,
    /// `jitdump`, `hotspot`, `python`, `v8`.
    pub fn name(self) -> &'static str {
        match self {
            FrameSource::Sframe => "sframe",
            FrameSource::EhFrame => "eh_frame",
            FrameSource::Fp => "fp",
            FrameSource::Leaf => "leaf",
            FrameSource::Gopclntab => "gopclntab",
            FrameSource::Kernel => "kernel",
            FrameSource::Jit => "jit",
            FrameSource::JitDump => "jitdump",
            FrameSource::HotSpot => "hotspot",
            FrameSource::Python => "python",
            FrameSource::V8 => "v8",
        }
    }

    /// One letter per source, as pprof's `sources` label spells a stack (`s`, `e`, `f`, `l`,
    /// `g`, `k`, `j`, `d`, `h`, `p`, `v`), so that a profile symbolized elsewhere says how each frame was found.
    pub fn letter(self) -> char {
        match self {
            FrameSource::Sframe => 's',
            FrameSource::EhFrame => 'e',
            FrameSource::Fp => 'f',
            FrameSource::Leaf => 'l',
            FrameSource::Gopclntab => 'g',
            FrameSource::Kernel => 'k',
            FrameSource::Jit => 'j',
            FrameSource::JitDump => 'd',
            FrameSource::HotSpot => 'h',
            FrameSource::Python => 'p',
            FrameSource::V8 => 'v',
        }
    }

    /// The source [`FrameSource::letter`] spells, `None` for any other character.
    pub fn from_letter(letter: char) -> Option<Self> {
        Some(match letter {
            's' => FrameSource::Sframe,
            'e' => FrameSource::EhFrame,
            'f' => FrameSource::Fp,
            'l' => FrameSource::Leaf,
            'g' => FrameSource::Gopclntab,
            'k' => FrameSource::Kernel,
            'j' => FrameSource::Jit,
            'd' => FrameSource::JitDump,
            'h' => FrameSource::HotSpot,
            'p' => FrameSource::Python,
            'v' => FrameSource::V8,
            _ => return None,
        })
    }
}

/// An object (executable, shared library, vDSO, or the kernel) frames are in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Path as the process maps it (for the kernel: `[kernel.kallsyms]`).
    pub path: String,
    /// Short name (file name).
    pub name: String,
    /// GNU build-id, when the object has one.
    pub build_id: Option<Vec<u8>>,
}

/// One symbolized frame. An address whose debug information shows inlining yields several
/// frames for the same `addr`: the inlined ones first (innermost first, `inlined: true`), then
/// the function they were inlined into.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ResolvedFrame {
    /// Absolute address in the process (the sampled PC, or a return address minus one).
    pub addr: u64,
    /// Index into [`Resolved::objects`], `None` for code in no known object.
    pub object: Option<usize>,
    /// Object-relative address: where the object's ELF file places the code (what the
    /// symbolizer looks up); `addr` for kernel frames and frames without object.
    pub offset: u64,
    /// Function name (demangled), `None` when unknown: formats print `[unknown]`-style names
    /// with the object and offset, never a neighbour's symbol.
    pub symbol: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub inlined: bool,
    pub source: FrameSource,
}

impl ResolvedFrame {
    /// The name text formats print: the symbol, else `[OBJECT+0xOFFSET]` for code of a known
    /// object without a symbol, `[kernel 0xADDR]` for an unknown kernel address and
    /// `[unknown 0xADDR]` for code in no known object, `[python 0xCODE]` for a Python frame
    /// whose code object could not be read.
    pub fn name<'a>(&'a self, objects: &[ObjectInfo]) -> Cow<'a, str> {
        if let Some(symbol) = &self.symbol {
            return Cow::Borrowed(symbol);
        }
        Cow::Owned(match (self.source, self.object.and_then(|i| objects.get(i))) {
            (FrameSource::Kernel, _) => format!("[kernel {:#x}]", self.addr),
            (FrameSource::Python, _) => format!("[python {:#x}]", self.addr),
            (_, Some(object)) => format!("[{}+{:#x}]", object.name, self.offset),
            (_, None) => format!("[unknown {:#x}]", self.addr),
        })
    }
}

/// One distinct stack with how often (and how much) it was seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedStack {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// The event that took it: `cpu-clock`, `uprobe:...`, `offcpu`, ...
    pub event: String,
    /// Frames innermost first: kernel frames (where the sample hit, when it hit the kernel),
    /// then user frames from the sampled PC down to `_start`.
    pub frames: Vec<ResolvedFrame>,
    /// Number of samples or events.
    pub count: u64,
    /// The summed weight: nanoseconds for cpu-clock (count × period) and off-CPU time.
    pub weight_ns: u64,
    /// Why the user frames end before the outermost one (a stop reason's name, as the summary
    /// counts it), when they do.
    pub truncated: Option<&'static str>,
    /// The CPU the samples were taken on, when the stacks were kept per CPU (OTLP's window).
    pub cpu: Option<u32>,
}

/// A profile ready to be written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    pub objects: Vec<ObjectInfo>,
    pub stacks: Vec<ResolvedStack>,
    /// Wall-clock start and duration of the collection, nanoseconds since the Unix epoch.
    pub start_unix_ns: u64,
    pub duration_ns: u64,
    /// Sampling period of cpu-clock in nanoseconds (1e9 / frequency).
    pub period_ns: u64,
}

/// What the weights of a profile's stacks measure, from its events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weights {
    /// cpu-clock samples only (or nothing): CPU time.
    Cpu,
    /// `offcpu` only: time blocked.
    OffCpu,
    /// Several kinds of events: each stack's weight is its own event's.
    Mixed,
}

impl Resolved {
    /// What the stacks' weights measure.
    pub fn weights(&self) -> Weights {
        if self.stacks.iter().all(|s| s.event == crate::event::CPU_CLOCK) {
            Weights::Cpu
        } else if self.stacks.iter().all(|s| crate::event::is_offcpu(&s.event)) {
            Weights::OffCpu
        } else {
            Weights::Mixed
        }
    }
}

/// One sample as the streaming formats (json, perf-script) write it while tracing, its frames
/// symbolized like those of [`ResolvedStack`] and indexing the same kind of object list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedSample {
    /// When it was taken: `CLOCK_MONOTONIC` nanoseconds (the clock `perf script` prints), and
    /// the same instant as nanoseconds since the Unix epoch.
    pub time_ns: u64,
    pub time_unix_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
    pub comm: String,
    pub event: String,
    /// What the sample stands for, in nanoseconds: the cpu-clock period, or the time blocked.
    pub weight_ns: u64,
    /// Frames innermost first, as in [`ResolvedStack::frames`].
    pub frames: Vec<ResolvedFrame>,
    /// Why the user frames end before the outermost one, as in [`ResolvedStack::truncated`].
    pub truncated: Option<&'static str>,
}

/// The functions Go's runtime starts its stacks with: a goroutine's stack ends at
/// `runtime.goexit` (the return address its function was started with), a system stack at
/// `runtime.mstart` or `runtime.systemstack` (a thread's g0 stack, entered by a switch), the
/// first thread's at `runtime.rt0_go`, a thread the runtime made itself (`newosproc`) at
/// `runtime.clone`, whose child side calls `mstart` on the new stack, and the system stack
/// entered by `runtime.mcall` or `runtime.morestack` at them (what they call there never
/// returns; as a caller frame they are always on that side of the switch). Above them is
/// nothing: the walk meets a zero return address (`zero_ra`) or, in a Go object's own table, a
/// function that switches stacks, whose rule holds in the innermost frame only
/// (`topmost_only_rule`: `table::gopcsp`), and the stack is complete, not cut. In a Go object
/// the names come from its `.gopclntab`, the runtime's own table, so a stripped binary's
/// stacks are judged alike.
const GO_STACK_BASES: [&str; 8] = [
    "runtime.goexit",
    "runtime.mstart",
    "runtime.systemstack",
    "runtime.systemstack_switch",
    "runtime.rt0_go",
    "runtime.clone",
    "runtime.mcall",
    "runtime.morestack",
];

/// Why a stack's user frames (innermost first, outermost last) end early, as shown to the
/// user: `truncated` from the walk, except a Go stack that ends at the base its runtime gives
/// it (see [`GO_STACK_BASES`]), which is complete.
pub fn truncation(truncated: Option<&'static str>, frames: &[ResolvedFrame]) -> Option<&'static str> {
    use tracer_common::walk::StopReason;
    truncated.filter(|&why| {
        (why != StopReason::ZeroRa.name() && why != StopReason::TopmostOnlyRule.name())
            || !frames
                .last()
                .and_then(|f| f.symbol.as_deref())
                .is_some_and(|s| GO_STACK_BASES.contains(&s.strip_suffix(".abi0").unwrap_or(s)))
    })
}

/// The frame folded and flame-graph lines show as the outermost of a truncated stack, so a
/// cut stack is seen as one where it is read: `[truncated: REASON]`.
pub fn truncation_marker(why: &str) -> String {
    format!("[truncated: {why}]")
}

impl ResolvedStack {
    /// Why its user frames end early, as shown ([`truncation`]).
    pub fn truncation(&self) -> Option<&'static str> {
        truncation(self.truncated, &self.frames)
    }
}

/// The objects of the writers' unit tests: a program, a library and the kernel.
#[cfg(test)]
pub(crate) fn test_objects() -> Vec<ObjectInfo> {
    [
        ("/usr/bin/app", "app"),
        ("/usr/lib/libx.so", "libx.so"),
        ("[kernel.kallsyms]", "[kernel.kallsyms]"),
    ]
    .map(|(path, name)| ObjectInfo {
        path: path.to_owned(),
        name: name.to_owned(),
        build_id: None,
    })
    .to_vec()
}
