//! `-f otlp` labels a containerised process: the test makes a cgroup with the path containerd
//! gives a Kubernetes container (systemd driver, cgroup v2), moves the workload into it, and the
//! receiver of `otlp.rs` must find the container's id and its pod's uid on the profile's
//! resource, with the host's id, architecture and OS. Privileged, like every tracing test.

use std::{
    path::{Path, PathBuf},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use crate::otlp::{Receiver, otlp_args, sframe_trace};
use crate::support::build_workloads;

/// The pod's uid (the systemd driver writes it with underscores in the path).
const POD: &str = "6b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e";

/// Where cgroup v2 is mounted (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a hybrid host).
fn cgroup2_mount() -> PathBuf {
    let mounts = std::fs::read_to_string("/proc/self/mounts").expect("read /proc/self/mounts");
    mounts
        .lines()
        .find_map(|line| {
            let mut fields = line.split_whitespace();
            let (_, dir, kind) = (fields.next()?, fields.next()?, fields.next()?);
            (kind == "cgroup2").then(|| PathBuf::from(dir))
        })
        .expect("a cgroup v2 mount (every kernel the tracer supports has one)")
}

/// The cgroups the test made, removed deepest first when dropped (their processes have exited).
struct Cgroups(Vec<PathBuf>);

impl Drop for Cgroups {
    fn drop(&mut self) {
        for dir in self.0.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// `ROOT/sframe-trace-test-PID/kubepods-besteffort-pod<uid_>.slice/cri-containerd-<id>.scope`.
fn containerd_cgroup(root: &Path, id: &str) -> Cgroups {
    let top = root.join(format!("sframe-trace-test-{}", std::process::id()));
    let pod = top.join(format!("kubepods-besteffort-pod{}.slice", POD.replace('-', "_")));
    let container = pod.join(format!("cri-containerd-{id}.scope"));
    let made = Cgroups(vec![top, pod, container]);
    for dir in &made.0 {
        std::fs::create_dir(dir).unwrap_or_else(|e| panic!("make the cgroup {}: {e}", dir.display()));
    }
    made
}

/// A workload moved into a containerd-style cgroup is exported with `container.id` and
/// `k8s.pod.uid` from its path, and `host.id` (the machine-id), `host.arch` and `os.type`.
#[test]
fn containerised_processes_carry_their_container_and_pod() {
    privileged_test!(shared);
    let workloads = build_workloads(&["v1"]);
    let plt = workloads.path().join("v1/plt");
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the time")
        .as_nanos();
    let id = format!("{:0>64}", format!("{:x}{nanos:x}", std::process::id()));
    let cgroups = containerd_cgroup(&cgroup2_mount(), &id);
    let procs = cgroups.0[2].join("cgroup.procs");
    let receiver = Receiver::start("http", false);
    // The shell moves itself into the cgroup, then becomes the workload.
    let script = format!("echo $$ > '{}' && exec '{}' 2", procs.display(), plt.display());
    let args = otlp_args(
        &format!("http://127.0.0.1:{}", receiver.port),
        "1",
        &["--otlp-protocol", "http", "--no-kernel", "--", "sh", "-c", &script],
    );
    let traced = sframe_trace(&args, &[], Duration::from_secs(20));
    drop(cgroups);
    assert!(traced.status.success(), "{}\n{}", traced.command, traced.stderr);
    let machine_id = std::fs::read_to_string("/etc/machine-id")
        .ok()
        .map(|s| s.trim().to_owned());
    let arch = if cfg!(target_arch = "x86_64") { "amd64" } else { "arm64" };
    let mut labelled = 0;
    for request in receiver.requests() {
        for resource in request["resources"].as_array().expect("resources") {
            let attributes = &resource["attributes"];
            assert_eq!(attributes["os.type"], "linux", "{attributes}");
            assert_eq!(attributes["host.arch"], arch, "{attributes}");
            if let Some(machine_id) = &machine_id {
                assert_eq!(attributes["host.id"], machine_id.as_str(), "{attributes}");
            }
            if attributes["process.executable.name"] == "plt" {
                assert_eq!(attributes["container.id"], id.as_str(), "{attributes}");
                assert_eq!(attributes["k8s.pod.uid"], POD, "{attributes}");
                labelled += 1;
            }
        }
    }
    assert!(labelled >= 1, "no profile of the workload: {}", traced.stderr);
}
