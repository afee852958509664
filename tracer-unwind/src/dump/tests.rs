//! The dump model and its text rendering, checked on the worked example of
//! docs/sframe-format.md (binutils 2.40's bytes for one function at 0x401000 with four rows) and
//! on hand-made rules.

use super::*;
use crate::sframe::Section;

/// The worked example of docs/sframe-format.md as binutils 2.40 wrote it (v1, amd64), `.sframe`
/// at 0x402000.
const WORKED_V1: &[u8] = &[
    0xe2, 0xde, 0x01, 0x01, 0x03, 0x00, 0xf8, 0x00, // magic, version 1, sorted, amd64, RA -8
    1, 0, 0, 0, 4, 0, 0, 0, 15, 0, 0, 0, 0, 0, 0, 0, 17, 0, 0, 0, // 1 FDE, 4 FREs, 15 B, offs
    0x00, 0xf0, 0xff, 0xff, 0x19, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0x00, // FDE
    0x00, 0x03, 0x08, 0x01, 0x05, 0x10, 0xf0, 0x04, 0x04, 0x10, 0xf0, 0x18, 0x05, 0x08, 0xf0,
];

fn worked() -> DumpSection {
    model(&Section::parse(WORKED_V1, 0x402000).expect("worked example parses")).expect("rows decode")
}

/// The model carries the worked example's rows: absolute starts, CFA rules and FP save slots.
#[test]
fn model_of_the_worked_example() {
    let dump = worked();
    assert_eq!(
        (dump.version, dump.flags, dump.abi, dump.fixed_ra_offset),
        (1, 1, 3, -8)
    );
    let [f] = dump.functions.as_slice() else {
        panic!("one function expected")
    };
    assert_eq!(
        (f.start, f.size, f.pc_type, f.fde_type),
        (0x401000, 25, "inc", "default")
    );
    let rows: Vec<_> = f
        .rows
        .iter()
        .map(|r| (r.start, r.cfa.base.as_str(), r.cfa.offset, r.fp_offset))
        .collect();
    assert_eq!(
        rows,
        [
            (0x401000, "sp", 8, None),
            (0x401001, "sp", 16, Some(-16)),
            (0x401004, "fp", 16, Some(-16)),
            (0x401018, "sp", 8, Some(-16))
        ]
    );
    assert!(
        f.rows
            .iter()
            .all(|r| r.ra_offset.is_none() && !r.ra_undefined && !r.mangled_ra)
    );
}

/// The JSON keeps the documented field order and `null` for untracked registers.
#[test]
fn json_follows_the_contract() {
    let json = serde_json::to_string(&worked()).expect("serialises");
    assert!(json.starts_with(r#"{"version":1,"flags":1,"abi":3,"fixed_fp_offset":0,"fixed_ra_offset":-8,"functions":[{"start":4198400,"size":25,"pc_type":"inc","rep_size":0,"fde_type":"default","signal":false,"pauth_key":"a","rows":[{"start":4198400,"cfa":{"base":"sp","offset":8,"deref":false},"fp_offset":null,"ra_offset":null,"ra_undefined":false,"mangled_ra":false}"#), "{json}");
    assert!(
        !json.contains("fp_rule") && !json.contains("ra_rule"),
        "plain rows add no rule objects: {json}"
    );
}

/// The text listing has readelf's shape: title, header, one line per row with CFA/FP/RA cells.
#[test]
fn text_lists_every_row_like_readelf() {
    let text = render_text(&worked(), ".sframe");
    assert!(text.starts_with("Contents of the SFrame section .sframe:\n"), "{text}");
    assert!(
        text.contains("Version: SFRAME_VERSION_1\n") && text.contains("Flags: SFRAME_F_FDE_SORTED\n"),
        "{text}"
    );
    assert!(
        text.contains("func idx [0]: pc = 0x401000, size = 25 bytes\n"),
        "{text}"
    );
    let rows: Vec<Vec<&str>> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("0000"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            ["0000000000401000", "sp+8", "u", "f"],
            ["0000000000401001", "sp+16", "c-16", "f"],
            ["0000000000401004", "fp+16", "c-16", "f"],
            ["0000000000401018", "sp+8", "c-16", "f"],
        ]
    );
}

/// Rules other than a save slot render as rule objects and in readelf-like cell notation.
#[test]
fn flex_and_register_rules_render() {
    let f = Function {
        start: 0x1000,
        size: 16,
        pc_type: PcType::Mask,
        rep_size: 16,
        fde_type: FdeType::Flex,
        signal: true,
        pauth_key: PauthKey::B,
        fre_type: crate::sframe::FreType::Addr1,
        num_fres: 1,
        fre_offset: 0,
        index: 0,
    };
    let row = Row {
        start: 4,
        cfa: CfaRule {
            base: Reg::Dwarf(10),
            offset: 0,
            deref: false,
        },
        ra: Rule::InRegister(Reg::Dwarf(11)),
        fp: Rule::Expr {
            base: Reg::Fp,
            offset: -8,
            deref: true,
        },
        ra_undefined: false,
        mangled_ra: true,
        offset: 0,
    };
    let model = function_model(&f, &[row]);
    let r = &model.rows[0];
    assert_eq!(
        (r.start, r.cfa.base.as_str(), r.fp_offset, r.ra_offset),
        (4, "r10", None, None)
    );
    let fp = r.fp_rule.as_ref().expect("fp rule");
    assert_eq!((fp.base.as_str(), fp.offset, fp.deref), ("fp", -8, true));
    assert_eq!(r.ra_rule.as_ref().map(|ra| ra.base.as_str()), Some("r11"));
    let dump = DumpSection {
        version: 3,
        flags: 5,
        abi: 3,
        fixed_fp_offset: 0,
        fixed_ra_offset: -8,
        functions: vec![],
    };
    let text = render_function(0, &model, &dump);
    assert!(
        text.contains("pc_type = mask, rep_size = 16, fde_type = flex, signal, pauth_key = b"),
        "{text}"
    );
    assert!(text.contains("STARTPC[m]"), "{text}");
    let cells: Vec<&str> = text.lines().last().unwrap_or_default().split_whitespace().collect();
    assert_eq!(cells, ["0000000000000004", "r10", "*(fp-8)", "r11[s]"]);
}

/// The kernel table of the worked example lists each transition once, as loaded: the four
/// rows with RA at the fixed CFA-8, then "no information" past the function.
#[test]
fn table_rows_of_the_worked_example() {
    let section = Section::parse(WORKED_V1, 0x402000).expect("parses");
    let table = crate::table::build_from_sframe(&section).expect("builds");
    let rows = table_rows(&table);
    let got: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r.start,
                r.kind,
                r.cfa.as_ref().map(|c| (c.base.clone(), c.offset)),
                r.fp_offset,
                r.ra_offset,
            )
        })
        .collect();
    let cfa = |base: &str, offset| Some((base.to_owned(), offset));
    assert_eq!(
        got,
        [
            (0x401000, "cfa", cfa("sp", 8), None, Some(-8)),
            (0x401001, "cfa", cfa("sp", 16), Some(-16), Some(-8)),
            (0x401004, "cfa", cfa("fp", 16), Some(-16), Some(-8)),
            (0x401018, "cfa", cfa("sp", 8), Some(-16), Some(-8)),
            (0x401019, "no_info", None, None, None),
        ]
    );
    let text = render_table(&rows);
    let first: Vec<&str> = text.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(first, ["0000000000401000", "CFA=SP+8", "RA=*(CFA-8)", "FP=same"]);
    assert_eq!(text.lines().last(), Some("0000000000401019  no information"));
}

/// The text table, written by hand for speed, is what `format!` with the documented widths
/// writes: every kind, register, sign, a CFA wider than its column, and each flag.
#[test]
fn table_text_matches_the_formatted_layout() {
    use super::{TableCfa, TableRow};
    let row = |start, kind, cfa: Option<(&str, i32)>, fp, ra, flags: [bool; 3]| TableRow {
        start,
        kind,
        cfa: cfa.map(|(base, offset)| TableCfa {
            base: base.to_owned(),
            offset,
        }),
        fp_offset: fp,
        ra_offset: ra,
        topmost_only: flags[0],
        mangled_ra: flags[1],
        signal: flags[2],
    };
    let rows = [
        row(0x401000, "cfa", Some(("sp", 8)), None, Some(-8), [false; 3]),
        row(
            0xffff_ffff_ffff_fff0,
            "cfa",
            Some(("fp", 0)),
            Some(-16),
            None,
            [true, false, false],
        ),
        row(
            7,
            "cfa_deref",
            Some(("r12", -2_147_483_648)),
            Some(2_147_483_647),
            Some(-8),
            [true, true, true],
        ),
        row(0x20, "cfa", Some(("r6", 123_456)), None, None, [false, true, false]),
        row(0x30, "outermost", None, None, None, [false, false, true]),
        row(0x40, "no_info", None, None, None, [false; 3]),
    ];
    let mut expected = String::new();
    for r in &rows {
        let mut line = format!("{:016x}  ", r.start);
        match &r.cfa {
            Some(cfa) => {
                let base = format!("{}{:+}", cfa.base.to_uppercase(), cfa.offset);
                let cfa = if r.kind == "cfa_deref" {
                    format!("*({base})")
                } else {
                    base
                };
                let ra = r.ra_offset.map_or_else(|| "LR".to_owned(), |o| format!("*(CFA{o:+})"));
                let fp = r
                    .fp_offset
                    .map_or_else(|| "same".to_owned(), |o| format!("*(CFA{o:+})"));
                line += &format!("CFA={cfa:<12}RA={ra:<12}FP={fp}");
            }
            None => {
                line += if r.kind == "outermost" {
                    "outermost"
                } else {
                    "no information"
                }
            }
        }
        for (flag, name) in [
            (r.topmost_only, "topmost-only"),
            (r.mangled_ra, "signed-ra"),
            (r.signal, "signal"),
        ] {
            if flag {
                line += &format!(" [{name}]");
            }
        }
        expected += line.trim_end();
        expected.push('\n');
    }
    assert_eq!(render_table(&rows), expected);
}
