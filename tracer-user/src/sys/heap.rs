//! The C allocator's statistics and tuning (glibc only; musl's keeps none and needs none).

/// Hand memory freed in glibc's arenas back to the system (malloc_trim).
pub fn trim() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free memory of glibc's arenas to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Serve blocks from `bytes` up with mappings of their own (`M_MMAP_THRESHOLD`), which also
/// stops glibc from raising that threshold by itself. Failure leaves it as it was.
#[cfg_attr(not(target_env = "gnu"), expect(unused_variables, reason = "only glibc is tuned"))]
pub fn mmap_threshold(bytes: libc::c_int) {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets a parameter of glibc's allocator; failure leaves it as it was.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, bytes);
    }
}

/// What glibc's allocator holds, in bytes: in use, free in its arenas, the arenas, and in
/// mappings of their own.
#[cfg(target_env = "gnu")]
pub struct Stats {
    pub in_use: usize,
    pub free: usize,
    pub arena: usize,
    pub mmap: usize,
}

/// glibc's statistics now (mallinfo2).
#[cfg(target_env = "gnu")]
pub fn stats() -> Stats {
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    let info = unsafe { libc::mallinfo2() };
    Stats {
        in_use: info.uordblks,
        free: info.fordblks,
        arena: info.arena,
        mmap: info.hblkhd,
    }
}
