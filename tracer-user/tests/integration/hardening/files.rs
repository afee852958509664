//! Hostile files: what an unprivileged user (`nobody`, in a user and mount namespace of its own)
//! can put behind the paths the root tracer reads. A FIFO or a symlink to a host file at a
//! mapped path inside a container root, a file with the same inode number as the mapped one on
//! another device, a fake library carrying libc's build-id, and symlinks planted where a
//! careless tracer would write its scratch files. Each test asserts that the tracer finishes in
//! bounded time, reads nothing it should not, and that the stacks it keeps are right.

use std::{
    io::BufRead as _,
    os::unix::fs::{MetadataExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use super::{Folded, Verdict, Verdicts, chain_of, compile, read_folded};
use crate::support::{Running, tracer_binary};

/// The capabilities the tracer can run with instead of root (then it cannot open
/// `/proc/PID/map_files`, and finds mapped files by their paths).
const REDUCED_CAPS: &str = "-all,+bpf,+perfmon,+sys_ptrace,+sys_resource";

/// A scratch directory that `nobody` may use too.
pub(super) fn shared_tempdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    dir
}

/// `script` run by `sh` as `nobody` in a user and mount namespace of its own (where it is root
/// and may mount), with `args` as `$1...`; its stdout piped, its stderr dropped.
pub(super) fn as_nobody_in_namespace(script: &str, args: &[&Path]) -> Running {
    Running(
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .args(["unshare", "-Urm", "--propagation", "private", "sh", "-c", script, "sh"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run setpriv/unshare"),
    )
}

/// The lines a child prints.
pub(super) struct Lines(std::io::Lines<std::io::BufReader<std::process::ChildStdout>>);

impl Lines {
    pub(super) fn of(running: &mut Running) -> Lines {
        Lines(std::io::BufReader::new(running.0.stdout.take().expect("stdout")).lines())
    }

    /// The numbers on the next line starting with `prefix`.
    pub(super) fn numbers(&mut self, prefix: &str) -> Vec<u64> {
        let line = self
            .0
            .find_map(|l| l.ok().filter(|l| l.starts_with(prefix)))
            .unwrap_or_else(|| panic!("no `{prefix}` line"));
        line[prefix.len()..]
            .split_whitespace()
            .map(|n| n.parse().expect("a number"))
            .collect()
    }
}

/// `mapexec FILE`, started (it maps FILE executable and sleeps for a minute) and waited for
/// until it has mapped it.
pub(super) fn mapping(mapexec: &Path, file: &Path) -> Running {
    let mut mapper = Running(
        Command::new(mapexec)
            .arg(file)
            .arg("60000")
            .stdout(Stdio::piped())
            .spawn()
            .expect("start mapexec"),
    );
    Lines::of(&mut mapper).numbers("mapped");
    mapper
}

/// `sframe-trace ARGS` (under `setpriv --bounding-set CAPS` when `caps` is given), which must
/// end by itself within `limit`; its stderr.
pub(super) fn trace_bounded(args: &[&str], caps: Option<&str>, limit: Duration) -> String {
    let mut command = match caps {
        Some(caps) => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--bounding-set={caps}")).arg(tracer_binary());
            c
        }
        None => Command::new(tracer_binary()),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let stderr_path = dir.path().join("stderr");
    let mut child: Child = command
        .args(args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).expect("create"))
        .spawn()
        .expect("start sframe-trace");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "sframe-trace {args:?} still running after {limit:?} (hung): {}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    eprintln!("{stderr}");
    assert!(status.success(), "sframe-trace {args:?} failed: {stderr}");
    stderr
}

/// An inotify watch for opens of one file.
struct OpenWatch(std::fs::File);

impl OpenWatch {
    fn new(path: &Path) -> OpenWatch {
        let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
        let file = sframe_trace::sys::fs::inotify_watch(&name, libc::IN_OPEN | libc::IN_ACCESS)
            .unwrap_or_else(|err| panic!("inotify watch of {}: {err}", path.display()));
        OpenWatch(file)
    }

    /// The events since the watch began or the last call (`inotify_event` masks).
    fn events(&self) -> Vec<u32> {
        let mut buf = [0u8; 4096];
        let n = std::io::Read::read(&mut &self.0, &mut buf).unwrap_or(0);
        let mut masks = Vec::new();
        let mut at = 0;
        while at + 16 <= n {
            masks.push(u32::from_ne_bytes(buf[at + 4..at + 8].try_into().expect("4 bytes")));
            at += 16 + u32::from_ne_bytes(buf[at + 12..at + 16].try_into().expect("4 bytes")) as usize;
        }
        masks
    }
}

/// The container: three copies of a static `first` (no libraries needed in its root) running
/// for 40 s
/// in a root of their own (a tmpfs made `/` with `pivot_root`), each hiding behind its mapped
/// path something the tracer must not trip over:
/// - `/fifo_first`: a FIFO bind-mounted over the file (opening it for reading would block);
/// - `/a/b/link_first`: `/a` covered by a tmpfs where `b` is an absolute symlink to a host
///   directory holding a `link_first` (following it would open a host file);
/// - `HOSTFS/first` (the path of a host tmpfs the test mounts, holding `second` under the same
///   inode number): the container's file is another, on another device.
const CONTAINER: &str = r#"set -e
cd "$1"
mkdir root
mount -t tmpfs t root
mkdir -p root/a/b "root$3" root/old
cp "$2" root/fifo_first
cp "$2" root/a/b/link_first
cp "$2" "root$3/first"
echo "inode $(stat -c %i "root$3/first")"
root/fifo_first 40000 1 &
P1=$!
root/a/b/link_first 40000 1 &
P2=$!
"root$3/first" 40000 1 &
P3=$!
sleep 0.3
mkfifo root/fifo
mount --bind root/fifo root/fifo_first
mount -t tmpfs t root/a
ln -s "$4" root/a/b
cd root
pivot_root . old
echo "pids $P1 $P2 $P3"
wait
"#;

/// Regression (a FIFO at a mapped path hung the tracer for good; an absolute symlink there made
/// it open host files; an inode number matched on the wrong device made it parse a host file as
/// the program): traced as root and with reduced capabilities, the container's processes are
/// sampled within `-d`, no host file is opened, and no stack is wrong.
#[test]
fn container_paths_cannot_mislead_the_tracer() {
    privileged_test!();
    let dir = shared_tempdir();
    let first = compile(dir.path(), "chain", "first", &["-static"]);
    let second = compile(dir.path(), "chain", "second", &["-static", "-DSECOND"]);
    // The host's side: a directory the symlink points to, and a tmpfs at the container's path.
    let victims = dir.path().join("victims");
    std::fs::create_dir(&victims).expect("mkdir");
    std::fs::copy(&second, victims.join("link_first")).expect("copy");
    let hostfs = dir.path().join("hostfs");
    std::fs::create_dir(&hostfs).expect("mkdir");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "t"])
        .arg(&hostfs)
        .status()
        .expect("mount");
    assert!(mounted.success(), "mount a tmpfs");
    let _unmount = Unmount(hostfs.clone());
    let mut container = as_nobody_in_namespace(CONTAINER, &[dir.path(), &first, &hostfs, &victims]);
    let mut lines = Lines::of(&mut container);
    let target = lines.numbers("inode ")[0];
    // Files on the host tmpfs until the next one gets the container file's inode number.
    for i in 0.. {
        let dummy = hostfs.join(format!("d{i}"));
        std::fs::write(&dummy, b"").expect("create");
        let ino = std::fs::metadata(&dummy).expect("stat").ino();
        assert!(ino < target, "the host tmpfs passed inode {target}");
        if ino + 1 == target {
            break;
        }
    }
    std::fs::copy(&second, hostfs.join("first")).expect("copy");
    assert_eq!(std::fs::metadata(hostfs.join("first")).expect("stat").ino(), target);
    let pids = lines.numbers("pids ");
    let pid_list = pids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let watch = OpenWatch::new(&victims.join("link_first"));
    let decoy = OpenWatch::new(&hostfs.join("first"));
    assert_eq!(
        (watch.events(), decoy.events()),
        (Vec::<u32>::new(), Vec::<u32>::new()),
        "opened before tracing"
    );
    for caps in [None, Some(REDUCED_CAPS)] {
        let out = dir.path().join("stacks.folded");
        let stderr = trace_bounded(
            &[
                "-F",
                "499",
                "--no-kernel",
                "-d",
                "3",
                "--pid",
                &pid_list,
                "-o",
                out.to_str().expect("path"),
            ],
            caps,
            Duration::from_secs(90),
        );
        assert_eq!(
            watch.events(),
            Vec::<u32>::new(),
            "{caps:?}: the host file behind the symlink was opened"
        );
        assert_eq!(
            decoy.events(),
            Vec::<u32>::new(),
            "{caps:?}: the host file with the same inode was opened"
        );
        let lines = read_folded(&out);
        // The samples in the chain's functions (not those in clock_gettime, say).
        let judged = |comm: &'static str| {
            move |line: &Folded| {
                let in_chain = line
                    .frames
                    .iter()
                    .any(|f| f.starts_with("first_") || f.starts_with("second_"));
                (line.comm == comm && in_chain).then(|| chain_of("first", 1))
            }
        };
        // The file with the same inode number elsewhere is never mistaken for the program.
        let same_inode = Verdicts::of(&lines, judged("first"));
        same_inode.assert_sound(&format!("{caps:?}: the program under a host path"), 50);
        assert!(
            same_inode.get(Verdict::Exact) * 2 >= same_inode.total(),
            "{caps:?}: {same_inode:?}"
        );
        if caps.is_none() {
            // As root the mapped files themselves are read (`/proc/PID/map_files`).
            for comm in ["fifo_first", "link_first"] {
                let verdicts = Verdicts::of(&lines, judged(comm));
                verdicts.assert_sound(&format!("{comm} as root"), 50);
                assert!(
                    verdicts.get(Verdict::Exact) * 2 >= verdicts.total(),
                    "{comm}: {verdicts:?}"
                );
            }
        } else {
            // By path, the FIFO is refused and the symlink leads nowhere inside the container:
            // they are sampled without tables.
            for comm in ["fifo_first", "link_first"] {
                assert!(lines.iter().any(|l| l.comm == comm), "{comm} was not sampled: {stderr}");
            }
        }
    }
}

/// Unmounts a test's mount on drop.
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// The GNU build-id of `path`, in hex.
fn build_id_hex(path: &Path) -> String {
    use object::Object as _;
    let data = std::fs::read(path).expect("read");
    let file = object::File::parse(data.as_slice()).expect("parse");
    let id = file.build_id().expect("notes").expect("a build-id");
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// Regression (build-ids were trusted as identity: a process mapping a fake library carrying
/// libc's build-id, traced first, lent the fake's table to every libc, and every later stack
/// through libc came out truncated): the victim's stacks through libc stay exact.
#[test]
fn a_fake_build_id_does_not_poison_libc() {
    privileged_test!();
    let dir = shared_tempdir();
    let first = compile(dir.path(), "chain", "first", &[]);
    let libc_path = sframe_trace::procmaps::executable_mappings(std::process::id())
        .expect("own mappings")
        .into_iter()
        .map(|m| m.path)
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libc.so"))
        })
        .expect("libc is mapped");
    let id = build_id_hex(&libc_path);
    let fake = compile(
        dir.path(),
        "churn_plugin",
        "libfake.so",
        &["-shared", "-fPIC", &format!("-Wl,--build-id=0x{id}")],
    );
    assert_eq!(build_id_hex(&fake), id, "the fake carries libc's build-id");
    // The hostile process (static: it maps no libc of its own) maps the fake, and is loaded
    // first.
    let mapexec = compile(dir.path(), "mapexec", "mapexec", &["-static"]);
    let hostile = mapping(&mapexec, &fake);
    let mut victim = Running(Command::new(&first).args(["0", "2"]).spawn().expect("start the victim"));
    victim.wait_working(&first);
    let out = dir.path().join("stacks.folded");
    let pids = format!("{},{}", hostile.pid(), victim.pid());
    trace_bounded(
        &[
            "-F",
            "499",
            "--no-kernel",
            "-d",
            "5",
            "--pid",
            &pids,
            "-o",
            out.to_str().expect("path"),
        ],
        None,
        Duration::from_secs(90),
    );
    let lines = read_folded(&out);
    let verdicts = Verdicts::of(&lines, |line| {
        let in_chain = line.frames.iter().any(|f| f.starts_with("first_"));
        (line.comm == "first" && in_chain).then(|| chain_of("first", 2))
    });
    verdicts.assert_sound("victim samples", 50);
    assert!(
        verdicts.get(Verdict::Exact) * 10 >= verdicts.total() * 9,
        "the victim's stacks through libc should be exact: {verdicts:?}"
    );
}

/// Regression (the vDSO image was written to the predictable `$TMPDIR/sframe-trace.<pid>/vdso`
/// following links: a user who planted `vdso -> victim` for the next pids had the victim
/// overwritten by root): with such links planted by `nobody` for every pid the tracer may get,
/// the victim is untouched, and nothing planted is removed.
#[test]
fn planted_scratch_links_are_not_followed() {
    privileged_test!();
    let dir = shared_tempdir();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).expect("mkdir");
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"precious\n").expect("write");
    let program = compile(dir.path(), "chain", "first", &[]);
    let target = Running(Command::new(&program).args(["0", "1"]).spawn().expect("start"));
    // Planted for the next few thousand pids (other programs on the host take pids too),
    // owned by `nobody` as if it had made them.
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .expect("read")
        .trim()
        .parse()
        .expect("a pid");
    let (from, to) = (last + 1, last + 5000);
    for pid in from..=to {
        let scratch = tmp.join(format!("sframe-trace.{pid}"));
        std::fs::create_dir(&scratch).expect("mkdir");
        std::os::unix::fs::symlink(&victim, scratch.join("vdso")).expect("symlink");
        for path in [scratch.join("vdso"), scratch] {
            std::os::unix::fs::lchown(&path, Some(65534), Some(65534)).expect("chown to nobody");
        }
    }
    let tracer = Command::new(tracer_binary())
        .args(["-F", "99", "--no-kernel", "-d", "1", "--pid", &target.pid().to_string()])
        .env("TMPDIR", &tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sframe-trace");
    let tracer_pid = tracer.id();
    let output = tracer.wait_with_output().expect("wait");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        (from..=to).contains(&tracer_pid),
        "the tracer's pid {tracer_pid} was not one planted for ({from}..={to}): the test proves nothing"
    );
    assert!(
        std::fs::read(&victim).expect("read") == b"precious\n",
        "the victim was written"
    );
    let link = tmp.join(format!("sframe-trace.{tracer_pid}/vdso"));
    assert!(
        std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()),
        "the planted link was removed"
    );
}
