//! Which container and Kubernetes pod a process runs in, from the text of `/proc/PID/cgroup`
//! (`container.id`, `k8s.pod.uid`), and what the resource says of the host (`host.id` from the
//! machine-id, `host.arch`, `os.type`). The Collector's `k8sattributes` processor adds the pod,
//! namespace and workload from these.
//!
//! The cgroup text is the kernel's, but its path names are chosen by whoever made the cgroups
//! (a runtime, or a user with a delegated subtree), so they are parsed as hostile: at most
//! [`MAX_LINES`] lines of at most [`MAX_LINE`] bytes are looked at, and an id is taken only when
//! it has the exact shape of one (64 lower-case hex digits; a UUID). Parsing is pure: the caller
//! reads the file, bounded.
//!
//! The path shapes (one segment of the path holds the container id, another the pod uid):
//! - Docker: `/docker/<id>` (cgroup v1, cgroupfs), `/system.slice/docker-<id>.scope` (systemd)
//! - containerd under Kubernetes: `/kubepods/burstable/pod<uid>/<id>` (cgroupfs),
//!   `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope` (systemd)
//! - CRI-O: `.../crio-<id>.scope` (its `crio-conmon-<id>.scope` monitor is not the container)
//! - podman: `/machine.slice/libpod-<id>.scope[/container]`, `/user.slice/.../libpod-<id>.scope`,
//!   `/libpod_parent/libpod-<id>` (v1); its `libpod-conmon-<id>.scope` is not the container

/// Lines of `/proc/PID/cgroup` looked at (one per v1 hierarchy, and the v2 one).
pub const MAX_LINES: usize = 64;
/// Bytes of one line looked at; a longer one is skipped.
pub const MAX_LINE: usize = 4096;
/// Bytes of `/proc/PID/cgroup` read.
pub const MAX_CGROUP_BYTES: u64 = (MAX_LINES * MAX_LINE) as u64;

/// What the cgroup path says about a process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Container {
    /// `container.id`: 64 lower-case hex digits.
    pub id: Option<String>,
    /// `k8s.pod.uid`: a UUID with dashes.
    pub pod_uid: Option<String>,
}

/// The runtimes' prefixes of a container's cgroup name (`docker-<id>.scope`, ...).
const PREFIXES: &[&str] = &["docker-", "cri-containerd-", "containerd-", "crio-", "libpod-"];

fn is_container_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The container id a path segment names, if it names one.
fn container_id(segment: &str) -> Option<&str> {
    let name = segment.strip_suffix(".scope").unwrap_or(segment);
    if is_container_id(name) {
        return Some(name);
    }
    // The conmon monitors are processes beside the container, not in it.
    if name.starts_with("crio-conmon-") || name.starts_with("libpod-conmon-") {
        return None;
    }
    PREFIXES
        .iter()
        .find_map(|prefix| name.strip_prefix(prefix))
        .filter(|id| is_container_id(id))
}

/// A UUID (8-4-4-4-12 hex digits, `-` or `_` between groups) at the start of `s`, with dashes.
fn uuid_at(s: &str) -> Option<String> {
    let candidate = s.get(..36)?;
    let ok = candidate.bytes().enumerate().all(|(i, b)| match i {
        8 | 13 | 18 | 23 => b == b'-' || b == b'_',
        _ => b.is_ascii_hexdigit(),
    });
    ok.then(|| candidate.replace('_', "-").to_ascii_lowercase())
}

/// The pod uid a path segment names: `pod<uid>` (cgroupfs) or `...-pod<uid>.slice` (systemd).
fn pod_uid(segment: &str) -> Option<String> {
    let name = segment.strip_suffix(".slice").unwrap_or(segment);
    let at = name.rfind("pod")?;
    if at > 0 && !name[..at].ends_with('-') {
        return None;
    }
    let rest = &name[at + 3..];
    if rest.len() != 36 {
        return None;
    }
    uuid_at(rest)
}

/// Parse the text of `/proc/PID/cgroup` (`ID:CONTROLLERS:PATH` lines). In each line the deepest
/// segment naming a container is taken (podman nests a `container` cgroup below it), with the
/// pod uid above it; the first line with both wins, else the last with a container id.
pub fn parse_cgroup(text: &str) -> Container {
    let mut found = Container::default();
    for line in text.lines().take(MAX_LINES) {
        if line.len() > MAX_LINE {
            continue;
        }
        let Some(path) = line.splitn(3, ':').nth(2) else {
            continue;
        };
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let Some(at) = segments.iter().rposition(|s| container_id(s).is_some()) else {
            continue;
        };
        found.id = container_id(segments[at]).map(str::to_owned);
        found.pod_uid = segments[..at].iter().rev().find_map(|s| pod_uid(s));
        if found.pod_uid.is_some() {
            break;
        }
    }
    found
}

/// Read and parse `/proc/PID/cgroup` (bounded); nothing when it cannot be read.
pub fn read_container(pid: u32) -> Container {
    use std::io::Read as _;
    let mut text = String::new();
    let read = std::fs::File::open(format!("/proc/{pid}/cgroup"))
        .and_then(|f| f.take(MAX_CGROUP_BYTES).read_to_string(&mut text));
    match read {
        Ok(_) => parse_cgroup(&text),
        Err(_) => Container::default(),
    }
}

/// `host.id`: the machine-id (32 hex digits), from `/etc/machine-id` or D-Bus's copy.
pub fn read_host_id() -> Option<String> {
    use std::io::Read as _;
    ["/etc/machine-id", "/var/lib/dbus/machine-id"].iter().find_map(|path| {
        let mut text = String::new();
        std::fs::File::open(path)
            .ok()?
            .take(64)
            .read_to_string(&mut text)
            .ok()?;
        let id = text.trim();
        (id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_ascii_lowercase())
    })
}

/// `host.arch` in the semantic conventions' words.
pub fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "x86",
        "arm" => "arm32",
        "powerpc64" => "ppc64",
        "s390x" => "s390x",
        other => other,
    }
}
