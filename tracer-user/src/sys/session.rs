//! The process-wide settings of a tracing session, made once when it starts ([`prepare`], which
//! the binary calls before it traces or loads the eBPF program): no constructor deeper in the
//! code changes them as a side effect.
//!
//! - `RLIMIT_MEMLOCK` lifted: kernels before 5.11 charge BPF maps to it (the limit left in place,
//!   without CAP_SYS_RESOURCE, is kept for the loader's error, [`memlock_left`]);
//! - `RLIMIT_NOFILE`'s soft limit lifted to the hard one: every object the registry knows holds
//!   its file open;
//! - glibc's `M_MMAP_THRESHOLD` fixed at 256 KiB. glibc serves blocks from that threshold up
//!   with mappings of their own, but raises it (up to 32 MiB) each time such a block is freed;
//!   from then on the scratch of table builds and symbol files (megabytes each, freed soon
//!   after) is carved out of the arenas, where the small blocks that outlive it pin their pages:
//!   over a session under churn, a hundred megabytes and more of free memory stayed resident.
//!   (musl's allocator returns freed mappings by itself: nothing to tune there.)
//!
//! The session thread's scheduling (`--drain-priority`) is set by `trace::run` on that thread,
//! as it starts: it is the calling thread's, not the process's.

use std::sync::OnceLock;

/// Blocks from this size up get mappings of their own.
const MMAP_THRESHOLD: libc::c_int = 256 << 10;

/// What [`prepare`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prepared {
    /// The memlock limit in bytes left in place (it could not be lifted), `None` when there is
    /// none.
    pub memlock_left: Option<u64>,
}

static PREPARED: OnceLock<Prepared> = OnceLock::new();

/// Make the session's process-wide settings (module docs); later calls do nothing and return
/// the first result.
pub fn prepare() -> Prepared {
    *PREPARED.get_or_init(|| {
        let memlock_left = super::limits::raise_memlock();
        super::limits::raise_open_files();
        super::heap::mmap_threshold(MMAP_THRESHOLD);
        Prepared { memlock_left }
    })
}

/// The memlock limit [`prepare`] left in place; `None` when it lifted it, or was not called
/// (nothing was changed then, and nothing is known).
pub fn memlock_left() -> Option<u64> {
    PREPARED.get().and_then(|prepared| prepared.memlock_left)
}
