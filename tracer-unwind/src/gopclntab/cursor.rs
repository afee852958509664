//! Reading a table forward from an offset, a chunk at a time, never past its end (the strings
//! and pc-value tables of `.gopclntab`, NUL-terminated and LEB128, have no length of their
//! own), and decoding a pc-value table into its runs, within the step bound.

use super::Bytes;

/// Reads forward from an offset in chunks, never past `end`.
pub(super) struct Cursor<'a, B: Bytes + ?Sized> {
    bytes: &'a B,
    at: u64,
    end: u64,
    buf: [u8; 64],
    filled: usize,
    used: usize,
}

impl<'a, B: Bytes + ?Sized> Cursor<'a, B> {
    pub(super) fn new(bytes: &'a B, at: u64, end: u64) -> Self {
        Cursor {
            bytes,
            at,
            end,
            buf: [0; 64],
            filled: 0,
            used: 0,
        }
    }

    pub(super) fn byte(&mut self) -> Option<u8> {
        if self.used == self.filled {
            let left = self.end.checked_sub(self.at).filter(|&n| n > 0)?;
            let n = usize::try_from(left).unwrap_or(usize::MAX).min(self.buf.len());
            if !self.bytes.read_at(self.at, &mut self.buf[..n]) {
                return None;
            }
            self.at += n as u64;
            (self.filled, self.used) = (n, 0);
        }
        self.used += 1;
        Some(self.buf[self.used - 1])
    }

    /// An unsigned LEB128 of at most 32 bits.
    pub(super) fn varint(&mut self) -> Option<u32> {
        let mut value = 0u32;
        for shift in (0..35).step_by(7) {
            let b = self.byte()?;
            value |= u32::from(b & 0x7f).checked_shl(shift)?;
            if b & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
}

/// The runs of a pc-value table, `(start, end, value)`, from a function's entry: each step a
/// zig-zag value delta (0 after the first ends the table) and a pc delta in units of the
/// instruction quantum. Ends at the function's end, at the end of the table, after
/// [`super::MAX_PCVALUE_STEPS`] steps, or at an unreadable or overflowing step (then
/// [`Runs::failed`] says so).
pub(super) struct Runs<'a, B: Bytes + ?Sized> {
    cursor: Cursor<'a, B>,
    value: i32,
    at: u64,
    end: u64,
    quantum: u64,
    pub(super) steps: usize,
    pub(super) failed: bool,
    done: bool,
}

impl<'a, B: Bytes + ?Sized> Runs<'a, B> {
    pub(super) fn new(cursor: Cursor<'a, B>, entry: u64, end: u64, quantum: u8) -> Self {
        Runs {
            cursor,
            value: -1,
            at: entry,
            end,
            quantum: u64::from(quantum),
            steps: 0,
            failed: false,
            done: false,
        }
    }

    fn step(&mut self) -> Option<(u64, u64, i32)> {
        let delta = self.cursor.varint()?;
        if delta == 0 && self.steps > 1 {
            self.done = true;
            return None;
        }
        // Zig-zag: the low bit is the sign.
        let delta = if delta & 1 != 0 { !(delta >> 1) } else { delta >> 1 };
        self.value = self.value.wrapping_add(delta as i32);
        let start = self.at;
        self.at = start.checked_add(u64::from(self.cursor.varint()?).checked_mul(self.quantum)?)?;
        Some((start, self.at, self.value))
    }
}

impl<B: Bytes + ?Sized> Iterator for Runs<'_, B> {
    type Item = (u64, u64, i32);

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.at >= self.end || self.steps >= super::MAX_PCVALUE_STEPS {
            return None;
        }
        self.steps += 1;
        let run = self.step();
        if run.is_none() && !self.done {
            self.failed = true;
        }
        self.done |= run.is_none();
        run
    }
}
