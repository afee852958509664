//! What the tracer reads, and how much: files that are not files or are huge, given to `dump`
//! and `check` or mapped by a traced process, are refused or bounded; file names that are not
//! UTF-8 are traced like any other; and a traced object is reached by a path once per session.

use std::{
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use super::{
    Verdicts, chain_of, compile,
    files::{mapping, trace_bounded},
    read_folded,
};
use crate::support::{Running, tracer_binary};

/// Regression (`dump` and `check` read a whole file before looking at it: `/dev/zero` grew
/// without bound, a FIFO hung): a device, a FIFO and a directory are refused at once, and a
/// program padded to 4 GiB of sparse file is read in bounded time and memory.
#[test]
fn dump_and_check_refuse_what_is_not_a_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().expect("mkfifo").success());
    let padded = dir.path().join("padded");
    std::fs::copy(tracer_binary(), &padded).expect("copy");
    let file = std::fs::OpenOptions::new().write(true).open(&padded).expect("open");
    file.set_len(file.metadata().expect("stat").len() + (4 << 30))
        .expect("extend");
    let run = |args: &[&str], path: &Path| {
        let started = Instant::now();
        let out = Command::new(tracer_binary())
            .args(args)
            .arg(path)
            .stdout(Stdio::null())
            .output()
            .expect("run sframe-trace");
        (out, started.elapsed())
    };
    for command in [&["dump"][..], &["check"], &["dump", "--source", "eh_frame"]] {
        for (path, kind) in [
            (Path::new("/dev/zero"), "character device"),
            (fifo.as_path(), "FIFO"),
            (dir.path(), "directory"),
        ] {
            let (out, took) = run(command, path);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{command:?} {}: {stderr}", path.display());
            assert!(stderr.contains(&format!("not a regular file (a {kind})")), "{stderr}");
            assert!(
                took < Duration::from_secs(10),
                "{command:?} {}: {took:?}",
                path.display()
            );
        }
        let (out, took) = run(command, &padded);
        assert!(
            took < Duration::from_secs(20),
            "{command:?} of a 4 GiB sparse file took {took:?}"
        );
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("cannot read"),
            "{command:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Regression (a running program padded to a 4 GiB sparse file drove the tracer to 4.2 GB of
/// memory): a process mapping an ELF file whose executable segment claims 3 GiB of a sparse
/// file is traced in bounded time and memory, its object counted as too large; a program padded
/// with 4 GiB of holes after its end is traced normally.
#[test]
fn huge_mapped_files_are_bounded() {
    privileged_test!();
    let dir = tempfile::tempdir().expect("tempdir");
    let mapexec = compile(dir.path(), "mapexec", "mapexec", &[]);
    let program = compile(dir.path(), "chain", "first", &[]);
    let padded = dir.path().join("padded");
    std::fs::copy(&program, &padded).expect("copy");
    let file = std::fs::OpenOptions::new().write(true).open(&padded).expect("open");
    file.set_len(file.metadata().expect("stat").len() + (4 << 30))
        .expect("extend");
    drop(file);
    // An ELF header and one executable PT_LOAD of 3 GiB from offset 0, in a sparse file.
    let mut elf = std::fs::read(&program).expect("read")[..64].to_vec();
    elf[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
    elf[0x28..0x30].copy_from_slice(&0u64.to_le_bytes());
    elf[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
    elf[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
    elf[0x3c..0x3e].copy_from_slice(&0u16.to_le_bytes());
    let mut phdr = vec![0u8; 56];
    phdr[0..4].copy_from_slice(&1u32.to_le_bytes());
    phdr[4..8].copy_from_slice(&5u32.to_le_bytes());
    phdr[32..40].copy_from_slice(&(3u64 << 30).to_le_bytes());
    phdr[40..48].copy_from_slice(&(3u64 << 30).to_le_bytes());
    phdr[48..56].copy_from_slice(&4096u64.to_le_bytes());
    elf.extend_from_slice(&phdr);
    let huge = dir.path().join("huge.so");
    std::fs::write(&huge, &elf).expect("write");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&huge)
        .expect("open")
        .set_len(3 << 30)
        .expect("extend");
    let mapper = mapping(&mapexec, &huge);
    let runner = Running(Command::new(&padded).args(["0", "1"]).spawn().expect("start"));
    let out = dir.path().join("stacks.folded");
    let pids = format!("{},{}", mapper.pid(), runner.pid());
    let started = Instant::now();
    let mut tracer = Command::new(tracer_binary())
        .args([
            "-F",
            "499",
            "--no-kernel",
            "-d",
            "3",
            "--pid",
            &pids,
            "-o",
            out.to_str().expect("path"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sframe-trace");
    let tracer_pid = tracer.id();
    let mut peak_kib = 0;
    while tracer.try_wait().expect("wait").is_none() {
        peak_kib = peak_kib.max(super::status_kib(tracer_pid, "VmHWM").unwrap_or(0));
        assert!(started.elapsed() < Duration::from_secs(90), "the tracer hung");
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = tracer.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stderr}\npeak RSS {peak_kib} KiB");
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("too large"),
        "the huge object is counted as too large: {stderr}"
    );
    assert!(peak_kib < 512 << 10, "the tracer's peak RSS was {peak_kib} KiB");
    let verdicts = Verdicts::of(&read_folded(&out), |line| {
        (line.comm == "padded").then(|| chain_of("first", 1))
    });
    verdicts.assert_sound("the padded program", 50);
}

/// Regression (a process mapping a file whose name is not UTF-8 could not be traced with
/// `--pid`, "stream did not contain valid UTF-8", and was counted as gone system-wide): it is
/// traced both ways, and its samples are kept.
#[test]
fn non_utf8_file_names_are_traced() {
    privileged_test!();
    use std::os::unix::ffi::OsStrExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let mapexec = compile(dir.path(), "mapexec", "mapexec", &[]);
    let library = compile(dir.path(), "churn_plugin", "libplugin.so", &["-shared", "-fPIC"]);
    let odd = dir.path().join(std::ffi::OsStr::from_bytes(b"lib\xff\xfe\nodd.so"));
    std::fs::rename(&library, &odd).expect("rename");
    let mapper = mapping(&mapexec, &odd);
    let pid = mapper.pid().to_string();
    let out = dir.path().join("stacks.folded");
    for mode in [&["--pid", pid.as_str()][..], &["-a"]] {
        let stderr = trace_bounded(
            &[
                mode,
                &["-F", "499", "--no-kernel", "-d", "2", "-o", out.to_str().expect("path")],
            ]
            .concat(),
            None,
            Duration::from_secs(90),
        );
        // Resolved through its mappings: its frames are named.
        let resolved = read_folded(&out)
            .iter()
            .filter(|l| l.comm == "mapexec" && l.frames.iter().any(|f| f == "main"))
            .map(|l| l.count)
            .sum::<u64>();
        assert!(resolved > 0, "{mode:?}: no resolved samples of the process: {stderr}");
    }
}

/// A traced object is opened once per session (it was opened in discovery, found again to be
/// held open, and read a third time to build its table): under `strace -y`, the program's file
/// is opened for reading exactly once, though two processes run it, looked at by path (an
/// `O_PATH` descriptor, to learn its identity) once per process load, and otherwise only
/// reopened through the descriptor held (the symbolizer: blazesym takes paths).
#[test]
fn a_traced_object_is_opened_once() {
    privileged_test!();
    let dir = tempfile::tempdir().expect("tempdir");
    let program = compile(dir.path(), "chain", "first", &[]);
    let mut first = Running(Command::new(&program).args(["0", "1"]).spawn().expect("start"));
    let mut second = Running(Command::new(&program).args(["0", "1"]).spawn().expect("start"));
    first.wait_working(&program);
    second.wait_working(&program);
    let pids = format!("{},{}", first.pid(), second.pid());
    let log = dir.path().join("strace.log");
    let out = dir.path().join("stacks.folded");
    let status = Command::new("strace")
        .args(["-f", "-qq", "-y", "-e", "trace=openat,openat2", "-o"])
        .arg(&log)
        .arg(tracer_binary())
        .args(["--no-kernel", "-F", "99", "-d", "2", "--pid", &pids, "-o"])
        .arg(&out)
        .stderr(Stdio::null())
        .status()
        .expect("run strace (apt package strace)");
    assert!(status.success(), "sframe-trace under strace failed");
    let log = std::fs::read_to_string(&log).expect("read the strace log");
    // `-y` shows the file each new descriptor is open on: `= 12</path/to/first>`.
    let program_fd = format!("<{}>", program.to_str().expect("path"));
    let opens: Vec<&str> = log.lines().filter(|l| l.trim_end().ends_with(&program_fd)).collect();
    let fd_of = |l: &str| {
        let (_, result) = l.rsplit_once(" = ")?;
        result.split('<').next()?.parse::<u32>().ok()
    };
    // Each open is an `O_PATH` look by path, a reopen of such a descriptor for reading
    // (discovery), a reopen of that one (the symbolizer, through `/proc/self/fd`), or a lookup
    // of the file by path for reading, which must not happen.
    let (mut looks, mut reads, mut symbolizer, mut by_path) = (Vec::new(), Vec::new(), 0, Vec::new());
    for &line in &opens {
        let reopened = line
            .split('"')
            .nth(1)
            .and_then(|p| p.strip_prefix("/proc/self/fd/"))
            .and_then(|n| n.parse::<u32>().ok());
        let fd = fd_of(line).expect("a descriptor");
        match reopened {
            _ if line.contains("O_PATH") => looks.push(fd),
            Some(n) if looks.contains(&n) => reads.push(fd),
            Some(n) if reads.contains(&n) => symbolizer += 1,
            _ => by_path.push(line),
        }
    }
    let all = opens.join("\n");
    assert_eq!(reads.len(), 1, "opened for reading more than once:\n{all}");
    assert_eq!(looks.len(), 2, "one identity look per process:\n{all}");
    assert!(symbolizer <= 1, "the symbolizer opened it more than once:\n{all}");
    assert!(by_path.is_empty(), "opened by path for reading:\n{all}");
    assert!(
        read_folded(&out)
            .iter()
            .any(|l| l.frames.iter().any(|f| f == "first_leaf"))
    );
}
