//! tracefs, through which every tracepoint (the `-e tracepoint:` events and the `munmap`
//! programs) is attached: found where it is mounted, else mounted at `/sys/kernel/tracing`,
//! once when the kernel side is loaded, before the first attach. It must come first: aya looks
//! tracefs up once per process, at its first tracepoint attach, and remembers a miss, so a
//! mount made after that lookup is never seen. A mount made here stays after the session (as
//! perf's does): other tools find tracefs where the kernel documents it.

use std::path::Path;

/// Where tracefs is mounted when it is, in the order aya looks (the second is debugfs's
/// automount point on kernels that have both).
const MOUNTS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The tracefs of this session: its root, or why there is none (a sentence).
pub(super) type Tracefs = Result<&'static str, String>;

/// The mount with an `events` directory, if any.
fn find() -> Option<&'static str> {
    MOUNTS.into_iter().find(|dir| Path::new(dir).join("events").is_dir())
}

/// Find tracefs, or mount it at `/sys/kernel/tracing` and say so on stderr.
pub(super) fn find_or_mount() -> Tracefs {
    if let Some(root) = find() {
        return Ok(root);
    }
    let target = MOUNTS[0];
    if let Err(err) = crate::sys::fs::mount_tracefs() {
        return Err(format!(
            "tracefs is not mounted, and mounting it at {target} failed: {err}"
        ));
    }
    match find() {
        Some(root) => {
            eprintln!("sframe-trace: mounted tracefs at {root} (tracepoints attach through it)");
            Ok(root)
        }
        None => Err(format!("tracefs mounted at {target} has no events directory")),
    }
}

/// Whether `root` (a tracefs) has the tracepoint `category:name`.
pub(super) fn has_tracepoint(root: &str, category: &str, name: &str) -> bool {
    Path::new(root)
        .join("events")
        .join(category)
        .join(name)
        .join("id")
        .exists()
}
