//! The parts named and the limits, on bytes: only the needed parts, each inside the file.

use object::{Object as _, ObjectSection as _};

use super::*;

/// The test binary's own bytes.
fn own_file() -> Vec<u8> {
    std::fs::read(std::env::current_exe().expect("own path")).expect("read own file")
}

/// Whether `range` lies inside one of `parts`.
fn covered(parts: &[(u64, u64)], (offset, size): (u64, u64)) -> bool {
    parts
        .iter()
        .any(|&(start, len)| start <= offset && offset + size <= start + len)
}

/// The unwind sections of this program are named, and its DWARF is not; for symbols, the
/// symbol table is named and the code is not.
#[test]
fn names_the_unwind_sections_and_not_the_rest() {
    let whole = own_file();
    let len = whole.len() as u64;
    let parts = bounded_parts(whole.as_slice(), len, Wanted::Unwind).expect("parts");
    assert!(
        parts.windows(2).all(|w| w[0].0 + w[0].1 < w[1].0),
        "merged and sorted: {parts:?}"
    );
    let obj = object::File::parse(whole.as_slice()).expect("parse");
    let range = |name: &str| obj.section_by_name(name).and_then(|s| s.file_range());
    assert!(covered(&parts, range(".eh_frame").expect(".eh_frame")));
    if let Some(debug) = range(".debug_info") {
        assert!(!covered(&parts, debug), "debug info is not needed for tables");
    }
    let symbols = bounded_parts(whole.as_slice(), len, Wanted::Symbols).expect("parts");
    assert!(covered(&symbols, range(".symtab").expect("a test program has .symtab")));
    assert!(
        !covered(&symbols, range(".text").expect(".text")),
        "code is not needed for symbols"
    );
}

/// A part past the end of the file is an error naming it, not a short read later.
#[test]
fn a_part_past_the_end_is_refused() {
    let whole = own_file();
    let obj = object::File::parse(whole.as_slice()).expect("parse");
    let (offset, size) = obj
        .section_by_name(".eh_frame")
        .and_then(|s| s.file_range())
        .expect(".eh_frame");
    let short = offset + size - 1;
    match bounded_parts(whole.as_slice(), short, Wanted::Unwind) {
        Err(ObjectFileError::OutOfFile { file_len, .. }) => assert_eq!(file_len, short),
        other => panic!("{other:?}"),
    }
}

/// A file larger than the limit, and a header whose executable segment spans 2 GiB, are too
/// large before anything but the headers is read.
#[test]
fn large_objects_are_refused() {
    match bounded_parts(&[0u8; 64][..], MAX_OBJECT_SIZE + 1, Wanted::Unwind) {
        Err(ObjectFileError::TooLarge { needed, cap }) => {
            assert_eq!((needed, cap), (MAX_OBJECT_SIZE + 1, MAX_OBJECT_SIZE))
        }
        other => panic!("{other:?}"),
    }
    let mut file = own_file()[..64].to_vec();
    file[0x20..0x28].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
    file[0x36..0x38].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
    file[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
    file[0x28..0x30].copy_from_slice(&0u64.to_le_bytes()); // e_shoff
    file[0x3c..0x3e].copy_from_slice(&0u16.to_le_bytes()); // e_shnum
    let mut phdr = vec![0u8; 56];
    phdr[0..4].copy_from_slice(&1u32.to_le_bytes()); // PT_LOAD
    phdr[4..8].copy_from_slice(&5u32.to_le_bytes()); // PF_R | PF_X
    phdr[32..40].copy_from_slice(&(2u64 << 30).to_le_bytes()); // p_filesz
    file.extend(phdr);
    match bounded_parts(file.as_slice(), 2 << 30, Wanted::Unwind) {
        Err(ObjectFileError::TooLarge { needed, cap }) => assert!(needed > cap && cap == MAX_OBJECT_READ),
        other => panic!("{other:?}"),
    }
}

/// What is not ELF names only its first bytes (the readers then say what it is not).
#[test]
fn not_elf_is_its_first_bytes() {
    let parts = bounded_parts(&b"#!/bin/sh\necho hi\n"[..], 4096, Wanted::Unwind).expect("parts");
    assert_eq!(parts, [(0, 64)]);
}
