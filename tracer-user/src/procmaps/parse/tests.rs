//! Unit tests of the `/proc/PID/maps` parser on hand-written lines in the kernel's format.

use std::path::PathBuf;

use super::{Backing, MapsEntry, ParseError, parse_maps};
use crate::procmaps::Device;

fn one(line: &str) -> MapsEntry {
    let mut entries = parse_maps(line).expect("parse");
    assert_eq!(entries.len(), 1, "{line}");
    entries.remove(0)
}

fn file(path: &str, deleted: bool) -> Backing {
    Backing::File {
        path: PathBuf::from(path),
        deleted,
    }
}

/// A file mapping yields every field: range, offset, device (hex), inode (decimal), path.
#[test]
fn file_mapping_fields() {
    let e = one("7f12a000-7f12c000 r-xp 00002000 fd:01 123456   /usr/lib/libc.so.6\n");
    assert_eq!(
        e,
        MapsEntry {
            start: 0x7f12_a000,
            end: 0x7f12_c000,
            file_offset: 0x2000,
            device: Device { major: 0xfd, minor: 1 },
            inode: 123_456,
            shared: false,
            backing: file("/usr/lib/libc.so.6", false),
        }
    );
}

/// Only executable mappings are kept, in file order; blank lines are skipped.
#[test]
fn keeps_only_executable() {
    let text = "\
5562c0cc9000-5562c0ccb000 r--p 00000000 fe:00 247030                     /usr/bin/cat
5562c0ccb000-5562c0cd0000 r-xp 00002000 fe:00 247030                     /usr/bin/cat

5562e8354000-5562e8375000 rw-p 00000000 00:00 0                          [heap]
7fb32ba04000-7fb32bb5a000 r-xp 00026000 fe:00 326279                     /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd1c5f0000-7ffd1c611000 rw-p 00000000 00:00 0                          [stack]
";
    let starts: Vec<u64> = parse_maps(text).expect("parse").iter().map(|e| e.start).collect();
    assert_eq!(starts, [0x5562_c0cc_b000, 0x7fb3_2ba0_4000]);
}

/// Spaces inside a path are part of it; the ` (deleted)` suffix becomes a flag.
#[test]
fn paths_with_spaces_and_deleted() {
    let e = one("1000-2000 r-xp 00000000 08:02 77  /opt/my app/bin x (deleted)");
    assert_eq!(e.backing, file("/opt/my app/bin x", true));
    let e = one("1000-2000 r-xp 00000000 08:02 77  /opt/my app/bin x ");
    assert_eq!(e.backing, file("/opt/my app/bin x ", false));
}

/// A newline in a path, escaped by the kernel as `\012`, is restored.
#[test]
fn escaped_newline() {
    let e = one(r"1000-2000 r-xp 00000000 08:02 77 /tmp/a\012b");
    assert_eq!(e.backing, file("/tmp/a\nb", false));
}

/// memfd files are files, always deleted; their name keeps the `memfd:` prefix.
#[test]
fn memfd() {
    let e = one("7f0000000000-7f0000001000 r-xs 00000000 00:01 2049 /memfd:jit-code (deleted)");
    assert_eq!(e.backing, file("/memfd:jit-code", true));
    assert!(e.shared);
}

/// Anonymous mappings (even with the kernel's trailing space) and pseudo names are told apart.
#[test]
fn anonymous_and_pseudo() {
    let anon = one("7fb32b959000-7fb32b97b000 rwxp 00000000 00:00 0 ");
    assert_eq!(anon.backing, Backing::Anonymous);
    let vdso = one("7ffd1c7e9000-7ffd1c7eb000 r-xp 00000000 00:00 0                          [vdso]");
    assert_eq!(vdso.backing, Backing::Pseudo("[vdso]".into()));
    let vsyscall = one("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]");
    assert_eq!(vsyscall.backing, Backing::Pseudo("[vsyscall]".into()));
    assert_eq!(vsyscall.end, 0xffff_ffff_ff60_1000);
    let named = one("7f00-8f00 r-xp 00000000 00:00 0 [anon:v8 code]");
    assert_eq!(named.backing, Backing::Pseudo("[anon:v8 code]".into()));
}

/// Devices with a major number above 0xff (printed wider than two digits) parse.
#[test]
fn wide_device() {
    let e = one("1000-2000 r-xp 00000000 103:0a 5 /lib/x.so");
    assert_eq!(
        e.device,
        Device {
            major: 0x103,
            minor: 0xa
        }
    );
}

/// Malformed lines, executable or not, are an error naming the line and field.
#[test]
fn malformed_lines() {
    let good = "1000-2000 r-xp 00000000 08:02 77 /bin/x\n";
    let cases: [(&str, ParseError); 8] = [
        ("1000 r-xp 0 08:02 77", bad("address range", "1000")),
        ("2000-1000 r-xp 0 08:02 77", bad("address range", "2000-1000")),
        ("1000-+2000 r-xp 0 08:02 77", bad("address range", "1000-+2000")),
        ("1000-2000 r-xq 0 08:02 77", bad("permissions", "r-xq")),
        ("1000-2000 r-x 0 08:02 77", bad("permissions", "r-x")),
        ("1000-2000 r--p zz 08:02 77", bad("offset", "zz")),
        ("1000-2000 r-xp 0 0802 77", bad("device", "0802")),
        ("1000-2000 r-xp 0 08:02 -1", bad("inode", "-1")),
    ];
    for (line, expected) in cases {
        assert_eq!(parse_maps(format!("{good}{line}\n")), Err(expected), "{line}");
    }
    assert_eq!(
        parse_maps("1000-2000 r-xp 0 08:02"),
        Err(ParseError::MissingField {
            line: 1,
            field: "inode"
        })
    );
}

fn bad(field: &'static str, value: &str) -> ParseError {
    ParseError::BadField {
        line: 2,
        field,
        value: value.into(),
    }
}

/// Regression (a mapped file whose name is not UTF-8 made the whole process untraceable): the
/// path comes through as the bytes the kernel printed, a newline escape undone, and the other
/// lines are unaffected.
#[test]
fn non_utf8_paths_are_bytes() {
    use std::os::unix::ffi::OsStrExt as _;
    let text = b"1000-2000 r-xp 00000000 fd:01 7 /tmp/lib\xff\xfe\\012x.so\n\
                 3000-4000 r-xp 00000000 fd:01 8 /usr/lib/libc.so.6\n";
    let entries = parse_maps(text).expect("parse");
    assert_eq!(entries.len(), 2);
    match &entries[0].backing {
        Backing::File { path, deleted: false } => assert_eq!(path.as_os_str().as_bytes(), b"/tmp/lib\xff\xfe\nx.so"),
        other => panic!("{other:?}"),
    }
    assert_eq!(entries[1].backing, file("/usr/lib/libc.so.6", false));
    // A field before the path that is not ASCII is an error naming the line, not a panic.
    assert!(matches!(
        parse_maps(b"1000-2000 r-xp 0000\xff000 fd:01 7 /x\n"),
        Err(ParseError::BadField { line: 1, .. })
    ));
}
