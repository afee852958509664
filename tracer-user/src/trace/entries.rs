//! Stacks at the entry of `exit`, `exit_group`, `execve` and `execveat`: a thread's samples
//! taken inside such a call after the kernel has freed its address space (`exit`) or put the
//! new program's in its place (`execve`, past the point of no return) have the thread's user
//! registers but no stack to walk: the kernel's walk ends after frame 0 (`exec_or_exit`, or a
//! read of the stack that failed). The user stack was whole when the call began, and the
//! thread has not run a user instruction since: the kernel walks it at the call's entry and
//! ships it as a record of its own (`tracer_common::event::EVENT_CALL_ENTRY`), kept here per
//! thread, and such a sample is given it. The same holds for a thread killed by a signal that
//! ends its process (the other threads of an `exit_group`): its stack is walked as the signal
//! is delivered, and it leaves through the kernel's exit with those registers.
//!
//! A sample is given the entry stack of its thread only when it is the same call's: the same
//! process and thread, taken after the entry, its walk cut short (not complete; a stack copy
//! counts), and every frame it did walk equal to the entry stack's frames (the
//! same PC above all: in the call, the user registers stay those of the entry). A later call
//! of the thread replaces its entry stack; a thread that ended leaves it until it is the
//! oldest of [`MAX_KEPT`] or [`KEEP_NS`] old. Nothing else is ever given one. A sample given
//! an entry stack keeps its kernel stack, weight and CPU, and takes the entry's time.

use std::collections::HashMap;

use serde::Serialize;
use tracer_common::{event::EVENT_CALL_ENTRY, mapping::ExecMapping, sample::Sample, trace::WalkRegs, walk::StopReason};

/// Threads whose entry stack is kept at once; past it the oldest is dropped (a storm of exits:
/// each of those threads' last samples came long before). A copy is up to 16 KiB: at
/// most 4 MiB in all.
pub const MAX_KEPT: usize = 256;
/// An entry stack is dropped once the newest record is this much later (kernel time): the
/// slowest exit (freeing a large address space) takes well under a second.
pub const KEEP_NS: u64 = 10_000_000_000;

/// The user part of an entry record.
struct Entry {
    tgid: u32,
    time_ns: u64,
    stop: u32,
    user: Vec<u64>,
    sources: Vec<u8>,
    /// `Sample::user_word`, per frame.
    v8: Vec<u64>,
    vmas: Vec<ExecMapping>,
    /// The registers, the address of the first word and the words of a stack copy (an entry
    /// of a process whose tables were not loaded yet).
    copy: Option<(WalkRegs, u64, Vec<u64>)>,
}

/// What the entry stacks did in a session (the summary's `call_entries`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EntryStats {
    /// Entry stacks the kernel shipped.
    pub kept: u64,
    /// Samples inside those calls given their thread's entry stack.
    pub given: u64,
    /// Entry stacks dropped for room or age before the session ended.
    pub dropped: u64,
    /// Execs not walked at their entry: the process's last one was less than a millisecond
    /// before (the kernel's count).
    pub exec_limited: u64,
}

/// The entry stacks of the session's threads (module docs).
pub struct EntryStacks {
    by_tid: HashMap<u32, Entry>,
    /// The time of the newest record seen.
    newest_ns: u64,
    /// The last sample given an entry stack.
    given: Box<Sample>,
    pub stats: EntryStats,
    /// Walks to take back from the kernel's stop counts, and to add, by reason: entry records
    /// are no samples, and a sample given an entry stack ends as the entry stack does.
    moved: [i64; StopReason::COUNT as usize],
}

impl Default for EntryStacks {
    fn default() -> EntryStacks {
        EntryStacks {
            by_tid: HashMap::new(),
            newest_ns: 0,
            given: Box::new(Sample::EMPTY),
            stats: EntryStats::default(),
            moved: [0; StopReason::COUNT as usize],
        }
    }
}

impl EntryStacks {
    /// Keep `record` if it is an entry stack (`None`: it is no sample); else the sample to
    /// take: `record` itself, or `record` with its thread's entry stack as its user stack.
    pub fn see<'a>(&'a mut self, record: &'a Sample) -> Option<&'a Sample> {
        self.newest_ns = self.newest_ns.max(record.time_ns);
        if record.event == EVENT_CALL_ENTRY {
            self.keep(record);
            return None;
        }
        let Some(entry) = self.by_tid.get(&record.tid) else {
            return Some(record);
        };
        if !cut_short(record) || !same_call(entry, record) {
            return Some(record);
        }
        let given = &mut *self.given;
        *given = *record;
        // Dated at the entry, when the stack it now carries was the thread's: its frames are
        // looked up in the mappings the process had then (an exiting process has ended by the
        // time its memory is freed, and an exec's new image is mapped by the time it returns).
        given.time_ns = entry.time_ns;
        given.stop = entry.stop;
        given.num_user = entry.user.len() as u32;
        given.user[..entry.user.len()].copy_from_slice(&entry.user);
        given.user_source[..entry.sources.len()].copy_from_slice(&entry.sources);
        given.user_word[..entry.v8.len()].copy_from_slice(&entry.v8);
        given.vmas = entry.vmas.len() as u32;
        given.vma_mappings[..entry.vmas.len()].copy_from_slice(&entry.vmas);
        match &entry.copy {
            Some((regs, base, words)) => {
                given.snapshot = words.len() as u32;
                given.copy.regs = *regs;
                given.copy.base = *base;
                given.copy.len = words.len() as u32;
                given.copy.words[..words.len()].copy_from_slice(words);
            }
            None => {
                given.snapshot = 0;
                given.copy.len = 0;
            }
        }
        let stop = entry.stop;
        self.move_stop(record.stop, -1);
        self.move_stop(stop, 1);
        self.stats.given += 1;
        Some(&*self.given)
    }

    /// The kernel's stop counts with the entry records taken out and the samples given an
    /// entry stack moved to how it ended (before stack copies are accounted for: a sample
    /// given a copy then counts as one).
    pub fn adjust(&self, stops: &mut [(StopReason, u64)]) {
        for (reason, count) in stops.iter_mut() {
            let moved = self.moved[*reason as usize];
            *count = count.saturating_add_signed(moved);
        }
    }

    /// Entry stacks kept now.
    pub fn len(&self) -> usize {
        self.by_tid.len()
    }

    fn move_stop(&mut self, stop: u32, by: i64) {
        if let Some(slot) = self.moved.get_mut(stop as usize) {
            *slot += by;
        }
    }

    fn keep(&mut self, record: &Sample) {
        log::trace!(
            "entry stack of thread {} of {}: {} frames, stop {}, copy of {} words",
            record.tid,
            record.tgid,
            record.num_user,
            record.stop,
            record.snapshot
        );
        self.move_stop(record.stop, -1);
        self.stats.kept += 1;
        let n = (record.num_user as usize).min(record.user.len());
        let vmas = (record.vmas as usize).min(record.vma_mappings.len());
        let copy = (record.snapshot != 0).then(|| {
            let len = (record.copy.len as usize).min(record.copy.words.len());
            (record.copy.regs, record.copy.base, record.copy.words[..len].to_vec())
        });
        let entry = Entry {
            tgid: record.tgid,
            time_ns: record.time_ns,
            stop: record.stop,
            user: record.user[..n].to_vec(),
            sources: record.user_source[..n].to_vec(),
            v8: record.user_word[..n].to_vec(),
            vmas: record.vma_mappings[..vmas].to_vec(),
            copy,
        };
        // A thread's new call replaces its last one.
        self.by_tid.insert(record.tid, entry);
        let before = self.by_tid.len();
        let newest = self.newest_ns;
        self.by_tid.retain(|_, e| newest.saturating_sub(e.time_ns) < KEEP_NS);
        if self.by_tid.len() > MAX_KEPT
            && let Some(oldest) = self.by_tid.iter().min_by_key(|(_, e)| e.time_ns).map(|(&tid, _)| tid)
        {
            self.by_tid.remove(&oldest);
        }
        self.stats.dropped += (before - self.by_tid.len()) as u64;
    }
}

/// Whether the kernel's walk of `sample` ended short of a whole stack: not complete. A stack
/// copy counts (inside the call the process may be gone from the tracer's maps, as it is from
/// the kernel's once its last thread is in `exit`, and the copy would be walked by nothing).
fn cut_short(sample: &Sample) -> bool {
    sample.num_user >= 1 && sample.stop != StopReason::Outermost as u32
}

/// Whether `sample` is in the call `entry` was taken at (module docs).
fn same_call(entry: &Entry, sample: &Sample) -> bool {
    let walked = (sample.num_user as usize).min(sample.user.len());
    let common = walked.min(entry.user.len());
    entry.tgid == sample.tgid
        && entry.time_ns <= sample.time_ns
        && common >= 1
        // What it walked is a part of the entry stack (a copy's walk is not known yet).
        && (walked <= entry.user.len() || entry.copy.is_some())
        && sample.user[..common] == entry.user[..common]
}

#[cfg(test)]
mod tests;
