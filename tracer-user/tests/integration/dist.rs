//! What `cargo xtask dist` ships, run the way the README's Install section runs it: the static
//! executable in a root that holds nothing but itself, in a Debian 11 root (glibc 2.31), the
//! Debian package installed with dpkg in a clean root (its `doctor`, its unit checked by
//! `systemd-analyze verify`, lintian), and the OCI image under podman tracing a host process.
//! `#[ignore]`d: `cargo xtask test` builds the artifacts first and runs these with
//! `SFRAME_TRACE_DIST_DIR` (target/dist) and `SFRAME_TRACE_BULLSEYE_ROOT` (a debootstrapped
//! bullseye, cached) set.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use crate::support::{Running, SFRAME_CFLAGS, gcc};

const DIST_VAR: &str = "SFRAME_TRACE_DIST_DIR";
const BULLSEYE_VAR: &str = "SFRAME_TRACE_BULLSEYE_ROOT";

fn env_dir(var: &str) -> PathBuf {
    let dir =
        PathBuf::from(std::env::var_os(var).unwrap_or_else(|| panic!("{var} is not set (cargo xtask test sets it)")));
    assert!(dir.is_dir(), "{var}={} is not a directory", dir.display());
    dir
}

/// The one file of `dist` whose name starts with `prefix` and ends with `suffix`.
fn artifact(dist: &Path, prefix: &str, suffix: &str) -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dist)
        .expect("read the dist directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with(prefix) && name.ends_with(suffix)
        })
        .collect();
    assert_eq!(found.len(), 1, "one {prefix}*{suffix} in {}: {found:?}", dist.display());
    found.pop().expect("one")
}

/// The x86-64 static executable of the staged tarball tree.
fn static_binary(dist: &Path) -> PathBuf {
    let stage = artifact(dist, "sframe-trace-", "-x86_64");
    stage.join("sframe-trace")
}

/// The demo (main -> run -> outer -> middle -> inner -> spin), built with SFrame, running for
/// `seconds` on the host (long enough for a slow tracer under emulation: it is killed when
/// the test is done with it).
fn demo(dir: &Path, seconds: &str) -> (PathBuf, Running) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../demo/demo.c");
    let exe = gcc(&src, &dir.join("demo"), &SFRAME_CFLAGS);
    let mut running = Running(Command::new(&exe).arg(seconds).spawn().expect("start the demo"));
    running.wait_working(&exe);
    (exe, running)
}

/// `chroot ROOT ARGS...` in a private mount namespace with /proc and /sys mounted in the root.
fn in_root(root: &Path, args: &[&str]) -> Output {
    let script = r#"set -e; root="$1"; shift
mkdir -p "$root/proc" "$root/sys"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
exec chroot "$root" "$@""#;
    Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", script, "sh"])
        .arg(root)
        .args(args)
        .output()
        .expect("run unshare and chroot")
}

/// The hard limit of `resource` of this process.
fn hard_limit(resource: libc::__rlimit_resource_t) -> u64 {
    sframe_trace::sys::limits::hard(resource).unwrap_or_else(|err| panic!("getrlimit: {err}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Folded lines of `folded` that carry the demo's chain below `spin`.
fn demo_stacks(folded: &str) -> u64 {
    folded
        .lines()
        .filter(|l| l.contains("main;run;outer;middle;inner") && l.contains("spin"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum()
}

/// The tarball, as the README's Install section uses it: its checksum verifies, it unpacks
/// into the binary, the man page, the completions and the licenses; the binary is static
/// (`file` says so), names its commit, and, alone in an empty root with /proc and /sys, traces
/// a host process with `--pid` and names its frames.
#[test]
#[ignore = "needs cargo xtask dist's output (cargo xtask test runs it)"]
fn static_binary_traces_from_an_empty_root() {
    privileged_test!();
    let dist = env_dir(DIST_VAR);
    let sums = Command::new("sha256sum")
        .args(["-c", "SHA256SUMS", "--ignore-missing"])
        .current_dir(&dist)
        .output()
        .expect("run sha256sum -c");
    assert!(
        sums.status.success(),
        "SHA256SUMS does not verify:\n{}",
        text(&sums.stdout)
    );
    let tarball = artifact(&dist, "sframe-trace-", "-x86_64.tar.gz");
    let work = tempfile::tempdir().expect("tempdir");
    let untar = Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(work.path())
        .status()
        .expect("run tar");
    assert!(untar.success(), "tar xzf {} failed", tarball.display());
    let unpacked = work.path().join(
        tarball
            .file_name()
            .expect("a name")
            .to_string_lossy()
            .trim_end_matches(".tar.gz"),
    );
    for file in [
        "sframe-trace",
        "sframe-trace.1",
        "completions/sframe-trace.bash",
        "completions/_sframe-trace",
        "completions/sframe-trace.fish",
        "README.md",
        "LICENSE-MIT",
        "LICENSE-APACHE",
    ] {
        assert!(unpacked.join(file).exists(), "the tarball has no {file}");
    }
    let binary = unpacked.join("sframe-trace");
    let file = text(&Command::new("file").arg(&binary).output().expect("run file").stdout);
    assert!(
        file.contains("statically linked") || file.contains("static-pie linked"),
        "file says: {file}"
    );
    let version = text(
        &Command::new(&binary)
            .arg("--version")
            .output()
            .expect("run --version")
            .stdout,
    );
    assert!(version.contains("commit "), "--version names no commit: {version}");

    let root = work.path().join("root");
    std::fs::create_dir_all(&root).expect("mkdir root");
    std::fs::copy(&binary, root.join("sframe-trace")).expect("copy the binary");
    let (_exe, demo) = demo(work.path(), "600");
    let pid = demo.pid().to_string();
    let out = in_root(&root, &["/sframe-trace", "--pid", &pid, "-d", "2", "-f", "folded"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "the static tracer in an empty root failed: {}\n{stderr}",
        out.status
    );
    let named = demo_stacks(&stdout);
    assert!(
        named >= 10,
        "too few named demo stacks ({named}) from the empty root:\n{stdout}\n{stderr}"
    );
}

/// In a Debian 11 root (glibc 2.31), the static executable runs `doctor` and traces a program
/// of that root, its stacks unwound through that root's libc (`__libc_start_main`).
#[test]
#[ignore = "needs cargo xtask dist's output and a bullseye root (cargo xtask test makes them)"]
fn static_binary_traces_in_a_bullseye_root() {
    privileged_test!();
    let dist = env_dir(DIST_VAR);
    let bullseye = env_dir(BULLSEYE_VAR);
    let glibc = std::fs::read_dir(bullseye.join("lib/x86_64-linux-gnu"))
        .expect("the bullseye root has lib/x86_64-linux-gnu")
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy() == "libc-2.31.so");
    assert!(glibc, "{} is not a glibc 2.31 root", bullseye.display());
    let bin = bullseye.join("usr/local/bin/sframe-trace");
    std::fs::copy(static_binary(&dist), &bin).expect("copy the binary into the root");
    let doctor = in_root(&bullseye, &["/usr/local/bin/sframe-trace", "doctor"]);
    assert!(
        doctor.status.success(),
        "doctor in the bullseye root: {}\n{}{}",
        doctor.status,
        text(&doctor.stdout),
        text(&doctor.stderr)
    );
    let out = in_root(
        &bullseye,
        &[
            "/usr/local/bin/sframe-trace",
            "-d",
            "3",
            "-f",
            "folded",
            "--no-kernel",
            "--",
            "/bin/bash",
            "-c",
            "i=0; while [ $i -lt 100000000 ]; do i=$((i+1)); done",
        ],
    );
    let _ = std::fs::remove_file(&bin);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "tracing bash in the bullseye root: {}\n{stderr}",
        out.status
    );
    let (mut total, mut through_libc) = (0u64, 0u64);
    for line in stdout.lines().filter(|l| l.starts_with("bash;")) {
        let n: u64 = line.rsplit_once(' ').and_then(|(_, n)| n.parse().ok()).unwrap_or(0);
        total += n;
        if line.contains("__libc_start_main") {
            through_libc += n;
        }
    }
    assert!(total >= 20, "too few samples of bash ({total}):\n{stdout}\n{stderr}");
    assert!(
        through_libc * 100 >= total * 90,
        "{through_libc} of {total} bash stacks reach glibc 2.31's __libc_start_main:\n{stdout}"
    );
}

/// The Debian package: lintian finds no error, dpkg installs it in a clean bullseye root,
/// where `sframe-trace doctor` runs, the man page and completions are in place, and the
/// systemd unit passes `systemd-analyze verify` and is not enabled.
#[test]
#[ignore = "needs cargo xtask dist's output and a bullseye root (cargo xtask test makes them)"]
fn deb_installs_in_a_clean_root_and_its_unit_verifies() {
    privileged_test!();
    let dist = env_dir(DIST_VAR);
    let deb = artifact(&dist, "sframe-trace_", "_amd64.deb");
    let lintian = Command::new("lintian")
        .args(["--fail-on", "error", "--allow-root"])
        .arg(&deb)
        .output()
        .expect("run lintian");
    assert!(
        lintian.status.success(),
        "lintian reports errors:\n{}{}",
        text(&lintian.stdout),
        text(&lintian.stderr)
    );
    let work = tempfile::tempdir().expect("tempdir");
    let root = work.path().join("root");
    let copied = Command::new("cp")
        .arg("-a")
        .arg(env_dir(BULLSEYE_VAR))
        .arg(&root)
        .status()
        .expect("copy the bullseye root");
    assert!(copied.success(), "cp -a of the bullseye root failed");
    std::fs::copy(&deb, root.join("tmp/sframe-trace.deb")).expect("copy the package");
    let install = in_root(&root, &["dpkg", "-i", "/tmp/sframe-trace.deb"]);
    assert!(
        install.status.success(),
        "dpkg -i: {}\n{}{}",
        install.status,
        text(&install.stdout),
        text(&install.stderr)
    );
    for file in [
        "usr/bin/sframe-trace",
        "usr/share/man/man1/sframe-trace.1.gz",
        "usr/share/bash-completion/completions/sframe-trace",
        "usr/share/zsh/vendor-completions/_sframe-trace",
        "usr/share/fish/vendor_completions.d/sframe-trace.fish",
        "lib/systemd/system/sframe-trace.service",
        "etc/default/sframe-trace",
    ] {
        assert!(root.join(file).exists(), "the package did not install /{file}");
    }
    assert!(
        !root
            .join("etc/systemd/system/multi-user.target.wants/sframe-trace.service")
            .exists(),
        "the package enabled its unit"
    );
    let doctor = in_root(&root, &["sframe-trace", "doctor"]);
    assert!(
        doctor.status.success(),
        "doctor from the package: {}\n{}{}",
        doctor.status,
        text(&doctor.stdout),
        text(&doctor.stderr)
    );
    // bullseye's own systemd and man-db judge the unit (its dependencies, its `man:` page).
    let verify = in_root(
        &root,
        &["systemd-analyze", "verify", "/lib/systemd/system/sframe-trace.service"],
    );
    assert!(
        verify.status.success() && verify.stderr.is_empty(),
        "systemd-analyze verify: {}\n{}",
        verify.status,
        text(&verify.stderr)
    );
}

/// The OCI image, loaded by podman and run privileged in the host's pid namespace, traces a
/// host process and names its frames.
#[test]
#[ignore = "needs cargo xtask dist's output (cargo xtask test runs it)"]
fn image_traces_a_host_process_under_podman() {
    privileged_test!();
    let dist = env_dir(DIST_VAR);
    let archive = artifact(&dist, "sframe-trace-", "-x86_64.oci.tar");
    let load = Command::new("podman")
        .arg("load")
        .arg("-i")
        .arg(&archive)
        .output()
        .expect("run podman load");
    let loaded = text(&load.stdout);
    assert!(
        load.status.success(),
        "podman load: {}\n{loaded}{}",
        load.status,
        text(&load.stderr)
    );
    let image = loaded
        .lines()
        .find_map(|l| {
            l.strip_prefix("Loaded image: ")
                .or_else(|| l.strip_prefix("Loaded image(s): "))
        })
        .unwrap_or_else(|| panic!("podman load named no image: {loaded}"))
        .trim()
        .to_owned();
    let work = tempfile::tempdir().expect("tempdir");
    let (_exe, demo) = demo(work.path(), "600");
    let pid = demo.pid().to_string();
    // This machine's limits, as they are: its root cannot raise them (no CAP_SYS_RESOURCE), and
    // podman would ask for more. runc, as crun refuses hybrid cgroup hierarchies. (docs/install
    // notes both.)
    let nofile = hard_limit(libc::RLIMIT_NOFILE);
    let nproc = hard_limit(libc::RLIMIT_NPROC).min(32768);
    let run = Command::new("podman")
        .args(["--runtime", "runc", "run", "--rm", "--privileged", "--pid=host"])
        .arg(format!("--ulimit=nofile={nofile}:{nofile}"))
        .arg(format!("--ulimit=nproc={nproc}:{nproc}"))
        .args([&image, "--pid", &pid, "-d", "2", "-f", "folded"])
        .output()
        .expect("run podman run");
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert!(run.status.success(), "podman run {image}: {}\n{stderr}", run.status);
    let named = demo_stacks(&stdout);
    assert!(
        named >= 10,
        "too few named demo stacks ({named}) from the container:\n{stdout}\n{stderr}"
    );
}

/// The static executable of the guest's architecture (`SFRAME_TRACE_DIST_BINARY`, set by
/// `cargo xtask test` for the qemu guests: 5.10 and 7.2 on x86-64, 6.1 on arm64) traces a
/// process of this kernel with `--pid` and names its frames.
#[test]
#[ignore = "run in the qemu guests by cargo xtask test, with SFRAME_TRACE_DIST_BINARY set"]
fn static_binary_traces_a_process_in_this_kernel() {
    privileged_test!();
    let binary = PathBuf::from(
        std::env::var_os("SFRAME_TRACE_DIST_BINARY").expect("SFRAME_TRACE_DIST_BINARY names the static executable"),
    );
    let work = tempfile::tempdir().expect("tempdir");
    let (_exe, demo) = demo(work.path(), "600");
    let pid = demo.pid().to_string();
    let out = Command::new(&binary)
        .args(["--pid", &pid, "-d", "3", "-f", "folded"])
        .output()
        .expect("run the static tracer");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{}: {}\n{stderr}", binary.display(), out.status);
    let named = demo_stacks(&stdout);
    assert!(named >= 5, "too few named demo stacks ({named}):\n{stdout}\n{stderr}");
}
