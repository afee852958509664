//! Where samples go (the session's [`Sink`]): each is resolved once into the profile and
//! streamed to the outputs written as it goes; a stack copy waits for its process's tables,
//! and a streamed sample whose JIT names a put-off read will give waits for that read
//! (`late`).

use super::{entries, inspect, late, output};
use crate::manager::Manager;
use crate::profile::Profile;
use crate::snapshots::Snapshots;
use crate::symbolize::SymbolCache;

/// Where samples go: a stack copy waits for its process's tables (`copies`); any other sample
/// is resolved once into the profile and streamed, named through the session's one symbol
/// cache, to the outputs written as it goes.
pub(super) struct Sink {
    pub(super) profile: Profile,
    pub(super) output: output::Outputs,
    pub(super) symbols: SymbolCache,
    pub(super) copies: Snapshots,
    /// Java and Node.js processes met without the flag their stacks need, and the executable
    /// names of the processes sampled.
    pub(super) runtimes: inspect::Runtimes,
    /// The tracer's own process, whose samples are left out (whole host, without
    /// `--include-self`).
    pub(super) own_pid: Option<u32>,
    /// Streamed samples waiting for a read of their perf map that names their JIT code.
    pub(super) late: late::Late,
    /// The user stacks threads had entering exit and exec, for their samples inside the call.
    pub(super) entries: entries::EntryStacks,
    /// How the walks of the tracer's own samples, left out, ended (by `StopReason`).
    pub(super) own_stops: [u64; tracer_common::walk::StopReason::COUNT as usize],
}

impl Sink {
    /// Take the sample `record`, or hold it if it is a stack copy; an entry stack is kept
    /// (`entries`), and a sample inside such a call is taken with its thread's.
    pub(super) fn take(&mut self, record: &tracer_common::sample::Sample, manager: &mut Manager) {
        let Some(sample) = self.entries.see(record) else {
            return;
        };
        if self.own_pid == Some(sample.tgid) {
            if let Some(count) = self.own_stops.get_mut(sample.stop as usize) {
                *count += 1;
            }
            return;
        }
        if self.copies.hold(sample) {
            return;
        }
        manager.resolve(|catalog| {
            let stack = self.profile.add(sample, catalog);
            self.runtimes.see(stack.pid);
            // JIT code not named yet: its perf map may have grown since it was read.
            if catalog.runtimes.jit.names.is_wanted() {
                catalog.runtimes.jit.names.refresh_wanted();
            }
            let taken = output::Taken::from(sample);
            if self.output.streams() && late::waits(stack, &catalog.runtimes.jit.names) {
                if let Some((taken, stack)) = self.late.hold(taken, stack.clone()) {
                    self.output.sample(taken, &stack, catalog, &mut self.symbols);
                }
            } else {
                self.output.sample(taken, stack, catalog, &mut self.symbols);
            }
            Self::write_late(&mut self.late, &mut self.output, &mut self.symbols, catalog, false);
        });
    }

    /// The kernel's stop counts without the walks of samples that are not in the profile: the
    /// tracer's own, and the stacks kept at exit and exec (`entries`), with the samples given
    /// those counted as they end; stacks the profile cut at a JIT frame count as
    /// `bad_frame_pointer`.
    pub(super) fn adjust_stops(&self, stops: &mut [(tracer_common::walk::StopReason, u64)]) {
        for (reason, count) in stops.iter_mut() {
            *count = count.saturating_sub(self.own_stops[*reason as usize]);
        }
        self.entries.adjust(stops);
        self.copies.stats.adjust(stops);
        // The stacks cut at a JIT frame (`Profile::fp_cuts`), by how their walk had ended.
        let mut cut = 0;
        for (reason, count) in stops.iter_mut() {
            let cuts = self.profile.fp_cuts[*reason as usize].min(*count);
            *count -= cuts;
            cut += cuts;
        }
        if let Some((_, count)) = stops
            .iter_mut()
            .find(|(r, _)| *r == tracer_common::walk::StopReason::BadFramePointer)
        {
            *count += cut;
        }
    }

    /// Write the samples held for their JIT names that wait no more (all of them with `all`,
    /// at the end, once the perf maps had their last read).
    fn write_late(
        late: &mut late::Late,
        output: &mut output::Outputs,
        symbols: &mut SymbolCache,
        catalog: &crate::registry::Catalog,
        all: bool,
    ) {
        for (taken, stack) in late.ready(&catalog.runtimes.jit.names, all) {
            output.sample(taken, &stack, catalog, symbols);
        }
    }

    /// [`Sink::write_late`] after the housekeeping tick's reads, or the last ones (`all`).
    pub(super) fn flush_late(&mut self, manager: &mut Manager, all: bool) {
        let (late, output, symbols) = (&mut self.late, &mut self.output, &mut self.symbols);
        manager.resolve(|catalog| Self::write_late(late, output, symbols, catalog, all));
    }

    /// Walk the stack copies of `pids` (every process's with `None`) whose process is loaded,
    /// and those that waited long enough (all of them with `all`), and take them; read again
    /// the processes in which a copy met code not known yet.
    pub(super) fn release(&mut self, pids: Option<&[u32]>, all: bool, manager: &mut Manager) -> anyhow::Result<()> {
        if !self.copies.waiting() {
            return Ok(());
        }
        let (profile, output, symbols, copies) =
            (&mut self.profile, &mut self.output, &mut self.symbols, &mut self.copies);
        let reload = manager.resolve(|catalog| {
            let catalog = &*catalog;
            copies.release(catalog, pids, all, |sample| {
                let stack = profile.add(sample, catalog);
                output.sample(sample.into(), stack, catalog, symbols);
            })
        });
        for pid in reload {
            manager.load(pid)?;
        }
        Ok(())
    }
}
