//! Test helpers shared by the registry's and the follower's unit tests: small ELF files checked
//! in under `fixtures/bin`, each standing for a file of a made-up identity (so that one file can
//! play several: a replaced file, another file with the same build-id), and mappings of them as
//! discovery hands them on.

use std::{fs::File, path::PathBuf, sync::Arc};

use crate::procmaps::{Device, Mapping, MappingKind, ObjectKey};

/// The build-id every fixture mapping carries: files never share a table by it.
pub const BUILD_ID: [u8; 20] = [0xab; 20];

/// One file of `fixtures/bin/v1/x86_64`, opened, with a made-up identity.
#[derive(Clone)]
pub struct Fixture {
    pub key: ObjectKey,
    pub file: Arc<File>,
    pub path: PathBuf,
}

/// The file `fixtures/bin/v1/x86_64/NAME`, standing for the file with identity `inode`/`mtime`.
pub fn object(name: &str, inode: u64, mtime_ns: i128) -> Fixture {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/bin/v1/x86_64")
        .join(name);
    let file = Arc::new(File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
    Fixture {
        key: ObjectKey {
            device: Device { major: 8, minor: 1 },
            inode,
            size: file.metadata().expect("stat").len(),
            mtime_ns,
            ctime_ns: mtime_ns,
        },
        file,
        path,
    }
}

/// A mapping of `object` at `[start, start + 0x1000)` with bias `start`.
pub fn mapped(object: &Fixture, start: u64) -> Mapping {
    Mapping {
        start,
        end: start + 0x1000,
        file_offset: 0,
        path: object.path.clone(),
        deleted: false,
        device: object.key.device,
        inode: object.key.inode,
        kind: MappingKind::File {
            key: object.key.clone(),
            bias: start,
            build_id: Some(BUILD_ID.into()),
            file: Arc::clone(&object.file),
        },
    }
}
