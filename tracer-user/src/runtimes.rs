//! The runtimes the session knows, one line each in the list below (see [`crate::runtime`]
//! for what a runtime is), and the hooks called on all of them.

use crate::{
    frame::Frame,
    runtime::{Mapped, Runtime, RuntimeFrame},
};

/// The runtimes, one line each: a field of [`Runtimes`] and its place in [`Runtimes::each`].
macro_rules! runtimes {
    ($($(#[$doc:meta])* $field:ident: $ty:ty,)*) => {
        /// Every runtime the session knows (module docs).
        #[derive(Default)]
        pub struct Runtimes {
            $($(#[$doc])* pub $field: $ty,)*
        }

        impl Runtimes {
            /// How many there are.
            const COUNT: usize = [$(stringify!($field)),*].len();

            /// Every runtime, in their order.
            pub fn each(&self) -> [&dyn Runtime; Self::COUNT] {
                [$(&self.$field as &dyn Runtime),*]
            }

            /// Every runtime, to change.
            pub fn each_mut(&mut self) -> [&mut dyn Runtime; Self::COUNT] {
                [$(&mut self.$field as &mut dyn Runtime),*]
            }
        }
    };
}

runtimes! {
    /// JIT-compiled code: perf maps name it, jitdumps give it objects (`jit/`).
    jit: crate::jit::Jit,
    /// CPython: its frames, read from the interpreter's memory (`python/`).
    python: crate::python::Python,
    /// Node.js: its JavaScript frames, named from V8's memory (`v8/`).
    v8: crate::v8::V8,
}

impl Runtimes {
    /// [`Runtime::attach`] for every runtime.
    pub fn attach(&mut self, pid: u32, mappings: &[Mapped]) {
        self.each_mut().into_iter().for_each(|r| r.attach(pid, mappings));
    }

    /// [`Runtime::exited`] for every runtime.
    pub fn exited(&mut self, pid: u32, at_ns: u64) {
        self.each_mut().into_iter().for_each(|r| r.exited(pid, at_ns));
    }

    /// [`Runtime::detach`] for every runtime.
    pub fn detach(&mut self, pid: u32) {
        self.each_mut().into_iter().for_each(|r| r.detach(pid));
    }

    /// [`Runtime::forget_objects`] for every runtime.
    pub fn forget_objects(&mut self, gone: &[usize]) {
        if !gone.is_empty() {
            self.each_mut().into_iter().for_each(|r| r.forget_objects(gone));
        }
    }

    /// [`Runtime::housekeep`] for every runtime.
    pub fn housekeep(&mut self, end: bool, now_ns: u64) {
        self.each_mut().into_iter().for_each(|r| r.housekeep(end, now_ns));
    }

    /// The first runtime's name for `frame`, if one names it.
    pub fn resolve(&self, frame: &Frame) -> Option<RuntimeFrame> {
        self.each().into_iter().find_map(|r| r.resolve(frame))
    }

    /// Every runtime's sizes.
    pub fn sizes(&self, add: &mut dyn FnMut(&'static str, usize)) {
        self.each().into_iter().for_each(|r| r.sizes(add));
    }
}

#[cfg(test)]
mod tests;
