//! Signals blocked on the calling thread and waited for there.

use std::{io, time::Duration};

/// A set of signals blocked on the calling thread, with the mask it replaced.
pub struct Blocked {
    set: libc::sigset_t,
    old: libc::sigset_t,
}

/// Block `signals` on the calling thread (threads it starts inherit the mask). The error is
/// errno's after pthread_sigmask failed.
pub fn block(signals: &[libc::c_int]) -> io::Result<Blocked> {
    // SAFETY: an all-zero sigset_t is a valid value to initialize with sigemptyset.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: sigset_t is owned and writable; the signal numbers are the caller's.
    unsafe {
        libc::sigemptyset(&mut set);
        for &signal in signals {
            libc::sigaddset(&mut set, signal);
        }
    }
    // SAFETY: an all-zero sigset_t is valid; pthread_sigmask reads `set` and writes `old`.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above; only the calling thread's mask changes.
    if unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Blocked { set, old })
}

impl Blocked {
    /// Wait up to `timeout` for one of the blocked signals: its number, or -1 (none came, or
    /// the wait was interrupted).
    pub fn wait(&self, timeout: Duration) -> libc::c_int {
        let timeout = libc::timespec {
            // The field's own type (`time_t`, whose alias musl's libc crate deprecates); a
            // timeout is seconds at most here.
            tv_sec: timeout.as_secs().min(i32::MAX as u64) as _,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `set` is initialized; a null siginfo is allowed; `timeout` is valid.
        unsafe { libc::sigtimedwait(&self.set, std::ptr::null_mut(), &timeout) }
    }

    /// Put back the mask that [`block`] replaced, on the calling thread (the one that blocked).
    pub fn restore(&self) {
        // SAFETY: `old` is the mask read by `block`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut()) };
    }
}
