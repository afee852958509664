//! Resource limits of the process (raised once, at the start of a session).

/// The type of an rlimit's resource: glibc's own enum type, a plain `int` elsewhere (musl).
#[cfg(target_env = "gnu")]
pub type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
pub type Resource = libc::c_int;

/// Lift the memlock limit (the eBPF maps of kernels before 5.11 are charged to it): `None`
/// when it is now unlimited, else the limit left in place.
pub fn raise_memlock() -> Option<u64> {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads the struct we pass; failure only leaves the old limit in place.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) } == 0 {
        return None;
    }
    let mut limit = unlimited;
    // SAFETY: getrlimit writes the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) } != 0 || limit.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    log::debug!("could not raise RLIMIT_MEMLOCK; loading may fail on kernels before 5.11");
    Some(limit.rlim_cur)
}

/// Lift the soft limit on open files to the hard one (failure leaves it as it was).
pub fn raise_open_files() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 && limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: setrlimit reads the struct we pass; failure leaves the old limit in place.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    }
}

/// The (soft, hard) limits of `resource` of this process.
pub fn get(resource: Resource) -> std::io::Result<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit into `limit`, a valid rlimit.
    if unsafe { libc::getrlimit(resource, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((limit.rlim_cur, limit.rlim_max))
}

/// The hard limit of `resource` of this process.
pub fn hard(resource: Resource) -> std::io::Result<u64> {
    Ok(get(resource)?.1)
}
