//! Which mapped file names are looked at for an interpreter.

use super::interpreter_name;

#[test]
fn interpreter_names() {
    for name in [
        "python3.11",
        "python3",
        "libpython3.13.so.1.0",
        "python3.12d",
        "libpython2.7.so",
        "python2.7",
    ] {
        assert!(interpreter_name(name), "{name}");
    }
    for name in ["libc.so.6", "perl", "mypython3", "node"] {
        assert!(!interpreter_name(name), "{name}");
    }
}
