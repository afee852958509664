//! Following processes while tracing: the kernel's notices (exec, exit, a process seen for the
//! first time system-wide, a PC in no known mapping, code unmapped) turn into reading
//! `/proc/PID/maps`, building the tables of new objects, writing them and the process's
//! mappings into the kernel, and, for exits, forgetting the process after a grace period
//! (samples already in the ring buffer still need its mappings) and unloading tables no
//! process needs any more.
//! It decides nothing about output; it only keeps the kernel's view of processes current.
//!
//! Building a large object's table can take a while, so new objects are built on tokio's
//! blocking threads while the session goes on reading samples; the [`Built`] result comes
//! back through a channel, and only then is the process loaded (installing a built table
//! is quick).

use std::{
    collections::VecDeque,
    time::{Duration, Instant},
};

use tokio::sync::mpsc;
use tracer_common::notice::{Notice, NoticeKind};

use super::seam::{KernelTables, Processes};
use crate::procmaps::ObjectKey;
use crate::registry::{Catalog, NoTable, Prebuilt, prebuild};

/// How long an exited process's mappings are kept for the samples still queued.
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// New objects up to this size in total are built at once; larger ones in the background.
const BUILD_NOW_BYTES: u64 = 2 << 20;
/// How often every known process is checked for having exited unnoticed.
const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// How long an object's table stays loaded after the last process mapping it is gone.
const UNLOAD_AFTER: Duration = Duration::from_secs(10);
/// The log target of the line each sweep's housekeeping ends with (`RUST_LOG=...,sframe_trace::sweep=debug`):
/// the sweep's number and the processes still known after it, so that a script (or a test) can
/// wait until the exits of a given moment are forgotten: two sweeps after it.
pub const SWEEP_LOG: &str = "sframe_trace::sweep";
/// The debug log that tells each process loaded (its mappings in the kernel, its tables
/// there): `pid N loaded`. Tests wait on it before they judge a process started while tracing.
pub const LOAD_LOG: &str = "sframe_trace::load";

/// What following did, for the summary (its JSON form names the fields as they are).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FollowStats {
    /// Processes loaded after the start (system-wide: new ones; any mode: exec'ed ones).
    pub loaded: u64,
    /// Mapping refreshes after a PC in no known mapping (dlopen, JIT).
    pub refreshed: u64,
    /// Followed processes that exited (their exit notice; also after an `Unmapped` or `Exec`
    /// notice ended their mappings) and were dropped.
    pub exited: u64,
    /// Processes that were gone before their mappings could be read.
    pub vanished: u64,
    /// Processes the process map had no room for.
    pub no_room: u64,
    /// Object tables unloaded because no process mapped them any more.
    pub unloaded: u64,
    /// Processes still known at the end (exited ones are dropped after a grace period).
    pub traced_at_end: u64,
}

/// Tables built in the background for a process to load.
pub struct Built {
    pid: u32,
    tables: Vec<(ObjectKey, Result<Prebuilt, NoTable>)>,
}

/// How long things are kept (the constants above; tests shorten them).
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub exit_grace: Duration,
    pub sweep_every: Duration,
    pub unload_after: Duration,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            exit_grace: EXIT_GRACE,
            sweep_every: SWEEP_EVERY,
            unload_after: UNLOAD_AFTER,
        }
    }
}

/// Process following state, over the processes `P` shows.
pub struct Follower<P> {
    processes: P,
    pub(super) timing: Timing,
    /// Exited processes waiting for their grace period to end.
    exited: VecDeque<(Instant, u32)>,
    /// Processes whose mappings an `Unmapped` or `Exec` notice ended and that were not loaded
    /// again since (the reload not acted on yet, or it found the process gone): their exit is
    /// still one of a followed process, to count. Dead ones are dropped by the sweep.
    ended_alive: std::collections::HashSet<u32>,
    built: mpsc::UnboundedSender<Built>,
    /// Objects being built in the background, and the processes waiting for them.
    building: std::collections::HashSet<ObjectKey>,
    waiting: Vec<u32>,
    last_sweep: Instant,
    /// Sweeps done so far (told in the `sframe_trace::sweep` debug log, see [`SWEEP_LOG`]).
    sweeps: u64,
    /// Memory was freed since [`Follower::take_freed`] last said so (a background build's
    /// scratch, an unloaded table).
    freed: bool,
    /// Whether the CPython frames of processes running an interpreter are walked
    /// (`--no-python` turns it off).
    pub python: bool,
    pub stats: FollowStats,
    /// Pids whose process exited or exec'd (their executable name is not trusted).
    pub changed: super::changed::Changed,
}

impl<P: Processes> Follower<P> {
    /// A follower of the processes `processes` shows, keeping things as long as `timing` says.
    pub fn with(processes: P, timing: Timing) -> (Follower<P>, mpsc::UnboundedReceiver<Built>) {
        let (built, receiver) = mpsc::unbounded_channel();
        let follower = Follower {
            processes,
            timing,
            exited: VecDeque::new(),
            ended_alive: std::collections::HashSet::new(),
            built,
            building: std::collections::HashSet::new(),
            waiting: Vec::new(),
            last_sweep: Instant::now(),
            sweeps: 0,
            freed: false,
            python: true,
            stats: FollowStats::default(),
            changed: super::changed::Changed::default(),
        };
        (follower, receiver)
    }

    /// An exit, an exec or unmapped code ends the mappings of the process for the samples
    /// taken after it (see `Catalog::end_process`); other notices change nothing here.
    /// [`Follower::notice`] does this too: call it alone first to resolve the samples queued
    /// before acting on a notice.
    /// An exit is counted here, once, for a process the session followed (its mappings
    /// current, or ended by an earlier notice of the process while it lived): the process is
    /// forgotten after a grace period.
    pub fn ended(&mut self, notice: &Notice, catalog: &mut Catalog) {
        let kind = NoticeKind::try_from(notice.kind);
        if matches!(kind, Ok(NoticeKind::Exit | NoticeKind::Exec | NoticeKind::Unmapped)) {
            if matches!(kind, Ok(NoticeKind::Exit | NoticeKind::Exec)) {
                self.changed.note(notice.tgid);
            }
            let known = catalog.end_process(notice.tgid, notice.time_ns);
            if kind == Ok(NoticeKind::Exit) {
                catalog.runtimes.exited(notice.tgid, notice.time_ns);
                let followed = self.ended_alive.remove(&notice.tgid);
                if known || followed {
                    self.stats.exited += 1;
                    self.exited.push_back((Instant::now(), notice.tgid));
                }
            } else if known {
                self.ended_alive.insert(notice.tgid);
            }
        }
    }

    /// Act on one notice: [`Self::ended`], then [`Self::act`]. Failures that concern one
    /// process (it vanished, no room) are counted; only a failure to talk to the kernel maps
    /// is an error.
    pub fn notice(
        &mut self,
        notice: &Notice,
        catalog: &mut Catalog,
        kernel: &mut impl KernelTables,
    ) -> anyhow::Result<()> {
        self.ended(notice, catalog);
        self.act(notice, catalog, kernel)
    }

    /// The rest of [`Self::notice`] once [`Self::ended`] ended what the notice ends (the
    /// session does that first, before the samples taken earlier are resolved): load or
    /// reload the process.
    pub fn act(
        &mut self,
        notice: &Notice,
        catalog: &mut Catalog,
        kernel: &mut impl KernelTables,
    ) -> anyhow::Result<()> {
        let pid = notice.tgid;
        log::debug!("notice {:?} for pid {pid}", NoticeKind::try_from(notice.kind));
        match NoticeKind::try_from(notice.kind) {
            // Done by `ended`, but for the interpreter record, which the kernel keeps.
            Ok(NoticeKind::Exit) => {
                catalog.runtimes.python.code.set_in_map(pid, false);
                Ok(kernel.set_python(pid, None)?)
            }
            Ok(NoticeKind::Exec | NoticeKind::NewProcess) => {
                self.stats.loaded += 1;
                // A new image: the code objects read from the old one are not its own.
                catalog.runtimes.python.code.forget(pid);
                self.load(pid, catalog, kernel)
            }
            Ok(NoticeKind::UnknownPc | NoticeKind::Unmapped) => {
                self.stats.refreshed += 1;
                self.load(pid, catalog, kernel)
            }
            Err(kind) => {
                log::warn!("ignoring a notice of unknown kind {kind} for pid {pid}");
                Ok(())
            }
        }
    }

    /// (Re)load `pid`: read its mappings; with every table at hand, write tables then
    /// mappings; else build the missing tables in the background first.
    pub fn load(&mut self, pid: u32, catalog: &mut Catalog, kernel: &mut impl KernelTables) -> anyhow::Result<()> {
        let Ok(mappings) = self.processes.mappings(pid, &|key| catalog.known_file(key)) else {
            self.stats.vanished += 1;
            return Ok(());
        };
        let missing = catalog.missing(&mappings);
        let small = missing.iter().map(|m| m.key.size).fold(0u64, u64::saturating_add) <= BUILD_NOW_BYTES;
        if small {
            // A plugin or a small program: built now, a few milliseconds, so that its first
            // samples are not lost waiting for a thread.
            let exec = catalog.add_process(pid, &mappings);
            self.ended_alive.remove(&pid);
            kernel.sync_tables(&mut catalog.loader.tables)?;
            match kernel.set_process(pid, &exec) {
                Ok(_) => log::debug!(target: LOAD_LOG, "pid {pid} loaded"),
                Err(err) => {
                    log::debug!("process {pid}: {err:#}");
                    self.stats.no_room += 1;
                }
            }
            self.set_python(pid, catalog, kernel);
            // It may have exited before it was in the process map: then no exit notice comes.
            if !self.processes.alive(pid) {
                self.exited.push_back((Instant::now(), pid));
                kernel.remove_process(pid)?;
                catalog.runtimes.python.code.set_in_map(pid, false);
                kernel.set_python(pid, None)?;
            }
            return Ok(());
        }
        // Each object is built once, however many processes wait for it.
        let missing: Vec<_> = missing
            .into_iter()
            .filter(|m| !self.building.contains(&m.key))
            .collect();
        if missing.is_empty() {
            if !self.waiting.contains(&pid) {
                self.waiting.push(pid);
            }
            return Ok(());
        }
        self.building.extend(missing.iter().map(|m| m.key.clone()));
        let sender = self.built.clone();
        tokio::task::spawn_blocking(move || {
            let tables = missing.into_iter().map(|m| {
                let table = prebuild(&m.file, &m.path);
                (m.key, table)
            });
            // The receiver is gone only when the session ended.
            let _ = sender.send(Built {
                pid,
                tables: tables.collect(),
            });
        });
        Ok(())
    }

    /// Tell the kernel whether `pid` (just loaded: started, exec'ed, remapped) runs a CPython
    /// interpreter whose frames it walks. A full map makes room by the policy of
    /// `python::pymap` (the least recently sampled process gives way), else the process
    /// keeps its native stacks, counted.
    fn set_python(&mut self, pid: u32, catalog: &mut Catalog, kernel: &mut impl KernelTables) {
        let info = if self.python { catalog.python_info(pid) } else { None };
        if info.is_none() && !self.python {
            return;
        }
        python::place_python(pid, info.as_ref(), catalog, kernel);
    }

    /// Put back in the kernel's map of interpreters the processes sampled while out of it
    /// (see `python::pymap`).
    pub fn readmit_python(&mut self, catalog: &mut Catalog, kernel: &mut impl KernelTables) {
        for pid in catalog.runtimes.python.code.take_readmit() {
            if self.processes.alive(pid) {
                self.set_python(pid, catalog, kernel);
            }
        }
    }

    /// [`Follower::set_python`] for every process loaded at the start.
    pub fn set_python_all(&mut self, catalog: &mut Catalog, kernel: &mut impl KernelTables) {
        let pids: Vec<u32> = catalog.processes.current.keys().copied().collect();
        for pid in pids {
            self.set_python(pid, catalog, kernel);
        }
    }

    /// Tables built in the background arrived: keep them and load their process (reading its
    /// mappings again: they may have changed meanwhile).
    pub fn built(&mut self, built: Built, catalog: &mut Catalog, kernel: &mut impl KernelTables) -> anyhow::Result<()> {
        self.freed = true;
        for (key, table) in built.tables {
            self.building.remove(&key);
            catalog.add_prebuilt(key, table);
        }
        self.load(built.pid, catalog, kernel)?;
        for pid in std::mem::take(&mut self.waiting) {
            self.load(pid, catalog, kernel)?;
        }
        Ok(())
    }

    /// Forget processes whose grace period ended, then unload tables nobody maps. Call it
    /// periodically.
    pub fn housekeep(&mut self, catalog: &mut Catalog, kernel: &mut impl KernelTables) -> anyhow::Result<()> {
        // Exits can go unnoticed (a lost notice, an exit before the process was loaded).
        let swept = self.last_sweep.elapsed() >= self.timing.sweep_every;
        if swept {
            self.last_sweep = Instant::now();
            self.sweeps += 1;
            let processes = &self.processes;
            self.ended_alive.retain(|&pid| processes.alive(pid));
            for pid in catalog
                .processes
                .current
                .keys()
                .copied()
                .filter(|&pid| !self.processes.alive(pid))
            {
                if !self.exited.iter().any(|&(_, p)| p == pid) {
                    self.exited.push_back((Instant::now(), pid));
                    kernel.remove_process(pid)?;
                    catalog.runtimes.python.code.set_in_map(pid, false);
                    kernel.set_python(pid, None)?;
                }
            }
        }
        while let Some(&(at, pid)) = self.exited.front() {
            if at.elapsed() < self.timing.exit_grace {
                break;
            }
            self.exited.pop_front();
            // A pid can be reused by a new process loaded meanwhile: keep that one.
            if self.processes.alive(pid) {
                continue;
            }
            catalog.remove_process(pid);
        }
        catalog.expire_ended(self.timing.exit_grace);
        catalog.expire_prebuilt(self.timing.unload_after);
        let unloaded = catalog.unload_unused(self.timing.unload_after);
        if unloaded > 0 {
            self.freed = true;
            self.stats.unloaded += unloaded as u64;
            kernel.sync_tables(&mut catalog.loader.tables)?;
        }
        if swept {
            log::debug!(target: SWEEP_LOG, "sweep {}: {} processes known", self.sweeps, catalog.processes.current.len());
        }
        Ok(())
    }

    /// Whether memory was freed since the last call (see `release_freed_memory`).
    pub fn take_freed(&mut self) -> bool {
        std::mem::take(&mut self.freed)
    }

    /// The objects the catalog may forget once no kept stack refers to them (see
    /// `Catalog::idle_objects`).
    pub fn idle_objects(&self, catalog: &Catalog) -> Vec<usize> {
        catalog.idle_objects(self.timing.unload_after)
    }

    /// The lengths of its collections, named (see `trace::sizes`).
    pub fn sizes(&self, add: &mut dyn FnMut(&'static str, usize)) {
        add("follow.exited", self.exited.len());
        add("follow.ended_alive", self.ended_alive.len());
        add("follow.building", self.building.len());
        add("follow.waiting", self.waiting.len());
    }
}

mod python;
