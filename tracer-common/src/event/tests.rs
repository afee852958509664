//! Unit tests of `event`; each test says what it proves.

use super::*;

/// Ids of different kinds and slots never collide, and cpu-clock keeps id 0.
#[test]
fn event_ids_are_distinct() {
    assert_eq!(EVENT_CPU_CLOCK, 0);
    let kinds = [
        EventKind::Kprobe,
        EventKind::Uprobe,
        EventKind::Uretprobe,
        EventKind::Tracepoint,
    ];
    let mut ids: [u32; 2 + 4 * PROBE_SLOTS] = [0; 2 + 4 * PROBE_SLOTS];
    ids[1] = EVENT_OFFCPU;
    for (k, kind) in kinds.iter().enumerate() {
        for slot in 0..PROBE_SLOTS {
            ids[2 + k * PROBE_SLOTS + slot] = event_id(*kind, slot as u32);
        }
    }
    for (i, a) in ids.iter().enumerate() {
        assert!(ids[i + 1..].iter().all(|b| a != b), "id {a:#x} twice");
    }
}

/// The call-entry records' id is no event's, whatever kind and slot.
#[test]
fn call_entries_are_no_event() {
    for kind in [
        EventKind::CpuClock,
        EventKind::Offcpu,
        EventKind::Kprobe,
        EventKind::Uprobe,
        EventKind::Uretprobe,
        EventKind::Tracepoint,
    ] {
        for slot in 0..PROBE_SLOTS as u32 {
            assert_ne!(event_id(kind, slot), EVENT_CALL_ENTRY);
        }
    }
}

/// A signal ends the process with its default action, unless that action ignores it or stops
/// the process; a handler or `SIG_IGN` (1) never does.
#[test]
fn fatal_signals_are_told_apart() {
    // SIGHUP, SIGINT, SIGQUIT, SIGABRT, SIGKILL, SIGSEGV, SIGPIPE, SIGTERM, SIGXCPU, a real-time one.
    for sig in [1, 2, 3, 6, 9, 11, 13, 15, 24, 34] {
        assert!(ends_process(sig, 0), "{sig}");
        assert!(!ends_process(sig, 1), "{sig} ignored");
        assert!(!ends_process(sig, 0x40_1000), "{sig} handled");
    }
    // SIGCHLD, SIGCONT, SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU, SIGURG, SIGWINCH, and no signal.
    for sig in [17, 18, 19, 20, 21, 22, 23, 28, 0] {
        assert!(!ends_process(sig, 0), "{sig}");
    }
}
