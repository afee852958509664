//! The JIT runtime behind the [`Runtime`] trait: perf maps name JIT-compiled code
//! ([`super::JitNames`]), jitdumps give it objects of its own ([`super::dumps`]).

use super::{JIT_OBJECT, JitNames, dumps};
use crate::{
    export::model::FrameSource,
    frame::Frame,
    runtime::{Mapped, Runtime, RuntimeFrame},
};

/// The JIT runtime: perf maps name JIT-compiled code, jitdumps give it objects of its own (the
/// catalog builds them, `registry::jitcode`); one budget bounds both ([`budget`]).
#[derive(Debug, Default)]
pub struct Jit {
    /// The perf maps read, and the JIT-name budget.
    pub names: JitNames,
    pub dumps: dumps::JitDumps,
    /// The JVMs whose code heaps are read (`hotspot/`).
    pub hotspot: super::hotspot::HotSpots,
    /// Processes whose JIT code keeps no frame pointers (Java without
    /// `-XX:+PreserveFramePointer`, `java.rs`): a frame-pointer step from their JIT code is not
    /// trusted. Decided at each look at a process with JIT code, forgotten with the process.
    without_frame_pointers: std::collections::HashSet<u32>,
}

impl Jit {
    /// The processes whose mappings are to be read again for code their jitdump images do
    /// not hold ([`dumps::JitDumps::take_rereads`]).
    pub fn take_dump_rereads(&mut self) -> Vec<u32> {
        let hotspot = &self.hotspot;
        self.dumps.take_rereads(&self.names.budget, |pid| hotspot.knows(pid))
    }

    /// Whether `pid`'s JIT code keeps no frame pointers (see the field).
    pub fn keeps_no_frame_pointers(&self, pid: u32) -> bool {
        self.without_frame_pointers.contains(&pid)
    }

    /// Record whether `pid`'s JIT code keeps no frame pointers (tests; [`Runtime::attach`]
    /// reads it from `/proc`).
    pub fn set_without_frame_pointers(&mut self, pid: u32, without: bool) {
        if without {
            self.without_frame_pointers.insert(pid);
        } else {
            self.without_frame_pointers.remove(&pid);
        }
    }
}

impl Runtime for Jit {
    fn name(&self) -> &'static str {
        "jit"
    }

    /// A process with executable memory without an object is looked at now (its root, pid
    /// and user), while it runs, so that a perf map it writes at exit can be read after it is
    /// gone.
    fn attach(&mut self, pid: u32, mappings: &[Mapped]) {
        let anonymous_code = mappings.iter().any(|m| m.anonymous_code);
        if anonymous_code {
            self.names.watch(pid);
        }
        // (A JVM whose code heaps are read has objects for them: its code is JIT code too.)
        if anonymous_code || self.hotspot.knows(pid) {
            let without = super::java::process_without_frame_pointers(pid);
            self.set_without_frame_pointers(pid, without);
        }
    }

    fn exited(&mut self, pid: u32, at_ns: u64) {
        self.names.exited(pid, at_ns);
    }

    fn detach(&mut self, pid: u32) {
        self.dumps.forget_process(pid, &mut self.names.budget);
        self.hotspot.forget(pid);
        self.without_frame_pointers.remove(&pid);
    }

    fn forget_objects(&mut self, gone: &[usize]) {
        for &index in gone {
            self.dumps.forget_object(index);
        }
    }

    /// The perf maps read again (at the `end`, every process's, once more).
    fn housekeep(&mut self, end: bool, now_ns: u64) {
        self.names.refresh(end, now_ns);
        if end {
            self.hotspot.end();
        }
    }

    /// Code outside any object that its process's perf map names; a Java method, interpreted
    /// or of a compiled frame, at its line (in the [`super::hotspot::HOTSPOT_OBJECT`]
    /// pseudo-object, at an offset standing for it).
    fn resolve(&self, frame: &Frame) -> Option<RuntimeFrame> {
        if let Frame::Java { method, line, inlined } = *frame {
            return Some(RuntimeFrame {
                object: super::hotspot::HOTSPOT_OBJECT,
                addr: u64::from(method),
                offset: u64::from(method),
                symbol: Some(self.hotspot.method(method)?),
                file: None,
                line: (line != 0).then_some(line),
                source: FrameSource::HotSpot,
                inlined,
            });
        }
        let Frame::UserUnknown { addr, process } = *frame else {
            return None;
        };
        Some(RuntimeFrame {
            object: JIT_OBJECT,
            addr,
            offset: addr,
            symbol: Some(self.names.name(process, addr)?.to_owned()),
            file: None,
            line: None,
            source: FrameSource::Jit,
            inlined: false,
        })
    }

    fn sizes(&self, add: &mut dyn FnMut(&'static str, usize)) {
        self.names.sizes(add);
        self.dumps.sizes(add);
        self.hotspot.sizes(add);
        add("jit.without_frame_pointers", self.without_frame_pointers.len());
    }
}
