//! What the resource attributes say about the host and each traced process: the host name and
//! id, the service name, and each process's executable and container, read from `/proc` while
//! the process is alive (snapshots of exited processes fall back to the main thread's command
//! name, without a container).

use std::{
    collections::{BTreeSet, HashMap},
    path::Path,
};

use super::container::Container;

/// The executable of one process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessInfo {
    /// `process.executable.name`: the file name of the executable.
    pub executable_name: String,
    /// `process.executable.path`, when `/proc/PID/exe` could be read.
    pub executable_path: Option<String>,
    /// `container.id` and `k8s.pod.uid`, from `/proc/PID/cgroup`.
    pub container: Container,
}

impl ProcessInfo {
    /// Read `/proc/PID/exe`; `None` when the process is gone or hides it.
    pub fn read(pid: u32) -> Option<ProcessInfo> {
        let link = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
        let path = link.to_string_lossy();
        // A binary replaced or removed while it runs still names its old path.
        let path = path.strip_suffix(" (deleted)").unwrap_or(&path).to_owned();
        let executable_name = path.rsplit('/').next().unwrap_or(&path).to_owned();
        Some(ProcessInfo {
            executable_name,
            executable_path: Some(path),
            container: super::container::read_container(pid),
        })
    }
}

/// The resource side of every export: host, service, and the processes seen so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceInfo {
    pub host_name: String,
    /// `host.id`: the machine-id, when there is one.
    pub host_id: Option<String>,
    /// `--service-name`; `None`: each process's executable name.
    pub service_name: Option<String>,
    /// `OTEL_RESOURCE_ATTRIBUTES`: on every resource, after those sframe-trace sets.
    pub attributes: Vec<(String, String)>,
    pub processes: HashMap<u32, ProcessInfo>,
}

impl ResourceInfo {
    /// This host's name (the kernel's `hostname`), with the configured service name and
    /// attributes.
    pub fn for_host(service_name: Option<String>, attributes: Vec<(String, String)>) -> ResourceInfo {
        let host_name = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_default();
        ResourceInfo {
            host_name,
            host_id: super::container::read_host_id(),
            service_name,
            attributes,
            processes: HashMap::new(),
        }
    }

    /// Read the executables of `pids` (again: a pid may have been reused since), keeping what
    /// was read before for those already gone; forget exited processes not in `pids`, so that
    /// a long session only remembers live ones.
    pub fn refresh(&mut self, pids: &BTreeSet<u32>) {
        for &pid in pids {
            if let Some(info) = ProcessInfo::read(pid) {
                self.processes.insert(pid, info);
            }
        }
        self.processes
            .retain(|pid, _| pids.contains(pid) || Path::new(&format!("/proc/{pid}")).exists());
    }
}
