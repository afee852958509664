//! Hostile debug information for the tests of naming (unit, integration and the fuzz seeds):
//! DWARF whose inlined calls nest as deep as asked, as raw sections and as assembler text that
//! describes a function of the program it is assembled into.

/// The note that keeps the stack of a program with an assembler file not executable.
const NO_EXEC_STACK: &str = ".section .note.GNU-stack,\"\",@progbits\n";

/// `.debug_abbrev` of [`nested_inlines`]: 1 compile unit (with its line program's offset), 2
/// subprogram (name), 3 inlined subroutine; every one with children and low and high pc (as
/// addresses).
pub fn nested_abbrev() -> Vec<u8> {
    vec![
        1, 0x11, 1, 0x11, 0x01, 0x12, 0x01, 0x10, 0x17, 0, 0, // compile_unit: pcs, stmt_list
        2, 0x2e, 1, 0x03, 0x08, 0x11, 0x01, 0x12, 0x01, 0, 0, // subprogram: name string, pcs addr
        3, 0x1d, 1, 0x11, 0x01, 0x12, 0x01, 0, 0, // inlined_subroutine: pcs addr
        0,
    ]
}

/// A little-endian DWARF 4 `.debug_info` of one unit over `[low, high)` (its line program said to
/// be at offset 0 of `.debug_line`, not given): a subprogram `name`
/// over that range with `depth` inlined subroutines over the same range, each inside the one
/// before.
pub fn nested_inlines(depth: usize, name: &str, low: u64, high: u64) -> Vec<u8> {
    let mut body = vec![4, 0, 0, 0, 0, 0, 8]; // version 4, abbrev offset 0, address size 8
    body.push(1);
    body.extend_from_slice(&low.to_le_bytes());
    body.extend_from_slice(&high.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes()); // no line program
    body.push(2);
    body.extend_from_slice(name.as_bytes());
    body.push(0);
    body.extend_from_slice(&low.to_le_bytes());
    body.extend_from_slice(&high.to_le_bytes());
    for _ in 0..depth {
        body.push(3);
        body.extend_from_slice(&low.to_le_bytes());
        body.extend_from_slice(&high.to_le_bytes());
    }
    // The children of every inlined entry, the subprogram and the unit end.
    body.extend(std::iter::repeat_n(0u8, depth + 2));
    let mut info = u32::try_from(body.len()).expect("a small unit").to_le_bytes().to_vec();
    info.extend(body);
    info
}

/// Assembler text (GNU as, x86-64 or aarch64) for a function `function` that spins forever and
/// DWARF (`.debug_abbrev`, `.debug_info`, and the line program the assembler makes of a `.loc`)
/// that nests `depth` inlined calls inside it; the program it is linked into must have no other
/// DWARF. (blazesym looks for inlined calls only at an address its line program covers.)
pub fn nested_inlines_asm(function: &str, depth: usize) -> String {
    let spin = if cfg!(target_arch = "aarch64") {
        "1: b 1b"
    } else {
        "1: jmp 1b"
    };
    let mut s = format!(
        ".file 1 \"{function}.c\"\n.text\n.globl {function}\n.type {function},@function\n{function}:\n.cfi_startproc\n.loc 1 1 0\n{spin}\n.cfi_endproc\n.L{function}_end:\n.size {function}, .-{function}\n.section .debug_line,\"\",@progbits\n.Lline_start:\n"
    );
    s.push_str(".section .debug_abbrev,\"\",@progbits\n.Labbrev_start:\n");
    for byte in nested_abbrev() {
        s.push_str(&format!(".byte {byte}\n"));
    }
    s.push_str(".section .debug_info,\"\",@progbits\n.long .Linfo_end - .Linfo_start\n.Linfo_start:\n");
    s.push_str(".short 4\n.long .Labbrev_start\n.byte 8\n");
    s.push_str(&format!(
        ".byte 1\n.quad {function}\n.quad .L{function}_end\n.long .Lline_start\n"
    ));
    s.push_str(&format!(
        ".byte 2\n.asciz \"{function}\"\n.quad {function}\n.quad .L{function}_end\n"
    ));
    s.push_str(&format!(
        ".rept {depth}\n.byte 3\n.quad {function}\n.quad .L{function}_end\n.endr\n"
    ));
    s.push_str(&format!(".fill {}, 1, 0\n.Linfo_end:\n", depth + 2));
    s.push_str(NO_EXEC_STACK);
    s
}

/// Assembler text for a function named `name` (any length) that spins forever, reached from a
/// function `entry` of an ordinary name (which jumps to it).
pub fn long_name_asm(entry: &str, name: &str) -> String {
    let (jump, spin) = if cfg!(target_arch = "aarch64") {
        ("b", "1: b 1b")
    } else {
        ("jmp", "1: jmp 1b")
    };
    format!(
        ".text\n.globl {entry}\n.type {entry},@function\n{entry}:\n.cfi_startproc\n{jump} {name}\n.cfi_endproc\n.size {entry}, .-{entry}\n\
         .globl {name}\n.type {name},@function\n{name}:\n.cfi_startproc\n{spin}\n.cfi_endproc\n.size {name}, .-{name}\n{NO_EXEC_STACK}"
    )
}

#[cfg(test)]
mod tests {
    use std::{path::Path, process::Command};

    /// Writes the checked-in seeds of the `symbolize` fuzz target (`fuzz/seeds/symbolize`): small
    /// static programs without libc whose `_start` has DWARF nested past the bound, nested
    /// within it, and a 2 KiB name. Run by hand when they change:
    /// `cargo test -p tracer-unwind --lib write_fuzz_seeds -- --ignored`.
    #[test]
    #[ignore = "writes the fuzz seeds; run by hand"]
    fn write_fuzz_seeds() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/symbolize");
        std::fs::create_dir_all(&dir).expect("create the seed directory");
        let long = format!("long_{}", "x".repeat(2048));
        let seeds = [
            ("deep_300", super::nested_inlines_asm("_start", 300)),
            ("nested_8", super::nested_inlines_asm("_start", 8)),
            ("long_name", super::long_name_asm("_start", &long)),
        ];
        let scratch = tempfile::tempdir().expect("tempdir");
        for (name, asm) in seeds {
            let source = scratch.path().join(format!("{name}.s"));
            std::fs::write(&source, asm).expect("write");
            let status = Command::new("gcc")
                .args(["-nostdlib", "-static", "-Wl,--build-id=none", "-Wl,-N", "-o"])
                .arg(dir.join(name))
                .arg(&source)
                .status()
                .expect("run gcc");
            assert!(status.success(), "gcc {name}");
        }
    }
}
