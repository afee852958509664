//! What the resource attributes say about the host and each traced process: the host name and
//! id, the service name, and each process's executable and container, read from `/proc` while
//! the process is alive (snapshots of exited processes fall back to the main thread's command
//! name, without a container). A process's language runtime (`process.runtime.*`) is what the
//! session detected of it (a CPython interpreter and its version); failing that, an executable
//! named `node` or `nodejs` is said to be Node.js, without a version and with a description
//! saying it was identified by name. Nothing else is guessed (a `java` executable does not say
//! which runtime it is, which is what the attribute names for Java).

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
    /// `process.runtime.*`: the runtime the session detected in the process.
    pub runtime: Option<Runtime>,
}

/// The language runtime a process runs, as the session detected it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Runtime {
    /// `process.runtime.name` (`cpython`, the name `sys.implementation.name` gives).
    pub name: &'static str,
    /// `process.runtime.version`: `3.11.7`, or `3.9` when only the minor release is known;
    /// `None` when not known.
    pub version: Option<String>,
    /// `process.runtime.description`: how the runtime was identified.
    pub description: String,
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
            runtime: None,
        })
    }
}

impl Runtime {
    /// The runtime an executable's name says, for Node.js only (labelled as identified by
    /// name, without a version).
    pub fn by_executable_name(name: &str) -> Option<Runtime> {
        matches!(name, "node" | "nodejs").then(|| Runtime {
            name: "nodejs",
            version: None,
            description: format!("Node.js, identified by the executable name `{name}` (version not read)"),
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
    /// a long session only remembers live ones. `runtimes` are the runtimes the session knows
    /// of: a process read again has the one given or none, a process gone keeps the one it had
    /// unless one is given.
    pub fn refresh(&mut self, pids: &BTreeSet<u32>, runtimes: &HashMap<u32, Runtime>) {
        for &pid in pids {
            let runtime = runtimes.get(&pid).cloned();
            if let Some(info) = ProcessInfo::read(pid) {
                let runtime = runtime.or_else(|| Runtime::by_executable_name(&info.executable_name));
                self.processes.insert(pid, ProcessInfo { runtime, ..info });
            } else if let (Some(info), Some(runtime)) = (self.processes.get_mut(&pid), runtime) {
                info.runtime = Some(runtime);
            }
        }
        self.processes
            .retain(|pid, _| pids.contains(pid) || Path::new(&format!("/proc/{pid}")).exists());
    }
}
