//! The wrappers keep the guarantees of the calls they replace, and the session's settings are
//! made once.

use std::{ffi::CString, os::fd::AsFd as _, os::unix::ffi::OsStrExt as _};

/// `create_new_at` never opens what is already there: a symbolic link planted at the name is
/// `EEXIST` and its target is left as it was.
#[test]
fn create_new_at_refuses_a_planted_link() {
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("precious");
    std::fs::write(&target, "precious").expect("write");
    std::os::unix::fs::symlink(&target, dir.path().join("out")).expect("symlink");
    let c_dir = CString::new(dir.path().as_os_str().as_bytes()).expect("path");
    let opened = super::fs::open_at(None, &c_dir, libc::O_RDONLY | libc::O_DIRECTORY).expect("open dir");
    let err = super::fs::create_new_at(opened.as_fd(), c"out", 0o600).expect_err("a link is not created over");
    assert_eq!(err.raw_os_error(), Some(libc::EEXIST));
    assert_eq!(std::fs::read_to_string(&target).expect("read"), "precious");
    let file = super::fs::create_new_at(opened.as_fd(), c"new", 0o600).expect("a new name");
    let mode = super::fs::fstat(file.as_fd()).expect("fstat").st_mode & 0o777;
    assert_eq!(mode, 0o600, "the mode asked for");
}

/// `prepare` lifts the soft limit on open files to the hard one, and a second call changes
/// nothing and says the same.
#[test]
fn prepare_lifts_open_files_once() {
    let first = super::session::prepare();
    let (soft, hard) = super::limits::get(libc::RLIMIT_NOFILE).expect("getrlimit");
    assert_eq!(soft, hard);
    assert_eq!(super::session::prepare(), first);
    assert_eq!(super::session::memlock_left(), first.memlock_left);
}
