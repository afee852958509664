//! Unit tests of the table builder on functions and rows stated as data (no section bytes):
//! the rule of every kind of row, the flat transitions (MASK expansion, overlap, merging),
//! paging at page boundaries with the kernel-equivalent lookup, and the global rule table.

mod build;
mod equivalence;
mod global;
mod padding;
mod rules;

use crate::sframe::{Abi, Function, Header, Reg, Row, Rule, testing, testing::row};

/// A header of `abi` and `version` with binutils' fixed offsets (amd64: RA at CFA - 8).
fn header(abi: Abi, version: u8) -> Header {
    Header {
        flags: 0x5,
        ..testing::header(abi, version, if abi == Abi::Amd64Le { -8 } else { 0 })
    }
}

/// An INC DEFAULT function at `start` of `size` bytes, with no rows yet.
fn function(start: u64, size: u32) -> Function {
    Function {
        num_fres: 0,
        ..testing::function(start, size)
    }
}

/// An amd64 row `CFA = SP + cfa` (RA from the header's fixed offset, FP unchanged).
fn sp(start: u32, cfa: i64) -> Row {
    row(start, Reg::Sp, cfa, Rule::Unchanged, Rule::Unchanged)
}
