//! The leaf scanner on instruction words (encodings from binutils' aarch64 assembler) and on a
//! shared object assembled by the aarch64 cross compiler, without unwind information.

use std::process::Command;

use super::*;

/// Words that cannot write SP, x29 or x30 nor call.
const HARMLESS: &[(u32, &str)] = &[
    (0xd503_233f, "paciasp"),
    (0xd503_23bf, "autiasp"),
    (0xd65f_03c0, "ret"),
    (0xd65f_0bff, "retaa"),
    (0xd503_201f, "nop"),
    (0xd61f_0200, "br x16"),
    (0xf100_041f, "cmp x0, #1"),
    (0x8b24_63e4, "add x4, sp, x4"),
    (0xf940_07e0, "ldr x0, [sp, #8]"),
    (0xa941_07e0, "ldp x0, x1, [sp, #16]"),
    (0xd400_0001, "svc #0"),
    (0xf240_1c1f, "tst x0, #0xff"),
    (0xd53b_e040, "mrs x0, cntvct_el0"),
    (0xf840_8420, "ldr x0, [x1], #8"),
    (0xf820_17e0, "ldraa x0, [sp, #8]"),
    (0x5800_0000, "ldr x0, <literal>"),
    (0x5400_0001, "b.ne"),
    (0xb400_0000, "cbz x0"),
    (0x3700_0006, "tbnz w6, #0"),
    (0x8b02_0020, "add x0, x1, x2"),
];

/// Words that write SP, x29 or x30, call, or are not decoded.
const HARMFUL: &[(u32, &str)] = &[
    (0xa9bf_7bfd, "stp x29, x30, [sp, #-16]!"),
    (0x9100_03fd, "mov x29, sp"),
    (0x9400_0000, "bl"),
    (0xd63f_0020, "blr x1"),
    (0xd100_43ff, "sub sp, sp, #16"),
    (0x9100_001f, "mov sp, x0"),
    (0x8b21_63ff, "add sp, sp, x1"),
    (0xf841_07fe, "ldr x30, [sp], #16"),
    (0xf841_07e0, "ldr x0, [sp], #16"),
    (0xa8c1_07e0, "ldp x0, x1, [sp], #16"),
    (0x9240_1c1f, "and sp, x0, #0xff"),
    (0xd53b_d05e, "mrs x30, tpidr_el0"),
    (0x483c_7c40, "casp x28, x29, x0, x1, [x2]"),
    (0xf900_07fd, "str x29, [sp, #8]"),
    (0xf820_1fe0, "ldraa x0, [sp, #8]!"),
    (0x4cdf_73e0, "ld1 {v0.16b}, [sp], #16"),
    (0xd280_003d, "mov x29, #1"),
    (0x9e66_001d, "fmov x29, d0"),
    (0xc85f_7c1d, "ldxr x29, [x0]"),
    (0xc81e_7c20, "stxr w30, x0, [x1]"),
    (0x0000_0000, "udf #0"),
];

#[test]
fn words_are_judged_by_what_they_write() {
    for &(word, text) in HARMLESS {
        assert!(harmless(word), "{text} ({word:#010x}) refused");
    }
    for &(word, text) in HARMFUL {
        assert!(!harmless(word), "{text} ({word:#010x}) accepted");
    }
}

fn code(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// A leaf signing its return address returns; a frame record, a call, a trampoline without a
/// return, a cut word are not leaves.
#[test]
fn leaves_return_and_write_nothing_of_the_frame() {
    let leaf = [
        0xd503_233f,
        0xf100_041f,
        0x5400_0001,
        0xd400_0001,
        0xd503_23bf,
        0xd65f_03c0,
    ];
    assert!(is_leaf(&code(&leaf)));
    let framed = [0xa9bf_7bfd, 0x9100_03fd, 0xa8c1_7bfd, 0xd65f_03c0];
    assert!(!is_leaf(&code(&framed)));
    let calls = [0xd503_233f, 0x9400_0000, 0xd65f_03c0];
    assert!(!is_leaf(&code(&calls)));
    // `mov x8, #139; svc #0`: rt_sigreturn, LR is no return address there.
    let trampoline = [0xd280_1168, 0xd400_0001];
    assert!(!is_leaf(&code(&trampoline)));
    let mut cut = code(&leaf);
    cut.pop();
    assert!(!is_leaf(&cut));
}

/// An aarch64 shared object without unwind information, laid out as the kernel's vDSO: its
/// leaf gets the leaf rule over its symbol's range, the function with a frame record none, and
/// the signal trampoline (a symbol without a type after a `nop`) the signal rule from that
/// `nop` on, where its caller's return address minus one is looked up.
#[test]
fn leaf_functions_of_an_object_without_unwind_information() {
    const SOURCE: &str = "
    .text
    .globl leaf, framed, trampoline
    .type leaf, %function
leaf:
    paciasp
    cmp x0, #1
    b.ne 1f
    mrs x0, cntvct_el0
1:  autiasp
    ret
    .size leaf, .-leaf
    .type framed, %function
framed:
    stp x29, x30, [sp, #-16]!
    mov x29, sp
    bl leaf
    ldp x29, x30, [sp], #16
    ret
    .size framed, .-framed
    nop
trampoline:
    mov x8, #139
    svc #0
    .size trampoline, .-trampoline
    .type lookalike, %function
lookalike:
    mov x8, #139
    svc #0
    ret
    .size lookalike, .-lookalike
";
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, out) = (dir.path().join("leaf.s"), dir.path().join("leaf.so"));
    std::fs::write(&src, SOURCE).expect("write source");
    let built = Command::new("aarch64-linux-gnu-gcc")
        .args(["-nostdlib", "-shared", "-march=armv8.3-a", "-o"])
        .arg(&out)
        .arg(&src)
        .status();
    match built {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("aarch64-linux-gnu-gcc failed: {s}"),
        Err(e) => {
            // The cross compiler comes with `cargo xtask setup`; CI always has it.
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "no aarch64-linux-gnu-gcc: {e}"
            );
            eprintln!("skipped: no aarch64-linux-gnu-gcc ({e})");
            return;
        }
    }
    let bytes = std::fs::read(&out).expect("read object");
    let obj = object::File::parse(&*bytes).expect("parse");
    let symbol = |name: &str| {
        let s = obj.symbols().find(|s| s.name() == Ok(name)).expect("symbol");
        (s.address(), s.address() + s.size())
    };
    let (leaf, framed, trampoline) = (symbol("leaf"), symbol("framed"), symbol("trampoline"));
    let lookalike = symbol("lookalike");
    let nop = trampoline.0 - 4;
    assert_eq!(framed.1, nop, "the nop follows framed");
    assert_eq!(trampoline.1, lookalike.0, "lookalike follows the trampoline");
    let flat = flatten(&bytes).expect("a leaf");
    // `lookalike` makes the same call but returns: not the trampoline, a leaf.
    assert_eq!(flat.functions, 3);
    assert_eq!(
        flat.transitions,
        [
            (leaf.0, LEAF),
            (leaf.1, UnwindRule::NO_INFO),
            (nop, SIGNAL),
            (lookalike.0, LEAF),
            (lookalike.1, UnwindRule::NO_INFO)
        ]
    );
    assert_eq!(leaf.1, framed.0, "framed follows leaf, and keeps NO_INFO");
    assert_eq!(flat.covered, [leaf, (nop, lookalike.1)]);
}
