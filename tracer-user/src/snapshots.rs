//! Samples shipped as stack copies (`tracer_common::snapshot`: the kernel had no table for
//! the process or the code yet) wait here until the process's mappings and tables are loaded,
//! then are walked ([`walk::walk_copy`]) through the mappings the process had when the sample
//! was taken and the tables the kernel uses, and go on as if the kernel had walked them.
//!
//! A copy is walked once nothing it meets is missing (every PC in a mapping), or once it has
//! waited [`HOLD`] (then with what there is: the sampled PC and the frames found, ended by
//! `no_mapping`): well inside the time ended mappings are kept for samples (`follow`'s exit
//! grace). A copy that finds the loaded process without a mapping for a PC asks for the
//! process to be read again (dlopen'ed code), at most every [`RELOAD_EVERY`]. At most
//! [`MAX_HELD`] copies wait; more go on unwalked and are counted.
//!
//! With a [`Recorder`] (`--record-snapshots`), each copy walked is also recorded (`record`,
//! in the format of `recording`) with the mappings and rules it was walked with, for the
//! replay corpus (`replay`).

mod record;
pub mod recording;
pub mod replay;
mod walk;

use std::{
    collections::{HashMap, VecDeque},
    time::{Duration, Instant},
};

use tracer_common::{
    sample::Sample,
    snapshot::StackSnapshot,
    trace::{MAX_KERNEL_FRAMES, SampleHeader},
    walk::StopReason,
};

use crate::registry::Catalog;
pub use record::{MAX_RECORDS, RecordDirError, Recorder};
use recording::{Cover, FORMAT_VERSION, Hex, RecordedMapping, RecordedRule, Recording};

/// How long a copy waits for its process's tables at most.
const HOLD: Duration = Duration::from_secs(1);
/// Copies waiting at most (each about 16 KiB).
const MAX_HELD: usize = 1024;
/// The least time between two reloads of one process asked for by copies.
const RELOAD_EVERY: Duration = Duration::from_millis(50);

/// What became of the stack copies, for the summary (its JSON form names the fields as they are).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SnapshotStats {
    /// Samples that came as stack copies.
    pub copies: u64,
    /// Copies walked once their process's tables were loaded.
    pub walked: u64,
    /// Copies walked after waiting in vain: their process was never loaded, or exited first.
    pub unresolved: u64,
    /// Copies that found the waiting queue full and went on unwalked (frame 0 only).
    pub overflowed: u64,
    /// How the walks of copies ended, by stop reason code (for the summary's stop reasons).
    #[serde(skip)]
    pub outcomes: [u64; StopReason::COUNT as usize],
    /// Every sample was a copy, to be recorded (`--record-snapshots`), not only those whose
    /// process or code had no table yet.
    #[serde(skip)]
    pub every_sample: bool,
}

impl SnapshotStats {
    /// The kernel's stop reasons with each walked copy counted by how its walk ended instead
    /// of as `snapshot`.
    pub fn adjust(&self, stops: &mut [(StopReason, u64)]) {
        let walked = self.walked + self.unresolved;
        for (reason, count) in stops.iter_mut() {
            if *reason == StopReason::Snapshot {
                *count = count.saturating_sub(walked);
            }
            *count += self.outcomes[*reason as usize];
        }
    }
}

/// A copy waiting for its process.
struct Held {
    arrived: Instant,
    header: SampleHeader,
    kernel: Vec<u64>,
    copy: Box<StackSnapshot>,
}

/// The copies waiting, and the sample walked ones are handed on in.
pub struct Snapshots {
    held: VecDeque<Held>,
    /// When a reload was last asked for, per process.
    reloads: HashMap<u32, Instant>,
    /// The walked sample handed on (reused: a sample is large).
    out: Box<Sample>,
    max_depth: u32,
    pub stats: SnapshotStats,
    /// Where walked copies are recorded (`--record-snapshots`).
    recorder: Option<Recorder>,
}

impl Snapshots {
    pub fn new(max_depth: u32) -> Snapshots {
        Snapshots {
            held: VecDeque::new(),
            reloads: HashMap::new(),
            out: Box::new(Sample::EMPTY),
            max_depth,
            stats: SnapshotStats::default(),
            recorder: None,
        }
    }

    /// Record every copy walked from now on into `recorder`.
    pub fn record_into(&mut self, recorder: Recorder) {
        self.stats.every_sample = true;
        self.recorder = Some(recorder);
    }

    /// The recorder, if copies are recorded.
    pub fn recorder(&self) -> Option<&Recorder> {
        self.recorder.as_ref()
    }

    /// Keep `sample` if it is a stack copy (true: it is handed on later by
    /// [`Snapshots::release`]); false for a walked sample, or a copy the queue has no room for
    /// (counted), which the caller hands on as it is.
    pub fn hold(&mut self, sample: &Sample) -> bool {
        if sample.stop != StopReason::Snapshot as u32 {
            return false;
        }
        self.stats.copies += 1;
        if self.held.len() >= MAX_HELD {
            self.stats.overflowed += 1;
            return false;
        }
        let nk = (sample.num_kernel as usize).min(MAX_KERNEL_FRAMES);
        self.held.push_back(Held {
            arrived: Instant::now(),
            header: sample.header,
            kernel: sample.kernel[..nk].to_vec(),
            copy: Box::new(sample.copy),
        });
        true
    }

    /// Walk the copies of `pids` (of every process with `None`: after tables were built, and
    /// periodically) whose process is loaded now, and those that waited long enough (all of
    /// them with `all`, at the end), and hand each on to `emit`; returns the loaded processes
    /// to read again (a copy met a PC in none of their mappings). Copies of other processes
    /// are not looked at: under a storm of new processes, each notice costs its own copies.
    pub fn release(
        &mut self,
        catalog: &Catalog,
        pids: Option<&[u32]>,
        all: bool,
        mut emit: impl FnMut(&Sample),
    ) -> Vec<u32> {
        let mut reload = Vec::new();
        let mut waiting = VecDeque::with_capacity(self.held.len());
        while let Some(held) = self.held.pop_front() {
            let (pid, time) = (held.header.tgid, held.header.time_ns);
            let late = all || held.arrived.elapsed() >= HOLD;
            if !late && pids.is_some_and(|pids| !pids.contains(&pid)) {
                waiting.push_back(held);
                continue;
            }
            // Every lookup, for a recording.
            let mut looked = Vec::new();
            let recording = self.recorder.as_ref().is_some_and(|r| !r.full());
            let walked = walk::walk_copy(&held.copy, self.max_depth, |pc| {
                let found = covering(catalog, pid, time, pc);
                if recording {
                    looked.push((pc, found));
                }
                found
            });
            if walked.stop == StopReason::NoMapping && !late {
                if catalog.processes.current.contains_key(&pid) {
                    let due = self.reloads.get(&pid).is_none_or(|at| at.elapsed() >= RELOAD_EVERY);
                    if due && !reload.contains(&pid) {
                        self.reloads.insert(pid, Instant::now());
                        reload.push(pid);
                    }
                }
                waiting.push_back(held);
                continue;
            }
            if let Some(recorder) = self.recorder.as_mut() {
                if recording {
                    recorder.write(pid, &record(catalog, &held, &walked, &looked, self.max_depth));
                } else {
                    recorder.dropped += 1;
                }
            }
            self.emit(&held, &walked, &mut emit);
        }
        self.held = waiting;
        self.reloads.retain(|_, at| at.elapsed() < HOLD);
        reload
    }

    /// Hand on `held` as walked.
    fn emit(&mut self, held: &Held, walked: &walk::Walked, emit: &mut impl FnMut(&Sample)) {
        if walked.stop == StopReason::NoMapping {
            self.stats.unresolved += 1;
        } else {
            self.stats.walked += 1;
        }
        self.stats.outcomes[walked.stop as usize] += 1;
        let out = &mut *self.out;
        out.header = held.header;
        out.stop = walked.stop as u32;
        out.header.snapshot = 0;
        out.copy.len = 0;
        out.num_kernel = held.kernel.len() as u32;
        out.kernel[..held.kernel.len()].copy_from_slice(&held.kernel);
        out.num_user = walked.frames.len() as u32;
        for (i, &(pc, source)) in walked.frames.iter().enumerate() {
            out.user[i] = pc;
            out.user_source[i] = source;
            out.user_word[i] = 0;
        }
        emit(out);
    }

    /// Whether copies are waiting.
    pub fn waiting(&self) -> bool {
        !self.held.is_empty()
    }

    /// The lengths of its collections, named (see `trace::sizes`).
    pub fn sizes(&self, add: &mut dyn FnMut(&'static str, usize)) {
        add("copies.held", self.held.len());
        add("copies.reloads", self.reloads.len());
    }
}

/// The recording of `held`, walked as `walked` with the rules `looked` (every lookup, in
/// order), with the process's mappings when it was sampled and the stack trimmed to what the
/// walk reads.
fn record(
    catalog: &Catalog,
    held: &Held,
    walked: &walk::Walked,
    looked: &[(u64, walk::Covering)],
    max_depth: u32,
) -> Recording {
    let (pid, time) = (held.header.tgid, held.header.time_ns);
    let (base, words) = recording::trim(&held.copy, walked, |copy| {
        walk::walk_copy(copy, max_depth, |pc| covering(catalog, pid, time, pc))
    });
    let mut rules: Vec<RecordedRule> = Vec::new();
    for &(pc, found) in looked {
        if !rules.iter().any(|r| r.pc.0 == pc) {
            rules.push(RecordedRule {
                pc: Hex(pc),
                covering: Cover::from(found),
            });
        }
    }
    let mappings = catalog
        .processes
        .mappings_at(pid, time)
        .unwrap_or_default()
        .iter()
        .map(|m| {
            let object = m.object.and_then(|i| catalog.objects.get(i));
            RecordedMapping {
                start: Hex(m.start),
                end: Hex(m.end),
                bias: Hex(m.bias),
                path: object.map(|o| o.path.display().to_string()).unwrap_or_default(),
                build_id: object
                    .and_then(|o| o.build_id.as_deref())
                    .map(|id| id.iter().map(|b| format!("{b:02x}")).collect()),
            }
        })
        .collect();
    let (frames, stop) = recording::frames_of(walked);
    let comm_len = held
        .header
        .comm
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(held.header.comm.len());
    let regs = held.copy.regs;
    Recording {
        version: FORMAT_VERSION,
        arch: std::env::consts::ARCH.to_owned(),
        comm: String::from_utf8_lossy(&held.header.comm[..comm_len]).into_owned(),
        max_depth,
        regs: recording::Registers {
            pc: Hex(regs.pc),
            sp: Hex(regs.sp),
            fp: Hex(regs.fp),
            lr: Hex(regs.lr),
        },
        stack: recording::Stack {
            base: Hex(base),
            words: recording::words_hex(&words),
        },
        mappings,
        rules,
        frames,
        stop,
    }
}

/// What covers `pc` in process `pid` at kernel time `time_ns` (see [`walk::Covering`]): its
/// mapping then, and the rule the kernel's table of the mapped object has there. An object
/// whose table was unloaded has nothing loaded to walk with: no mapping, as in the kernel.
fn covering(catalog: &Catalog, pid: u32, time_ns: u64, pc: u64) -> walk::Covering {
    let (mapping, known) = catalog.code_mapping_at(pid, pc, time_ns)?;
    if !known {
        return None;
    }
    let Some(object) = mapping.object.and_then(|i| catalog.objects.get(i)) else {
        return Some(None);
    };
    if object.unloaded {
        return None;
    }
    Some(
        object
            .table
            .as_ref()
            .ok()
            .map(|table| catalog.loader.tables.lookup(table.id, pc.wrapping_sub(mapping.bias))),
    )
}

#[cfg(test)]
mod tests;
