//! Threads' scheduling: real-time (SCHED_FIFO) priorities and nice values.

use std::io;

/// A `sched_param` of real-time priority `p` (musl's has more fields than glibc's, all zero).
fn fifo_param(p: u8) -> libc::sched_param {
    // SAFETY: sched_param is plain integers (and, in musl, timespecs): all zero is valid.
    let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
    param.sched_priority = i32::from(p);
    param
}

/// Run `thread`, a live thread of this process, under SCHED_FIFO at `p`; the error number on
/// failure.
pub fn thread_fifo(thread: &std::thread::JoinHandle<()>, p: u8) -> Result<(), libc::c_int> {
    use std::os::unix::thread::JoinHandleExt as _;
    let param = fifo_param(p);
    // std's raw handle is the C library's `pthread_t` (an integer in glibc, a pointer in musl).
    let handle = thread.as_pthread_t() as libc::pthread_t;
    // SAFETY: `thread` is a live thread of this process (its handle is held); `param`
    // outlives the call.
    let r = unsafe { libc::pthread_setschedparam(handle, libc::SCHED_FIFO, &param) };
    if r != 0 {
        return Err(r);
    }
    Ok(())
}

/// Run the calling thread under SCHED_FIFO at `p`, reset in children it forks.
pub fn own_fifo(p: u8) -> io::Result<()> {
    let param = fifo_param(p);
    // SAFETY: sets the calling thread's policy (pid 0); `param` outlives the call.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Set the calling thread's nice value.
pub fn own_nice(n: i8) -> io::Result<()> {
    let tid = super::process::thread_id();
    // SAFETY: sets the priority of one thread of this process; no memory is passed.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, libc::c_int::from(n)) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
