//! Fuzz the `.gopclntab` reader: any bytes as a table whose code starts at an arbitrary
//! address. Parsing, the table's code range and looking up addresses in it and around it must
//! not panic or read past the table, and every name found stays within the bound of names;
//! the same for the functions inlined at those addresses, with the table's own bytes read as
//! the inline trees (from address 0, `go:func.*` at the code's start).
//! Does not touch ELF (the section is found by `object`, fuzzed in `elf_discover`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer_unwind::{
    gopclntab::{MAX_INLINE_DEPTH, Table},
    names::MAX_NAME_BYTES,
};

fuzz_target!(|input: &[u8]| {
    // The first 8 bytes choose where the code starts (Go 1.18 on); the rest is the table.
    let (text_start, data) = match input.split_first_chunk::<8>() {
        Some((addr, rest)) => (u64::from_le_bytes(*addr), rest),
        None => (0, input),
    };
    let Ok(mut table) = Table::parse(data, data.len() as u64) else {
        return;
    };
    table.relocate(text_start);
    let mut pcs = vec![text_start, text_start.wrapping_sub(1), u64::MAX];
    if let Some(text) = table.text(data) {
        let step = ((text.end - text.start) / 64).max(1);
        pcs.extend((0..64).map(|i| text.start.saturating_add(i * step)));
        pcs.push(text.end);
    }
    for pc in pcs {
        if let Some(found) = table.locate(data, pc) {
            assert!(found.range.contains(&pc), "{pc:#x} outside {:?}", found.range);
            assert!(found.function.len() <= MAX_NAME_BYTES);
            assert!(found.file.is_none_or(|f| f.len() <= MAX_NAME_BYTES));
        }
        if let Some(calls) = table.calls(data, data, Some(text_start % 4096), pc) {
            assert!(calls.len() <= MAX_INLINE_DEPTH + 1);
            assert_eq!(calls.iter().filter(|c| !c.inlined).count(), 1);
            assert!(calls.iter().all(|c| c.function.len() <= MAX_NAME_BYTES));
        }
    }
});
