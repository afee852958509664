//! System calls behind safe functions: the layer the rest of the tracer calls instead of `libc`.
//! Every `unsafe` block of the crate lives here, each with a `// SAFETY:` comment; the
//! wrappers keep the exact flags and error handling of the calls they replace (`O_NOFOLLOW`,
//! `O_EXCL`, `RESOLVE_*`), since the tracer runs as root beside processes it must not trust.
//! One file per concern: [`fs`] opens and names files, [`memory`] maps them, [`process`] handles
//! processes, threads and ptrace, [`signals`] masks and waits for signals, [`priority`]
//! schedules threads, [`limits`] and [`heap`] tune the process, [`alloc`] counts the heap,
//! `poll` registers descriptors with tokio, [`objfile`] reads the parts of object files the
//! unwind-info readers name, and [`session`] makes the process-wide settings of a tracing
//! session once, when it starts.

pub mod alloc;
pub mod fs;
pub mod heap;
pub mod limits;
pub mod memory;
pub mod poll;
pub mod priority;
pub mod process;
pub mod session;
pub mod signals;

/// Now on the kernel's clock (`bpf_ktime_get_ns` is `CLOCK_MONOTONIC`).
pub fn monotonic_ns() -> u64 {
    clock_ns_lossy(libc::CLOCK_MONOTONIC)
}

/// Nanoseconds of `clock`, `None` when it cannot be read (or overflows).
pub fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    u64::try_from(ts.tv_sec)
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(u64::try_from(ts.tv_nsec).ok()?)
}

/// Nanoseconds of `clock`, 0 for a part that cannot be read (the old, unchecked reading).
pub fn clock_ns_lossy(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

#[cfg(test)]
mod tests;

/// The page size in bytes (`sysconf(_SC_PAGESIZE)`, -1 if unknown).
pub fn page_size() -> libc::c_long {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) }
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, -1 if unknown).
pub fn clock_ticks() -> libc::c_long {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }
}
/// The size of a memory page (4096 if the system will not say).
pub fn page_bytes() -> u64 {
    u64::try_from(page_size()).unwrap_or(4096)
}

pub mod objfile;
