//! The incremental jitdump reader: only what was appended is read, a record still being
//! written is taken once it is whole, a file replaced or cut shorter is read again from its
//! start, and a read cut short by its time goes on where it stopped.

use std::{
    io::Write as _,
    os::unix::fs::{FileExt as _, MetadataExt as _},
};

use super::*;
use crate::jit::dump::tests::{header, load};

/// `path` open for reading, with its identity and size.
fn opened(path: &Path) -> (File, (u64, u64), u64) {
    let file = File::open(path).unwrap();
    let meta = file.metadata().unwrap();
    (file, (meta.dev(), meta.ino()), meta.size())
}

/// Read what `path` gained into `state` (continued, or new when the file is another or
/// shorter), with time enough: the state, whether it was read from the start.
fn read(state: Option<DumpFile>, path: &Path) -> (DumpFile, bool) {
    let (file, identity, size) = opened(path);
    let (mut state, again) = DumpFile::continued(state, (0, 0), identity, size);
    let whole = state.read_more(&file, size, Instant::now() + Duration::from_secs(60));
    assert_eq!(whole, Ok(true));
    (state, again)
}

fn names(state: &DumpFile) -> Vec<&str> {
    state.dump.loads.values().map(|l| l.name.as_str()).collect()
}

#[test]
fn appended_records_are_read_from_the_last_complete_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jit-1.dump");
    let mut file = File::create(&path).unwrap();
    let mut bytes = header();
    bytes.extend(load(0x1000, "one", &[0x90; 16]));
    let second = load(0x2000, "two", &[0x90; 16]);
    // The second record half written.
    bytes.extend_from_slice(&second[..10]);
    file.write_all(&bytes).unwrap();
    let (state, again) = read(None, &path);
    assert!(again);
    assert_eq!(names(&state), ["one"]);
    let first_end = (header().len() + load(0x1000, "one", &[0x90; 16]).len()) as u64;
    assert_eq!(state.read, first_end, "the offset of the last complete record");
    // The rest of it, and a third: only those bytes are read, the first is not taken again.
    file.write_all(&second[10..]).unwrap();
    file.write_all(&load(0x3000, "three", &[0x90; 16])).unwrap();
    let (state, again) = read(Some(state), &path);
    assert!(!again, "continued, not read from the start");
    assert_eq!(names(&state), ["one", "two", "three"]);
    assert_eq!(state.read, std::fs::metadata(&path).unwrap().len());
    assert_eq!(state.dump.malformed, 0);
}

#[test]
fn a_replaced_or_shorter_dump_is_read_again_from_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jit-1.dump");
    let mut bytes = header();
    bytes.extend(load(0x1000, "one", &[0x90; 16]));
    bytes.extend(load(0x2000, "two", &[0x90; 16]));
    std::fs::write(&path, &bytes).unwrap();
    let (state, _) = read(None, &path);
    assert_eq!(names(&state), ["one", "two"]);
    // Cut shorter, in place (same inode): read again from the start.
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let mut shorter = header();
    shorter.extend(load(0x5000, "five", &[0x90; 8]));
    file.set_len(0).unwrap();
    file.write_all_at(&shorter, 0).unwrap();
    let (state, again) = read(Some(state), &path);
    assert!(again);
    assert_eq!(names(&state), ["five"]);
    // Replaced by another file (a new inode), longer than what was read: read from its start.
    std::fs::remove_file(&path).unwrap();
    let mut other = header();
    other.extend(load(0x7000, "seven", &[0x90; 64]));
    other.extend(load(0x8000, "eight", &[0x90; 64]));
    std::fs::write(&path, &other).unwrap();
    let (state, again) = read(Some(state), &path);
    assert!(again);
    assert_eq!(names(&state), ["seven", "eight"]);
}

#[test]
fn a_read_out_of_time_goes_on_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jit-1.dump");
    let mut bytes = header();
    for i in 0..3000u64 {
        bytes.extend(load(0x10_0000 + i * 0x1000, &format!("f{i}"), &[0x90; 512]));
    }
    std::fs::write(&path, &bytes).unwrap();
    let (file, identity, size) = opened(&path);
    let (mut state, _) = DumpFile::continued(None, (0, 0), identity, size);
    // No time at all: nothing read, nothing lost.
    assert_eq!(state.read_more(&file, size, Instant::now()), Ok(false));
    assert_eq!(state.read, 0);
    let (state, again) = read(Some(state), &path);
    assert!(!again);
    assert_eq!(state.dump.loads.len(), 3000);
    assert_eq!(state.read, size);
}

#[test]
fn an_endless_record_stops_the_reading() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jit-1.dump");
    let mut bytes = header();
    bytes.extend(load(0x1000, "one", &[0x90; 16]));
    // A record that says it is 4 GiB long, and more bytes than MAX_RECORD after it.
    bytes.extend_from_slice(&0u32.to_ne_bytes());
    bytes.extend_from_slice(&u32::MAX.to_ne_bytes());
    bytes.resize(bytes.len() + MAX_RECORD + CHUNK, 0);
    std::fs::write(&path, &bytes).unwrap();
    let (state, _) = read(None, &path);
    assert_eq!(names(&state), ["one"]);
    assert!(state.stuck);
    assert_eq!(state.dump.malformed, 1);
}
