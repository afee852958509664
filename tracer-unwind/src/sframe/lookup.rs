//! Searching a parsed section: which function covers a PC, and which of its rows applies.
//!
//! 1. Binary search the functions (sorted by resolved start) for the last one starting at or
//!    before the PC; it covers the PC if the PC is below its end. Overlapping descriptors
//!    (e.g. a relocatable object, where every text section starts at 0) are not disambiguated.
//! 2. Reduce the PC to a key: `pc - start` for INC functions, `(pc - start) % rep_size` for
//!    MASK functions (v2's modulo rule; v1 descriptors have no repetition size, so a v1 MASK
//!    function yields no row).
//! 3. Binary search the rows (strictly ascending starts) for the last one starting at or
//!    before the key.
//!
//! Decoding is not done here: the caller passes rows.

use super::{Error, Function, PcType, Row};

pub(crate) fn find_function(functions: &[Function], pc: u64) -> Option<&Function> {
    let after = functions.partition_point(|f| f.start <= pc);
    let f = functions.get(after.checked_sub(1)?)?;
    f.contains(pc).then_some(f)
}

/// The row of `f` covering `pc`; `version` and `descriptor_at` (the descriptor's offset) are
/// for the MASK-without-repetition-size case.
pub(crate) fn row_for(
    f: &Function,
    rows: &[Row],
    pc: u64,
    version: u8,
    descriptor_at: u64,
) -> Result<Option<Row>, Error> {
    let Some(offset) = pc.checked_sub(f.start) else {
        return Ok(None);
    };
    let key = match f.pc_type {
        PcType::Inc => offset,
        PcType::Mask if f.rep_size != 0 => offset % u64::from(f.rep_size),
        PcType::Mask if version == 1 => return Ok(None),
        PcType::Mask => {
            return Err(Error::ZeroRepSize { offset: descriptor_at });
        }
    };
    let after = rows.partition_point(|r| u64::from(r.start) <= key);
    Ok(after.checked_sub(1).and_then(|i| rows.get(i)).copied())
}
