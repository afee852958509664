//! What the bench reads from and does to the operating system: the load average, a process's
//! CPU clock, `wait4` with its rusage, signals, a process's state and descendants, and a sysctl
//! that is put back when the bench is done. Thin wrappers only: no measuring policy here.

use std::{
    path::Path,
    thread::sleep,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

/// The 1, 5 and 15 minute load averages.
pub fn loadavg() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut fields = text.split_whitespace().map(|f| f.parse().unwrap_or(f64::NAN));
    [(); 3].map(|()| fields.next().unwrap_or(f64::NAN))
}

/// Online CPUs.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// `uname -r`.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// CPU time (all threads, user + system) that process `pid` has used so far, in seconds.
pub fn process_cpu(pid: u32) -> Option<f64> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `clock` is a valid out-pointer; the call only reads `pid`.
    if unsafe { libc::clock_getcpuclockid(pid as libc::pid_t, &mut clock) } != 0 {
        return None;
    }
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
}

/// How a reaped child ended, and the CPU time (user + system) it and the children it reaped
/// used.
pub struct Reaped {
    pub success: bool,
    pub cpu: f64,
}

/// Reap child `pid` (which must not be waited for through `std::process::Child` as well),
/// sending it SIGINT after `limit` and SIGKILL 10 s later if it is still running.
pub fn wait4(pid: u32, limit: Duration) -> anyhow::Result<Reaped> {
    let start = Instant::now();
    let mut sent = None;
    loop {
        if let Some(reaped) = try_wait4(pid)? {
            return Ok(reaped);
        }
        let waited = start.elapsed();
        match sent {
            None if waited > limit => {
                eprintln!("bench: pid {pid} still running after {limit:?}: SIGINT");
                signal(pid, libc::SIGINT);
                sent = Some(libc::SIGINT);
            }
            Some(libc::SIGINT) if waited > limit + Duration::from_secs(10) => {
                signal(pid, libc::SIGKILL);
                sent = Some(libc::SIGKILL);
            }
            _ => sleep(Duration::from_millis(5)),
        }
    }
}

/// `wait4(pid, WNOHANG)`: `None` while it runs.
fn try_wait4(pid: u32) -> anyhow::Result<Option<Reaped>> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `status` and `usage` are valid out-pointers.
    let got = unsafe { libc::wait4(pid as libc::pid_t, &mut status, libc::WNOHANG, &mut usage) };
    if got < 0 {
        bail!("wait4({pid}): {}", std::io::Error::last_os_error());
    }
    if got != pid as libc::pid_t {
        return Ok(None);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    Ok(Some(Reaped {
        success: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        cpu: secs(usage.ru_utime) + secs(usage.ru_stime),
    }))
}

/// Send `sig` to `pid` (errors ignored: the process may be gone).
pub fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill has no memory arguments.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// `(state, ppid, comm)` of `pid` from /proc/PID/stat.
fn stat(pid: u32) -> Option<(char, u32, String)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text[open + 1..close].to_owned();
    let mut rest = text[close + 1..].split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some((state, ppid, comm))
}

/// The processes on the host (the numeric entries of /proc).
pub fn process_count() -> usize {
    std::fs::read_dir("/proc").map_or(0, |dir| {
        dir.filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
            })
            .count()
    })
}

/// Wait until `pid` is stopped (by a signal: state `T`); fail after `limit` or if it exits.
pub fn wait_stopped(pid: u32, limit: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        match stat(pid) {
            Some(('T', ..)) => return Ok(()),
            Some(('Z' | 'X', ..)) | None => bail!("pid {pid} exited instead of stopping"),
            Some(_) if Instant::now() > deadline => bail!("pid {pid} did not stop within {limit:?}"),
            Some(_) => sleep(Duration::from_millis(1)),
        }
    }
}

/// Wait until `pid` has exited (a zombie, or reaped); fail after `limit`.
pub fn wait_exited(pid: u32, limit: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        match stat(pid) {
            Some(('Z' | 'X', ..)) | None => return Ok(()),
            Some(_) if Instant::now() > deadline => bail!("pid {pid} still running after {limit:?}"),
            Some(_) => sleep(Duration::from_millis(1)),
        }
    }
}

/// The first descendant of `ancestor` whose command name is `comm`, waiting up to `limit`.
pub fn find_descendant(ancestor: u32, comm: &str, limit: Duration) -> anyhow::Result<u32> {
    let deadline = Instant::now() + limit;
    loop {
        let procs: Vec<(u32, u32, String)> = std::fs::read_dir("/proc")?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter_map(|pid| stat(pid).map(|(_, ppid, c)| (pid, ppid, c)))
            .collect();
        let mut family = vec![ancestor];
        // Parents come before children often, but not always: repeat until nothing is added.
        loop {
            let before = family.len();
            for (pid, ppid, _) in &procs {
                if family.contains(ppid) && !family.contains(pid) {
                    family.push(*pid);
                }
            }
            if family.len() == before {
                break;
            }
        }
        if let Some((pid, ..)) = procs
            .iter()
            .find(|(p, _, c)| c == comm && *p != ancestor && family.contains(p))
        {
            return Ok(*pid);
        }
        if Instant::now() > deadline {
            bail!("no process {comm} under pid {ancestor} within {limit:?}");
        }
        sleep(Duration::from_millis(2));
    }
}

/// The files of `pid`'s executable mappings, in address order, each once.
pub fn executable_files(pid: u32) -> anyhow::Result<Vec<String>> {
    let maps =
        std::fs::read_to_string(format!("/proc/{pid}/maps")).with_context(|| format!("reading the maps of {pid}"))?;
    let mut files: Vec<String> = Vec::new();
    for line in maps.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let [_, perms, _, _, _, path, ..] = fields[..]
            && perms.contains('x')
            && path.starts_with('/')
            && !files.iter().any(|f| f == path)
        {
            files.push(path.to_owned());
        }
    }
    Ok(files)
}

/// A sysctl set for the bench and put back as it was when this is dropped.
pub struct Sysctl {
    path: String,
    old: String,
}

impl Sysctl {
    pub fn set(name: &str, value: &str) -> anyhow::Result<Sysctl> {
        let path = format!("/proc/sys/{}", name.replace('.', "/"));
        let old = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        std::fs::write(&path, value).with_context(|| format!("setting {name} = {value}"))?;
        eprintln!("bench: sysctl {name} = {value} (was {})", old.trim());
        Ok(Sysctl { path, old })
    }
}

impl Drop for Sysctl {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(&self.path, &self.old) {
            eprintln!("bench: cannot restore {}: {e}", self.path);
        } else {
            eprintln!("bench: restored {} = {}", self.path, self.old.trim());
        }
    }
}

/// Size of a file in bytes, 0 if it cannot be read.
pub fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}
