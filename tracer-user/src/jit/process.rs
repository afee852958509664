//! Finding and opening a traced process's JIT files as a root process beside hostile ones
//! must: the file is looked up inside the process's own root (`/proc/PID/root`, held open
//! from the first look, so that it can still be read once the process has exited) with
//! `openat2(RESOLVE_IN_ROOT)` and `O_NOFOLLOW` (never out of a container, never through a
//! symlink), named with the process's pid in its own pid namespace (the last `NSpid` of
//! `/proc/PID/status`); it is read only if it is a regular file owned by the process's user
//! or by root (as perf requires), not larger than [`MAX_FILE`], and not last written before the
//! process started or after it exited (a map an earlier or later process with the same pid
//! wrote names other code).

use std::{
    fs::File,
    io::{self, Read as _},
    os::unix::fs::MetadataExt as _,
    path::Path,
};

use crate::sys::objfile::reopen_checked;
use tracer_unwind::objfile::ObjectFileError;

/// The largest JIT file read (a perf map of a million functions is about 80 MiB).
pub const MAX_FILE: u64 = 256 << 20;

/// Bytes of a `/proc/PID/FILE` read by [`proc_file`] at most.
pub const MAX_PROC_FILE: u64 = 64 << 10;

/// The start of `/proc/PID/FILE` (`stat`, `status`, `cmdline`, `environ`), at most
/// [`MAX_PROC_FILE`] bytes; `None` when unreadable.
pub fn proc_file(pid: u32, file: &str) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    File::open(format!("/proc/{pid}/{file}"))
        .ok()?
        .take(MAX_PROC_FILE)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(bytes)
}

/// What identifies a process's JIT files: its root, its pid there and its user.
#[derive(Debug)]
pub struct ProcessView {
    /// `/proc/PID/root` as an `O_PATH` descriptor.
    pub root: File,
    /// The pid in the process's own pid namespace.
    pub nspid: u32,
    /// The effective user id, as the tracer sees it.
    pub uid: u32,
    /// When it started (`/proc/PID/stat` field 22): tells it from a later process that gets
    /// the same pid.
    pub start_time: u64,
    /// The same instant as nanoseconds since the Unix epoch (0: unknown), what file times
    /// are compared with, and on `CLOCK_MONOTONIC` (0: unknown), what sample times are (both
    /// at most a clock tick early).
    pub started_unix_ns: u64,
    pub started_mono_ns: u64,
    /// When it exited, in nanoseconds since the Unix epoch (0: running or unknown): a file
    /// written later is another process's.
    pub ended_unix_ns: u64,
}

/// How much earlier than its process's start a JIT file may have been written and still be
/// taken as its own (the start is known to a clock tick; the wall clock can be stepped).
const STALE_SLACK_NS: u64 = 1_000_000_000;

/// Why a JIT file was not read (the summary counts them by [`Refusal::name`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Refusal {
    /// A symbolic link, a FIFO, a directory, a device.
    NotRegular,
    /// Owned by neither the process's user nor root.
    OtherOwner,
    /// Larger than [`MAX_FILE`].
    TooLarge,
    /// Last written before its process started or after it exited: another process's.
    Stale,
    /// It could not be opened or read (other than not being there).
    Unreadable,
}

impl Refusal {
    /// The name the summary counts it under.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::NotRegular => "not_regular",
            Refusal::OtherOwner => "other_owner",
            Refusal::TooLarge => "too_large",
            Refusal::Stale => "stale",
            Refusal::Unreadable => "unreadable",
        }
    }
}

/// The view of process `pid`, `None` when it is gone (or `/proc` cannot tell).
pub fn view(pid: u32) -> Option<ProcessView> {
    let mut status = Vec::new();
    File::open(format!("/proc/{pid}/status"))
        .ok()?
        .take(64 << 10)
        .read_to_end(&mut status)
        .ok()?;
    let (nspid, uid) = status_ids(&status, pid)?;
    let start_time = start_time(pid)?;
    let root = crate::procmaps::open_dir(Path::new(&format!("/proc/{pid}/root")))?;
    // Looked at again: the root must be that of the process whose ids were read.
    (self::start_time(pid)? == start_time).then_some(ProcessView {
        root,
        nspid,
        uid,
        start_time,
        started_unix_ns: started_on(libc::CLOCK_REALTIME, start_time).unwrap_or(0),
        started_mono_ns: started_on(libc::CLOCK_MONOTONIC, start_time).unwrap_or(0),
        ended_unix_ns: 0,
    })
}

/// Our own view, with `root` as the root and `nspid` as the pid (for tests of what reads files).
#[cfg(test)]
pub(crate) fn own_view(root: &Path, nspid: u32) -> ProcessView {
    ProcessView {
        root: crate::procmaps::open_dir(root).expect("a directory"),
        nspid,
        uid: crate::sys::process::effective_uid(),
        start_time: 0,
        started_unix_ns: 0,
        started_mono_ns: 0,
        ended_unix_ns: 0,
    }
}

/// `mono_ns` (`CLOCK_MONOTONIC`, the kernel's sample and notice times) as nanoseconds since
/// the Unix epoch, from the clocks now.
pub fn unix_of_monotonic(mono_ns: u64) -> Option<u64> {
    let offset = i128::from(read_clock(libc::CLOCK_REALTIME)?) - i128::from(read_clock(libc::CLOCK_MONOTONIC)?);
    u64::try_from(i128::from(mono_ns) + offset).ok()
}

/// `clock` now, in nanoseconds.
fn read_clock(clock: libc::clockid_t) -> Option<u64> {
    crate::sys::clock_ns(clock)
}

/// `start_time` (clock ticks after boot) on `clock`, from the clocks now: `clock` less the
/// time since boot.
fn started_on(clock: libc::clockid_t, start_time: u64) -> Option<u64> {
    let ticks = u64::try_from(crate::sys::clock_ticks()).ok().filter(|&t| t > 0)?;
    // `clock` at boot (negative for a clock that stood still while suspended, such as
    // `CLOCK_MONOTONIC`, after a suspend).
    let boot = i128::from(read_clock(clock)?) - i128::from(read_clock(libc::CLOCK_BOOTTIME)?);
    u64::try_from(boot + i128::from(start_time.checked_mul(1_000_000_000)? / ticks)).ok()
}

/// When the process that holds `pid` now started, on `CLOCK_MONOTONIC` (the kernel's sample
/// and notice times, at most a clock tick early), `None` when there is none.
pub fn started_mono(pid: u32) -> Option<u64> {
    started_on(libc::CLOCK_MONOTONIC, start_time(pid)?).filter(|&s| s > 0)
}

/// When process `pid` started, `None` when there is none.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    stat_start_time(&stat)
}

/// Field 22 of `/proc/PID/stat` text (the command name, field 2, is in parentheses and may
/// hold spaces and parentheses: fields are counted after its last `)`).
pub fn stat_start_time(stat: &[u8]) -> Option<u64> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// The last `NSpid` (the pid inside the process's namespace; `pid` on kernels without the
/// line) and the effective `Uid` of `/proc/PID/status` text.
pub fn status_ids(status: &[u8], pid: u32) -> Option<(u32, u32)> {
    let text = String::from_utf8_lossy(status);
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .map(|rest| rest.split_ascii_whitespace().map(str::parse::<u32>).collect::<Vec<_>>())
    };
    let uid = match field("Uid:")?.as_slice() {
        [_, Ok(effective), ..] => *effective,
        _ => return None,
    };
    let nspid = match field("NSpid:") {
        Some(ids) => *ids.last()?.as_ref().ok()?,
        None => pid,
    };
    Some((nspid, uid))
}

/// `path` (absolute, as the process sees it) inside the process's root, open for reading
/// with its size, if it is a file the process may have written (module docs). `Ok(None)`
/// when there is no such file.
pub fn open_trusted(view: &ProcessView, path: &Path) -> Result<Option<(File, u64)>, Refusal> {
    let handle = match crate::procmaps::open_in_root(&view.root, path) {
        Ok(handle) => handle,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        // O_NOFOLLOW on a symlink as the last component.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(Refusal::NotRegular),
        Err(_) => return Err(Refusal::Unreadable),
    };
    let meta = handle.metadata().map_err(|_| Refusal::Unreadable)?;
    check(&meta, view.uid)?;
    let written_ns = u64::try_from(meta.mtime()).ok().and_then(|s| {
        s.checked_mul(1_000_000_000)?
            .checked_add(u64::try_from(meta.mtime_nsec()).ok()?)
    });
    let before = |w: u64| view.started_unix_ns > 0 && w.saturating_add(STALE_SLACK_NS) < view.started_unix_ns;
    let after = |w: u64| view.ended_unix_ns > 0 && w > view.ended_unix_ns.saturating_add(STALE_SLACK_NS);
    if written_ns.is_some_and(|w| before(w) || after(w)) {
        return Err(Refusal::Stale);
    }
    let file = reopen_checked(&handle, &meta).map_err(|e| match e {
        ObjectFileError::NotRegular { .. } => Refusal::NotRegular,
        _ => Refusal::Unreadable,
    })?;
    Ok(Some((file, meta.size())))
}

/// A file of metadata `meta` is trusted for a process of user `uid` (module docs).
pub fn check(meta: &std::fs::Metadata, uid: u32) -> Result<(), Refusal> {
    if !meta.file_type().is_file() {
        return Err(Refusal::NotRegular);
    }
    if meta.uid() != uid && meta.uid() != 0 {
        return Err(Refusal::OtherOwner);
    }
    if meta.size() > MAX_FILE {
        return Err(Refusal::TooLarge);
    }
    Ok(())
}
