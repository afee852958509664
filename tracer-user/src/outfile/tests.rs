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
    crate::sys::fs::mkfifo(&c_fifo, 0o666).expect("mkfifo");
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

/// `SUDO_UID`/`SUDO_GID` give the outputs to the user who ran sudo only when root runs the
/// tracer and both are plain ids: a sign, a space, `-1` (`u32::MAX`, "leave it" to chown), an
/// overflow or one of the two alone is refused and the outputs stay root's.
#[test]
fn sudo_ids_are_checked() {
    let owner = |euid, uid, gid| Access::for_sudo(euid, uid, gid, 0o600);
    assert_eq!(owner(0, Some("1000"), Some("100")).0.owner, Some((1000, 100)));
    assert_eq!(owner(1000, Some("1000"), Some("100")), (Access::default(), None));
    assert_eq!(owner(0, None, None), (Access::default(), None));
    assert_eq!(owner(0, Some("0"), Some("0")), (Access::default(), None));
    for (uid, gid) in [
        ("-1", "100"),
        ("1000", "4294967295"),
        ("+1000", "100"),
        (" 1000", "100"),
        ("1000", "99999999999"),
        ("1000x", "100"),
        ("", "100"),
    ] {
        let (access, refused) = owner(0, Some(uid), Some(gid));
        assert_eq!(access.owner, None, "{uid} {gid}");
        assert!(
            matches!(refused, Some(SudoIdsError::NotAnId { .. })),
            "{uid} {gid}: {refused:?}"
        );
    }
    assert_eq!(owner(0, Some("1000"), None).1, Some(SudoIdsError::Half));
}

/// A file created for a user and mode is theirs with that mode from its creation (the
/// temporary file), whatever the umask, and stays so once in place.
#[test]
fn an_output_for_a_user_is_theirs() {
    use std::os::unix::fs::MetadataExt as _;
    let root = crate::sys::process::effective_uid() == 0;
    if !root {
        eprintln!("an_output_for_a_user_is_theirs: chown needs root; only the mode is checked");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("out.svg");
    let access = Access {
        owner: root.then_some((65534, 65533)),
        mode: 0o644,
    };
    let (mut file, placement) = create_for(&path, &access).expect("create");
    let temp = dir.path().join(placement.temporary().expect("a temporary file"));
    assert_eq!(mode(&temp), 0o644);
    file.write_all(b"<svg/>").expect("write");
    placement.commit().expect("commit");
    let meta = std::fs::metadata(&path).expect("metadata");
    assert_eq!(meta.mode() & 0o7777, 0o644);
    if root {
        assert_eq!((meta.uid(), meta.gid()), (65534, 65533));
    }
}
