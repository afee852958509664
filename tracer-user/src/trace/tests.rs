//! Unit tests of the session's pure parts: folding samples into stacks and the symbol helpers,
//! on hand-made samples, mappings and notes (shared with the summary's tests).

use tracer_common::{
    sample::Sample,
    trace::{SOURCE_FP, SOURCE_TABLE, SampleHeader},
    walk::StopReason,
};

use crate::export::model::FrameSource;
use crate::profile::{Frame, Profile, Tally};
use crate::registry::{Catalog, NoTable, Object, ResolvedMapping, Table, TableSource};

pub(crate) fn catalog() -> Catalog {
    let mut catalog: Catalog = Catalog::default();
    let sframe = Table {
        id: 0,
        source: TableSource::Sframe,
        rows: 10,
    };
    let cfi = Table {
        id: 1,
        source: TableSource::Cfi,
        rows: 5,
    };
    catalog.objects.push(object("/app", Ok(sframe)));
    catalog.objects.push(object("/lib.so", Ok(cfi)));
    catalog.objects.push(object("/x.so", Err(NoTable::NoUnwindInfo)));
    catalog.processes.current.insert(
        7,
        vec![
            ResolvedMapping {
                start: 0x1000,
                end: 0x2000,
                bias: 0x1000,
                object: Some(0),
            },
            ResolvedMapping {
                start: 0x8000,
                end: 0x9000,
                bias: 0x7000,
                object: Some(1),
            },
        ],
    );
    catalog
}

pub(crate) fn sample(user: &[u64], sources: &[u8], kernel: &[u64]) -> Sample {
    let mut s = Sample::EMPTY;
    s.header = SampleHeader {
        time_ns: 1,
        weight: 10_101_010,
        event: tracer_common::event::EVENT_CPU_CLOCK,
        snapshot: 0,
        tgid: 7,
        tid: 8,
        cpu: 0,
        stop: StopReason::Outermost as u32,
        num_user: user.len() as u32,
        num_kernel: kernel.len() as u32,
        vmas: 0,
        _pad: 0,
        comm: [0; 16],
    };
    s.comm[..3].copy_from_slice(b"app");
    s.user[..user.len()].copy_from_slice(user);
    s.user_source[..sources.len()].copy_from_slice(sources);
    s.kernel[..kernel.len()].copy_from_slice(kernel);
    s
}

/// Frame 0 keeps its PC, callers are looked up at `ra - 1`, all object-relative with their
/// absolute address kept; addresses in no mapping stay absolute; identical samples count
/// together; each frame records how it was found, and the sources are tallied.
#[test]
fn samples_fold_into_object_relative_frames() {
    let catalog = catalog();
    let mut profile = Profile::new(Default::default());
    let s = sample(
        &[0x1100, 0x8201, 0x1000, 0x5000],
        &[SOURCE_TABLE, SOURCE_TABLE, SOURCE_TABLE, SOURCE_FP],
        &[0xffff_fff1],
    );
    profile.add(&s, &catalog);
    profile.add(&s, &catalog);
    assert_eq!(profile.samples, 2);
    // Frame 1 unwound from app (SFrame), frame 2 from lib.so (CFI), frame 3 by frame pointer.
    assert_eq!(
        (profile.sframe_frames, profile.cfi_frames, profile.fp_frames),
        (2, 2, 2)
    );
    let (stack, tally) = profile.stacks.iter().next().expect("one stack");
    assert_eq!(
        *tally,
        Tally {
            count: 2,
            weight_ns: 2 * 10_101_010
        }
    );
    assert_eq!(
        (stack.pid, stack.tid, stack.comm.as_str(), &*stack.event),
        (7, 8, "app", "cpu-clock")
    );
    assert_eq!(
        stack.user,
        [
            Frame::User {
                object: 0,
                offset: 0x100,
                addr: 0x1100
            },
            Frame::User {
                object: 1,
                offset: 0x1200,
                addr: 0x8200
            },
            // 0x1000 - 1 lies before the first mapping.
            Frame::UserUnknown {
                addr: 0xfff,
                process: 0
            },
            Frame::UserUnknown {
                addr: 0x4fff,
                process: 0
            },
        ]
    );
    assert_eq!(
        stack.sources,
        [
            FrameSource::Sframe,
            FrameSource::Sframe,
            FrameSource::EhFrame,
            FrameSource::Fp
        ]
    );
    assert_eq!(stack.kernel, [Frame::Kernel { addr: 0xffff_fff1 }]);
}

/// Stacks of different threads are different stacks, even with the same frames.
#[test]
fn threads_are_told_apart() {
    let catalog = catalog();
    let mut profile = Profile::new(Default::default());
    let mut s = sample(&[0x1100], &[], &[]);
    profile.add(&s, &catalog);
    s.tid = 9;
    profile.add(&s, &catalog);
    profile.add(&s, &catalog);
    let mut counts: Vec<(u32, u64)> = profile.stacks.iter().map(|(s, t)| (s.tid, t.count)).collect();
    counts.sort_unstable();
    assert_eq!(counts, [(8, 1), (9, 2)]);
}

/// Samples carry their event: each is named as on the command line, the same frames of two
/// events are two stacks, and weights add up per stack (off-CPU time; probe hits weigh 0).
#[test]
fn events_are_named_and_weighted() {
    use tracer_common::event::{EVENT_OFFCPU, EventKind, event_id};
    let catalog = catalog();
    let specs = ["offcpu".to_owned(), "uprobe:/app:f".to_owned()];
    let events = crate::event::EventSet::parse(&specs, None).expect("events");
    let mut profile = Profile::new(events.names());
    let mut s = sample(&[0x1100], &[], &[]);
    s.event = EVENT_OFFCPU;
    for blocked in [3_000_000, 5_000_000] {
        s.weight = blocked;
        profile.add(&s, &catalog);
    }
    s.event = event_id(EventKind::Uprobe, 0);
    s.weight = 0;
    profile.add(&s, &catalog);
    let mut tallies: Vec<(String, Tally)> = profile
        .stacks
        .iter()
        .map(|(stack, tally)| (stack.event.to_string(), *tally))
        .collect();
    tallies.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        tallies,
        [
            (
                "offcpu".to_owned(),
                Tally {
                    count: 2,
                    weight_ns: 8_000_000
                }
            ),
            ("uprobe:/app:f".to_owned(), Tally { count: 1, weight_ns: 0 }),
        ]
    );
}

/// C names stay as they are even when they read like mangled types; Rust and C++ names are
/// demangled.
#[test]
fn only_mangled_names_are_demangled() {
    use crate::symbolize::demangle;
    assert_eq!(demangle("c"), "c");
    assert_eq!(demangle("main"), "main");
    assert_eq!(demangle("_ZN3foo3barE"), "foo::bar");
    assert_eq!(demangle("_Z3fooi"), "foo(int)");
}

/// The GNU build-id note is found among other notes, its name and description padded to 4
/// bytes; truncated notes give nothing.
#[test]
fn build_id_from_notes() {
    use crate::symbolize::gnu_build_id;
    let note = |name: &[u8], kind: u32, desc: &[u8]| {
        let mut n = Vec::new();
        n.extend_from_slice(&(name.len() as u32).to_ne_bytes());
        n.extend_from_slice(&(desc.len() as u32).to_ne_bytes());
        n.extend_from_slice(&kind.to_ne_bytes());
        n.extend_from_slice(name);
        n.resize(n.len().next_multiple_of(4), 0);
        n.extend_from_slice(desc);
        n.resize(n.len().next_multiple_of(4), 0);
        n
    };
    let mut notes = note(b"Xen\0", 3, &[1, 2, 3]);
    notes.extend(note(b"GNU\0", 1, &[9; 16]));
    notes.extend(note(b"GNU\0", 3, &[0xab; 20]));
    assert_eq!(gnu_build_id(&notes), Some(vec![0xab; 20]));
    assert_eq!(gnu_build_id(&notes[..notes.len() - 4]), None);
    assert_eq!(gnu_build_id(&[]), None);
}
/// An object of the test catalog at `path` (named by its file name), with `table`, mapped by
/// one process; its file is /dev/null (nothing reads it in these tests).
pub(crate) fn object(path: &str, table: Result<Table, NoTable>) -> Object {
    Object {
        path: path.into(),
        key: None,
        file: Some(std::sync::Arc::new(std::fs::File::open("/dev/null").expect("a file"))),
        build_id: None,
        name: path.rsplit('/').next().unwrap_or(path).to_owned(),
        table,
        users: 1,
        unused_since: None,
        unloaded: false,
        refused_for: None,
    }
}

/// Code outside any object is named from its process's perf map, as JIT code (`source` `jit`,
/// object `[jit]`); executable memory the map does not name stays unknown and asks for the map
/// to be read again, an address in no mapping does not.
#[test]
fn jit_frames_are_named_from_the_perf_map() {
    let mut catalog = catalog();
    // Anonymous executable memory: a mapping without object.
    let jit = ResolvedMapping {
        start: 0xa000,
        end: 0xc000,
        bias: 0,
        object: None,
    };
    catalog.processes.current.get_mut(&7).unwrap().push(jit);
    catalog
        .runtimes
        .jit
        .names
        .set_map(7, 0, b"a000 100 JS:*fib /srv/fib.js:1:13\n");
    let events = crate::event::EventSet::default().names();
    let of_sample = |sample: &tracer_common::sample::Sample, catalog: &Catalog, events| {
        let mut stack = crate::profile::Stack::default();
        stack.set_to(sample, catalog, events);
        stack
    };
    let named = of_sample(&sample(&[0xa010], &[], &[]), &catalog, &events);
    assert!(
        !catalog.runtimes.jit.names.is_wanted(),
        "a named frame asks for nothing"
    );
    let unnamed = of_sample(&sample(&[0xb000], &[], &[]), &catalog, &events);
    assert!(
        catalog.runtimes.jit.names.is_wanted(),
        "an unnamed one asks for the map again"
    );
    catalog.runtimes.jit.names.refresh_wanted();
    of_sample(&sample(&[0xd000], &[], &[]), &catalog, &events);
    assert!(
        !catalog.runtimes.jit.names.is_wanted(),
        "an address in no mapping is no JIT code"
    );
    let mut cache = crate::symbolize::SymbolCache::new(false, crate::symbolize::DEFAULT_MAX_SYMBOL_MEMORY);
    let frames = cache.frames(&named, &catalog);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].symbol.as_deref(), Some("JS:*fib /srv/fib.js:1:13"));
    assert_eq!(frames[0].source, FrameSource::Jit);
    assert_eq!((frames[0].addr, frames[0].offset), (0xa010, 0xa010));
    let object = &cache.objects()[frames[0].object.expect("an object")];
    assert_eq!((object.path.as_str(), object.name.as_str()), ("[jit]", "[jit]"));
    let frames = cache.frames(&unnamed, &catalog);
    assert_eq!((frames[0].symbol.as_deref(), frames[0].object), (None, None));
    assert_ne!(frames[0].source, FrameSource::Jit);
}

/// A profile keeps only the stacks its consumers read: the whole session's, the window since
/// the last export (taken out by each export, the whole left as it was), both or neither; the
/// tallies are kept in every case, and `add` hands back the stack it resolved.
#[test]
fn profiles_keep_what_their_consumers_read() {
    use crate::profile::Keep;
    let catalog = catalog();
    let s = sample(&[0x1100, 0x8201], &[], &[]);
    for (whole, window) in [(false, false), (true, false), (false, true), (true, true)] {
        let mut profile = Profile::keeping(Default::default(), Keep { whole, window });
        let stack = profile.add(&s, &catalog).clone();
        assert_eq!(stack.user.len(), 2);
        profile.add(&s, &catalog);
        let first = profile.take_window();
        profile.add(&s, &catalog);
        let second = profile.take_window();
        assert_eq!(profile.samples, 3);
        let count = |stacks: &crate::profile::Stacks, stack| stacks.get(stack).map_or(0, |t| t.count);
        // The window keeps the CPU of its stacks, the whole session's does not.
        let without_cpu = crate::profile::Stack {
            cpu: None,
            ..stack.clone()
        };
        assert_eq!(stack.cpu, Some(s.cpu));
        assert_eq!(count(&profile.stacks, &without_cpu), if whole { 3 } else { 0 });
        assert_eq!(
            (count(&first, &stack), count(&second, &stack)),
            if window { (2, 1) } else { (0, 0) }
        );
        assert!(profile.take_window().is_empty());
    }
}

/// The export window counts a stack once per CPU it was taken on (its samples carry
/// `cpu.logical_number`), while the whole session's stacks fold the CPUs together, and a
/// resolved window says the CPU of each stack.
#[test]
fn the_window_keeps_the_cpu_of_each_stack() {
    use crate::profile::Keep;
    let catalog = catalog();
    let mut profile = Profile::keeping(
        Default::default(),
        Keep {
            whole: true,
            window: true,
        },
    );
    for cpu in [0, 1, 1] {
        let mut s = sample(&[0x1100, 0x8201], &[], &[]);
        s.header.cpu = cpu;
        profile.add(&s, &catalog);
    }
    let window = profile.take_window();
    let mut per_cpu: Vec<(Option<u32>, u64)> = window.iter().map(|(k, t)| (k.cpu, t.count)).collect();
    per_cpu.sort();
    assert_eq!(per_cpu, [(Some(0), 1), (Some(1), 2)]);
    let whole: Vec<(Option<u32>, u64)> = profile.stacks.iter().map(|(k, t)| (k.cpu, t.count)).collect();
    assert_eq!(whole, [(None, 3)]);
    let collection = crate::symbolize::Collection {
        start: std::time::SystemTime::now(),
        duration: std::time::Duration::from_secs(1),
        period_ns: 1,
    };
    let mut cache = crate::symbolize::SymbolCache::new(false, crate::symbolize::DEFAULT_MAX_SYMBOL_MEMORY);
    let resolved = crate::symbolize::resolve(&window, &catalog, &mut cache, &collection);
    let mut cpus: Vec<Option<u32>> = resolved.stacks.iter().map(|s| s.cpu).collect();
    cpus.sort();
    assert_eq!(cpus, [Some(0), Some(1)]);
}

/// A resolved profile lists only the objects its stacks use (an export of a window carries
/// its own objects, not every object the session met), and forgetting an object frees its
/// slot for the next one without renaming the frames of the others.
#[test]
fn resolved_stacks_list_only_their_objects() {
    use crate::symbolize::{Collection, SymbolCache, resolve};
    let catalog = catalog();
    let mut cache = SymbolCache::new(false, crate::symbolize::DEFAULT_MAX_SYMBOL_MEMORY);
    let collection = Collection {
        start: std::time::SystemTime::now(),
        duration: std::time::Duration::from_secs(1),
        period_ns: 1,
    };
    let mut profile = Profile::new(Default::default());
    profile.add(&sample(&[0x1100], &[], &[]), &catalog);
    let app = resolve(&profile.stacks, &catalog, &mut cache, &collection);
    let mut profile = Profile::new(Default::default());
    profile.add(&sample(&[0x8100], &[], &[]), &catalog);
    let lib = resolve(&profile.stacks, &catalog, &mut cache, &collection);
    let paths = |r: &crate::export::model::Resolved| r.objects.iter().map(|o| o.path.clone()).collect::<Vec<_>>();
    assert_eq!(paths(&app), ["/app"]);
    assert_eq!(paths(&lib), ["/lib.so"]);
    assert_eq!(lib.stacks[0].frames[0].object, Some(0));
    assert_eq!(cache.objects().len(), 2);
    cache.forget(&[0], &catalog);
    let mut profile = Profile::new(Default::default());
    profile.add(&sample(&[0x8100], &[], &[]), &catalog);
    let again = resolve(&profile.stacks, &catalog, &mut cache, &collection);
    assert_eq!(paths(&again), ["/lib.so"]);
    let mut catalog = catalog;
    catalog.objects.push(object("/new.so", Err(NoTable::NoUnwindInfo)));
    catalog
        .processes
        .current
        .get_mut(&7)
        .expect("pid 7")
        .push(crate::registry::ResolvedMapping {
            start: 0xa000,
            end: 0xb000,
            bias: 0xa000,
            object: Some(3),
        });
    let mut profile = Profile::new(Default::default());
    profile.add(&sample(&[0xa100], &[], &[]), &catalog);
    let new = resolve(&profile.stacks, &catalog, &mut cache, &collection);
    assert_eq!(paths(&new), ["/new.so"]);
    assert_eq!(cache.objects().len(), 2, "the forgotten object's slot was taken again");
}

/// The names the symbol cache keeps are bounded: past the bound they are dropped (and named
/// again when asked for), so a long session does not grow with every address it ever met;
/// frames resolved after a drop are still named.
#[test]
fn symbol_names_are_bounded() {
    use crate::symbolize::SymbolCache;
    let catalog = catalog();
    let mut cache = SymbolCache::with_max_names(false, 2);
    let mut profile = Profile::new(Default::default());
    let stack = profile
        .add(&sample(&[0x1100, 0x1201, 0x8201], &[], &[]), &catalog)
        .clone();
    assert_eq!(cache.frames(&stack, &catalog).len(), 3);
    assert_eq!(cache.cached_names(), 3, "one batch is named whole");
    assert!(!cache.take_dropped());
    let other = profile.add(&sample(&[0x1301], &[], &[]), &catalog).clone();
    let frames = cache.frames(&other, &catalog);
    assert_eq!(cache.cached_names(), 1, "past the bound, the old names were dropped");
    assert!(cache.take_dropped(), "the session is told, to hand the memory back");
    assert!(!cache.take_dropped(), "once");
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].offset, 0x301, "frame 0 is its own PC");
    assert_eq!(cache.frames(&stack, &catalog).len(), 3, "named again");
}

/// What naming grows the heap by is bounded too: past the bound (here each measure of the
/// heap finds it a mebibyte larger, and a batch may grow it by one and a half) the names and
/// blazesym's parsed data are dropped at the next batch, and every frame is still named.
#[test]
fn symbolizer_memory_is_bounded() {
    use crate::symbolize::SymbolCache;
    use std::sync::atomic::{AtomicUsize, Ordering};
    static HEAP: AtomicUsize = AtomicUsize::new(0);
    fn growing() -> usize {
        HEAP.fetch_add(1 << 20, Ordering::Relaxed)
    }
    let catalog = catalog();
    let mut cache = SymbolCache::with_naming_bound(false, 3 << 19, growing);
    let mut profile = Profile::new(Default::default());
    let stack = profile
        .add(&sample(&[0x1100, 0x1201, 0x8201], &[], &[]), &catalog)
        .clone();
    assert_eq!(cache.frames(&stack, &catalog).len(), 3);
    assert_eq!(cache.naming_bytes(), 1 << 20, "one batch, measured");
    let other = profile.add(&sample(&[0x1301], &[], &[]), &catalog).clone();
    assert_eq!(cache.frames(&other, &catalog).len(), 1);
    assert_eq!(cache.cached_names(), 4, "within the bound: kept");
    let third = profile.add(&sample(&[0x1401], &[], &[]), &catalog).clone();
    let frames = cache.frames(&third, &catalog);
    assert_eq!(
        cache.cached_names(),
        1,
        "past it, the names of before were dropped with the parsed data"
    );
    assert_eq!(frames.len(), 1);
    assert_eq!(cache.frames(&stack, &catalog).len(), 3, "named again");
}

/// What forgetting an object gives back is taken off what naming holds, so that the bound
/// (and the size log's `symbols.naming_kib`) counts what naming still holds, not what it ever
/// grew by.
#[test]
fn forgetting_gives_naming_memory_back() {
    use crate::symbolize::SymbolCache;
    use std::sync::Mutex;
    /// The heap as each measure finds it, in order.
    static MEASURES: Mutex<Vec<usize>> = Mutex::new(Vec::new());
    fn measured() -> usize {
        MEASURES.lock().unwrap().remove(0)
    }
    let catalog = catalog();
    let mut cache = SymbolCache::with_naming_bound(false, 64 << 20, measured);
    let mut profile = Profile::new(Default::default());
    let stack = profile.add(&sample(&[0x1100, 0x1201], &[], &[]), &catalog).clone();
    *MEASURES.lock().unwrap() = vec![10 << 20, 13 << 20];
    assert_eq!(cache.frames(&stack, &catalog).len(), 2);
    assert_eq!(cache.naming_bytes(), 3 << 20, "the batch grew the heap by 3 MiB");
    *MEASURES.lock().unwrap() = vec![13 << 20, 11 << 20];
    cache.forget(&[0], &catalog);
    assert_eq!(cache.naming_bytes(), 1 << 20, "forgetting gave 2 MiB back");
    *MEASURES.lock().unwrap() = vec![11 << 20, 5 << 20];
    cache.forget(&[1], &catalog);
    assert_eq!(cache.naming_bytes(), 0, "never below nothing");
}

/// A sample the kernel walked through VMAs (a process userspace never read) resolves its
/// frames through the mappings it carries, to the objects whose tables they name; a frame
/// outside them stays unknown, and the profile counts the sample.
#[test]
fn frames_found_through_vmas_resolve_without_the_process() {
    let mut catalog = catalog();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/bin/v2/x86_64/chain");
    let bytes = std::fs::read(&path).expect("fixture");
    let (table, _) = tracer_unwind::table::build_object(&bytes)
        .expect("builds")
        .expect("has a table");
    let id = catalog.loader.tables.add(&table).expect("room");
    let key = crate::procmaps::ObjectKey {
        device: crate::procmaps::Device { major: 8, minor: 1 },
        inode: 99,
        size: 1,
        mtime_ns: 0,
        ctime_ns: 0,
    };
    let segment = tracer_common::vma::FileSegment {
        start: 0,
        end: 0x10000,
        delta: 0,
    };
    catalog.loader.tables.bind_file(id, 1, &key, &[segment]);
    let mut s = sample(&[0x7000_0100, 0x7000_0201, 0x9999], &[SOURCE_TABLE; 3], &[]);
    s.tgid = 4242;
    s.vmas = 1;
    s.vma_mappings[0] = tracer_common::trace::ExecMapping {
        start: 0x7000_0000,
        end: 0x7001_0000,
        bias: 0x7000_0000,
        object: id,
        frame_word: 0,
    };
    let mut profile = Profile::new(Default::default());
    profile.add(&s, &catalog);
    assert_eq!(profile.vma_samples, 1);
    let (stack, _) = profile.stacks.iter().next().expect("one stack");
    assert_eq!(
        stack.user,
        vec![
            Frame::User {
                object: 1,
                offset: 0x100,
                addr: 0x7000_0100
            },
            Frame::User {
                object: 1,
                offset: 0x200,
                addr: 0x7000_0200
            },
            Frame::UserUnknown {
                addr: 0x9998,
                process: 0
            },
        ]
    );
}

/// In a process whose JIT code keeps no frame pointers (Java without
/// `-XX:+PreserveFramePointer`), a frame the frame-pointer fallback found from JIT code is not
/// its caller: the stack ends at the JIT frame, truncated as `bad_frame_pointer`, and the
/// profile counts the cut by how the kernel's walk had ended. A frame found from JIT code by a
/// table, a frame-pointer step from an object's code, and the same stacks in a process that
/// keeps its frame pointers stay whole.
#[test]
fn jit_frames_without_frame_pointers_end_their_stack() {
    let mut catalog = catalog();
    catalog
        .processes
        .current
        .get_mut(&7)
        .expect("process 7")
        .push(ResolvedMapping {
            start: 0x40000,
            end: 0x50000,
            bias: 0,
            object: None,
        });
    // A leaf in /app, a JIT frame, /app's frame found from it by its frame pointer, /lib.so.
    let from_jit = sample(
        &[0x1100, 0x40100, 0x1201, 0x8101],
        &[SOURCE_TABLE, SOURCE_TABLE, SOURCE_FP, SOURCE_TABLE],
        &[],
    );
    // The JIT frame found by the fallback from /app's leaf, /app's frame from it by a table.
    let from_app = sample(
        &[0x1100, 0x40101, 0x1201, 0x8101],
        &[SOURCE_TABLE, SOURCE_FP, SOURCE_TABLE, SOURCE_TABLE],
        &[],
    );
    let stacks = |catalog: &Catalog| {
        let mut profile = Profile::new(Default::default());
        let got: Vec<(usize, Option<StopReason>)> = [&from_jit, &from_app]
            .iter()
            .map(|s| {
                let stack = profile.add(s, catalog);
                (stack.user.len(), stack.truncated)
            })
            .collect();
        (got, profile.fp_cuts)
    };
    let (whole, cuts) = stacks(&catalog);
    assert_eq!(whole, [(4, None), (4, None)]);
    assert_eq!(cuts.iter().sum::<u64>(), 0);
    catalog.runtimes.jit.set_without_frame_pointers(7, true);
    let (cut, cuts) = stacks(&catalog);
    assert_eq!(cut, [(2, Some(StopReason::BadFramePointer)), (4, None)]);
    assert_eq!(cuts[StopReason::Outermost as usize], 1);
    assert_eq!(cuts.iter().sum::<u64>(), 1);
    let mut profile = Profile::new(Default::default());
    let stack = profile.add(&from_jit, &catalog);
    assert!(
        matches!(stack.user[1], Frame::UserUnknown { addr: 0x400ff, .. }),
        "the JIT frame is kept, its callers dropped: {:?}",
        stack.user
    );
}

/// `/healthz` is 503 before the session publishes and once its figures are older than 10 s,
/// 200 in between; `/metrics` carries each figure with its type; other paths are 404, other
/// methods 405.
#[test]
fn health_answers_follow_the_published_figures() {
    use std::{sync::atomic::Ordering::Relaxed, time::Duration};

    use super::health::{Figures, respond};
    let figures = Figures::default();
    let at = |s: u64| Duration::from_secs(s);
    assert_eq!(
        respond(b"GET", b"/healthz", &figures, at(1)).0,
        "503 Service Unavailable"
    );
    figures.published_at(at(5));
    assert_eq!(
        respond(b"GET", b"/healthz", &figures, at(6)),
        ("200 OK", "ok\n".to_owned())
    );
    assert_eq!(respond(b"GET", b"/healthz", &figures, at(15)).0, "200 OK");
    assert_eq!(
        respond(b"GET", b"/healthz", &figures, at(16)).0,
        "503 Service Unavailable"
    );
    figures.samples.store(1234, Relaxed);
    figures.exports_failed.store(2, Relaxed);
    let (status, text) = respond(b"GET", b"/metrics", &figures, at(16));
    assert_eq!(status, "200 OK");
    assert!(
        text.contains("# TYPE sframe_trace_samples_total counter\nsframe_trace_samples_total 1234\n"),
        "{text}"
    );
    assert!(text.contains("\nsframe_trace_otlp_exports_failed_total 2\n"), "{text}");
    assert!(text.contains("# TYPE sframe_trace_resident_bytes gauge\n"), "{text}");
    assert_eq!(respond(b"GET", b"/", &figures, at(6)).0, "404 Not Found");
    assert_eq!(
        respond(b"POST", b"/healthz", &figures, at(6)).0,
        "405 Method Not Allowed"
    );
}
