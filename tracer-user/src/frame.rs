//! One frame of a sampled stack, as it is kept until it is named: native code by object and
//! offset, code outside any object by address (and, in JIT code, the process incarnation its
//! perf-map names belong to), kernel code by address, a Python function at a line, or a JavaScript function.

use crate::python::pycode::PyFrame;

/// One frame of a stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Frame {
    /// User code of a known object: `offset` is the object-relative address to symbolize and
    /// `addr` the address in the process (the sampled PC in frame 0; a return address minus one
    /// above it, so that it falls in the call).
    User {
        object: usize,
        offset: u64,
        addr: u64,
    },
    /// User code in no known object (anonymous memory, JIT): the absolute address, and in
    /// executable memory without an object the process's JIT incarnation (`JitNames::want`;
    /// 0 elsewhere), which its perf-map names belong to.
    UserUnknown {
        addr: u64,
        process: u32,
    },
    Kernel {
        addr: u64,
    },
    /// A Python function at a line, in place of the evaluation-loop frame that ran it.
    Python(PyFrame),
    /// A JavaScript function at its running line (`v8::V8::function`), in place of the JIT
    /// or builtin frame that ran it, or one of the frames compiled code stands for (its own
    /// function's, and those inlined into it: `inlined`).
    V8 {
        function: u32,
        inlined: bool,
    },
    /// A Java method (`jit::hotspot::HotSpots::method`) at a line (0: not known), in place of
    /// the interpreter's frame that ran it, or one of the frames a compiled method's frame
    /// stands for (its own method's, and those inlined into it).
    Java {
        method: u32,
        line: u32,
        inlined: bool,
    },
}
