//! What rows mean: DEFAULT words per ABI (amd64, aarch64, s390x with its CFA encoding and
//! register words), header fixed offsets, outermost frames (no words; v3 functions without
//! rows), and v3 FLEX (control, offset) pairs.

use super::build::{Fre, Spec, amd64, fde, fre};
use crate::sframe::{CfaRule, Endian, Error, FdeType, PauthKey, Reg, Row, Rule, Section};

/// A one-function section of `abi` (1 aarch64-BE, 2 aarch64-LE, 3 amd64, 4 s390x).
fn spec(version: u8, abi: u8, fixed_fp: i8, fixed_ra: i8, rows: Vec<Fre>) -> Spec {
    let mut s = amd64(version, vec![fde(0x1000, 0x100, rows)]);
    (s.abi, s.fixed_fp, s.fixed_ra) = (abi, fixed_fp, fixed_ra);
    s
}

/// Rows of the first function, in both byte orders (asserting they agree).
fn rows(spec: &Spec) -> Result<Vec<Row>, Error> {
    let decode = |endian| {
        let bytes = spec.build(endian);
        let s = Section::parse(&bytes, spec.vaddr)?;
        s.rows(&s.functions()[0])
    };
    let le = decode(Endian::Little);
    let be = decode(Endian::Big);
    assert_eq!(le.clone().map(strip), be.map(strip), "byte orders agree");
    le
}

/// Offsets differ by nothing between byte orders, but keep comparisons about meaning.
fn strip(rows: Vec<Row>) -> Vec<(CfaRule, Rule, Rule, bool, bool)> {
    rows.into_iter()
        .map(|r| (r.cfa, r.ra, r.fp, r.ra_undefined, r.mangled_ra))
        .collect()
}

fn cfa(base: Reg, offset: i64) -> CfaRule {
    CfaRule {
        base,
        offset,
        deref: false,
    }
}

fn flex(version: u8, abi: u8, fixed_ra: i8, words: &[i64]) -> Spec {
    let mut s = spec(version, abi, 0, fixed_ra, vec![fre(0, false, words)]);
    s.fdes[0].flex = true;
    s
}

/// aarch64: `[CFA]`, `[CFA, RA, FP]`, or `[CFA, RA]`; the mangled-RA bit and PAuth key B.
#[test]
fn aarch64_default_rows() {
    let mut signed = fre(8, false, &[16, -8, -16]);
    signed.mangled = true;
    let mut s = spec(2, 2, 0, 0, vec![fre(0, true, &[0]), fre(4, true, &[16, -8]), signed]);
    s.fdes[0].pauth_b = true;
    let got = strip(rows(&s).expect("rows"));
    assert_eq!(
        got[0],
        (cfa(Reg::Sp, 0), Rule::Unchanged, Rule::Unchanged, false, false)
    );
    assert_eq!(
        got[1],
        (cfa(Reg::Sp, 16), Rule::AtCfa(-8), Rule::Unchanged, false, false)
    );
    assert_eq!(
        got[2],
        (cfa(Reg::Fp, 16), Rule::AtCfa(-8), Rule::AtCfa(-16), false, true)
    );
    let bytes = s.build(Endian::Big);
    assert_eq!(
        Section::parse(&bytes, 0).expect("parses").functions()[0].pauth_key,
        PauthKey::B
    );
}

/// A non-zero header fixed offset removes that register's word; extra words are an error.
#[test]
fn fixed_offsets_remove_words() {
    let got = strip(rows(&spec(2, 3, 0, -8, vec![fre(0, true, &[16, -16])])).expect("rows"));
    assert_eq!(
        got[0],
        (cfa(Reg::Sp, 16), Rule::Unchanged, Rule::AtCfa(-16), false, false)
    );
    let got = strip(rows(&spec(2, 2, -16, 0, vec![fre(0, true, &[16, -8])])).expect("rows"));
    assert_eq!(
        got[0],
        (cfa(Reg::Sp, 16), Rule::AtCfa(-8), Rule::Unchanged, false, false)
    );
    let both = spec(2, 3, -16, -8, vec![fre(0, true, &[16, -16])]);
    let bytes = both.build(Endian::Little);
    let s = Section::parse(&bytes, 0).expect("parses");
    let at = both.fre_at() as u64;
    assert_eq!(
        s.rows(&s.functions()[0]),
        Err(Error::TooManyWords {
            offset: at,
            count: 2,
            max: 1
        })
    );
}

/// s390x: CFA `w * 8 + 160`, RA padding 0, v2 odd words = register `w >> 1` (v3: offsets).
#[test]
fn s390x_default_rows() {
    let s = spec(
        2,
        4,
        0,
        0,
        vec![
            fre(0, true, &[0]),
            fre(2, true, &[20, -48, -72]),
            fre(4, true, &[20, 0, -72]),
            fre(6, true, &[0, (14 << 1) | 1, (17 << 1) | 1]),
            fre(8, false, &[0, (15 << 1) | 1]),
        ],
    );
    let got = strip(rows(&s).expect("rows"));
    assert_eq!(got[0].0, cfa(Reg::Sp, 160));
    assert_eq!(
        got[1],
        (cfa(Reg::Sp, 320), Rule::AtCfa(-48), Rule::AtCfa(-72), false, false)
    );
    assert_eq!(
        got[2],
        (cfa(Reg::Sp, 320), Rule::Unchanged, Rule::AtCfa(-72), false, false)
    );
    let regs = (Rule::InRegister(Reg::Dwarf(14)), Rule::InRegister(Reg::Dwarf(17)));
    assert_eq!((got[3].1, got[3].2), regs);
    assert_eq!((got[4].0, got[4].1), (cfa(Reg::Fp, 160), Rule::InRegister(Reg::Sp)));
    let v3 = strip(rows(&spec(3, 4, 0, 0, vec![fre(0, true, &[0, 29])])).expect("rows"));
    assert_eq!(v3[0].1, Rule::AtCfa(29));
    let bad = spec(2, 4, 0, 0, vec![fre(0, true, &[0, -3])]);
    let at = bad.fre_at() as u64;
    assert_eq!(rows(&bad), Err(Error::BadRegister { offset: at, value: -2 }));
}

/// A row without data words is the outermost frame (RA undefined), in every version.
#[test]
fn rows_without_words_are_outermost() {
    for version in 1..=3 {
        let got = strip(rows(&spec(version, 3, 0, -8, vec![fre(0, true, &[8]), fre(5, true, &[])])).expect("rows"));
        assert_eq!(got[1], (cfa(Reg::Sp, 0), Rule::Unchanged, Rule::Unchanged, true, false));
    }
}

/// A v3 DEFAULT function without rows yields one synthetic outermost row; v2/FLEX yield none.
#[test]
fn v3_function_without_rows_is_outermost() {
    let s = spec(3, 3, 0, -8, vec![]);
    let bytes = s.build(Endian::Little);
    let sec = Section::parse(&bytes, 0x402000).expect("parses");
    let f = sec.functions()[0];
    assert_eq!((f.num_fres, f.fde_type), (0, FdeType::Default));
    let synthetic = Row {
        start: 0,
        cfa: cfa(Reg::Sp, 0),
        ra: Rule::Unchanged,
        fp: Rule::Unchanged,
        ra_undefined: true,
        mangled_ra: false,
        offset: s.fre_at() as u32,
    };
    assert_eq!(sec.rows(&f), Ok(vec![synthetic]));
    assert_eq!(sec.find_row(0x1080), Ok(Some((f, synthetic))));
    let mut flex_fn = s.clone();
    flex_fn.fdes[0].flex = true;
    for other in [flex_fn, spec(2, 3, 0, -8, vec![])] {
        let bytes = other.build(Endian::Big);
        let sec = Section::parse(&bytes, 0x402000).expect("parses");
        assert_eq!(sec.rows(&sec.functions()[0]), Ok(vec![]));
        assert_eq!(sec.find_row(0x1080), Ok(None));
    }
}

/// Every FLEX rule shape decodes, with each ABI's SP/FP DWARF numbers normalised.
#[test]
fn flex_rules() {
    let r = |words: &[i64]| strip(rows(&flex(3, 3, -8, words)).expect("rows"))[0];
    assert_eq!(
        r(&[0x39, 8]),
        (cfa(Reg::Sp, 8), Rule::Unchanged, Rule::Unchanged, false, false)
    );
    assert_eq!(r(&[0x51, 0]).0, cfa(Reg::Dwarf(10), 0));
    assert_eq!(
        r(&[0x33, -8]).0,
        CfaRule {
            base: Reg::Fp,
            offset: -8,
            deref: true
        }
    );
    let drap = r(&[0x51, 0, 0, 0x33, 0]);
    assert_eq!(
        (drap.1, drap.2),
        (
            Rule::Unchanged,
            Rule::Expr {
                base: Reg::Fp,
                offset: 0,
                deref: true
            }
        )
    );
    let saved = r(&[0x39, 16, 2, -8, 2, -16]);
    assert_eq!((saved.1, saved.2), (Rule::AtCfa(-8), Rule::AtCfa(-16)));
    let other = r(&[0x39, 16, (3 << 3) | 1, 0, 8, 16]);
    assert_eq!((other.1, other.2), (Rule::InRegister(Reg::Dwarf(3)), Rule::ValCfa(16)));
    let plus = r(&[0x39, 16, (3 << 3) | 1, 8]);
    assert_eq!(
        plus.1,
        Rule::Expr {
            base: Reg::Dwarf(3),
            offset: 8,
            deref: false
        }
    );
    let aarch64 = strip(rows(&flex(3, 2, 0, &[(31 << 3) | 1, 16, 0, (29 << 3) | 1, 0])).expect("rows"))[0];
    assert_eq!((aarch64.0.base, aarch64.2), (Reg::Sp, Rule::InRegister(Reg::Fp)));
    let s390x = strip(rows(&flex(3, 4, 0, &[(11 << 3) | 1, 20, (15 << 3) | 1, 0])).expect("rows"))[0];
    assert_eq!((s390x.0, s390x.1), (cfa(Reg::Fp, 320), Rule::InRegister(Reg::Sp)));
    assert!(r(&[]).3, "no words: outermost");
}

/// Malformed FLEX rows (each way the pairs can be wrong) are errors naming the row.
#[test]
fn flex_errors() {
    let cases: [(&[i64], &str); 4] = [
        (&[0x39], "the CFA needs a control word and an offset"),
        (&[2, 8], "the CFA rule is not register based"),
        (&[0x39, 8, 2], "a control word without its offset"),
        (&[0x39, 8, 0, 0, 5], "data words left after the FP rule"),
    ];
    for (words, reason) in cases {
        let s = flex(3, 3, -8, words);
        let at = s.fre_at() as u64 + 5;
        assert_eq!(rows(&s), Err(Error::InvalidFlex { offset: at, reason }), "{words:?}");
    }
    let mut big = fre(0, false, &[(70_000 << 3) | 1, 0]);
    big.size = 4;
    let mut s = spec(3, 3, 0, -8, vec![big]);
    s.fdes[0].flex = true;
    let at = s.fre_at() as u64 + 5;
    assert_eq!(
        rows(&s),
        Err(Error::BadRegister {
            offset: at,
            value: 70_000
        })
    );
}
