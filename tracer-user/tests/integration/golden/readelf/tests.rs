//! Unit tests of `golden::readelf`; each test says what it proves.

use super::*;

fn loc(base: &str, offset: i64, deref: bool) -> Loc {
    Loc {
        base: base.to_owned(),
        offset,
        deref,
    }
}

/// binutils 2.40 (v1): no fixed-offset lines, RA `u` on amd64, a PCMASK function.
#[test]
fn reads_the_2_40_dialect() {
    let text = r"Contents of the SFrame section .sframe:
  Header :

    Version: SFRAME_VERSION_1
    Flags: SFRAME_F_FDE_SORTED
    Num FDEs: 1
    Num FREs: 2

  Function Index :

    func idx [0]: pc = 0x1030, size = 16 bytes
    STARTPC[m]      CFA       FP        RA
    0000000000000000  sp+8      u         u
    000000000000000b  sp+16     c-16      u
";
    let l = parse_readelf(text).unwrap();
    assert_eq!((l.version, l.flags, l.fixed_ra_offset), (1, 1, None));
    let f = &l.functions[0];
    assert!(f.mask && !f.flex);
    let want = Row::Rules {
        start: 0xb,
        cfa: loc("sp", 16, false),
        fp: Val::Cfa(-16),
        ra: Val::Untracked,
        mangled_ra: false,
    };
    assert_eq!(f.rows[1], want);
}

/// binutils 2.44 (v2): flags NONE, an aarch64 key-B function with a signed, tracked RA.
#[test]
fn reads_the_2_44_dialect() {
    let text = r"    Version: SFRAME_VERSION_2
    Flags: NONE
    Num FDEs: 1
    Num FREs: 1
    func idx [0]: pc = 0x0, size = 108 bytes, pauth = B key
    STARTPC         CFA       FP        RA
    000000000000000c  sp+32     c-32      c-24[s]
";
    let l = parse_readelf(text).unwrap();
    assert_eq!((l.flags, l.fixed_ra_offset), (0, Some(0)));
    assert!(l.functions[0].key_b);
    let row = &l.functions[0].rows[0];
    assert!(matches!(
        row,
        Row::Rules {
            ra: Val::Cfa(-24),
            mangled_ra: true,
            ..
        }
    ));
}

/// The 2.47.50 snapshot (v3): two-line flags, RA undefined, `attr`, FLEX rules.
#[test]
fn reads_the_snapshot_dialect() {
    let text = r#"    Version: SFRAME_VERSION_3
    Flags: SFRAME_F_FDE_SORTED,
           SFRAME_F_FDE_FUNC_START_PCREL
    CFA fixed RA offset: -8
    Num FDEs: 2
    Num FREs: 3
    func idx [0]: pc = 0x401000, size = 52 bytes
    STARTPC         CFA       FP        RA
    0000000000401000  RA undefined
    func idx [1]: pc = 0x401062, size = 40 bytes, attr = "SF"
    STARTPC         CFA       FP        RA
    0000000000401075  (fp-8)    (fp+0)    U
    000000000040109a  sp+0      r8+0      r11+0
"#;
    let l = parse_readelf(text).unwrap();
    assert_eq!((l.flags, l.fixed_ra_offset), (5, Some(-8)));
    assert_eq!(l.functions[0].rows, [Row::RaUndefined { start: 0x401000 }]);
    let f = &l.functions[1];
    assert!(f.flex && f.signal && !f.key_b);
    let drap = Row::Rules {
        start: 0x401075,
        cfa: loc("fp", -8, true),
        fp: Val::Reg(loc("fp", 0, true)),
        ra: Val::Untracked,
        mangled_ra: false,
    };
    assert_eq!(f.rows[0], drap);
    let in_regs = Row::Rules {
        start: 0x40109a,
        cfa: loc("sp", 0, false),
        fp: Val::Reg(loc("r8", 0, false)),
        ra: Val::Reg(loc("r11", 0, false)),
        mangled_ra: false,
    };
    assert_eq!(f.rows[1], in_regs);
}

/// Lines the parser does not know are errors, not silently skipped.
#[test]
fn rejects_unknown_lines() {
    let text = "    Version: SFRAME_VERSION_3\n    Flags: NONE\n    Something new: 1\n";
    assert!(parse_readelf(text).unwrap_err().contains("unexpected line"));
}
