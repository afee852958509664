//! The heap bytes each thread holds, net of what it freed: the system allocator, counted per
//! thread. The symbol cache measures what naming costs by this count of its own thread
//! (blazesym's parsed data and the names kept), which other threads allocating at the same
//! moment (table builders, exporters) do not disturb, as they do glibc's process-wide figures.
//! The first [`SLOTS`] threads also publish their count, so that the size log can say which
//! threads hold the heap ([`per_thread`]).

use std::{
    cell::Cell,
    sync::atomic::{AtomicIsize, AtomicU32, Ordering},
};

/// Where every thread's count starts: far from both ends, so that a thread that frees more than
/// it allocated (memory another thread allocated) still has a count that only differences
/// matter of.
const START: usize = 1 << 62;

/// Threads whose counts are published one by one, at most at a time; the threads past them
/// share the last slot.
const SLOTS: usize = 256;
/// A thread's slot not taken yet.
const UNCLAIMED: usize = usize::MAX;

thread_local! {
    static NET: Cell<usize> = const { Cell::new(START) };
    static SLOT: Cell<usize> = const { Cell::new(UNCLAIMED) };
}

/// One thread's published count (its own cache line: written by its thread only, but the last,
/// shared slot).
#[repr(align(64))]
struct Slot {
    /// The thread's id (`gettid`); 0 while free.
    tid: AtomicU32,
    /// Bytes allocated less bytes freed by the thread (by the threads, for the shared slot).
    net: AtomicIsize,
}

static PUBLISHED: [Slot; SLOTS] = [const {
    Slot {
        tid: AtomicU32::new(0),
        net: AtomicIsize::new(0),
    }
}; SLOTS];
/// What ended threads counted when their slots were taken by new threads.
static ENDED: AtomicIsize = AtomicIsize::new(0);

/// Who holds a published count ([`per_thread`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holder {
    /// A thread, by id (it may have ended since).
    Thread(u32),
    /// Threads that ended and whose slots new threads took.
    Ended,
    /// The threads that found every slot taken by a live thread.
    Others,
}

/// Whether thread `tid` of this process is alive (a signal 0 reaches it).
fn alive(tid: u32) -> bool {
    crate::sys::process::thread_alive(tid)
}

/// Take a slot for thread `tid`: a free one, else one whose thread ended (its count moves to
/// [`ENDED`]), else the shared last one. Allocates nothing.
fn claim(tid: u32) -> usize {
    for (index, slot) in PUBLISHED[..SLOTS - 1].iter().enumerate() {
        let owner = slot.tid.load(Ordering::Relaxed);
        if (owner == 0 || !alive(owner))
            && slot
                .tid
                .compare_exchange(owner, tid, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            ENDED.fetch_add(slot.net.swap(0, Ordering::AcqRel), Ordering::Relaxed);
            return index;
        }
    }
    SLOTS - 1
}

/// The calling thread's slot, taken at its first count.
fn slot() -> usize {
    SLOT.with(|slot| {
        if slot.get() == UNCLAIMED {
            slot.set(claim(crate::sys::process::thread_id()));
        }
        slot.get()
    })
}

/// Publish a change of `delta` bytes to the calling thread's count, `net` now.
fn publish(net: usize, delta: isize) {
    let index = slot();
    if index < SLOTS - 1 {
        PUBLISHED[index]
            .net
            .store(net.wrapping_sub(START) as isize, Ordering::Relaxed);
    } else {
        PUBLISHED[index].net.fetch_add(delta, Ordering::Relaxed);
    }
}

/// The counts kept for the allocator ([`crate::sys::alloc::Counted`]).
pub struct Counts;

impl crate::sys::alloc::Counter for Counts {
    fn grew(bytes: usize) {
        grew(bytes);
    }

    fn shrank(bytes: usize) {
        shrank(bytes);
    }
}

/// The system allocator, each call counted on the calling thread.
pub type Counted = crate::sys::alloc::Counted<Counts>;

#[global_allocator]
static ALLOCATOR: Counted = Counted::new();

fn grew(bytes: usize) {
    let now = NET.with(|net| {
        net.set(net.get().wrapping_add(bytes));
        net.get()
    });
    publish(now, bytes as isize);
}

fn shrank(bytes: usize) {
    let now = NET.with(|net| {
        net.set(net.get().wrapping_sub(bytes));
        net.get()
    });
    publish(now, (bytes as isize).wrapping_neg());
}

/// The calling thread's count: only the difference between two readings on the same thread
/// means something (the bytes it allocated in between, less those it freed).
pub fn thread_bytes() -> usize {
    NET.with(Cell::get)
}

/// Every published count with its holder: bytes allocated less bytes freed, negative for a
/// holder that freed more than it allocated (what another thread allocated and handed to it).
/// A thread that ended keeps its count (what it allocated and left to others) until a new
/// thread takes its slot, then it is part of [`Holder::Ended`].
pub fn per_thread() -> Vec<(Holder, isize)> {
    let mut counts: Vec<(Holder, isize)> = PUBLISHED[..SLOTS - 1]
        .iter()
        .filter_map(|slot| {
            let tid = slot.tid.load(Ordering::Relaxed);
            (tid != 0).then(|| (Holder::Thread(tid), slot.net.load(Ordering::Relaxed)))
        })
        .collect();
    counts.push((Holder::Ended, ENDED.load(Ordering::Relaxed)));
    counts.push((Holder::Others, PUBLISHED[SLOTS - 1].net.load(Ordering::Relaxed)));
    counts
}

#[cfg(test)]
mod tests {
    use super::{Holder, per_thread, thread_bytes};

    /// Within a page of `expected` (spawning and joining a thread allocates a little).
    fn near(bytes: usize, expected: usize) -> bool {
        bytes.abs_diff(expected) < 4096
    }

    /// A thread's count grows by what it allocates and comes back when it frees it; another
    /// thread allocating at the same time leaves it alone.
    #[test]
    fn each_thread_counts_its_own_allocations() {
        let before = thread_bytes();
        let mine = vec![1u8; 3 << 20];
        let grown = thread_bytes().wrapping_sub(before);
        assert!(near(grown, 3 << 20), "grew by {grown}");
        let other = std::thread::spawn(|| vec![2u8; 8 << 20]).join().unwrap();
        let now = thread_bytes().wrapping_sub(before);
        assert!(near(now, 3 << 20), "the other thread's 8 MiB counted here: {now}");
        drop(mine);
        let now = thread_bytes().wrapping_sub(before);
        assert!(near(now, 0), "3 MiB freed: {now}");
        // Freeing what another thread allocated takes it off this thread's count.
        drop(other);
        let freed = before.wrapping_sub(thread_bytes());
        assert!(near(freed, 8 << 20), "its 8 MiB freed here: {freed}");
    }

    /// A live thread's count is published under its id: 5 MiB it allocated and handed over
    /// stay its own; freed by this thread, they come off this thread's count, not its.
    #[test]
    fn threads_publish_their_counts() {
        use std::sync::mpsc::channel;
        let (to_test, from_thread) = channel();
        let (release, released) = channel::<()>();
        let thread = std::thread::spawn(move || {
            let tid = crate::sys::process::thread_id();
            to_test.send((tid, vec![3u8; 5 << 20])).unwrap();
            released.recv().unwrap();
        });
        let (tid, kept) = from_thread.recv().unwrap();
        let published = || {
            per_thread()
                .into_iter()
                .find(|(holder, _)| *holder == Holder::Thread(tid))
                .map(|(_, net)| net)
        };
        let net = published().expect("the live thread's slot");
        assert!(near(net.unsigned_abs(), 5 << 20) && net > 0, "published {net}");
        drop(kept);
        // The thread's own count may move by the little its wait allocates meanwhile; the 5 MiB
        // freed here do not come off it.
        let after = published().expect("the live thread's slot");
        assert!(
            near(after.abs_diff(net), 0),
            "freed here: counted here, not there ({net} then {after})"
        );
        release.send(()).unwrap();
        thread.join().unwrap();
    }
}
