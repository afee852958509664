//! The life cycle of processes and objects, driven through the [`Manager`] against
//! a fake kernel and fake processes: exec, exit and the grace period, dlopen and dlclose, pid
//! reuse, a replaced file, table budget exhaustion, unloading and reloading. No root, no BPF.
//! The objects are small ELF files checked in under `fixtures/bin`, of made-up identities
//! (`objects::testing`).

use std::{
    cell::RefCell,
    collections::{HashMap, HashSet},
    rc::Rc,
    time::Duration,
};

use tracer_common::{
    notice::{Notice, NoticeKind},
    trace::{ExecMapping, NO_OBJECT},
};

use super::{Manager, Timing};
use crate::tables::{Capacity, TableSet};
use crate::{
    manager::seam::{KernelTables, Processes, SeamError},
    procmaps::{Known, Mapping, ProcError},
    registry::{
        Catalog, NoTable,
        testing::{mapped, object},
    },
    sys::monotonic_ns,
};

/// The kernel maps, as far as following changes them.
#[derive(Default)]
struct FakeKernel {
    /// The pages of tables written, by (object, page).
    pages: HashSet<(u32, u32)>,
    /// Objects whose tables were written (by id), as of the last sync.
    objects: HashSet<u32>,
    processes: HashMap<u32, Vec<ExecMapping>>,
    /// Room in the process map.
    max_processes: Option<usize>,
    syncs: usize,
}

impl KernelTables for FakeKernel {
    /// Apply the changes as the kernel maps would; the objects are those with pages.
    fn sync_tables(&mut self, tables: &mut TableSet) -> Result<(), SeamError> {
        let changes = tables.take_changes();
        for key in changes.pages_removed {
            self.pages.remove(&(key.object, key.page));
        }
        for (key, _) in changes.pages_set {
            self.pages.insert((key.object, key.page));
        }
        self.objects = self.pages.iter().map(|&(object, _)| object).collect();
        self.syncs += 1;
        Ok(())
    }

    fn set_process(&mut self, pid: u32, mappings: &[ExecMapping]) -> Result<usize, SeamError> {
        if self.max_processes.is_some_and(|max| self.processes.len() >= max) && !self.processes.contains_key(&pid) {
            return Err(SeamError::Full("PROCS"));
        }
        self.processes.insert(pid, mappings.to_vec());
        Ok(0)
    }

    fn remove_process(&mut self, pid: u32) -> Result<(), SeamError> {
        self.processes.remove(&pid);
        Ok(())
    }
}

/// A process of the test: its mappings, and whether it runs (not a zombie).
type Process = (Vec<Mapping>, bool);

/// The processes of the test, changed as the test goes.
#[derive(Clone, Default)]
struct World(Rc<RefCell<HashMap<u32, Process>>>);

impl World {
    fn run(&self, pid: u32, mappings: Vec<Mapping>) {
        self.0.borrow_mut().insert(pid, (mappings, true));
    }

    fn exit(&self, pid: u32) {
        self.0.borrow_mut().remove(&pid);
    }
}

impl Processes for World {
    fn mappings(&self, pid: u32, _known: Known<'_>) -> Result<Vec<Mapping>, ProcError> {
        self.0
            .borrow()
            .get(&pid)
            .map(|(m, _)| m.clone())
            .ok_or(ProcError::Gone { pid })
    }

    fn alive(&self, pid: u32) -> bool {
        self.0.borrow().get(&pid).is_some_and(|&(_, alive)| alive)
    }
}

/// A session's state: the manager over the fake kernel, and the fake world, nothing kept
/// waiting (every grace period and idle time zero) unless a test says otherwise.
struct Session {
    manager: Manager<FakeKernel, World>,
    world: World,
}

impl Session {
    fn new() -> Session {
        Session::with(TableSet::new(), Duration::ZERO)
    }

    fn with(tables: TableSet, wait: Duration) -> Session {
        let world = World::default();
        let timing = Timing {
            exit_grace: wait,
            sweep_every: wait,
            unload_after: wait,
        };
        let catalog = Catalog::with_tables(tables);
        let (manager, _built) = Manager::with(catalog, FakeKernel::default(), world.clone(), timing, true);
        Session { manager, world }
    }

    /// Deliver a notice of `kind` for `pid`, sent now; returns when it was sent.
    fn notice(&mut self, kind: NoticeKind, pid: u32) -> u64 {
        let notice = notice_now(kind, pid);
        self.manager.notice(&notice).expect("notice");
        notice.time_ns
    }

    fn load(&mut self, pid: u32) {
        self.manager.load(pid).expect("load");
    }

    fn housekeep(&mut self) {
        self.manager.housekeep().expect("housekeep");
    }

    /// The catalog object that held `addr` in `pid` at `time_ns`, by its identity's inode.
    fn inode_at(&self, pid: u32, addr: u64, time_ns: u64) -> Option<u64> {
        let index = self.manager.catalog().mapping_at(pid, addr, time_ns)?.object?;
        Some(self.manager.catalog().objects[index].key.as_ref()?.inode)
    }

    /// The kernel's table id of each of `pid`'s mappings.
    fn kernel_objects(&self, pid: u32) -> Vec<u32> {
        self.manager.kernel().processes[&pid].iter().map(|m| m.object).collect()
    }
}

/// A new process gets a table per object and its mappings, in the kernel.
#[test]
fn a_new_process_is_loaded_with_its_tables() {
    let mut s = Session::new();
    let (app, lib) = (object("chain", 1, 0), object("libshlib.so", 2, 0));
    s.world.run(10, vec![mapped(&app, 0x10000), mapped(&lib, 0x20000)]);
    s.notice(NoticeKind::NewProcess, 10);
    let ids = s.kernel_objects(10);
    assert!(ids.iter().all(|&id| id != NO_OBJECT), "{ids:?}");
    assert_eq!(
        s.manager.kernel().objects,
        ids.iter().copied().collect(),
        "the tables were written"
    );
    assert_eq!(s.manager.stats().loaded, 1);
}

/// Two processes mapping the same file (the same identity) share one object and one table.
#[test]
fn processes_mapping_one_file_share_its_table() {
    let mut s = Session::new();
    let app = object("chain", 1, 0);
    s.world.run(10, vec![mapped(&app, 0x10000)]);
    s.world.run(11, vec![mapped(&app, 0x50000)]);
    s.load(10);
    s.load(11);
    assert_eq!(s.manager.catalog().objects.len(), 1);
    assert_eq!(s.kernel_objects(10), s.kernel_objects(11));
    assert_eq!(s.manager.catalog().objects[0].users, 2);
}

/// Regression (build-ids were trusted as identity): two files carrying the same build-id are
/// two objects with two tables.
#[test]
fn the_same_build_id_in_another_file_is_another_object() {
    let mut s = Session::new();
    let (real, fake) = (object("libshlib.so", 1, 0), object("cfi", 2, 0));
    s.world.run(10, vec![mapped(&fake, 0x10000)]);
    s.world.run(11, vec![mapped(&real, 0x10000)]);
    s.load(10);
    s.load(11);
    assert_eq!(s.manager.catalog().objects.len(), 2);
    assert_ne!(s.kernel_objects(10), s.kernel_objects(11));
    assert_eq!(s.inode_at(11, 0x10800, monotonic_ns()), Some(1));
}

/// An exec replaces the image: samples taken before it resolve through the old one, samples
/// taken after through the new one.
#[test]
fn exec_replaces_the_image_for_later_samples_only() {
    let mut s = Session::new();
    let (old, new) = (object("chain", 1, 0), object("cfi", 2, 0));
    s.world.run(10, vec![mapped(&old, 0x10000)]);
    s.load(10);
    let before = monotonic_ns();
    s.world.run(10, vec![mapped(&new, 0x10000)]);
    let exec = s.notice(NoticeKind::Exec, 10);
    assert_eq!(s.inode_at(10, 0x10800, before), Some(1));
    assert_eq!(s.inode_at(10, 0x10800, exec + 1), Some(2));
    assert_eq!(
        s.manager.catalog().objects[0].users,
        0,
        "the old image is mapped no more"
    );
}

/// An exit keeps the process's mappings for the samples queued before it, through the grace
/// period; then the process is forgotten and its objects' tables unloaded.
#[test]
fn an_exit_is_forgotten_after_the_grace_period() {
    let mut s = Session::with(TableSet::new(), Duration::from_secs(3600));
    let app = object("chain", 1, 0);
    s.world.run(10, vec![mapped(&app, 0x10000)]);
    s.load(10);
    let before = monotonic_ns();
    s.world.exit(10);
    s.notice(NoticeKind::Exit, 10);
    s.housekeep();
    assert_eq!(s.manager.stats().exited, 1);
    assert_eq!(
        s.inode_at(10, 0x10800, before),
        Some(1),
        "kept through the grace period"
    );
    assert_eq!(s.manager.kernel().objects.len(), 1, "still loaded");
    s.manager.follower.timing = Timing {
        exit_grace: Duration::ZERO,
        sweep_every: Duration::ZERO,
        unload_after: Duration::ZERO,
    };
    s.housekeep();
    assert_eq!(s.inode_at(10, 0x10800, before), None, "forgotten");
    assert!(s.manager.kernel().objects.is_empty(), "unloaded");
    assert_eq!(s.manager.stats().unloaded, 1);
}

/// dlopen: code added to a process (a PC in no known mapping) loads the new object, and the
/// samples taken before resolve through the new mappings too (they only add code).
#[test]
fn dlopen_adds_an_object() {
    let mut s = Session::new();
    let (app, plugin) = (object("chain", 1, 0), object("libshlib.so", 2, 0));
    s.world.run(10, vec![mapped(&app, 0x10000)]);
    s.load(10);
    let before = monotonic_ns();
    s.world.run(10, vec![mapped(&app, 0x10000), mapped(&plugin, 0x20000)]);
    s.notice(NoticeKind::UnknownPc, 10);
    assert_eq!(s.manager.stats().refreshed, 1);
    assert_eq!(s.kernel_objects(10).len(), 2);
    assert_eq!(
        s.inode_at(10, 0x20800, before),
        Some(2),
        "earlier samples see the added code"
    );
    assert_eq!(s.inode_at(10, 0x10800, before), Some(1));
}

/// dlclose: code unmapped ends the old mappings (earlier samples keep them), and the unused
/// object's table is unloaded once idle, then built again when the library comes back.
#[test]
fn dlclose_unloads_and_dlopen_again_reloads() {
    let mut s = Session::new();
    let (app, plugin) = (object("chain", 1, 0), object("libshlib.so", 2, 0));
    s.world.run(10, vec![mapped(&app, 0x10000), mapped(&plugin, 0x20000)]);
    s.load(10);
    let before = monotonic_ns();
    s.world.run(10, vec![mapped(&app, 0x10000)]);
    let unmapped = s.notice(NoticeKind::Unmapped, 10);
    assert_eq!(
        s.inode_at(10, 0x20800, before),
        Some(2),
        "earlier samples keep the plugin"
    );
    assert_eq!(s.inode_at(10, 0x20800, unmapped + 1), None);
    s.housekeep();
    assert_eq!(s.manager.stats().unloaded, 1);
    assert_eq!(s.manager.kernel().objects.len(), 1, "only the program's table is left");
    assert!(s.manager.catalog().objects[1].unloaded);
    s.world.run(10, vec![mapped(&app, 0x10000), mapped(&plugin, 0x30000)]);
    s.notice(NoticeKind::UnknownPc, 10);
    assert_eq!(s.manager.catalog().objects.len(), 2, "the same object, not a new one");
    assert!(!s.manager.catalog().objects[1].unloaded);
    assert_eq!(s.manager.kernel().objects.len(), 2, "built and written again");
    assert!(s.kernel_objects(10).iter().all(|&id| id != NO_OBJECT));
}

/// A pid taken again by a new process: each sample resolves through the process that had the
/// pid when it was taken.
#[test]
fn a_reused_pid_is_two_processes() {
    let mut s = Session::with(TableSet::new(), Duration::from_secs(3600));
    let (first, second) = (object("chain", 1, 0), object("cfi", 2, 0));
    s.world.run(10, vec![mapped(&first, 0x10000)]);
    s.load(10);
    let before = monotonic_ns();
    s.world.exit(10);
    let exit = s.notice(NoticeKind::Exit, 10);
    s.world.run(10, vec![mapped(&second, 0x10000)]);
    s.notice(NoticeKind::NewProcess, 10);
    let after = monotonic_ns();
    assert_eq!(s.inode_at(10, 0x10800, before), Some(1));
    assert_eq!(s.inode_at(10, 0x10800, after), Some(2));
    assert!(exit < after);
    // The grace period of the first ends while the second runs: the second is kept.
    s.manager.follower.timing.exit_grace = Duration::ZERO;
    s.housekeep();
    assert!(s.manager.kernel().processes.contains_key(&10));
    assert_eq!(s.inode_at(10, 0x10800, monotonic_ns()), Some(2));
}

/// A file replaced at its path (another identity: new mtime) is another object with its own
/// table; the old one is unloaded when no process maps it.
#[test]
fn a_replaced_file_is_a_new_object() {
    let mut s = Session::new();
    let (old, new) = (object("chain", 1, 100), object("chain", 1, 200));
    s.world.run(10, vec![mapped(&old, 0x10000)]);
    s.load(10);
    s.world.run(11, vec![mapped(&new, 0x10000)]);
    s.load(11);
    assert_eq!(s.manager.catalog().objects.len(), 2);
    assert_ne!(s.kernel_objects(10), s.kernel_objects(11));
    s.world.exit(10);
    s.notice(NoticeKind::Exit, 10);
    s.housekeep();
    assert_eq!(s.manager.kernel().objects.len(), 1, "the old file's table is unloaded");
    assert!(s.manager.catalog().objects[0].unloaded && !s.manager.catalog().objects[1].unloaded);
}

/// With no room left for tables (`--max-table-memory` spent), a process is still traced, its
/// objects without tables and counted with the reason.
#[test]
fn an_exhausted_budget_leaves_objects_without_tables() {
    let none = Capacity {
        row_chunks: 0,
        pages: 0,
        rules: 0,
    };
    let mut s = Session::with(TableSet::with_capacity(none), Duration::ZERO);
    let app = object("chain", 1, 0);
    s.world.run(10, vec![mapped(&app, 0x10000)]);
    s.load(10);
    assert_eq!(s.kernel_objects(10), [NO_OBJECT]);
    assert!(matches!(s.manager.catalog().objects[0].table, Err(NoTable::NoRoom(_))));
    assert!(s.manager.kernel().objects.is_empty());
}

/// A process the process map has no room for is counted, and the others are unaffected.
#[test]
fn a_full_process_map_is_counted() {
    let mut s = Session::new();
    s.manager.kernel_mut().max_processes = Some(1);
    let app = object("chain", 1, 0);
    s.world.run(10, vec![mapped(&app, 0x10000)]);
    s.world.run(11, vec![mapped(&app, 0x10000)]);
    s.load(10);
    s.load(11);
    assert_eq!(s.manager.stats().no_room, 1);
    assert!(s.manager.kernel().processes.contains_key(&10) && !s.manager.kernel().processes.contains_key(&11));
}

/// A process gone before its mappings could be read is counted as vanished, and nothing is
/// loaded for it.
#[test]
fn a_process_gone_before_loading_is_counted() {
    let mut s = Session::new();
    s.notice(NoticeKind::NewProcess, 10);
    assert_eq!(s.manager.stats().vanished, 1);
    assert!(s.manager.kernel().processes.is_empty() && s.manager.catalog().objects.is_empty());
}

/// A process that exited while it was being loaded (so no exit notice will come) leaves the
/// kernel's process map at once, and the catalog after the grace period.
#[test]
fn a_process_exiting_while_loaded_is_removed() {
    let mut s = Session::new();
    let app = object("chain", 1, 0);
    s.world.run(10, vec![mapped(&app, 0x10000)]);
    s.world.0.borrow_mut().get_mut(&10).expect("running").1 = false;
    s.load(10);
    assert!(!s.manager.kernel().processes.contains_key(&10));
    assert!(
        s.manager.catalog().processes.current.contains_key(&10),
        "kept through the grace period"
    );
    s.housekeep();
    assert!(!s.manager.catalog().processes.current.contains_key(&10));
}

/// An exit whose notice was lost is found by the periodic sweep: the process leaves the kernel
/// and the catalog, and its table is unloaded.
#[test]
fn an_unnoticed_exit_is_swept() {
    let mut s = Session::new();
    let app = object("chain", 1, 0);
    s.world.run(10, vec![mapped(&app, 0x10000)]);
    s.load(10);
    s.world.exit(10);
    s.housekeep();
    assert!(!s.manager.kernel().processes.contains_key(&10));
    s.housekeep();
    assert!(!s.manager.catalog().processes.current.contains_key(&10));
    assert!(s.manager.kernel().objects.is_empty());
}

/// An unused table is kept while the idle time runs (a program started again and again keeps
/// its table), and the next process mapping it uses it as it is.
#[test]
fn an_idle_table_is_kept_for_a_while() {
    let mut s = Session::with(TableSet::new(), Duration::from_secs(3600));
    let app = object("chain", 1, 0);
    s.world.run(10, vec![mapped(&app, 0x10000)]);
    s.load(10);
    let syncs = s.manager.kernel().syncs;
    s.world.exit(10);
    s.notice(NoticeKind::Exit, 10);
    s.housekeep();
    assert_eq!(s.manager.stats().unloaded, 0);
    s.world.run(11, vec![mapped(&app, 0x10000)]);
    s.load(11);
    assert_eq!(s.manager.catalog().objects.len(), 1);
    assert!(!s.manager.catalog().objects[0].unloaded);
    assert_eq!(
        s.kernel_objects(11),
        s.manager.kernel().objects.iter().copied().collect::<Vec<_>>()
    );
    assert!(s.manager.kernel().syncs > syncs);
}

/// A plugin unloaded after dlclose and then forgotten (nothing refers to it any more) gives up
/// its file and is found no more by its identity; a dlopen of the same file later is a new
/// object (in the slot the old one left) whose table is built and written again, while the
/// program, still mapped, is never idle.
#[test]
fn a_forgotten_object_comes_back_as_a_new_one() {
    let mut s = Session::new();
    let (app, plugin) = (object("chain", 1, 0), object("libshlib.so", 2, 0));
    s.world.run(10, vec![mapped(&app, 0x10000), mapped(&plugin, 0x20000)]);
    s.load(10);
    s.world.run(10, vec![mapped(&app, 0x10000)]);
    s.notice(NoticeKind::Unmapped, 10);
    s.housekeep();
    let idle = s.manager.idle_objects();
    assert_eq!(idle, [1], "the plugin only: the program is mapped");
    s.manager.resolve(|c| c.forget(&idle));
    assert!(s.manager.catalog().objects[1].file.is_none());
    assert!(s.manager.catalog().known_file(&plugin.key).is_none());
    assert!(s.manager.idle_objects().is_empty());
    s.world.run(10, vec![mapped(&app, 0x10000), mapped(&plugin, 0x30000)]);
    s.notice(NoticeKind::UnknownPc, 10);
    assert_eq!(
        s.manager.catalog().objects.len(),
        2,
        "a new object for the plugin, in the freed slot"
    );
    assert!(s.manager.catalog().objects[1].file.is_some());
    assert_eq!(s.inode_at(10, 0x30800, monotonic_ns()), Some(2));
    assert_eq!(s.manager.kernel().objects.len(), 2, "its table written again");
    assert!(s.kernel_objects(10).iter().all(|&id| id != NO_OBJECT));
}

/// An exited process whose objects are still in their idle time is not forgotten early, and
/// the objects become idle only once their idle time passed.
#[test]
fn objects_are_idle_only_after_their_idle_time() {
    let mut s = Session::with(TableSet::new(), Duration::from_secs(3600));
    let app = object("chain", 1, 0);
    s.world.run(10, vec![mapped(&app, 0x10000)]);
    s.load(10);
    s.world.exit(10);
    s.notice(NoticeKind::Exit, 10);
    s.housekeep();
    assert!(s.manager.idle_objects().is_empty());
    assert!(
        s.manager.catalog().idle_objects(Duration::ZERO).is_empty(),
        "its table is still loaded"
    );
    assert_eq!(s.manager.resolve(|c| c.unload_unused(Duration::ZERO)), 1);
    assert_eq!(s.manager.catalog().idle_objects(Duration::ZERO), [0]);
}

/// A notice of `kind` for `pid`, sent now.
fn notice_now(kind: NoticeKind, pid: u32) -> Notice {
    Notice {
        time_ns: monotonic_ns(),
        kind: kind as u32,
        tgid: pid,
    }
}

/// A session that loaded process 10 (one object), which then exited: its exit notice, sent
/// now and not delivered yet.
fn exited_process() -> (Session, Notice) {
    let mut s = Session::with(TableSet::new(), Duration::from_secs(3600));
    let app = object("chain", 1, 0);
    s.world.run(10, vec![mapped(&app, 0x10000)]);
    s.load(10);
    s.world.exit(10);
    (s, notice_now(NoticeKind::Exit, 10))
}

/// The session ends what a notice ends before it resolves the samples queued (`ended`), and
/// acts on it after (`act`): an exit taken in those two steps is told once, to the JIT names
/// too (one end for the pid, not one per step).
#[test]
fn an_exit_taken_in_two_steps_ends_the_process_once() {
    let (mut s, exit) = exited_process();
    s.manager.on_notice_seen(&exit);
    s.manager.on_notice(&exit).expect("act");
    assert_eq!(s.manager.stats().exited, 1);
    let mut ends = None;
    s.manager.catalog().runtimes.jit.names.sizes(&mut |name, n| {
        if name == "jit.ended" {
            ends = Some(n);
        }
    });
    assert_eq!(ends, Some(1), "the JIT names' ends of pid 10");
}

/// A pid reused right after an exit: samples of the new process resolved between the two
/// steps of the exit's notice (`ended`, then `act`) belong to the new process, and stay its
/// own once the notice is acted on (ending the pid a second time there ended the new process
/// instead, and its frames were named from the old one's perf map).
#[test]
fn a_pid_reused_after_an_exit_keeps_its_incarnation() {
    let (mut s, exit) = exited_process();
    let before = s
        .manager
        .resolve(|c| c.runtimes.jit.names.want(10, 0x9000, exit.time_ns - 1));
    s.manager.on_notice_seen(&exit);
    let next = s
        .manager
        .resolve(|c| c.runtimes.jit.names.want(10, 0x9000, exit.time_ns + 1));
    assert_ne!(next, before, "a sample after the exit is the next process's");
    s.manager.on_notice(&exit).expect("act");
    assert_eq!(
        s.manager
            .resolve(|c| c.runtimes.jit.names.want(10, 0x9000, exit.time_ns + 2)),
        next
    );
    assert_eq!(
        s.manager
            .resolve(|c| c.runtimes.jit.names.want(10, 0x9000, exit.time_ns - 1)),
        before
    );
}

/// A followed process's exit is counted once whatever notice of it came first: one whose
/// mappings an `Unmapped` notice ended just before (not acted on yet, as at the end of a
/// session), one whose reload after such a notice found it gone, and one reloaded after an
/// exec; a process never followed is not counted, and a dead one's entry goes with the sweep.
#[test]
fn a_followed_process_s_exit_is_counted_after_any_notice() {
    let app = object("chain", 1, 0);
    // The unmapping ended, not acted on.
    let mut s = Session::with(TableSet::new(), Duration::from_secs(3600));
    s.world.run(10, vec![mapped(&app, 0x10000)]);
    s.load(10);
    s.manager.on_notice_seen(&notice_now(NoticeKind::Unmapped, 10));
    s.world.exit(10);
    s.notice(NoticeKind::Exit, 10);
    assert_eq!(s.manager.stats().exited, 1);
    // Acted on, the process gone by then.
    s.world.run(11, vec![mapped(&app, 0x10000)]);
    s.load(11);
    s.world.exit(11);
    s.notice(NoticeKind::Unmapped, 11);
    assert_eq!(s.manager.stats().vanished, 1);
    s.notice(NoticeKind::Exit, 11);
    assert_eq!(s.manager.stats().exited, 2);
    // An exec reloaded, then the exit: once.
    s.world.run(12, vec![mapped(&app, 0x10000)]);
    s.load(12);
    s.notice(NoticeKind::Exec, 12);
    s.world.exit(12);
    s.notice(NoticeKind::Exit, 12);
    s.notice(NoticeKind::Exit, 12);
    assert_eq!(s.manager.stats().exited, 3);
    // Never followed: not counted.
    s.notice(NoticeKind::Exit, 13);
    assert_eq!(s.manager.stats().exited, 3);
    // Ended by a notice, then dead without an exit notice: the sweep drops it.
    let mut s = Session::new();
    s.world.run(14, vec![mapped(&app, 0x10000)]);
    s.load(14);
    s.manager.on_notice_seen(&notice_now(NoticeKind::Unmapped, 14));
    let size = |s: &Session| {
        let mut n = None;
        s.manager.sizes(&mut |name, len| {
            if name == "follow.ended_alive" {
                n = Some(len);
            }
        });
        n
    };
    assert_eq!(size(&s), Some(1));
    s.world.exit(14);
    s.housekeep();
    assert_eq!(size(&s), Some(0));
}
