//! System calls behind safe functions: the layer the rest of the tracer calls instead of `libc`
//! (moved here one at a time; see docs/design.md).

/// Now on the kernel's clock (`bpf_ktime_get_ns` is `CLOCK_MONOTONIC`).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

/// The size of a memory page (4096 if the system will not say).
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

pub mod objfile;
