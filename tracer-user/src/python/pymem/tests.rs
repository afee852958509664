//! The reader thread against a fake memory whose reads of one process never return.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use super::{MAX_STUCK, MAX_STUCK_PER_USER, MemReader, ReadError, TIMEOUT};
use crate::python::{layout::V3_11, testing::FakeMemory};

/// A reader whose processes all have `memory`, but for `stuck` pids, whose reads block.
fn reader(memory: FakeMemory, stuck: Vec<u32>) -> MemReader {
    let memory = Arc::new(memory);
    MemReader::with(Box::new(move || {
        let (memory, stuck) = (Arc::clone(&memory), stuck.clone());
        Box::new(move |pid, addr, buf: &mut [u8]| {
            if buf.is_empty() {
                return true;
            }
            if stuck.contains(&pid) {
                std::thread::sleep(Duration::from_secs(3600));
            }
            memory.read(addr, buf)
        })
    }))
}

/// A code object is read through the thread; one that is not there is an error of the code,
/// not a stuck reader.
#[test]
fn reads_code_objects() {
    let c = V3_11.code;
    let mut memory = FakeMemory::default();
    memory.function(&c, 0x10_000, "Kls.run", "/srv/app.py", 7, &[0xef, 0x00]);
    let mut reader = reader(memory, Vec::new());
    let info = reader.meta(40, 0, c, 0x10_000).expect("read");
    assert_eq!(
        (info.qualname.as_str(), info.filename.as_str(), info.first_line),
        ("Kls.run", "/srv/app.py", 7)
    );
    assert_eq!(reader.table(40, 0, info.table_at, info.table_len), Ok(vec![0xef, 0x00]));
    // The pointers the code object's identity is made of: its qualified name, its line table.
    assert_eq!([info.header[0], info.header[2]], [0x10_400, 0x10_c00]);
    assert!(matches!(reader.meta(40, 0, c, 0x90_000), Err(ReadError::Code(_))));
    assert_eq!(reader.stuck, 0);
}

/// A read that never returns costs the session [`TIMEOUT`] once: the process is not read
/// again, other processes are (through a new thread), a process given its pid later is; after
/// [`MAX_STUCK_PER_USER`] blocked threads of one user's processes, that user's processes are
/// not read, other users' still are; after [`MAX_STUCK`] in all nothing is read any more.
#[test]
fn a_blocked_read_costs_its_user_only() {
    let c = V3_11.code;
    let mut memory = FakeMemory::default();
    memory.function(&c, 0x10_000, "f", "a.py", 1, &[]);
    let stuck: Vec<u32> = (1..=MAX_STUCK as u32).collect();
    let mut reader = reader(memory, stuck);
    let (user, other) = (65534, 0);
    let started = Instant::now();
    assert_eq!(reader.meta(1, user, c, 0x10_000), Err(ReadError::Stuck));
    assert!(started.elapsed() >= TIMEOUT);
    let again = Instant::now();
    assert_eq!(reader.meta(1, user, c, 0x10_000), Err(ReadError::Stuck));
    assert!(again.elapsed() < TIMEOUT, "a stuck process is refused at once");
    assert!(
        reader.meta(99, user, c, 0x10_000).is_ok(),
        "another process of the user is read"
    );
    assert_eq!(reader.stuck, 1);
    assert_eq!(reader.meta(2, user, c, 0x10_000), Err(ReadError::Stuck));
    assert_eq!(reader.stuck, MAX_STUCK_PER_USER);
    let refused = Instant::now();
    assert_eq!(
        reader.meta(99, user, c, 0x10_000),
        Err(ReadError::Stuck),
        "the user's processes are not read"
    );
    assert!(refused.elapsed() < TIMEOUT, "refused at once");
    assert!(
        reader.meta(98, other, c, 0x10_000).is_ok(),
        "another user's process is read"
    );
    // As many users as it takes to stop all reading.
    for pid in 3..=MAX_STUCK as u32 {
        assert_eq!(reader.meta(pid, 1000 + pid / 2, c, 0x10_000), Err(ReadError::Stuck));
    }
    assert_eq!(reader.stuck, MAX_STUCK);
    assert_eq!(
        reader.meta(98, other, c, 0x10_000),
        Err(ReadError::Stuck),
        "reading stopped"
    );
    reader.forget(1);
    assert_eq!(
        reader.meta(98, other, c, 0x10_000),
        Err(ReadError::Stuck),
        "still stopped"
    );
}

/// Forgetting a stuck process lets a new process with its pid be read.
#[test]
fn a_forgotten_pid_is_read_again() {
    let c = V3_11.code;
    let mut memory = FakeMemory::default();
    memory.function(&c, 0x10_000, "f", "a.py", 1, &[]);
    let stuck_once = Arc::new(Mutex::new(true));
    let memory = Arc::new(memory);
    let mut reader = MemReader::with(Box::new(move || {
        let (memory, stuck_once) = (Arc::clone(&memory), Arc::clone(&stuck_once));
        Box::new(move |_pid, addr, buf: &mut [u8]| {
            if buf.is_empty() {
                return true;
            }
            if std::mem::replace(&mut *stuck_once.lock().unwrap(), false) {
                std::thread::sleep(Duration::from_secs(3600));
            }
            memory.read(addr, buf)
        })
    }));
    assert_eq!(reader.meta(5, 0, c, 0x10_000), Err(ReadError::Stuck));
    assert_eq!(reader.meta(5, 0, c, 0x10_000), Err(ReadError::Stuck));
    reader.forget(5);
    assert!(reader.meta(5, 0, c, 0x10_000).is_ok());
}

/// A read that answers after the timeout (a slow read on a busy host, not a stuck one) gives
/// its process and its user back: refused while the thread is blocked, read again once it has
/// answered, counted as late and no longer as stuck.
#[test]
fn a_late_answer_gives_the_process_back() {
    let c = V3_11.code;
    let mut memory = FakeMemory::default();
    memory.function(&c, 0x10_000, "f", "a.py", 1, &[]);
    let memory = Arc::new(memory);
    let (release, held) = std::sync::mpsc::channel::<()>();
    let held = Arc::new(Mutex::new(Some(held)));
    let mut reader = MemReader::with(Box::new(move || {
        let (memory, held) = (Arc::clone(&memory), Arc::clone(&held));
        Box::new(move |_pid, addr, buf: &mut [u8]| {
            if buf.is_empty() {
                return true;
            }
            // The first thread's first read waits until the test lets it go.
            if let Some(held) = held.lock().unwrap().take() {
                let _ = held.recv();
            }
            memory.read(addr, buf)
        })
    }));
    assert_eq!(reader.meta(5, 7, c, 0x10_000), Err(ReadError::Stuck));
    assert_eq!(
        reader.meta(5, 7, c, 0x10_000),
        Err(ReadError::Stuck),
        "refused while blocked"
    );
    assert_eq!((reader.stuck, reader.recovered), (1, 0));
    release.send(()).expect("the blocked read waits");
    let started = Instant::now();
    while reader.meta(5, 7, c, 0x10_000).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the late answer never counted"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!((reader.stuck, reader.recovered), (0, 1));
    assert!(reader.stuck_users.is_empty() && reader.stuck_pids.is_empty());
}
