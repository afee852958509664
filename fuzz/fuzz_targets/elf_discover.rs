//! Fuzz ELF discovery: any bytes as a file. `find_sframe` (including relocation of `.o`
//! files) and `find_section` must not panic; a found section is then parsed and decoded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer_unwind::{elf, sframe};

fuzz_target!(|file: &[u8]| {
    let _ = elf::find_section(file, ".eh_frame");
    if let Ok(Some(found)) = elf::find_sframe(file)
        && let Ok(section) = sframe::Section::parse(&found.data, found.vaddr)
    {
        let _ = sframe::decode_all(&section);
    }
});
