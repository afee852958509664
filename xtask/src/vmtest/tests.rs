//! The pure parts of the kernel matrix: naming and resolving kernel packages, the guest's
//! command line and script, the initramfs archive, the report and the table of docs/kernels.md,
//! the tests' progress and the watchdog (with a stand-in guest: a shell that hangs).

use std::{
    path::Path,
    time::{Duration, Instant},
};

use super::{
    arch::GuestArch,
    guest, initramfs, kernel,
    progress::Progress,
    report::{self, BEGIN, END, Outcome, Row},
};

/// The release comes from the `Depends:` line that names a versioned image, not a recommends.
#[test]
fn release_is_read_from_apt_cache_depends() {
    let depends = "linux-image-amd64\n  Recommends: firmware-linux-free\n  Depends: linux-image-6.1.0-41-amd64\n";
    assert_eq!(kernel::release_from_depends(depends).as_deref(), Some("6.1.0-41-amd64"));
    let trixie = "linux-image-amd64\n  Depends: linux-image-6.12.57+deb13-amd64\n";
    assert_eq!(
        kernel::release_from_depends(trixie).as_deref(),
        Some("6.12.57+deb13-amd64")
    );
    assert_eq!(
        kernel::release_from_depends("linux-image-amd64\n  Depends: linux-base\n"),
        None
    );
}

/// A release names its image, binary and modules packages; suites and releases are told apart.
#[test]
fn package_names_of_a_release() {
    assert_eq!(
        kernel::package_candidates("7.2.0-1-amd64"),
        [
            "linux-image-7.2.0-1-amd64",
            "linux-binary-7.2.0-1-amd64",
            "linux-modules-7.2.0-1-amd64"
        ]
    );
    assert!(kernel::is_release("5.10.0-35-amd64"));
    assert!(!kernel::is_release("bullseye"));
}

/// The kernel command line carries the three paths for the guest init, and refuses a path
/// with a space (the kernel would split it).
#[test]
fn guest_command_line() {
    let line = guest::command_line(
        "ttyS0",
        Path::new("/r/target/vm-test/sid"),
        Path::new("/r"),
        Path::new("/c/kernels/7.2"),
    )
    .unwrap();
    assert!(line.starts_with("console=ttyS0 panic=-1 "));
    assert!(
        line.ends_with(
            " sframe_trace.run=/r/target/vm-test/sid sframe_trace.repo=/r sframe_trace.kernel=/c/kernels/7.2"
        )
    );
    assert!(guest::command_line("ttyS0", Path::new("/a b"), Path::new("/r"), Path::new("/k")).is_err());
    let arm = guest::command_line("ttyAMA0", Path::new("/r/x"), Path::new("/r"), Path::new("/k")).unwrap();
    assert!(arm.starts_with("console=ttyAMA0 panic=-1 "));
}

/// An aarch64 guest gets the `virt` board and a CPU with pointer authentication under
/// emulation, the host's CPU under kvm; x86-64 keeps q35.
#[test]
fn machine_arguments_per_architecture() {
    let arm = GuestArch::Aarch64.machine_args("tcg");
    assert_eq!(arm, ["-M", "virt", "-accel", "tcg", "-cpu", "max,pauth-impdef=on"]);
    assert_eq!(GuestArch::Aarch64.machine_args("kvm")[5], "host");
    assert_eq!(GuestArch::X86_64.machine_args("tcg")[1], "q35");
    assert_eq!(GuestArch::Aarch64.qemu().0, "qemu-system-aarch64");
}

/// The name a guest architecture is given to `--arch` is the one `cargo xtask dist` stages
/// its executable under (the background guests of `cargo xtask test` pass it to both).
#[test]
fn architecture_names_are_those_of_vm_test_and_dist() {
    for arch in [GuestArch::X86_64, GuestArch::Aarch64] {
        let parsed = <GuestArch as clap::ValueEnum>::from_str(arch.dist_name(), false);
        assert_eq!(parsed, Ok(arch));
        assert!(crate::dist::arch(arch.dist_name()).is_ok(), "{}", arch.dist_name());
    }
}

/// qemu option values double their commas; shell words are quoted only when they must be.
#[test]
fn quoting_for_qemu_and_the_shell() {
    assert_eq!(guest::qemu_value(Path::new("/x,y")), "/x,,y");
    assert_eq!(guest::shell_quote("walker::"), "walker::");
    assert_eq!(guest::shell_quote("it's"), "'it'\\''s'");
    assert_eq!(guest::shell_quote(""), "''");
    let script = guest::command_script(
        &[("PATH".to_owned(), "/usr/bin:/bin".to_owned())],
        Path::new("/r"),
        &["/r/t".to_owned(), "a b".to_owned()],
    );
    assert!(
        script.ends_with("export PATH=/usr/bin:/bin\ncd /r || exit 125\nexec /r/t 'a b'\n"),
        "{script}"
    );
}

/// modprobe's plan gives each module file once, in load order; built-ins add nothing.
#[test]
fn boot_modules_from_modprobe_plans() {
    let plans = [
        "builtin virtio_pci\n".to_owned(),
        "insmod /k/net/9p/9pnet.ko \ninsmod /k/net/9p/9pnet_virtio.ko \n".to_owned(),
        "insmod /k/net/9p/9pnet.ko \ninsmod /k/fs/netfs/netfs.ko.xz \ninsmod /k/fs/9p/9p.ko.xz \n".to_owned(),
    ];
    assert_eq!(
        initramfs::insmod_paths(&plans),
        [
            "/k/net/9p/9pnet.ko",
            "/k/net/9p/9pnet_virtio.ko",
            "/k/fs/netfs/netfs.ko.xz",
            "/k/fs/9p/9p.ko.xz"
        ]
    );
    assert_eq!(initramfs::module_name(3, "/k/fs/9p/9p.ko.xz"), "03-9p.ko");
}

/// A newc entry: the 110-byte header with hex fields, the name NUL-terminated and padded to 4
/// bytes, the data padded to 4; the archive ends with its trailer.
#[test]
fn cpio_newc_layout() {
    let mut cpio = initramfs::Cpio::default();
    cpio.file("init", 0o755, b"hello");
    let bytes = cpio.finish();
    let header = std::str::from_utf8(&bytes[..110]).unwrap();
    assert_eq!(&header[..6], "070701");
    let field = |i: usize| u32::from_str_radix(&header[6 + 8 * i..14 + 8 * i], 16).unwrap();
    assert_eq!(field(1), 0o100_755, "mode");
    assert_eq!(field(6), 5, "file size");
    assert_eq!(field(11), 5, "name size with its NUL");
    assert_eq!(&bytes[110..115], b"init\0");
    assert_eq!(&bytes[116..121], b"hello", "name padded to 116");
    assert_eq!(&bytes[121..124], &[0, 0, 0], "data padded to 124");
    assert_eq!(&bytes[124..130], b"070701");
    assert_eq!(&bytes[234..245], b"TRAILER!!!\0");
    assert_eq!(bytes.len() % 4, 0);
}

/// busybox must have no program interpreter: a real static and a real dynamic binary.
#[test]
fn static_elf_is_recognised() {
    let dynamic = std::fs::read("/bin/sh").unwrap();
    assert!(!super::is_static(&dynamic));
    assert!(!super::is_static(b"#!/bin/sh\n"));
    let mut elf = vec![0u8; 0x40 + 56];
    elf[..5].copy_from_slice(b"\x7fELF\x02");
    elf[0x20] = 0x40; // program headers right after the ELF header
    elf[0x36] = 56;
    elf[0x38] = 1;
    elf[0x40] = 1; // PT_LOAD
    assert!(super::is_static(&elf));
    elf[0x40] = 3; // PT_INTERP
    assert!(!super::is_static(&elf));
}

/// libtest's summary gives the counts; a run without one (a boot failure) gives none.
#[test]
fn test_counts_from_libtest() {
    let ok = "running 16 tests\ntest result: ok. 16 passed; 0 failed; 0 ignored; 0 measured; 180 filtered out; finished in 212.5s\n";
    assert_eq!(report::test_counts(ok).as_deref(), Some("16 passed"));
    let bad = "test result: FAILED. 12 passed; 1 failed; 0 ignored; 0 measured; 183 filtered out\n";
    assert_eq!(report::test_counts(bad).as_deref(), Some("12 passed, 1 failed"));
    assert_eq!(report::test_counts("vmlinuz: panic\n"), None);
}

/// Calendar dates of epoch seconds, leap days included.
#[test]
fn dates_of_epoch_seconds() {
    assert_eq!(report::date(0), "1970-01-01");
    assert_eq!(report::date(951_782_400), "2000-02-29");
    assert_eq!(report::date(1_795_478_400), "2026-11-24");
}

/// Rewriting the kernel table replaces the rows of the kernels run, keeps the others with their own
/// date and commit, orders by kernel version, and leaves the text around the markers alone.
#[test]
fn kernel_table_is_rewritten_between_markers() {
    let old_rows = [
        Row::new(
            "bullseye",
            "5.10.0-35-amd64",
            &Outcome::Exited(0),
            "",
            "2026-11-21",
            "62509c0",
        ),
        Row::new(
            "bookworm",
            "6.1.0-41-amd64",
            &Outcome::Exited(0),
            "",
            "2026-11-21",
            "62509c0",
        ),
    ];
    let doc = format!("intro\n{BEGIN}\n{}{END}\nafter\n", report::table(&old_rows));
    let output = "test result: FAILED. 15 passed; 1 failed; 0 ignored\n";
    let new = [Row::new(
        "bookworm",
        "6.1.0-42-amd64",
        &Outcome::Exited(101),
        output,
        "2026-11-24",
        "abc1234",
    )];
    let rewritten = report::rewrite_table(&doc, &new).unwrap();
    assert_eq!(
        rewritten,
        format!(
            "intro\n{BEGIN}\n| kernel | result | tests | date | commit |\n|---|---|---|---|---|\n\
             | 5.10 (bullseye) | pass | - | 2026-11-21 | 62509c0 |\n\
             | 6.1 (bookworm) | fail (exit status 101) | 15 passed, 1 failed | 2026-11-24 | abc1234 |\n{END}\nafter\n"
        )
    );
    assert_eq!(
        report::rewrite_table(&rewritten, &new).unwrap(),
        rewritten,
        "idempotent"
    );
    assert_eq!(report::rewrite_table("no markers", &new), None);
    let timeout = Row::new("sid", "7.2.0-1-amd64", &Outcome::Timeout, "", "d", "c");
    assert!(report::report(&[timeout]).contains("| 7.2 (sid) | timeout | - | d | c |"));
}

/// The table `cargo xtask vm-test` writes is in docs/kernels.md, between its markers, with a row
/// per kernel that parses back; the README no longer holds one (a rewrite there would fail).
#[test]
fn kernel_table_lives_in_docs_kernels() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(root.join(report::KERNELS_DOC)).expect("read docs/kernels.md");
    let start = doc.find(BEGIN).expect("docs/kernels.md has the table's first marker");
    let end = doc.find(END).expect("docs/kernels.md has the table's last marker");
    assert!(start < end, "the markers of docs/kernels.md are in order");
    let rows: Vec<Row> = doc[start..end].lines().filter_map(Row::parse).collect();
    assert!(
        !rows.is_empty(),
        "the kernel table of docs/kernels.md has rows:\n{}",
        &doc[start..end]
    );
    assert_eq!(
        report::rewrite_table(&doc, &rows).as_deref(),
        Some(doc.as_str()),
        "its own rows rewrite it unchanged"
    );
    let readme = std::fs::read_to_string(root.join("README.md")).expect("read README.md");
    assert!(!readme.contains(BEGIN), "README.md holds no generated kernel table");
}

/// Each test's time runs from libtest naming it to its result, on the host's clock, also
/// when the test's own output leaks between its name and its result.
#[test]
fn progress_times_each_test_from_its_name_to_its_result() {
    let t0 = Instant::now();
    let at = |secs| t0 + Duration::from_secs(secs);
    let mut progress = Progress::new(t0);
    assert!(
        progress
            .feed("\nrunning 2 tests\ntest events::a ... ", at(1))
            .is_empty()
    );
    assert_eq!(progress.feed("ok\n", at(4)), ["vm-test: events::a: ok in 3 s"]);
    assert!(progress.feed("test dist::b ... demo: done (1", at(5)).is_empty());
    assert!(progress.feed("5)\n", at(6)).is_empty());
    assert_eq!(
        progress.feed("FAILED\ntest c::d ... ignored, needs root\n", at(12)),
        [
            "vm-test: dist::b: FAILED in 7 s",
            "vm-test: c::d: ignored, needs root in 0 s"
        ]
    );
}

/// The watchdog names the test that printed nothing for its time, and the boot or set-up when
/// no test has started; output of any kind resets it.
#[test]
fn progress_names_what_a_quiet_guest_is_stuck_in() {
    let t0 = Instant::now();
    let at = |secs| t0 + Duration::from_secs(secs);
    let limit = Duration::from_secs(60);
    let mut progress = Progress::new(t0);
    assert_eq!(progress.stuck(at(59), limit), None);
    let boot = progress.stuck(at(60), limit).expect("stuck before any test");
    assert!(boot.contains("no test running"), "{boot}");
    progress.feed("test trace::sframe_v3_workloads_unwind_exactly ... ", at(70));
    assert_eq!(progress.stuck(at(129), limit), None);
    let stuck = progress.stuck(at(130), limit).expect("stuck in the test");
    assert!(
        stuck.starts_with("test trace::sframe_v3_workloads_unwind_exactly printed nothing for 60 s"),
        "{stuck}"
    );
    progress.feed("ok\n", at(200));
    assert_eq!(progress.stuck(at(259), limit), None);
}

/// Regression (a guest test ran silently for 30 minutes): a guest whose test prints nothing is
/// stopped by the watchdog, within its time, with the test's name; the guest here is a shell
/// that names a test as libtest does and then hangs, watched by the code that watches qemu.
#[test]
fn a_stuck_guest_test_ends_with_its_name_within_the_watchdog() {
    let dir = std::env::temp_dir().join(format!("vmtest-watchdog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let output = dir.join("output.log");
    let mut guest = std::process::Command::new("sh")
        .arg("-c")
        .arg("printf 'running 2 tests\\ntest fake::quick ... ok\\ntest fake::stuck ... ' > \"$1\"; exec sleep 120")
        .arg("sh")
        .arg(&output)
        .spawn()
        .expect("start the stand-in guest");
    let watchdog = Duration::from_secs(3);
    let limits = guest::Limits {
        timeout: Duration::from_secs(120),
        watchdog,
        poll: Duration::from_millis(100),
    };
    let started = Instant::now();
    let mut copied = Vec::new();
    let watched = guest::watch(&mut guest, &output, limits, &mut copied).expect("watch the guest");
    let took = started.elapsed();
    let _ = std::fs::remove_dir_all(&dir);
    let guest::Watched::Stuck(what) = watched else {
        panic!("the stuck guest was not stopped by the watchdog: {watched:?}");
    };
    assert!(what.starts_with("test fake::stuck printed nothing"), "{what}");
    assert!(
        took >= watchdog,
        "stopped after {took:?}, before the watchdog's {watchdog:?}"
    );
    assert!(
        took < watchdog + Duration::from_secs(10),
        "stopped after {took:?}, long after the watchdog's {watchdog:?}"
    );
    assert!(
        guest.try_wait().expect("the guest's status").is_some(),
        "the guest still runs"
    );
    assert!(String::from_utf8_lossy(&copied).contains("test fake::quick ... ok"));
}

/// A guest that ends by itself is watched to its end, its whole output copied, each test's
/// time said after its line.
#[test]
fn a_guest_that_exits_is_watched_to_its_end() {
    let dir = std::env::temp_dir().join(format!("vmtest-exits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let output = dir.join("output.log");
    let mut guest = std::process::Command::new("sh")
        .arg("-c")
        .arg("printf 'test fake::a ... ok <0.250s>\\n' > \"$1\"")
        .arg("sh")
        .arg(&output)
        .spawn()
        .expect("start the stand-in guest");
    let limits = guest::Limits {
        timeout: Duration::from_secs(120),
        watchdog: Duration::from_secs(60),
        poll: Duration::from_millis(50),
    };
    let mut copied = Vec::new();
    let watched = guest::watch(&mut guest, &output, limits, &mut copied).expect("watch the guest");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(watched, guest::Watched::Exited);
    assert_eq!(
        String::from_utf8_lossy(&copied),
        "test fake::a ... ok <0.250s>\nvm-test: fake::a: ok in 0.250 s\n"
    );
}
