//! Which samples are given an entry stack, what they keep of their own, and the stop counts.

use tracer_common::{event::EVENT_CALL_ENTRY, sample::Sample, trace::WalkRegs, walk::StopReason};

use super::{EntryStacks, KEEP_NS, MAX_KEPT};
use crate::trace::tests::{self, sample};

/// The entry stack of thread 8 of process 7 at time 100: `_exit`'s PC down to `_start`,
/// walked whole.
fn entry() -> Sample {
    let mut s = sample(&[0x1010, 0x1100, 0x1200, 0x1300], &[0, 0, 1, 0], &[0xffff_0001]);
    s.event = EVENT_CALL_ENTRY;
    s.time_ns = 100;
    s.weight = 0;
    s
}

/// A cpu-clock sample of the same thread at `time`, inside the call after its memory went:
/// the PC alone (`exec_or_exit`), with kernel frames of its own.
fn inside(time: u64) -> Sample {
    let mut s = sample(&[0x1010], &[], &[0xffff_0100, 0xffff_0200]);
    s.time_ns = time;
    s.stop = StopReason::ExecOrExit as u32;
    s
}

#[test]
fn a_sample_in_the_call_is_given_the_entry_stack_and_keeps_the_rest() {
    let mut entries = EntryStacks::default();
    assert!(entries.see(&entry()).is_none(), "an entry record is no sample");
    let sample = inside(200);
    let given = *entries.see(&sample).expect("a sample");
    assert_eq!(
        &given.user[..given.num_user as usize],
        &[0x1010, 0x1100, 0x1200, 0x1300]
    );
    assert_eq!(&given.user_source[..4], &[0, 0, 1, 0]);
    assert_eq!(given.stop, StopReason::Outermost as u32);
    assert_eq!(&given.kernel[..given.num_kernel as usize], &[0xffff_0100, 0xffff_0200]);
    // Dated at the entry, whose mappings its frames are of.
    assert_eq!(
        (given.time_ns, given.weight, given.event),
        (100, sample.weight, sample.event)
    );
    assert_eq!((entries.stats.kept, entries.stats.given), (1, 1));
}

/// A change to a sample, named.
type Change = (&'static str, fn(&mut Sample));

/// Changed from a sample inside the call, one way each: none is given the entry stack.
const NOT_THE_CALL: [Change; 5] = [
    ("another thread", |s| s.tid = 9),
    ("another process", |s| s.tgid = 6),
    ("before the entry", |s| s.time_ns = 50),
    ("another PC", |s| s.user[0] = 0x1011),
    ("a complete walk", |s| s.stop = StopReason::Outermost as u32),
];

#[test]
fn only_the_same_threads_cut_samples_at_the_same_frames_after_the_entry_are_given_it() {
    let mut entries = EntryStacks::default();
    entries.see(&entry());
    let check = |entries: &mut EntryStacks, what: &str, sample: &Sample| {
        let seen = entries.see(sample).expect("a sample");
        assert_eq!(
            &seen.user[..seen.num_user as usize],
            &sample.user[..sample.num_user as usize],
            "{what}"
        );
        assert_eq!(seen.stop, sample.stop, "{what}");
    };
    for (what, change) in NOT_THE_CALL {
        let mut sample = Box::new(inside(200));
        change(&mut sample);
        check(&mut entries, what, &sample);
    }
    let mut sample = Box::new(sample(&[0x1010, 0x1400], &[], &[]));
    sample.time_ns = 200;
    sample.stop = StopReason::RaReadFailed as u32;
    check(&mut entries, "another caller", &sample);
    *sample = tests::sample(&[0x1010, 0x1100, 0x1200, 0x1300, 0x1400], &[], &[]);
    sample.time_ns = 200;
    sample.stop = StopReason::ZeroRa as u32;
    check(&mut entries, "more frames than the entry", &sample);
    assert_eq!(entries.stats.given, 0);
    // A walk that got past frame 0 before it was cut is given it when its frames agree.
    *sample = tests::sample(&[0x1010, 0x1100], &[], &[]);
    sample.time_ns = 300;
    sample.stop = StopReason::RaReadFailed as u32;
    assert_eq!(entries.see(&sample).expect("a sample").num_user, 4);
}

/// A sample in the call shipped as a stack copy (its process no longer in the kernel's map)
/// is given the entry stack instead of waiting to be walked: it is no copy any more.
#[test]
fn a_copy_in_the_call_is_given_the_entry_stack() {
    let mut entries = EntryStacks::default();
    entries.see(&entry());
    let mut copy = Box::new(inside(200));
    copy.stop = StopReason::Snapshot as u32;
    copy.snapshot = 2;
    copy.copy.len = 2;
    let given = entries.see(&copy).expect("a sample");
    assert_eq!((given.num_user, given.snapshot, given.copy.len), (4, 0, 0));
    assert_eq!(given.stop, StopReason::Outermost as u32);
    let mut stops = vec![(StopReason::Outermost, 1), (StopReason::Snapshot, 1)];
    entries.adjust(&mut stops);
    assert_eq!(stops, vec![(StopReason::Outermost, 1), (StopReason::Snapshot, 0)]);
}

#[test]
fn a_later_call_replaces_the_threads_entry_stack() {
    let mut entries = EntryStacks::default();
    entries.see(&entry());
    let mut exec = sample(&[0x2020, 0x2100], &[], &[]);
    exec.event = EVENT_CALL_ENTRY;
    exec.time_ns = 150;
    entries.see(&exec);
    assert_eq!(entries.len(), 1);
    let mut in_exec = inside(200);
    in_exec.user[0] = 0x2020;
    let given = *entries.see(&in_exec).expect("a sample");
    assert_eq!(&given.user[..given.num_user as usize], &[0x2020, 0x2100]);
    let old = *entries.see(&inside(200)).expect("a sample");
    assert_eq!(old.num_user, 1, "the first call's stack is gone");
}

#[test]
fn an_entry_taken_as_a_copy_makes_the_sample_a_copy() {
    let mut entries = EntryStacks::default();
    let mut copy = sample(&[0x1010], &[], &[]);
    copy.event = EVENT_CALL_ENTRY;
    copy.time_ns = 100;
    copy.stop = StopReason::Snapshot as u32;
    copy.snapshot = 3;
    copy.copy.regs = WalkRegs {
        pc: 0x1010,
        sp: 0x7000,
        fp: 0,
        lr: 0,
    };
    copy.copy.base = 0x7000;
    copy.copy.len = 3;
    copy.copy.words[..3].copy_from_slice(&[1, 2, 0x1101]);
    entries.see(&copy);
    let given = *entries.see(&inside(200)).expect("a sample");
    assert_eq!(
        (given.stop, given.snapshot, given.copy.len),
        (StopReason::Snapshot as u32, 3, 3)
    );
    assert_eq!(given.copy.regs, copy.copy.regs);
    assert_eq!((given.copy.base, &given.copy.words[..3]), (0x7000, &[1, 2, 0x1101][..]));
    assert_eq!(&given.kernel[..2], &[0xffff_0100, 0xffff_0200]);
}

#[test]
fn stop_counts_leave_entries_out_and_move_given_samples() {
    let mut entries = EntryStacks::default();
    entries.see(&entry());
    entries.see(&inside(200));
    entries.see(&inside(300));
    // The kernel counted the entry's walk (outermost) and both samples' (exec_or_exit).
    let mut stops = vec![
        (StopReason::Outermost, 10 + 1),
        (StopReason::ExecOrExit, 2 + 2),
        (StopReason::ZeroRa, 1),
    ];
    entries.adjust(&mut stops);
    assert_eq!(
        stops,
        vec![
            (StopReason::Outermost, 12),
            (StopReason::ExecOrExit, 2),
            (StopReason::ZeroRa, 1)
        ]
    );
}

#[test]
fn entry_stacks_are_bounded_in_number_and_age() {
    let mut entries = EntryStacks::default();
    for tid in 0..MAX_KEPT as u32 + 10 {
        let mut e = entry();
        e.tid = tid;
        e.time_ns = 1000 + u64::from(tid);
        entries.see(&e);
    }
    assert_eq!(entries.len(), MAX_KEPT);
    assert_eq!(entries.stats.dropped, 10);
    // The oldest went: thread 0's sample keeps its PC alone; the newest's is given its stack.
    let mut first = inside(5000);
    first.tid = 0;
    assert_eq!(entries.see(&first).expect("a sample").num_user, 1);
    let mut last = inside(5000);
    last.tid = MAX_KEPT as u32 + 9;
    assert_eq!(entries.see(&last).expect("a sample").num_user, 4);
    // Much later, a new entry finds every other one too old.
    let mut late = entry();
    late.tid = 1 << 20;
    late.time_ns = 1000 + KEEP_NS + MAX_KEPT as u64 + 10;
    entries.see(&late);
    assert_eq!(entries.len(), 1);
}
