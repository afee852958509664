//! The SFrame reader: bytes of one `.sframe` section in, typed header, functions and rows out
//! (format: docs/sframe-format.md; versions 1, 2, 2 with FUNC_START_PCREL, and 3, in both
//! byte orders). Pure: no I/O, no ELF (see `crate::elf`), no kernel types. Malformed input is
//! an [`Error`] naming the byte offset, never a panic, a hang, or an allocation sized by an
//! unchecked count.
//!
//! Representation decisions (what consumers can rely on):
//! - `functions()` is sorted by resolved start address, stably (equal starts keep descriptor
//!   order); `Function::index` is the descriptor's position on disk.
//! - Header fixed offsets: a register with a non-zero fixed FP/RA offset in the header has no
//!   data word and its rule is [`Rule::Unchanged`]; the consumer applies
//!   `*(CFA + fixed)` (amd64: RA at CFA - 8). The same holds for a FLEX "not tracked" RA.
//! - Outermost frames: a row with no data words has `ra_undefined = true` (CFA base from
//!   fre_info bit 0, offset 0). A v3 DEFAULT function with zero rows is also an outermost
//!   marker: `rows()` returns exactly one synthetic row `{start: 0, ra_undefined: true}` whose
//!   `offset` is the function's attribute record (so `find_row` inside the function returns
//!   it). Such a function is recognisable by `num_fres == 0` with one row; if its `signal`
//!   bit is set it is a signal trampoline and the consumer should check that first. v1/v2
//!   functions and v3 FLEX functions with zero rows have no rows, and `find_row` is `Ok(None)`.
//! - Register numbers are normalised: amd64 7/6, aarch64 31/29, s390x 15/11 are `Reg::Sp`/
//!   `Reg::Fp`; any other DWARF number is `Reg::Dwarf(n)`.
//! - MASK functions: row key is `(pc - start) % rep_size`; v1 has no rep_size (0), so its MASK
//!   functions give `Ok(None)`; a v2/v3 MASK function with rep_size 0 is `Error::ZeroRepSize`.

mod error;
mod fde;
mod fre;
mod header;
mod lookup;
mod read;
mod types;

#[doc(hidden)]
pub mod testing;

#[cfg(test)]
mod tests;

pub use error::Error;
pub use types::*;

use header::Layout;
use read::Bytes;

/// A parsed, validated SFrame section. Rows are decoded on demand with [`Section::rows`].
#[derive(Clone, Debug)]
pub struct Section<'a> {
    data: &'a [u8],
    header: Header,
    endian: Endian,
    layout: Layout,
    functions: Vec<Function>,
}

impl<'a> Section<'a> {
    /// Parse and validate header + function descriptors. `section_vaddr` = virtual address of
    /// the section's first byte.
    ///
    /// SFrame offsets are 32-bit: only the first 4 GiB - 1 bytes of `data` are considered.
    pub fn parse(data: &'a [u8], section_vaddr: u64) -> Result<Section<'a>, Error> {
        let data = &data[..data.len().min(u32::MAX as usize)];
        let (header, endian, layout) = header::parse(data)?;
        let functions = fde::parse(Bytes::new(data, endian), &header, &layout, section_vaddr)?;
        Ok(Section {
            data,
            header,
            endian,
            layout,
            functions,
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    pub fn endian(&self) -> Endian {
        self.endian
    }

    /// Total number of rows, as the header states (checked against the descriptors).
    pub fn num_rows(&self) -> u32 {
        self.header.num_fres
    }

    /// All functions, sorted by resolved start address.
    pub fn functions(&self) -> &[Function] {
        &self.functions
    }

    /// Decode the rows of one function, in order (starts strictly ascending).
    pub fn rows(&self, f: &Function) -> Result<Vec<Row>, Error> {
        fre::decode(Bytes::new(self.data, self.endian), &self.header, &self.layout, f)
    }

    /// The function covering `pc`: binary search on resolved start addresses.
    pub fn find_function(&self, pc: u64) -> Option<&Function> {
        lookup::find_function(&self.functions, pc)
    }

    /// Function + row covering `pc` (INC: last row with `start <= pc - func_start`; MASK: last
    /// row with `start <= (pc - func_start) % rep_size`). `Ok(None)` when no function covers
    /// `pc` or no row applies.
    pub fn find_row(&self, pc: u64) -> Result<Option<(Function, Row)>, Error> {
        let Some(f) = self.find_function(pc) else {
            return Ok(None);
        };
        let rows = self.rows(f)?;
        let at = fde::descriptor_offset(&self.layout, f.index).min(self.data.len() as u64);
        Ok(lookup::row_for(f, &rows, pc, self.header.version, at)?.map(|row| (*f, row)))
    }
}

/// Micro-benchmark entry point: decode every row of every function (exactly as [`Section::rows`],
/// without collecting them), return the row count.
pub fn decode_all(section: &Section<'_>) -> Result<u64, Error> {
    let b = Bytes::new(section.data, section.endian);
    let mut rows = 0u64;
    for f in section.functions() {
        rows += fre::count(b, &section.header, &section.layout, f)?;
    }
    Ok(rows)
}
