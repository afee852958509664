//! The vDSO's image, which has no file: read from the process's memory (bounded) and kept in
//! an anonymous memory file for symbolization.

use std::{fs::File, io::Write as _};

/// `[start, end)` of a process's memory (at most 1 MiB: a vDSO is a few pages).
pub(super) fn read_memory(pid: u32, start: u64, end: u64) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt as _;
    let len = usize::try_from(end.saturating_sub(start)).unwrap_or(0).min(1 << 20);
    let mut image = vec![0; len];
    std::fs::File::open(format!("/proc/{pid}/mem"))?.read_exact_at(&mut image, start)?;
    Ok(image)
}

/// An anonymous memory file (`memfd_create`) holding `bytes`: no path anyone could have
/// prepared, nothing to remove afterwards.
pub(super) fn memory_file(name: &str, bytes: &[u8]) -> std::io::Result<File> {
    let name = std::ffi::CString::new(format!("sframe-trace-{name}")).map_err(std::io::Error::other)?;
    let mut file = crate::sys::memory::memfd(&name)?;
    file.write_all(bytes)?;
    Ok(file)
}
