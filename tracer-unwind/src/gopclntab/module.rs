//! Where a Go module's `go:func.*` lies (`moduledata.gofunc`, Go 1.18 on): the base the
//! funcdata offsets of [`super::inline`] are taken from. A stripped binary has no symbol for
//! it, so it is read from the module's `runtime.moduledata`, which the linker writes into the
//! data (`.noptrdata`; its own `.go.module` from Go 1.26) and which starts with the table's
//! address (`pcHeader`), then the slice of function names (whose data pointer is the table's
//! address plus the names' offset). Its later fields moved between releases, but `rodata`
//! (the start of `.rodata`) is always followed by `gofunc`, which lies in read-only data
//! (`.rodata`; the table's own section from 1.26): that pair is looked for among the next
//! [`FIELDS`] words.
//!
//! Bounded: at most [`MAX_SCAN`] bytes of data are scanned, in chunks; a binary whose words are
//! left to relocations (a position-independent build holds zeros there) has no match, and
//! then no inlined frames are named.

use super::{Bytes, Table};

/// Bytes of data scanned at most for the module data.
pub const MAX_SCAN: u64 = 64 << 20;
/// Words of `moduledata` looked through for `rodata, gofunc` (it sits about 40 words in).
const FIELDS: u64 = 96;
/// Bytes read at a time.
const CHUNK: usize = 64 << 10;

impl Table {
    /// `go:func.*`'s address, from the module data in `data` (a section of `size` bytes), for
    /// the table found at address `table_at`, with `.rodata` at `rodata` and `readonly` saying
    /// which addresses are read-only data. `None` when it is not found or does not check out.
    pub fn gofunc<D: Bytes + ?Sized>(
        &self,
        data: &D,
        size: u64,
        table_at: u64,
        rodata: u64,
        readonly: &dyn Fn(u64) -> bool,
    ) -> Option<u64> {
        let ptr = u64::from(self.ptr);
        let names_at = table_at.checked_add(self.funcnames)?;
        let word = |at: u64| -> Option<u64> {
            let mut buf = [0u8; 8];
            let buf = &mut buf[..self.ptr as usize];
            data.read_at(at, buf).then(|| self.word_of(buf))
        };
        let mut chunk = vec![0u8; CHUNK];
        let mut start = 0u64;
        while start < size.min(MAX_SCAN) {
            let n = usize::try_from(size - start).unwrap_or(usize::MAX).min(CHUNK);
            let n = n - n % self.ptr as usize;
            if n == 0 || !data.read_at(start, &mut chunk[..n]) {
                return None;
            }
            for (i, w) in chunk[..n].chunks_exact(self.ptr as usize).enumerate() {
                if self.word_of(w) != table_at {
                    continue;
                }
                let at = start + i as u64 * ptr;
                if word(at + ptr) != Some(names_at) {
                    continue;
                }
                // `rodata, gofunc`, the second in read-only data.
                let found = (2..FIELDS).find_map(|k| {
                    let first = word(at.checked_add(k * ptr)?)?;
                    let second = word(at.checked_add((k + 1) * ptr)?)?;
                    (first == rodata && readonly(second)).then_some(second)
                });
                if found.is_some() {
                    return found;
                }
            }
            start += n as u64;
        }
        None
    }

    /// A pointer-sized word in the table's byte order.
    fn word_of(&self, bytes: &[u8]) -> u64 {
        let mut buf = [0u8; 8];
        if self.little {
            buf[..bytes.len()].copy_from_slice(bytes);
            u64::from_le_bytes(buf)
        } else {
            buf[8 - bytes.len()..].copy_from_slice(bytes);
            u64::from_be_bytes(buf)
        }
    }
}
