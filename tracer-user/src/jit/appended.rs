//! Reading what was appended to a JIT file (perf map or jitdump) since the last read, in chunks,
//! until its size when checked or a deadline: the loop both readers share. What the bytes mean
//! is the caller's (`take`); this only reads, keeps the bytes not taken yet, and moves the
//! offset of the last complete line or record. It never blocks past a chunk once `until` passed.

use std::{fs::File, os::unix::fs::FileExt as _, time::Instant};

/// Read `file` from `*read` up to `size` in chunks of `chunk` bytes, or until `until`, handing
/// `take` the bytes read and not taken yet and whether the file's end was reached; `take`
/// returns how many it used (they are dropped and `*read` moves past them) and whether to stop
/// there. `Ok(true)` when it got to `size` or `take` stopped it, `Ok(false)` when cut short by
/// `until`; `unreadable` when a read fails, `take`'s own error as it is.
pub(crate) fn read_appended<E: Copy>(
    file: &File,
    read: &mut u64,
    size: u64,
    until: Instant,
    chunk: usize,
    unreadable: E,
    mut take: impl FnMut(&[u8], bool) -> Result<(usize, bool), E>,
) -> Result<bool, E> {
    let mut pending: Vec<u8> = Vec::new();
    let mut at = *read;
    let mut buf = vec![0; chunk];
    while at < size {
        if Instant::now() >= until {
            return Ok(false);
        }
        let want = usize::try_from(size - at).unwrap_or(chunk).min(chunk);
        let got = file.read_at(&mut buf[..want], at).map_err(|_| unreadable)?;
        if got == 0 {
            break;
        }
        at += got as u64;
        pending.extend_from_slice(&buf[..got]);
        let (used, stop) = take(&pending, at >= size)?;
        *read += used as u64;
        pending.drain(..used);
        if stop {
            return Ok(true);
        }
    }
    Ok(true)
}
