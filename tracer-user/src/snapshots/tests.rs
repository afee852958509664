//! The queue of stack copies: held until their process is loaded, walked through its
//! mappings then, handed on unwalked when the queue is full, and counted.

use tracer_common::{
    sample::Sample,
    trace::{SOURCE_FP, SOURCE_TABLE, WalkRegs},
    walk::StopReason,
};

use super::{MAX_HELD, Snapshots};
use crate::{registry::ResolvedMapping, trace::tests::catalog};

/// A copy from process `pid` sampled at 0x3010 of `/x.so` (no table: frame pointers) whose
/// frame pointer leads to a caller at 0x1100 of `/app` and ends there (a saved FP of 0).
fn copy(pid: u32) -> Sample {
    let mut s = crate::trace::tests::sample(&[0x3010], &[], &[0xffff_fff1]);
    s.tgid = pid;
    s.stop = StopReason::Snapshot as u32;
    s.snapshot = 4;
    s.copy.regs = WalkRegs {
        pc: 0x3010,
        sp: 0x7000,
        fp: 0x7010,
        lr: 0,
    };
    s.copy.base = 0x7000;
    s.copy.len = 4;
    s.copy.words[..4].copy_from_slice(&[0, 0, 0, 0x1101]);
    s
}

/// `/x.so` (object 2, no table) at 0x3000 in process 9, besides `/app`.
fn load_nine(catalog: &mut crate::registry::Catalog) {
    let mut maps = catalog.processes.current[&7].clone();
    maps.insert(
        1,
        ResolvedMapping {
            start: 0x3000,
            end: 0x4000,
            bias: 0x3000,
            object: Some(2),
        },
    );
    catalog.processes.current.insert(9, maps);
}

#[test]
fn a_copy_waits_for_its_process_and_is_walked_through_its_mappings() {
    let mut catalog = catalog();
    let mut copies = Snapshots::new(2048);
    assert!(
        !copies.hold(&crate::trace::tests::sample(&[0x1100], &[], &[])),
        "a walked sample"
    );
    assert!(copies.hold(&copy(9)));
    let mut out = Vec::new();
    let reload = copies.release(&catalog, None, false, |s| {
        out.push(s.user[..s.num_user as usize].to_vec())
    });
    assert!(
        out.is_empty() && reload.is_empty(),
        "process 9 is not loaded: nothing to reload"
    );
    assert!(copies.waiting());
    load_nine(&mut catalog);
    let mut sources = Vec::new();
    // Copies of other processes are not looked at.
    copies.release(&catalog, Some(&[7]), false, |_| panic!("process 9's copy"));
    copies.release(&catalog, Some(&[9]), false, |s| {
        out.push(s.user[..s.num_user as usize].to_vec());
        sources.push((s.user_source[0], s.user_source[1], s.stop, s.num_kernel, s.kernel[0]));
    });
    assert_eq!(out, [vec![0x3010, 0x1101]]);
    // The caller came from frame pointers; `/app` has no page in the empty table set, so its
    // frame's rule is NO_INFO and frame pointers end the chain (saved FP 0) as complete.
    assert_eq!(
        sources,
        [(SOURCE_TABLE, SOURCE_FP, StopReason::Outermost as u32, 1, 0xffff_fff1)]
    );
    assert!(!copies.waiting());
    assert_eq!(
        (copies.stats.copies, copies.stats.walked, copies.stats.unresolved),
        (1, 1, 0)
    );
}

#[test]
fn a_copy_of_a_process_never_loaded_ends_unresolved_and_the_stops_add_up() {
    let catalog = catalog();
    let mut copies = Snapshots::new(2048);
    assert!(copies.hold(&copy(9)));
    let mut out = Vec::new();
    copies.release(&catalog, Some(&[]), true, |s| out.push((s.num_user, s.stop)));
    assert_eq!(out, [(1, StopReason::NoMapping as u32)]);
    assert_eq!((copies.stats.walked, copies.stats.unresolved), (0, 1));
    let mut stops = vec![
        (StopReason::Snapshot, 1),
        (StopReason::NoMapping, 2),
        (StopReason::Outermost, 5),
    ];
    copies.stats.adjust(&mut stops);
    assert_eq!(
        stops,
        [
            (StopReason::Snapshot, 0),
            (StopReason::NoMapping, 3),
            (StopReason::Outermost, 5)
        ]
    );
}

#[test]
fn a_loaded_process_missing_the_code_is_read_again_and_the_queue_is_bounded() {
    let catalog = catalog();
    let mut copies = Snapshots::new(2048);
    // Process 7 is loaded, but 0x3010 is in none of its mappings (code mapped since).
    assert!(copies.hold(&copy(7)));
    assert_eq!(copies.release(&catalog, None, false, |_| panic!("not yet")), [7]);
    // Asked for once, not at every look.
    assert!(copies.release(&catalog, None, false, |_| panic!("not yet")).is_empty());
    for _ in 1..MAX_HELD {
        assert!(copies.hold(&copy(7)));
    }
    assert!(!copies.hold(&copy(7)), "full: handed on as it is");
    assert_eq!((copies.stats.copies, copies.stats.overflowed), (MAX_HELD as u64 + 1, 1));
}
