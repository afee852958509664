//! Samples folded into a profile: each distinct stack with its count, every frame recorded as
//! (object, object-relative address) at sample time so it symbolizes after the process is
//! gone, plus the tallies the summary prints. No I/O, no symbolization here.

use std::collections::HashMap;

use tracer_common::trace::{SOURCE_FP, Sample};

use super::objects::{Catalog, TableSource};

/// One frame of a stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Frame {
    /// User code of a known object: `addr` is the object-relative address to symbolize (the
    /// sampled PC in frame 0; a return address minus one above it, so it falls in the call).
    User {
        object: usize,
        addr: u64,
    },
    /// User code in no known object (anonymous memory, JIT): the absolute address.
    UserUnknown {
        addr: u64,
    },
    Kernel {
        addr: u64,
    },
}

/// A distinct stack: the thread's command name, user frames innermost first, then kernel frames
/// innermost first (as the kernel records them).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Stack {
    pub comm: String,
    pub user: Vec<Frame>,
    pub kernel: Vec<Frame>,
}

/// Everything collected.
#[derive(Debug, Default)]
pub struct Profile {
    pub stacks: HashMap<Stack, u64>,
    pub samples: u64,
    /// Caller frames found with an SFrame table, a CFI table, or the frame-pointer fallback.
    pub sframe_frames: u64,
    pub cfi_frames: u64,
    pub fp_frames: u64,
}

impl Profile {
    /// Fold one sample in, resolving its user frames through the process's mappings.
    pub fn add(&mut self, sample: &Sample, catalog: &Catalog) {
        let num_user = (sample.num_user as usize).min(sample.user.len());
        let mut user = Vec::with_capacity(num_user);
        for (i, &pc) in sample.user[..num_user].iter().enumerate() {
            // Return addresses point after the call: look up the call itself.
            let lookup = if i == 0 { pc } else { pc.wrapping_sub(1) };
            let frame = match catalog.mapping(sample.tgid, lookup) {
                Some(m) if m.object.is_some() => Frame::User {
                    object: m.object.unwrap_or_default(),
                    addr: lookup.wrapping_sub(m.bias),
                },
                _ => Frame::UserUnknown { addr: lookup },
            };
            // Frame i was found by unwinding frame i - 1 with the table of that frame's object.
            if let Some(callee) = user.last() {
                if sample.user_source[i] == SOURCE_FP {
                    self.fp_frames += 1;
                } else if table_source(callee, catalog) == Some(TableSource::Cfi) {
                    self.cfi_frames += 1;
                } else {
                    self.sframe_frames += 1;
                }
            }
            user.push(frame);
        }
        let num_kernel = (sample.num_kernel as usize).min(sample.kernel.len());
        let kernel = sample.kernel[..num_kernel]
            .iter()
            .map(|&addr| Frame::Kernel { addr })
            .collect();
        let comm = comm_of(&sample.comm);
        *self.stacks.entry(Stack { comm, user, kernel }).or_default() += 1;
        self.samples += 1;
    }
}

/// The NUL-terminated command name of a sample.
fn comm_of(raw: &[u8; 16]) -> String {
    let len = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    String::from_utf8_lossy(&raw[..len]).into_owned()
}

/// The source of the table that unwinds `frame`.
fn table_source(frame: &Frame, catalog: &Catalog) -> Option<TableSource> {
    let Frame::User { object, .. } = frame else { return None };
    catalog.objects.get(*object)?.table.as_ref().ok().map(|t| t.source)
}
