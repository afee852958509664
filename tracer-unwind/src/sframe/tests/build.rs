//! A tiny SFrame writer for the unit tests: each test states its section as data (header
//! fields, functions at resolved addresses, rows as words) and gets the bytes in either byte
//! order, with offsets, counts and start fields computed here. Test-only, not an encoder for
//! the product: it writes what the spec says and nothing is validated.

use crate::sframe::Endian;

/// One row: start, CFA base (`true` = SP), data words and their size in bytes (1, 2 or 4).
#[derive(Clone)]
pub(super) struct Fre {
    pub start: u32,
    pub sp: bool,
    pub words: Vec<i64>,
    pub size: u8,
    pub mangled: bool,
}

/// A row with 1-byte words.
pub(super) fn fre(start: u32, sp: bool, words: &[i64]) -> Fre {
    Fre {
        start,
        sp,
        words: words.to_vec(),
        size: 1,
        mangled: false,
    }
}

/// One function at resolved address `start`; `fre_type` 0/1/2 = ADDR1/2/4.
#[derive(Clone)]
pub(super) struct Fde {
    pub start: u64,
    pub size: u32,
    pub fre_type: u8,
    pub mask: bool,
    pub rep_size: u8,
    pub flex: bool,
    pub signal: bool,
    pub pauth_b: bool,
    pub rows: Vec<Fre>,
}

pub(super) fn fde(start: u64, size: u32, rows: Vec<Fre>) -> Fde {
    Fde {
        start,
        size,
        fre_type: 0,
        mask: false,
        rep_size: 0,
        flex: false,
        signal: false,
        pauth_b: false,
        rows,
    }
}

/// A whole section.
#[derive(Clone)]
pub(super) struct Spec {
    pub version: u8,
    pub flags: u8,
    pub abi: u8,
    pub fixed_fp: i8,
    pub fixed_ra: i8,
    pub aux: Vec<u8>,
    pub vaddr: u64,
    pub fdes: Vec<Fde>,
}

/// amd64 section at 0x402000 with the flags binutils uses for `version`.
pub(super) fn amd64(version: u8, fdes: Vec<Fde>) -> Spec {
    let flags = if version == 1 { 0x1 } else { 0x5 };
    Spec {
        version,
        flags,
        abi: 3,
        fixed_fp: 0,
        fixed_ra: -8,
        aux: Vec::new(),
        vaddr: 0x402000,
        fdes,
    }
}

/// The worked example of docs/sframe-format.md: one function at 0x401000, size 25, four rows.
pub(super) fn worked(version: u8) -> Spec {
    let rows = vec![
        fre(0, true, &[8]),
        fre(1, true, &[16, -16]),
        fre(4, false, &[16, -16]),
        fre(0x18, true, &[8, -16]),
    ];
    amd64(version, vec![fde(0x401000, 25, rows)])
}

impl Spec {
    pub(super) fn fde_len(&self) -> usize {
        match self.version {
            1 => 17,
            2 => 20,
            _ => 16,
        }
    }

    /// Offset of descriptor `i` in the built section.
    pub(super) fn fde_at(&self, i: usize) -> usize {
        28 + self.aux.len() + i * self.fde_len()
    }

    /// Offset of the FRE sub-section in the built section.
    pub(super) fn fre_at(&self) -> usize {
        self.fde_at(self.fdes.len())
    }

    pub(super) fn build(&self, endian: Endian) -> Vec<u8> {
        let mut fres = W {
            endian,
            buf: Vec::new(),
        };
        let mut starts = Vec::new();
        let mut num_fres = 0u32;
        for f in &self.fdes {
            starts.push(fres.buf.len() as u32);
            if self.version >= 3 {
                fres.u16(f.rows.len() as u16);
                fres.u8(self.info(f));
                fres.u8(u8::from(f.flex));
                fres.u8(f.rep_size);
            }
            for r in &f.rows {
                fres.int(u64::from(r.start) as i64, 1 << f.fre_type);
                let code = match r.size {
                    1 => 0,
                    2 => 1,
                    _ => 2,
                };
                fres.u8(u8::from(r.sp) | (r.words.len() as u8) << 1 | code << 5 | u8::from(r.mangled) << 7);
                for &w in &r.words {
                    fres.int(w, r.size);
                }
            }
            num_fres += f.rows.len() as u32;
        }
        let mut out = W {
            endian,
            buf: Vec::new(),
        };
        out.u16(0xdee2);
        out.u8(self.version);
        out.u8(self.flags);
        out.u8(self.abi);
        out.u8(self.fixed_fp as u8);
        out.u8(self.fixed_ra as u8);
        out.u8(self.aux.len() as u8);
        out.u32(self.fdes.len() as u32);
        out.u32(num_fres);
        out.u32(fres.buf.len() as u32);
        out.u32(0);
        out.u32((self.fdes.len() * self.fde_len()) as u32);
        out.buf.extend_from_slice(&self.aux);
        for (i, f) in self.fdes.iter().enumerate() {
            let field = self.vaddr + self.fde_at(i) as u64;
            let base = if self.flags & 0x4 != 0 { field } else { self.vaddr };
            let raw = f.start.wrapping_sub(base) as i64;
            if self.version >= 3 {
                out.int(raw, 8);
                out.u32(f.size);
                out.u32(starts[i]);
            } else {
                out.int(raw, 4);
                out.u32(f.size);
                out.u32(starts[i]);
                out.u32(f.rows.len() as u32);
                out.u8(self.info(f));
                if self.version == 2 {
                    out.u8(f.rep_size);
                    out.u16(0);
                }
            }
        }
        out.buf.extend_from_slice(&fres.buf);
        out.buf
    }

    fn info(&self, f: &Fde) -> u8 {
        f.fre_type | u8::from(f.mask) << 4 | u8::from(f.pauth_b) << 5 | u8::from(f.signal) << 7
    }
}

/// Patch a `width`-byte field at `at` in `endian` (for tests that corrupt one field).
pub(super) fn put(bytes: &mut [u8], at: usize, width: usize, value: u64, endian: Endian) {
    let all = match endian {
        Endian::Little => value.to_le_bytes(),
        Endian::Big => value.to_be_bytes(),
    };
    let src = match endian {
        Endian::Little => &all[..width],
        Endian::Big => &all[8 - width..],
    };
    bytes[at..at + width].copy_from_slice(src);
}

/// Parse hex with spaces and `|` separators.
pub(super) fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).expect("ascii"), 16).expect("hex"))
        .collect()
}

struct W {
    endian: Endian,
    buf: Vec<u8>,
}

impl W {
    fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.int(i64::from(v), 2);
    }
    fn u32(&mut self, v: u32) {
        self.int(i64::from(v), 4);
    }
    /// The low `width` bytes of `v`.
    fn int(&mut self, v: i64, width: u8) {
        let at = self.buf.len();
        self.buf.resize(at + usize::from(width), 0);
        put(&mut self.buf, at, usize::from(width), v as u64, self.endian);
    }
}
