use std::time::{Duration, Instant};

use super::*;

/// A stack of process 7 with one frame in JIT code at `addr` of incarnation `process`.
fn jit_stack(addr: u64, process: u32) -> Stack {
    Stack {
        pid: 7,
        user: vec![Frame::UserUnknown { addr, process }],
        ..Stack::default()
    }
}

fn taken(time_ns: u64) -> Taken {
    Taken {
        time_ns,
        cpu: 0,
        weight: 0,
    }
}

/// A sample in code compiled after the map was last read, whose read the rate limit puts
/// off, waits for it and is handed back named; one the map names, or whose process's map
/// is not to be read, does not wait.
#[test]
fn a_sample_waits_for_the_read_that_names_it() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    std::fs::create_dir(dir.join("tmp")).unwrap();
    std::fs::write(dir.join("tmp/perf-7.map"), b"1000 10 one\n").unwrap();
    let mut jit = JitNames::default();
    let id = jit.read_under(7, dir);
    jit.want(7, 0x1000, crate::sys::monotonic_ns());
    jit.refresh_wanted();
    assert_eq!(jit.name(id, 0x1000), Some("one"));
    assert!(!waits(&jit_stack(0x1000, id), &jit), "named");
    // Code compiled since, its line written; the map read (as if) just now: the read for the
    // sample in it is put off.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("tmp/perf-7.map"))
        .unwrap();
    std::io::Write::write_all(&mut file, b"2000 10 two\n").unwrap();
    jit.set_read_at(id, Instant::now() + Duration::from_secs(3600));
    jit.want(7, 0x2000, crate::sys::monotonic_ns());
    jit.refresh_wanted();
    assert_eq!(jit.name(id, 0x2000), None, "the read is put off");
    let stack = jit_stack(0x2000, id);
    assert!(waits(&stack, &jit));
    assert!(
        !waits(&jit_stack(0x2000, 0), &jit),
        "memory outside JIT code asks nothing"
    );
    assert!(!waits(&jit_stack(0x2000, id + 1), &jit), "another incarnation's");
    let mut late = Late::default();
    assert!(late.hold(taken(1), stack.clone()).is_none());
    assert!(late.ready(&jit, false).is_empty(), "still waiting");
    assert_eq!(late.len(), 1);
    let settled = jit.settled();
    jit.refresh_wanted();
    assert_eq!(jit.settled(), settled, "a read still put off settles nothing");
    assert!(waits(&stack, &jit));
    // The read is due: made, and the sample handed back, named.
    jit.set_read_at(id, Instant::now() - Duration::from_secs(1));
    jit.refresh_wanted();
    assert!(jit.settled() > settled, "the put-off read was made");
    assert_eq!(jit.name(id, 0x2000), Some("two"));
    let ready = late.ready(&jit, false);
    assert_eq!(ready.len(), 1);
    assert_eq!((ready[0].0.time_ns, &ready[0].1), (1, &stack));
    assert_eq!(late.len(), 0);
}

/// At most [`MAX_HELD`] samples wait: the oldest is handed back to be written as it is; at
/// the end every one is.
#[test]
fn held_samples_are_bounded_and_all_go_at_the_end() {
    let jit = JitNames::default();
    let mut late = Late::default();
    for i in 0..MAX_HELD as u64 {
        assert!(late.hold(taken(i), jit_stack(0x2000, 1)).is_none());
    }
    let oldest = late.hold(taken(MAX_HELD as u64), jit_stack(0x2000, 1));
    assert_eq!(oldest.map(|(t, _)| t.time_ns), Some(0));
    assert_eq!(late.len(), MAX_HELD);
    let all = late.ready(&jit, true);
    assert_eq!(all.len(), MAX_HELD);
    assert_eq!(all.first().map(|(t, _)| t.time_ns), Some(1), "oldest first");
    assert_eq!(late.len(), 0);
}
