//! Output files against what can be at their path.

use std::{io::Write as _, os::unix::fs::PermissionsExt as _};

use super::*;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("metadata").permissions().mode() & 0o7777
}

/// A new output is a 0600 temporary file beside the path until it is committed; then the path
/// holds it, mode 0600, and no temporary file is left.
#[test]
fn a_new_output_appears_complete_and_private() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("out.folded");
    let (mut file, placement) = create(&path).expect("create");
    let temp = dir.path().join(placement.temporary().expect("a temporary file"));
    assert!(temp.file_name().unwrap().as_bytes().starts_with(b".out.folded."));
    assert_eq!(mode(&temp), 0o600);
    assert!(!path.exists(), "the path is untouched until the output is complete");
    file.write_all(b"a;b 1\n").expect("write");
    placement.commit().expect("commit");
    assert_eq!(std::fs::read(&path).expect("read"), b"a;b 1\n");
    assert_eq!(mode(&path), 0o600);
    assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 1);
}

/// An output given up on leaves an existing file as it was and no temporary file.
#[test]
fn an_abandoned_output_keeps_the_old_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("old.folded");
    std::fs::write(&path, "old 1\n").expect("write");
    let (mut file, placement) = create(&path).expect("create");
    file.write_all(b"new").expect("write");
    drop(placement);
    assert_eq!(std::fs::read_to_string(&path).expect("read"), "old 1\n");
    assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 1);
}

/// A symbolic link, a FIFO (without blocking), a socket and a directory at the path are refused
/// with what they are; the link's target is untouched.
#[test]
fn links_and_special_files_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("precious");
    std::fs::write(&target, "precious").expect("write");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let fifo = dir.path().join("fifo");
    let c_fifo = CString::new(fifo.as_os_str().as_bytes()).expect("path");
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_fifo.as_ptr(), 0o666) }, 0);
    let socket = dir.path().join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
    for (path, what) in [
        (&link, "a symbolic link"),
        (&fifo, "a FIFO"),
        (&socket, "a socket"),
        (&dir.path().to_path_buf(), "a directory"),
    ] {
        let err = create(path).expect_err("refused");
        assert!(
            matches!(&err, OutputFileError::NotAFile { what: w, .. } if *w == what),
            "{}: {err}",
            path.display()
        );
    }
    assert_eq!(std::fs::read_to_string(&target).expect("read"), "precious");
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("list").count(),
        4,
        "no file created"
    );
}

/// A character device is written in place (here /dev/null), with nothing to rename.
#[test]
fn a_character_device_is_written_in_place() {
    let (mut file, placement) = create(Path::new("/dev/null")).expect("create");
    assert!(placement.temporary().is_none());
    file.write_all(b"anything").expect("write");
    placement.commit().expect("commit");
}
