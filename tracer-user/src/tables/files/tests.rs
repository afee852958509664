//! Unit tests of `tables::files`; each test says what it proves.

use super::*;
use crate::procmaps::Device;

fn key(inode: u64, ctime_ns: i128) -> ObjectKey {
    ObjectKey {
        device: Device { major: 259, minor: 1 },
        inode,
        size: 4096,
        mtime_ns: 1_700_000_000_123_456_789,
        ctime_ns,
    }
}

const SEGMENT: FileSegment = FileSegment {
    start: 0x1000,
    end: 0x5123,
    delta: 0,
};

/// A bound table's entry carries the file's kernel name and identity (times split into
/// seconds and nanoseconds as the inode keeps them) and is written once; its owner is known
/// until it is unbound, and unbinding deletes the entry the kernel has.
#[test]
fn bound_tables_are_written_then_deleted() {
    let mut files = FileTables::default();
    files.bind(7, 3, &key(42, 1_700_000_001_000_000_005), &[SEGMENT]);
    let changes = files.take_changes();
    assert_eq!(changes.removed, vec![]);
    let [(file, table)] = changes.set[..] else {
        panic!("one entry: {changes:?}")
    };
    assert_eq!(
        file,
        FileKey {
            dev: (259 << 20) | 1,
            _pad: 0,
            inode: 42
        }
    );
    assert_eq!((table.object, table.num_segments, table.size), (7, 1, 4096));
    assert_eq!((table.mtime_sec, table.mtime_nsec), (1_700_000_000, 123_456_789));
    assert_eq!((table.ctime_sec, table.ctime_nsec), (1_700_000_001, 5));
    assert_eq!(table.segments[0], SEGMENT);
    assert_eq!(files.owner(7), Some(3));
    assert_eq!(files.take_changes(), FileChanges::default(), "nothing new");
    files.unbind(7);
    assert_eq!(files.owner(7), None);
    assert_eq!(files.take_changes().removed, vec![file]);
}

/// A file changed in place and loaded again (same device and inode, another identity): its
/// entry names the new table, and unloading the old table leaves it.
#[test]
fn a_file_loaded_again_keeps_the_entry_of_its_newest_table() {
    let mut files = FileTables::default();
    files.bind(1, 0, &key(42, 1), &[SEGMENT]);
    files.take_changes();
    files.bind(2, 5, &key(42, 2), &[SEGMENT]);
    files.unbind(1);
    let changes = files.take_changes();
    assert_eq!(changes.removed, vec![]);
    assert_eq!(changes.set.len(), 1);
    assert_eq!((changes.set[0].1.object, changes.set[0].1.ctime_nsec), (2, 2));
    // Bound and unbound before any sync: the kernel never hears of it.
    files.bind(3, 6, &key(43, 1), &[SEGMENT]);
    files.unbind(3);
    assert_eq!(files.take_changes(), FileChanges::default());
}

/// A file without executable segments gets no entry (no VMA of it can hold code).
#[test]
fn files_without_code_are_not_bound() {
    let mut files = FileTables::default();
    files.bind(1, 0, &key(42, 1), &[]);
    assert_eq!(files.owner(1), None);
    assert_eq!(files.take_changes(), FileChanges::default());
}

/// The kernel's bias (`vm_start - vm_pgoff * page - delta` of the segment holding the
/// mapping's offset) agrees with userspace's (`procmaps::inspect`) for every executable
/// mapping of this test program and the libraries it maps (PIE and shared objects, whatever
/// their segment layout).
#[test]
fn segments_give_the_bias_discovery_computes() {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
    let mut checked = 0;
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || !f[1].contains('x') || !f[5].starts_with('/') {
            continue;
        }
        let (range, offset) = (f[0], u64::from_str_radix(f[2], 16).expect("offset"));
        let (start, end) = range.split_once('-').expect("range");
        let (start, end) = (
            u64::from_str_radix(start, 16).unwrap(),
            u64::from_str_radix(end, 16).unwrap(),
        );
        let Ok(file) = File::open(f[5]) else { continue };
        let data = object::ReadCache::new(File::open(f[5]).expect("open"));
        let facts = crate::procmaps::inspect(&data, start, end, offset).expect("inspect");
        let segments = exec_segments(&file, 4096);
        let segment = segments
            .iter()
            .find(|s| s.start <= offset && offset < s.end)
            .unwrap_or_else(|| panic!("no segment of {} holds {offset:#x}: {segments:?}", f[5]));
        assert_eq!(
            start.wrapping_sub(offset).wrapping_sub(segment.delta),
            facts.bias,
            "{line}"
        );
        checked += 1;
    }
    assert!(checked >= 2, "this program and libc at least: {checked}");
}

/// Not an ELF file: no segments.
#[test]
fn non_elf_files_have_no_segments() {
    let file = File::open("/proc/self/status").expect("open");
    assert!(exec_segments(&file, 4096).is_empty());
}
