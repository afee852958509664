//! The bounded reader on real files: only regular files, only the needed parts, within limits.

use std::io::Write as _;

use super::*;

/// The test binary's own file: its unwind sections come out byte for byte, and what is not
/// needed (its debug sections) reads as zero.
#[test]
fn reads_the_unwind_sections_and_not_the_rest() {
    let exe = std::env::current_exe().expect("own path");
    let whole = std::fs::read(&exe).expect("read own file");
    let image = read_object(&open_regular(&exe).expect("open")).expect("read");
    assert_eq!(image.len(), whole.len());
    let obj = object::File::parse(whole.as_slice()).expect("parse");
    use object::{Object as _, ObjectSection as _};
    let eh_frame = obj.section_by_name(".eh_frame").expect(".eh_frame");
    let (offset, size) = eh_frame.file_range().expect("in the file");
    let range = offset as usize..(offset + size) as usize;
    assert_eq!(&image[range.clone()], &whole[range]);
    let debug = obj
        .sections()
        .filter(|s| s.name().is_ok_and(|n| n.starts_with(".debug_info")))
        .find_map(|s| s.file_range());
    if let Some((offset, size)) = debug {
        let range = offset as usize..(offset + size) as usize;
        assert!(image[range.clone()].iter().all(|&b| b == 0), "debug info was read");
        assert!(whole[range].iter().any(|&b| b != 0));
    }
}

/// A FIFO, a directory and `/dev/zero` are refused without blocking or reading.
#[test]
fn refuses_non_regular_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fifo = dir.path().join("fifo");
    let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("name");
    // SAFETY: a NUL-terminated path; mkfifo only reads it.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    for path in [fifo.as_path(), dir.path(), Path::new("/dev/zero")] {
        match open_regular(path) {
            Err(ObjectFileError::NotRegular { .. }) => {}
            other => panic!("{}: {:?}", path.display(), other.map(|_| ())),
        }
    }
}

/// A sparse file claiming an executable segment of 1 GiB is too large, and is refused before
/// anything is read; one with its bulk in a part not needed is read quickly and cheaply.
#[test]
fn sparse_files_are_bounded() {
    let exe = std::env::current_exe().expect("own path");
    let whole = std::fs::read(&exe).expect("read own file");
    let dir = tempfile::tempdir().expect("temp dir");
    // The same program padded with a 2 GiB hole at its end: the parts needed are unchanged.
    let padded = dir.path().join("padded");
    let mut file = std::fs::File::create(&padded).expect("create");
    file.write_all(&whole).expect("write");
    file.set_len(whole.len() as u64 + (2 << 30)).expect("extend");
    let started = std::time::Instant::now();
    let image = read_object(&open_regular(&padded).expect("open")).expect("read");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(image.len() as u64, whole.len() as u64 + (2 << 30));
    // An ELF header whose executable segment spans the whole 2 GiB file.
    let mut header = whole[..64].to_vec();
    header[0x20..0x28].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
    header[0x36..0x38].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
    header[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
    header[0x28..0x30].copy_from_slice(&0u64.to_le_bytes()); // e_shoff
    header[0x3c..0x3e].copy_from_slice(&0u16.to_le_bytes()); // e_shnum
    let mut phdr = vec![0u8; 56];
    phdr[0..4].copy_from_slice(&1u32.to_le_bytes()); // PT_LOAD
    phdr[4..8].copy_from_slice(&5u32.to_le_bytes()); // PF_R | PF_X
    phdr[32..40].copy_from_slice(&(2u64 << 30).to_le_bytes()); // p_filesz
    let huge = dir.path().join("huge");
    let mut file = std::fs::File::create(&huge).expect("create");
    file.write_all(&header).expect("write");
    file.write_all(&phdr).expect("write");
    file.set_len(2 << 30).expect("extend");
    match read_object(&open_regular(&huge).expect("open")) {
        Err(ObjectFileError::TooLarge { needed, cap }) => assert!(needed > cap),
        other => panic!("{:?}", other.map(|i| i.len())),
    }
}
