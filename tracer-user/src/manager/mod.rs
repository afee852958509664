//! The process manager: the one owner of what the session knows of the traced processes, the
//! objects they map (the registry's [`Catalog`]), following their life (the [`Follower`]:
//! exits in their grace period, tables being built, sweeps) and the kernel maps the walker
//! reads (through the [`KernelTables`] seam, [`crate::bpf::Kernel`] in a session, a fake in
//! tests). The session's loop hands it what happens, one method per event:
//!
//! | event | method |
//! |---|---|
//! | a kernel notice (exec, exit, new process, unknown PC, code unmapped) | [`Manager::on_notice_seen`] (before the samples queued are resolved), then [`Manager::on_notice`] |
//! | tables built in the background | [`Manager::on_built`] |
//! | the housekeeping tick | [`Manager::housekeep`] |
//! | a sample to resolve | [`Manager::resolve`] (the catalog it is resolved through) |
//! | a process to (re)read | [`Manager::load`] |
//!
//! Everything else reads through [`Manager::catalog`] and [`Manager::kernel`].

mod changed;
mod follow;
pub mod seam;

use std::collections::HashMap;

use tokio::sync::mpsc;
use tracer_common::notice::Notice;

use follow::Follower;
pub use follow::{Built, FollowStats, LOAD_LOG, SWEEP_LOG, Timing};
use seam::{KernelTables, Live, Processes};

use crate::registry::Catalog;

/// The traced processes, their objects and the kernel's view of them, kept together.
pub struct Manager<K = crate::bpf::Kernel, P = Live> {
    catalog: Catalog,
    follower: Follower<P>,
    kernel: K,
}

impl<K: KernelTables> Manager<K, Live> {
    /// The manager of this host's processes, starting from `catalog` (the processes loaded at
    /// the start) and `kernel`; `python`: whether CPython frames are walked. Tables built in
    /// the background arrive on the returned receiver: pass each to [`Manager::on_built`].
    pub fn new(catalog: Catalog, kernel: K, python: bool) -> (Self, mpsc::UnboundedReceiver<Built>) {
        Manager::with(catalog, kernel, Live, Timing::default(), python)
    }
}

impl<K: KernelTables, P: Processes> Manager<K, P> {
    /// [`Manager::new`] over the processes `processes` shows, keeping things as long as
    /// `timing` says.
    pub fn with(
        catalog: Catalog,
        kernel: K,
        processes: P,
        timing: Timing,
        python: bool,
    ) -> (Self, mpsc::UnboundedReceiver<Built>) {
        let (mut follower, built) = Follower::with(processes, timing);
        follower.python = python;
        (
            Manager {
                catalog,
                follower,
                kernel,
            },
            built,
        )
    }

    /// Sampling starts: the interpreters of the processes loaded so far go into the kernel's
    /// map, and the processes whose tables were left for later (`deferred`) are loaded;
    /// `vanished` processes were gone before they could be read.
    pub fn start(&mut self, deferred: impl IntoIterator<Item = u32>, vanished: u64) -> anyhow::Result<()> {
        self.follower.stats.vanished += vanished;
        self.follower.set_python_all(&mut self.catalog, &mut self.kernel);
        for pid in deferred {
            self.load(pid)?;
        }
        Ok(())
    }

    /// A notice arrived: end what it ends (an exit, an exec, unmapped code end the mappings
    /// the samples taken after it are resolved with). Call [`Manager::on_notice`] once the
    /// samples taken before it are resolved.
    pub fn on_notice_seen(&mut self, notice: &Notice) {
        self.follower.ended(notice, &mut self.catalog);
    }

    /// Act on a notice [`Manager::on_notice_seen`] saw: load or reload its process, or take
    /// an exited one's interpreter out of the kernel. Failures that concern one process are
    /// counted; only a failure to talk to the kernel maps is an error.
    pub fn on_notice(&mut self, notice: &Notice) -> anyhow::Result<()> {
        self.follower.act(notice, &mut self.catalog, &mut self.kernel)
    }

    /// [`Manager::on_notice_seen`] then [`Manager::on_notice`], for a notice whose samples
    /// are all still to come.
    pub fn notice(&mut self, notice: &Notice) -> anyhow::Result<()> {
        self.follower.notice(notice, &mut self.catalog, &mut self.kernel)
    }

    /// Tables built in the background arrived: keep them and load the processes waiting.
    pub fn on_built(&mut self, built: Built) -> anyhow::Result<()> {
        self.follower.built(built, &mut self.catalog, &mut self.kernel)
    }

    /// The periodic work: forget processes whose grace period ended and unload tables nobody
    /// maps, put back interpreters a full map left out, read the JIT runtimes' maps again.
    pub fn housekeep(&mut self) -> anyhow::Result<()> {
        self.follower.housekeep(&mut self.catalog, &mut self.kernel)?;
        self.follower.readmit_python(&mut self.catalog, &mut self.kernel);
        self.catalog.runtimes.housekeep(false, crate::sys::monotonic_ns());
        Ok(())
    }

    /// (Re)read `pid`'s mappings and load its tables and mappings into the kernel.
    pub fn load(&mut self, pid: u32) -> anyhow::Result<()> {
        self.follower.load(pid, &mut self.catalog, &mut self.kernel)
    }

    /// Read again the processes whose JIT code was compiled into a known region after their
    /// jitdump was read.
    pub fn reload_dumps(&mut self) -> anyhow::Result<()> {
        for pid in self.catalog.runtimes.jit.take_dump_rereads() {
            self.load(pid)?;
        }
        Ok(())
    }

    /// Resolve something through the catalog: a sample's frames into the profile, the
    /// outputs' names (their JIT names read as they are missed, their runtimes' caches).
    pub fn resolve<T>(&mut self, with: impl FnOnce(&mut Catalog) -> T) -> T {
        with(&mut self.catalog)
    }

    /// The objects the catalog may forget once no kept stack refers to them.
    pub fn idle_objects(&self) -> Vec<usize> {
        self.follower.idle_objects(&self.catalog)
    }

    /// Whether memory was freed since the last call (a background build's scratch, an
    /// unloaded table).
    pub fn take_freed(&mut self) -> bool {
        self.follower.take_freed()
    }

    /// What following did, with the processes still known now.
    pub fn stats(&self) -> FollowStats {
        FollowStats {
            traced_at_end: self.catalog.processes.len() as u64,
            ..self.follower.stats
        }
    }

    /// The executable names of `names` that name their pid's one program: those of pids whose
    /// process did not exit or exec while traced.
    pub fn trusted_names(&self, names: &HashMap<u32, String>) -> HashMap<u32, String> {
        self.follower.changed.trusted(names)
    }

    /// The lengths of the follower's collections, named (see `trace::sizes`).
    pub fn sizes(&self, add: &mut dyn FnMut(&'static str, usize)) {
        self.follower.sizes(add);
    }

    /// The objects and processes known.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The kernel side.
    pub fn kernel(&self) -> &K {
        &self.kernel
    }

    /// The kernel side, to attach, detach and read its counters.
    pub fn kernel_mut(&mut self) -> &mut K {
        &mut self.kernel
    }

    /// The catalog and the kernel side, for the end of the session.
    pub fn into_parts(self) -> (Catalog, K) {
        (self.catalog, self.kernel)
    }
}

#[cfg(test)]
mod tests;
