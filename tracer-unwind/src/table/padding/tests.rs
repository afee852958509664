//! The padding recogniser on the byte patterns compilers and linkers write (and on code that
//! is not padding), and `fill` on flat lists stated as data.

use tracer_common::unwind::{KIND_CFA, UnwindRule};

use super::{Code, MAX_PADDING, fill, is_padding};
use crate::cfi::Arch;
use crate::table::transitions::Flat;

/// Every NOP gas writes for x86-64 alignment (`i386_generate_nops`' 64-bit table, 1 to 11
/// bytes), its longer `66`-prefixed forms up to 15 bytes, and other `0f 1f /0` operand forms.
const X86_NOPS: &[&[u8]] = &[
    &[0x90],
    &[0x66, 0x90],
    &[0x66, 0x66, 0x90],
    &[0x0f, 0x1f, 0x00],
    &[0x0f, 0x1f, 0x40, 0x00],
    &[0x0f, 0x1f, 0x44, 0x00, 0x00],
    &[0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00],
    &[0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00],
    &[0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
    &[0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
    &[0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
    &[0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
    &[
        0x66, 0x66, 0x66, 0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00,
    ],
    &[
        0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00,
    ],
    &[0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
    // nopl %eax (register form), nopl 0x0(%rip), nopl 0x0(,%riz,1) (SIB without base).
    &[0x0f, 0x1f, 0xc0],
    &[0x0f, 0x1f, 0x05, 0x00, 0x00, 0x00, 0x00],
    &[0x0f, 0x1f, 0x04, 0x25, 0x00, 0x00, 0x00, 0x00],
    &[0x0f, 0x1f, 0x04, 0x00],
    &[0x0f, 0x1f, 0x44, 0x11, 0x22],
];

fn x86(bytes: &[u8]) -> bool {
    is_padding(Arch::X86_64, 0x1000, bytes)
}

#[test]
fn x86_nop_forms_and_int3_are_padding() {
    for nop in X86_NOPS {
        assert!(x86(nop), "{nop:02x?}");
        let twice = [*nop, *nop].concat();
        assert!(x86(&twice), "{twice:02x?}");
    }
    assert!(x86(&[0xcc; 1]));
    assert!(x86(&[0xcc; 15]));
    // What gas writes for `.p2align 4` after a 3-byte function, and lld's int3 fill mixed in.
    let mixed = [
        &[0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00][..],
        &[0x0f, 0x1f, 0x00],
        &[0xcc, 0xcc, 0x90],
        &[0x66, 0x90],
    ]
    .concat();
    assert!(x86(&mixed));
    let all = X86_NOPS.concat();
    assert!(x86(&all), "{} bytes of every form", all.len());
}

#[test]
fn x86_code_is_not_padding() {
    let not: &[&[u8]] = &[
        &[0xc3],                               // ret
        &[0xc3, 0xcc, 0xcc],                   // ret before int3 fill
        &[0x90, 0x90, 0xc3],                   // nops before a ret
        &[0xeb, 0x0e],                         // jmp .+16
        &[0xe9, 0, 0, 0, 0],                   // jmp rel32
        &[0xf3, 0x0f, 0x1e, 0xfa],             // endbr64
        &[0xf3, 0x90],                         // pause
        &[0x00, 0x00],                         // add %al,(%rax): zero fill is not padding here
        &[0x0f, 0x1f],                         // truncated nopl
        &[0x0f, 0x1f, 0x44, 0x00],             // truncated 5-byte nopl
        &[0x0f, 0x1f, 0x04],                   // nopl with its SIB byte missing
        &[0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00], // truncated displacement
        &[0x0f, 0x1f, 0x48, 0x00],             // 0f 1f /1: not the NOP
        &[0x0f, 0x0b],                         // ud2
        &[0x0f, 0x18, 0x00],                   // prefetchnta: a hint, but not padding
        &[0x2e, 0x90],                         // cs nop: not a form anyone pads with
        &[0x2e, 0x2e, 0x0f, 0x1f, 0x00],
        &[0x66], // a lone prefix
        &[0x66, 0x2e],
        &[0x48, 0x89, 0xe5], // mov %rsp,%rbp
        // 16 bytes: one prefix more than an instruction may have.
        &[
            0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00,
        ],
    ];
    for bytes in not {
        assert!(!x86(bytes), "{bytes:02x?}");
        let after_nops = [&[0x0f, 0x1f, 0x40, 0x00][..], bytes].concat();
        assert!(!x86(&after_nops), "{after_nops:02x?}");
    }
}

/// Random buffers whose first byte no padding instruction starts with are never padding, and
/// no random buffer makes the recogniser panic or read past it.
#[test]
fn x86_random_bytes_are_not_padding() {
    let mut rng = crate::testing::Rng::new(0x9e37_79b9_7f4a_7c15);
    let mut next = move || rng.next_u64();
    let mut accepted = 0;
    for _ in 0..20_000 {
        let len = 1 + (next() % MAX_PADDING) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let padding = x86(&bytes);
        if ![0x90, 0x66, 0x2e, 0x0f, 0xcc].contains(&bytes[0]) {
            assert!(!padding, "{bytes:02x?}");
        }
        accepted += usize::from(padding);
    }
    assert!(accepted < 20, "{accepted} random buffers taken for padding");
}

#[test]
fn aarch64_nop_and_zero_words_only() {
    let nop = 0xd503_201f_u32.to_le_bytes();
    let ret = 0xd65f_03c0_u32.to_le_bytes();
    let branch = 0x1400_0001_u32.to_le_bytes();
    let hint_bti = 0xd503_245f_u32.to_le_bytes(); // bti c: executed at function starts
    let a64 = |addr: u64, words: &[[u8; 4]]| is_padding(Arch::Aarch64, addr, &words.concat());
    assert!(a64(0x1004, &[nop]));
    assert!(a64(0x1004, &[nop, nop, nop]));
    assert!(a64(0x1008, &[[0; 4], [0; 4]]));
    assert!(a64(0x1008, &[nop, [0; 4], nop]));
    assert!(!a64(0x1004, &[ret]));
    assert!(!a64(0x1004, &[nop, ret, nop]));
    assert!(!a64(0x1004, &[branch]));
    assert!(!a64(0x1004, &[hint_bti]));
    assert!(!a64(0x1004, &[0xd503_201f_u32.to_be_bytes()]));
    assert!(!a64(0x1006, &[nop]), "misaligned");
    assert!(
        !is_padding(Arch::Aarch64, 0x1004, &[0x1f, 0x20, 0x03]),
        "a partial word"
    );
    assert!(!is_padding(
        Arch::Aarch64,
        0x1004,
        &[0x1f, 0x20, 0x03, 0xd5, 0x00, 0x00]
    ));
}

#[test]
fn other_architectures_never_have_padding() {
    assert!(!is_padding(Arch::S390x, 0x1000, &[0x07, 0x00])); // nopr
    assert!(!is_padding(Arch::S390x, 0x1000, &[0x00; 8]));
}

fn rule(cfa: i32) -> UnwindRule {
    UnwindRule {
        kind: KIND_CFA,
        cfa_offset: cfa,
        ..UnwindRule::NO_INFO
    }
}

/// x86-64 code at 0x1000: `0x100` bytes of `ret`, with padding where the test says.
fn code_with(padding: &[(u64, &[u8])]) -> Vec<u8> {
    let mut bytes = vec![0xc3; 0x100];
    for &(at, fill) in padding {
        let at = (at - 0x1000) as usize;
        bytes[at..at + fill.len()].copy_from_slice(fill);
    }
    bytes
}

fn flat(transitions: &[(u64, UnwindRule)], covered: &[(u64, u64)]) -> Flat {
    let mut flat = Flat::default();
    for &(at, r) in transitions {
        flat.push(at, r);
    }
    for &(start, end) in covered {
        flat.cover(start, end);
    }
    flat
}

/// Functions A [0x1000, 0x1013), B [0x1020, 0x1030), C [0x1040, 0x1048), D [0x1050, 0x10f0):
/// the gap after A is padding (filled; B starts with A's last rule, so its row goes too), the
/// gap after B holds a `ret` (a stub without unwind information: kept), the gap after C is
/// padding (filled; D's first rule differs), and D's `NO_INFO` from 0x1060 to 0x1070 is inside
/// D (an unsupported row, not a gap between functions: kept even over padding bytes).
#[test]
fn fill_extends_only_padding_gaps_between_functions() {
    let no = UnwindRule::NO_INFO;
    let bytes = code_with(&[
        (0x1013, &[0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0, 0x66, 0x90]),
        (0x1030, &[0x90; 15]),
        (0x1048, &[0xcc; 8]),
        (0x1060, &[0x90; 16]),
    ]);
    let code = Code {
        arch: Arch::X86_64,
        segments: vec![(0x1000, &bytes)],
    };
    let mut f = flat(
        &[
            (0x1000, rule(8)),
            (0x1013, no),
            (0x1020, rule(8)),
            (0x1030, no),
            (0x1040, rule(16)),
            (0x1048, no),
            (0x1050, rule(24)),
            (0x1060, no),
            (0x1070, rule(24)),
            (0x10f0, no),
        ],
        &[(0x1000, 0x1013), (0x1020, 0x1030), (0x1040, 0x1048), (0x1050, 0x10f0)],
    );
    assert_eq!(fill(&mut f, &code), 2);
    assert_eq!(
        f.transitions,
        [
            (0x1000, rule(8)),
            (0x1030, no),
            (0x1040, rule(16)),
            (0x1050, rule(24)),
            (0x1060, no),
            (0x1070, rule(24)),
            (0x10f0, no),
        ]
    );
}

/// A flat list's transitions and covered runs.
type Case<'a> = (&'a [(u64, UnwindRule)], &'a [(u64, u64)]);

/// A padding gap is kept when it is longer than `MAX_PADDING`, when its bytes are outside
/// the executable segments, or when the flat list does not have `NO_INFO` exactly over it.
#[test]
fn fill_keeps_gaps_it_cannot_prove() {
    let no = UnwindRule::NO_INFO;
    let bytes = vec![0x90; 0x200];
    let code = Code {
        arch: Arch::X86_64,
        segments: vec![(0x1000, &bytes)],
    };
    let long = MAX_PADDING + 1;
    let cases: [Case; 4] = [
        // Longer than any alignment.
        (
            &[(0x1000, rule(8)), (0x1010, no), (0x1010 + long, rule(16))],
            &[(0x1000, 0x1010), (0x1010 + long, 0x1100)],
        ),
        // Partly outside the segment.
        (
            &[(0x11f0, rule(8)), (0x11f8, no), (0x1208, rule(16))],
            &[(0x11f0, 0x11f8), (0x1208, 0x1300)],
        ),
        // A function covers part of the gap (its rows say NO_INFO there).
        (
            &[(0x1000, rule(8)), (0x1010, no), (0x1020, rule(16))],
            &[(0x1000, 0x1018), (0x1020, 0x1100)],
        ),
        // The next function starts with NO_INFO: the run goes on past the gap.
        (
            &[(0x1000, rule(8)), (0x1010, no), (0x1028, rule(16))],
            &[(0x1000, 0x1010), (0x1020, 0x1100)],
        ),
    ];
    for (transitions, covered) in cases {
        let mut f = flat(transitions, covered);
        assert_eq!(fill(&mut f, &code), 0, "{transitions:x?}");
        assert_eq!(f.transitions, transitions, "{transitions:x?}");
    }
}
