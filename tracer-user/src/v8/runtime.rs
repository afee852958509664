//! The V8 runtime behind the [`Runtime`] trait: JavaScript frames named (module docs of
//! [`super`]).

use super::V8;
use crate::{
    export::model::FrameSource,
    frame::Frame,
    runtime::{Runtime, RuntimeFrame},
};

/// The pseudo-object of JavaScript frames.
pub const V8_OBJECT: &str = "[javascript]";

impl Runtime for V8 {
    fn name(&self) -> &'static str {
        "v8"
    }

    fn detach(&mut self, pid: u32) {
        self.forget(pid);
    }

    /// A JavaScript function: in the [`V8_OBJECT`] pseudo-object, at an offset standing for
    /// it (its index: what tells its pprof location apart).
    fn resolve(&self, frame: &Frame) -> Option<RuntimeFrame> {
        let Frame::V8 { function, inlined } = *frame else {
            return None;
        };
        let named = self.function(function)?;
        let offset = u64::from(function);
        Some(RuntimeFrame {
            object: V8_OBJECT,
            addr: offset,
            offset,
            symbol: Some(named.name),
            file: (!named.file.is_empty()).then_some(named.file),
            line: (named.line != 0).then_some(named.line),
            source: FrameSource::V8,
            inlined,
        })
    }

    fn sizes(&self, add: &mut dyn FnMut(&'static str, usize)) {
        let inner = self.inner.borrow();
        add("v8.processes", self.procs.len());
        add("v8.images", self.images.len());
        add("v8.functions", inner.functions.len());
        add("v8.cache", inner.cache.len());
    }
}
