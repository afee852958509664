//! Processes and threads: ids, signals sent, exits waited for (waitpid, pidfd), and the ptrace
//! requests that hold a launched command at its entry point.

use std::{
    io,
    os::fd::{FromRawFd as _, OwnedFd},
    os::unix::process::CommandExt as _,
};

/// This process's id.
pub fn pid() -> u32 {
    std::process::id()
}

/// The calling thread's id.
pub fn thread_id() -> u32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }.unsigned_abs()
}

/// The effective user id.
/// Run `f` when the process exits normally (`atexit`); `false` when it could not be
/// registered. `f` must not unwind.
pub fn at_exit(f: extern "C" fn()) -> bool {
    // SAFETY: `f` is a plain function without arguments; atexit only records its address.
    unsafe { libc::atexit(f) == 0 }
}

/// The process's effective user id.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether thread `tid` of this process still exists (tgkill with signal 0).
pub fn thread_alive(tid: u32) -> bool {
    // SAFETY: signal 0 only checks that the thread exists; no memory is passed.
    unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid as libc::c_int, 0) == 0 }
}

/// Send `signal` to `pid` (kill(2)); the caller knows the pid is its own unreaped child.
pub fn kill(pid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: kill(2) passes no memory.
    if unsafe { libc::kill(pid, signal) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A pidfd of `pid` (pidfd_open), readable once the process has exited.
pub fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open(2) takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as std::os::fd::RawFd) })
}

/// Make the child of `command` a tracee of this process (PTRACE_TRACEME between fork and exec):
/// it stops at exec.
pub fn trace_me_on_exec(command: &mut std::process::Command) {
    // SAFETY: the closure runs in the child between fork and exec and only calls ptrace(2),
    // which is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// waitpid(pid, WNOHANG | __WALL): `Some(status)` once it changed state, `None` if not yet.
pub fn wait_nohang(pid: libc::pid_t) -> io::Result<Option<libc::c_int>> {
    let mut status = 0;
    // SAFETY: waitpid on a child with a valid status pointer.
    let got = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG | libc::__WALL) };
    if got == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok((got == pid).then_some(status))
}

/// PTRACE_DETACH of a stopped tracee.
pub fn ptrace_detach(pid: libc::pid_t) -> io::Result<()> {
    // SAFETY: PTRACE_DETACH passes no memory of ours.
    if unsafe { libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// PTRACE_CONT of a stopped tracee, delivering `signal` (0 for none).
pub fn ptrace_cont(pid: libc::pid_t, signal: usize) -> io::Result<()> {
    // SAFETY: PTRACE_CONT passes no memory of ours.
    if unsafe { libc::ptrace(libc::PTRACE_CONT, pid, 0, signal) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The word at `addr` in the tracee (PTRACE_PEEKTEXT; -1 is a word like any other: errno tells).
pub fn ptrace_peek(pid: libc::pid_t, addr: u64) -> io::Result<u64> {
    // SAFETY: errno is this thread's; PTRACE_PEEKTEXT reads the tracee, not our memory.
    unsafe {
        *libc::__errno_location() = 0;
        let word = libc::ptrace(libc::PTRACE_PEEKTEXT, pid, addr, 0);
        if word == -1 && *libc::__errno_location() != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(word as u64)
    }
}

/// Write `word` at `addr` in the tracee (PTRACE_POKETEXT).
pub fn ptrace_poke(pid: libc::pid_t, addr: u64, word: u64) -> io::Result<()> {
    // SAFETY: PTRACE_POKETEXT writes the tracee's memory, not ours.
    if unsafe { libc::ptrace(libc::PTRACE_POKETEXT, pid, addr, word) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The tracee's registers (PTRACE_GETREGS).
#[cfg(target_arch = "x86_64")]
pub fn ptrace_regs(pid: libc::pid_t) -> io::Result<libc::user_regs_struct> {
    // SAFETY: an all-zero user_regs_struct is valid; PTRACE_GETREGS fills it.
    let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    // SAFETY: `regs` is a valid, writable user_regs_struct.
    if unsafe { libc::ptrace(libc::PTRACE_GETREGS, pid, 0, &mut regs) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(regs)
}

/// Set the tracee's registers (PTRACE_SETREGS).
#[cfg(target_arch = "x86_64")]
pub fn ptrace_set_regs(pid: libc::pid_t, regs: &libc::user_regs_struct) -> io::Result<()> {
    // SAFETY: `regs` is a valid user_regs_struct that the kernel only reads.
    if unsafe { libc::ptrace(libc::PTRACE_SETREGS, pid, 0, regs) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The tracee's general registers (PTRACE_GETREGSET, NT_PRSTATUS).
#[cfg(target_arch = "aarch64")]
pub fn ptrace_regs(pid: libc::pid_t) -> io::Result<libc::user_regs_struct> {
    // SAFETY: an all-zero user_regs_struct is valid; PTRACE_GETREGSET fills it through the
    // iovec, which describes it exactly.
    let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: (&mut regs as *mut libc::user_regs_struct).cast(),
        iov_len: std::mem::size_of::<libc::user_regs_struct>(),
    };
    // SAFETY: as above.
    if unsafe { libc::ptrace(libc::PTRACE_GETREGSET, pid, libc::NT_PRSTATUS, &mut iov) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(regs)
}
