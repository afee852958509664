use std::os::unix::fs::FileExt as _;

use object::{Object as _, ObjectSection as _, ObjectSymbol as _};

use super::*;

const EXT4: i64 = 0xef53;
const FUSE: i64 = 0x6573_5546;

/// Only root's files that only root may write, on a local file system, are mapped as they are.
#[test]
fn who_may_change_a_file() {
    assert!(!changeable(0, 0o100755, EXT4));
    assert!(!changeable(0, 0o100644, EXT4));
    assert!(changeable(1000, 0o100755, EXT4), "another owner");
    assert!(changeable(0, 0o100775, EXT4), "group-writable");
    assert!(changeable(0, 0o100757, EXT4), "writable by others");
    assert!(changeable(0, 0o100755, FUSE), "served by a FUSE process");
    assert!(changeable(0, 0o100755, 0x6969), "NFS");
}

/// The copy of this test program: as long as the file, the same symbols and sections that
/// are not loaded, no code, and sealed (it can neither shrink nor be written).
#[test]
fn a_sealed_copy_has_the_symbols_and_cannot_change() {
    let path = std::env::current_exe().expect("this test program");
    let original = File::open(&path).expect("open");
    let copy = sealed_copy(&original).expect("copy");
    let len = original.metadata().expect("stat").len();
    assert_eq!(copy.metadata().expect("stat the copy").len(), len);
    let bytes = std::fs::read(&path).expect("read");
    let mut copied = vec![0; len as usize];
    copy.read_exact_at(&mut copied, 0).expect("read the copy");
    let (was, is) = (
        object::File::parse(bytes.as_slice()).expect("ELF"),
        object::File::parse(copied.as_slice()).expect("the copy is ELF"),
    );
    let names = |f: &object::File| -> Vec<(String, u64)> {
        f.symbols()
            .filter_map(|s| Some((s.name().ok()?.to_owned(), s.address())))
            .collect()
    };
    assert!(names(&was).len() > 100, "a test program has a symbol table");
    assert_eq!(names(&was), names(&is));
    let text = is.section_by_name(".text").expect(".text");
    assert!(text.data().expect("text").iter().all(|&b| b == 0), "code is not copied");
    for name in [".symtab", ".strtab", ".debug_info", ".note.gnu.build-id"] {
        if let Some(section) = was.section_by_name(name) {
            let copy = is.section_by_name(name).expect("the section");
            assert_eq!(section.data().ok(), copy.data().ok(), "{name}");
        }
    }
    assert!(copy.set_len(0).is_err(), "shrinking a sealed copy");
    assert!(copy.set_len(len + 4096).is_err(), "growing a sealed copy");
    assert!(copy.write_all_at(b"x", 0).is_err(), "writing a sealed copy");
}

/// What is not an ELF file within bounds is not copied.
#[test]
fn only_elf_files_are_copied() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = dir.path().join("text");
    std::fs::write(&text, b"not an object file").expect("write");
    assert!(sealed_copy(&File::open(&text).expect("open")).is_err());
    assert!(sealed_copy(&File::open(dir.path()).expect("open the directory")).is_err());
}
