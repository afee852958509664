//! Fuzz the SFrame reader: any bytes as a section at an arbitrary address. Parsing, decoding
//! every function's rows and looking up PCs must not panic, and every error must name an
//! offset inside the input. Does not touch ELF (see `elf_discover`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer_unwind::sframe::{Error, Section};

fuzz_target!(|input: &[u8]| {
    // The first 8 bytes choose the section address; the rest is the section.
    let (vaddr, data) = match input.split_first_chunk::<8>() {
        Some((addr, rest)) => (u64::from_le_bytes(*addr), rest),
        None => (0, input),
    };
    let len = data.len() as u64;
    let inside = |e: &Error| assert!(e.offset() <= len, "error offset past the input: {e}");
    let section = match Section::parse(data, vaddr) {
        Ok(section) => section,
        Err(e) => return inside(&e),
    };
    let mut pcs = vec![vaddr, vaddr.wrapping_add(len)];
    for f in section.functions() {
        match section.rows(f) {
            Ok(rows) => assert!(
                rows.windows(2).all(|w| w[0].start < w[1].start),
                "rows ascend"
            ),
            Err(e) => inside(&e),
        }
        pcs.extend([f.start, f.end().wrapping_sub(1)]);
    }
    for pc in pcs.into_iter().take(64) {
        match section.find_row(pc) {
            Ok(Some((f, _))) => assert!(f.contains(pc), "row outside its function"),
            Ok(None) => {}
            Err(e) => inside(&e),
        }
    }
});
