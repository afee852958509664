//! A fake process memory holding code objects and strings laid out as an interpreter lays
//! them out, for the tests of the code-object reader and of the registry's naming of Python
//! frames.

use std::collections::BTreeMap;

use super::CodeLayout;

/// Bytes at addresses; a read of anything not written in one piece fails.
#[derive(Clone, Default)]
pub struct FakeMemory(BTreeMap<u64, Vec<u8>>);

impl FakeMemory {
    pub fn put(&mut self, addr: u64, bytes: &[u8]) {
        self.0.insert(addr, bytes.to_vec());
    }

    /// The piece written at `addr`, if one was.
    pub fn piece(&self, addr: u64) -> Option<&[u8]> {
        self.0.get(&addr).map(Vec::as_slice)
    }

    /// Forget the piece written at `addr`.
    pub fn remove(&mut self, addr: u64) {
        self.0.remove(&addr);
    }

    pub fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        let Some((&start, bytes)) = self.0.range(..=addr).next_back() else {
            return false;
        };
        let from = (addr - start) as usize;
        match bytes.get(from..from + buf.len()) {
            Some(src) => {
                buf.copy_from_slice(src);
                true
            }
            None => false,
        }
    }

    /// A compact string at `at`: ASCII, or of `kind` bytes per character.
    pub fn string(&mut self, c: &CodeLayout, at: u64, s: &str, kind: u32) {
        let ascii = s.is_ascii() && kind == 1;
        let data = if ascii { c.str_ascii_size } else { c.str_compact_size };
        let mut obj = vec![0u8; usize::from(data)];
        obj[usize::from(c.str_length)..][..8].copy_from_slice(&(s.chars().count() as u64).to_ne_bytes());
        let state = kind << 2 | 1 << 5 | u32::from(ascii) << 6;
        obj[usize::from(c.str_state)..][..4].copy_from_slice(&state.to_ne_bytes());
        for ch in s.chars() {
            obj.extend(&(ch as u32).to_ne_bytes()[..kind as usize]);
        }
        // The terminating NUL, and the allocator's rounding up: eight bytes of characters at
        // least, as in an interpreter's memory.
        obj.push(0);
        obj.resize(obj.len().max(usize::from(data) + 8).next_multiple_of(8), 0);
        self.put(at, &obj);
    }

    /// A line table (a bytes object) at `at`.
    pub fn bytes(&mut self, c: &CodeLayout, at: u64, data: &[u8]) {
        let mut obj = vec![0u8; usize::from(c.bytes_data)];
        obj[usize::from(c.bytes_size)..][..8].copy_from_slice(&(data.len() as u64).to_ne_bytes());
        obj.extend(data);
        self.put(at, &obj);
    }

    /// A code object at `code` whose qualified name, file name and line table are at the
    /// addresses given (written there separately), its first line `first_line`.
    pub fn code(&mut self, c: &CodeLayout, code: u64, [qualname, filename, linetable]: [u64; 3], first_line: i32) {
        let mut obj = vec![0u8; usize::from(c.code_adaptive) + 64];
        for (field, value) in [(c.qualname, qualname), (c.filename, filename), (c.linetable, linetable)] {
            obj[usize::from(field)..][..8].copy_from_slice(&value.to_ne_bytes());
        }
        obj[usize::from(c.firstlineno)..][..4].copy_from_slice(&first_line.to_ne_bytes());
        self.put(code, &obj);
    }

    /// The identity (`tracer_common::python::code_ident`) of the code object at `code`, as the
    /// kernel records it with a frame; 0 when it cannot be read.
    pub fn ident(&self, c: &CodeLayout, code: u64) -> u32 {
        tracer_common::python::code_ident(&c.ident_offsets(), code, |at| {
            let mut word = [0u8; 8];
            self.read(at, &mut word).then(|| u64::from_ne_bytes(word))
        })
    }

    /// A whole code object at `code`, its strings and line table right after it (within
    /// 0x1000 bytes of it).
    pub fn function(
        &mut self,
        c: &CodeLayout,
        code: u64,
        qualname: &str,
        filename: &str,
        first_line: i32,
        table: &[u8],
    ) {
        let at = [code + 0x400, code + 0x800, code + 0xc00];
        self.code(c, code, at, first_line);
        self.string(c, at[0], qualname, 1);
        self.string(c, at[1], filename, 1);
        self.bytes(c, at[2], table);
    }
}
