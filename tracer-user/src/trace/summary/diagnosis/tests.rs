//! Unit tests of `trace::summary::diagnosis`; each test says what it proves.

use super::*;

/// Issue 31 (an empty profile came back silent): with no samples, one sentence says why and
/// what to do: a target that slept (-e offcpu), samples lost (the ring buffer), or too little
/// CPU time (longer, -F, doctor); a note about the targets (a thread or kernel thread) stands
/// for the generic one.
#[test]
fn an_empty_profile_says_why() {
    let slept = diagnose(&Evidence {
        idle: &[42],
        frequency: 99,
        ..Evidence::default()
    });
    assert_eq!(slept.len(), 1);
    assert!(
        slept[0].contains("pid 42 used no CPU") && slept[0].contains("-e offcpu"),
        "{slept:?}"
    );
    let lost = diagnose(&Evidence {
        lost: 9,
        frequency: 99,
        ..Evidence::default()
    });
    assert!(lost[0].contains("--ring-buffer-size"), "{lost:?}");
    let other = diagnose(&Evidence {
        frequency: 99,
        ..Evidence::default()
    });
    assert!(other[0].contains("-F 99") && other[0].contains("doctor"), "{other:?}");
    let notes = ["pid 5 (kworker/0:1) is a kernel thread: ...".to_owned()];
    let kthread = diagnose(&Evidence {
        target_notes: &notes,
        frequency: 99,
        ..Evidence::default()
    });
    assert_eq!(kthread, notes);
    let fine = diagnose(&Evidence {
        samples: 10,
        frequency: 99,
        ..Evidence::default()
    });
    assert!(fine.is_empty(), "{fine:?}");
}

/// Issue 31 (unnamed frames came back silent): JIT code without a perf map names the flags;
/// frames of objects without symbols name the objects and DEBUGINFOD_URLS when no server is
/// configured, the debug package otherwise.
#[test]
fn unnamed_frames_say_how_to_name_them() {
    let jit = diagnose(&Evidence {
        samples: 5,
        jit_processes: 2,
        perf_maps: 1,
        ..Evidence::default()
    });
    assert!(
        jit[0].starts_with("1 processes ran JIT") && jit[0].contains("--perf-basic-prof"),
        "{jit:?}"
    );
    let unnamed = [("/usr/lib/libz.so.1".to_owned(), 30)];
    let without = diagnose(&Evidence {
        samples: 30,
        unnamed: &unnamed,
        ..Evidence::default()
    });
    assert!(without[0].contains("/usr/lib/libz.so.1 (30 samples)"), "{without:?}");
    assert!(without[0].contains("DEBUGINFOD_URLS"), "{without:?}");
    let with = diagnose(&Evidence {
        samples: 30,
        unnamed: &unnamed,
        debuginfod: true,
        ..Evidence::default()
    });
    assert!(
        !with[0].contains("DEBUGINFOD_URLS") && with[0].contains("dbgsym"),
        "{with:?}"
    );
    // Where dpkg says which package owns the object, its debug package is named.
    let packages = [("/usr/lib/libz.so.1".to_owned(), "zlib1g".to_owned())];
    let named = diagnose(&Evidence {
        samples: 30,
        unnamed: &unnamed,
        debuginfod: true,
        packages: &packages,
        ..Evidence::default()
    });
    assert!(
        named[0].contains("install zlib1g-dbgsym (from Debian's debug archive") && !named[0].contains("dpkg -S"),
        "{named:?}"
    );
}

/// Objects whose unnamed frames are in fewer than 1 sample in 20 are not worth a sentence.
#[test]
fn rarely_seen_unnamed_objects_are_left_out() {
    let unnamed = [("/a.so".to_owned(), 10), ("/b.so".to_owned(), 4)];
    let said = diagnose(&Evidence {
        samples: 100,
        unnamed: &unnamed,
        ..Evidence::default()
    });
    assert_eq!(said.len(), 1);
    assert!(
        said[0].contains("/a.so (10 samples)") && !said[0].contains("/b.so"),
        "{said:?}"
    );
}
