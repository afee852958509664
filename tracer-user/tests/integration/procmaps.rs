//! Discovery on live processes: a PIE compiled here with the host gcc that prints `&main` and
//! waits, checked against `nm` and `readelf -n`; an exited pid; and the same program run from
//! a copy that is deleted while it runs (identified through `/proc/PID/map_files`, which needs
//! root: skipped loudly otherwise, failing under `CI=true`).

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use sframe_trace::procmaps::{Mapping, MappingKind, ProcError, executable_mappings};

use super::reader::compile;

/// Prints `&main` and waits; with an argument, first maps that file executable.
const WAITER: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc > 1 && mmap(0, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, open(argv[1], O_RDONLY), 0) == MAP_FAILED)
        return 1;
    printf("%p\n", (void *)&main);
    fflush(stdout);
    for (;;) pause();
}
"#;

/// A running program, killed and reaped on drop so failed assertions leave nothing behind.
struct Running {
    child: Child,
    /// Runtime address of `main`, as the program printed it.
    main: u64,
}

impl Running {
    fn start(path: &Path, args: &[&Path]) -> Self {
        // A file this process just wrote can be "busy" for a moment: a child another test
        // thread forks meanwhile holds the written descriptor until it execs.
        let mut attempts = 0;
        let mut child = loop {
            match Command::new(path).args(args).stdout(Stdio::piped()).spawn() {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && attempts < 50 => {
                    attempts += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                spawned => break spawned.expect("start the test program"),
            }
        };
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        BufReader::new(stdout).read_line(&mut line).expect("read &main");
        let main = u64::from_str_radix(line.trim().trim_start_matches("0x"), 16).expect("&main in hex");
        Running { child, main }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn waiter(dir: &Path) -> PathBuf {
    compile(dir, "waiter", WAITER, &["-fPIE", "-pie", "-Wl,--build-id"])
}

/// `nm`'s value of `main` in `path`.
fn nm_main(path: &Path) -> u64 {
    let out = Command::new("nm").arg(path).output().expect("run nm");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
            [value, "T", "main"] => u64::from_str_radix(value, 16).ok(),
            _ => None,
        })
        .expect("main in nm output")
}

/// The build-id `readelf -n` prints for `path`, in hex.
fn readelf_build_id(path: &Path) -> String {
    let out = Command::new("readelf")
        .arg("-n")
        .arg(path)
        .output()
        .expect("run readelf");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_owned))
        .expect("a build-id in readelf -n output")
}

fn containing(mappings: &[Mapping], pc: u64) -> &Mapping {
    mappings
        .iter()
        .find(|m| (m.start..m.end).contains(&pc))
        .expect("a mapping containing the pc")
}

fn build_id(mapping: &Mapping) -> (String, u64) {
    match &mapping.kind {
        MappingKind::File {
            build_id: Some(id),
            bias,
            ..
        } => (id.iter().map(|b| format!("{b:02x}")).collect(), *bias),
        other => panic!("{}: expected a build-id, got {other:?}", mapping.path.display()),
    }
}

/// The executable, libc and the vDSO are found; build-ids match readelf's; the executable's
/// bias is `&main` minus nm's `main`, so `pc - bias` is the file's own address.
#[test]
fn live_process_mappings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = waiter(dir.path());
    let running = Running::start(&exe, &[]);
    let mappings = executable_mappings(running.pid()).expect("mappings");

    let main_map = containing(&mappings, running.main);
    assert_eq!(main_map.path, exe);
    assert!(!main_map.deleted);
    let (id, bias) = build_id(main_map);
    assert_eq!(id, readelf_build_id(&exe));
    assert_eq!(running.main.wrapping_sub(bias), nm_main(&exe));
    assert_ne!(bias, 0, "a PIE is not loaded at its link address 0");

    let libc = mappings
        .iter()
        .find(|m| {
            m.path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libc.so"))
        })
        .expect("libc is mapped");
    let (libc_id, _) = build_id(libc);
    assert_eq!(libc_id, readelf_build_id(&libc.path));

    assert!(
        mappings.iter().any(|m| matches!(m.kind, MappingKind::Vdso)),
        "{mappings:?}"
    );
    assert!(mappings.windows(2).all(|w| w[0].end <= w[1].start), "sorted, disjoint");
}

/// A pid whose process exited and was reaped is `ProcError::Gone`.
#[test]
fn exited_process_is_gone() {
    let mut child = Command::new("true").spawn().expect("run true");
    let pid = child.id();
    child.wait().expect("wait for true");
    match executable_mappings(pid) {
        Err(ProcError::Gone { pid: gone }) => assert_eq!(gone, pid),
        other => panic!("expected Gone, got {other:?}"),
    }
}

/// An executable deleted while it runs is still identified (through map_files), marked
/// deleted, with the build-id and bias of the file it was started from.
#[test]
fn deleted_executable_resolves_through_map_files() {
    privileged_test!();
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = waiter(dir.path());
    let copy = dir.path().join("copy of waiter");
    std::fs::copy(&exe, &copy).expect("copy the executable");
    let running = Running::start(&copy, &[]);
    std::fs::remove_file(&copy).expect("delete the running copy");

    let mappings = executable_mappings(running.pid()).expect("mappings");
    let main_map = containing(&mappings, running.main);
    assert_eq!(main_map.path, copy);
    assert!(main_map.deleted);
    let (id, bias) = build_id(main_map);
    assert_eq!(id, readelf_build_id(&exe));
    assert_eq!(running.main.wrapping_sub(bias), nm_main(&exe));
}

/// A non-ELF file mapped executable is Unreadable with an ELF reason; the other mappings of
/// the process are still identified.
#[test]
fn non_elf_mapping_is_unreadable_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = waiter(dir.path());
    let data = dir.path().join("not-elf.bin");
    std::fs::write(&data, [0x90u8; 4096]).expect("write the data file");
    let running = Running::start(&exe, &[&data]);
    let mappings = executable_mappings(running.pid()).expect("mappings");
    let bad = mappings
        .iter()
        .find(|m| m.path == data)
        .expect("the data file is mapped");
    match &bad.kind {
        MappingKind::Unreadable { reason } => assert!(reason.to_string().contains("not an ELF"), "{reason}"),
        other => panic!("expected Unreadable, got {other:?}"),
    }
    build_id(containing(&mappings, running.main));
}
