use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

use super::*;
use crate::snapshots::recording::{FORMAT_VERSION, Hex, Registers, Stack};

fn recording() -> Recording {
    Recording {
        version: FORMAT_VERSION,
        arch: std::env::consts::ARCH.to_owned(),
        comm: "t".to_owned(),
        max_depth: 8,
        regs: Registers {
            pc: Hex(1),
            sp: Hex(2),
            fp: Hex(3),
            lr: Hex(0),
        },
        stack: Stack {
            base: Hex(0),
            words: String::new(),
        },
        mappings: Vec::new(),
        rules: Vec::new(),
        frames: Vec::new(),
        stop: "outermost".to_owned(),
    }
}

/// A new directory is created 0700 and each recording is a 0600 file that reads back equal.
#[test]
fn creates_private_directory_and_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rec");
    let mut recorder = Recorder::open(&dir).unwrap();
    assert!(recorder.write(42, &recording()));
    assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
    let file = dir.join("42-000001.json");
    assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
    let back: Recording = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(back, recording());
}

/// A symbolic link at the directory's path is refused, not followed.
#[test]
fn refuses_symlinked_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    assert!(Recorder::open(&link).is_err());
}

/// An existing directory others may enter is refused.
#[test]
fn refuses_open_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("open");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(matches!(Recorder::open(&dir), Err(RecordDirError::Refused { .. })));
}

/// A file already at a recording's name (a planted symbolic link) is not written through.
#[test]
fn never_writes_through_a_planted_name() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rec");
    let mut recorder = Recorder::open(&dir).unwrap();
    let target = tmp.path().join("target");
    std::fs::write(&target, b"keep").unwrap();
    std::os::unix::fs::symlink(&target, dir.join("7-000001.json")).unwrap();
    assert!(!recorder.write(7, &recording()));
    assert_eq!(recorder.dropped, 1);
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
}
