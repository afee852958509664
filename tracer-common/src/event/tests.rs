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
