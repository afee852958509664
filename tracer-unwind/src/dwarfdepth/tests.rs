//! The depth pre-scan on generated DWARF: the nesting measured exactly, deep files refused at
//! the bound and not before, damaged DWARF refused, no DWARF passed.

use gimli::RunTimeEndian;

use super::*;
use crate::testing::hostile::{nested_abbrev, nested_inlines};

fn depth_of(depth: usize, limit: usize) -> Result<usize, DwarfRefusal> {
    inline_depth(
        &nested_inlines(depth, "f", 0x1000, 0x1010),
        &nested_abbrev(),
        RunTimeEndian::Little,
        limit,
    )
}

/// The deepest nesting is measured exactly, up to the limit itself.
#[test]
fn nesting_is_measured() {
    assert_eq!(depth_of(0, 8), Ok(0));
    assert_eq!(depth_of(1, 8), Ok(1));
    assert_eq!(depth_of(7, 8), Ok(7));
    assert_eq!(depth_of(8, 8), Ok(8));
}

/// Regression (20,000 nested inlined calls overflowed blazesym's recursion and ended the
/// session): one level past the bound is refused, and 20,000 levels are scanned without
/// recursing (this test's thread has the default stack).
#[test]
fn nesting_past_the_bound_is_refused() {
    assert_eq!(depth_of(9, 8), Err(DwarfRefusal::TooDeep));
    assert_eq!(depth_of(MAX_INLINE_DEPTH, MAX_INLINE_DEPTH), Ok(MAX_INLINE_DEPTH));
    assert_eq!(
        depth_of(MAX_INLINE_DEPTH + 1, MAX_INLINE_DEPTH),
        Err(DwarfRefusal::TooDeep)
    );
    let deep = std::thread::Builder::new()
        .stack_size(64 << 10)
        .spawn(|| depth_of(20_000, MAX_INLINE_DEPTH))
        .expect("spawn")
        .join()
        .expect("no overflow");
    assert_eq!(deep, Err(DwarfRefusal::TooDeep));
}

/// Siblings do not add up: many inlined calls side by side, each one deep, are one deep.
#[test]
fn siblings_are_not_nesting() {
    let mut info = nested_inlines(0, "f", 0x1000, 0x1010);
    // Replace the unit's end (subprogram and unit closers) with 500 leaf-free siblings: an
    // inlined entry with no children is closed by its own null entry.
    let closers = info.split_off(info.len() - 2);
    for _ in 0..500 {
        info.push(3);
        info.extend_from_slice(&0x1000u64.to_le_bytes());
        info.extend_from_slice(&0x1010u64.to_le_bytes());
        info.push(0);
    }
    info.extend(closers);
    let len = u32::try_from(info.len() - 4).expect("small").to_le_bytes();
    info[..4].copy_from_slice(&len);
    assert_eq!(inline_depth(&info, &nested_abbrev(), RunTimeEndian::Little, 8), Ok(1));
}

/// DWARF that ends mid-entry, or names abbreviations that are not there, is refused as damaged;
/// no `.debug_info` at all passes.
#[test]
fn damaged_dwarf_is_refused() {
    let info = nested_inlines(4, "f", 0x1000, 0x1010);
    let cut = &info[..info.len() - 20];
    assert_eq!(
        inline_depth(cut, &nested_abbrev(), RunTimeEndian::Little, 8),
        Err(DwarfRefusal::Malformed)
    );
    assert_eq!(
        inline_depth(&info, &[], RunTimeEndian::Little, 8),
        Err(DwarfRefusal::Malformed)
    );
    assert_eq!(inline_depth(&[], &[], RunTimeEndian::Little, 8), Ok(0));
    assert_eq!(check_elf(b"not an ELF file"), Ok(0));
}
