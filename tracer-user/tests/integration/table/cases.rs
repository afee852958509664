//! Particular tables: the x86_64 `.plt` expanded per 16-byte entry, a function over a page
//! boundary (`addr4.o`) and one over three (a section written here), the `cfi` fixtures'
//! special functions (outermost, signal, DRAP, aarch64 PAC), with their reasons.

use std::path::Path;

use tracer_common::unwind::{
    FLAG_MANGLED_RA, FLAG_RA_SAVED, FLAG_SIGNAL, FLAG_TOPMOST_ONLY, KIND_CFA, KIND_NO_INFO, KIND_OUTERMOST,
    REG_DWARF_BASE, UnwindRule,
};
use tracer_unwind::elf;
use tracer_unwind::sframe::{PcType, Section};
use tracer_unwind::table::ObjectTable;

use super::check_section;

fn fixture(rel: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/bin").join(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Parse, build and check a fixture's table; `f` gets the section and the table.
fn with_table(rel: &str, f: impl FnOnce(&Section<'_>, &ObjectTable)) {
    let bytes = fixture(rel);
    let found = elf::find_sframe(&bytes).expect("ELF").expect(".sframe");
    let s = Section::parse(&found.data, found.vaddr).expect("parses");
    let (t, _) = check_section(rel, &s);
    f(&s, &t);
}

/// Addresses in `[from, to]` where the looked-up rule differs from the one before.
fn changes(t: &ObjectTable, from: u64, to: u64) -> Vec<u64> {
    (from..=to).filter(|&pc| t.lookup(pc) != t.lookup(pc - 1)).collect()
}

fn reasons(t: &ObjectTable) -> Vec<(&'static str, u64)> {
    t.stats().unsupported.iter().map(|(r, n)| (r.name(), *n)).collect()
}

/// The 48-byte `.plt` (rows at 0 and 11 of each 16-byte entry) becomes a transition at every
/// entry's 0 and 11: v1 (no repetition size, 16 assumed), v2 and v3 alike.
#[test]
fn plt_is_expanded_per_entry() {
    for v in ["v1", "v2", "v3"] {
        with_table(&format!("{v}/x86_64/chain"), |s, t| {
            let plt = s.functions().iter().find(|f| f.pc_type == PcType::Mask).expect("plt");
            assert_eq!(plt.size, 48, "{v}");
            let at = |o: u64| plt.start + o;
            let want = [0, 11, 16, 27, 32, 43].map(at);
            assert_eq!(changes(t, plt.start, plt.end() - 1), want, "{v}");
            assert_eq!(t.lookup(at(16)).cfa_offset, 8);
            assert_eq!(t.lookup(at(43)).cfa_offset, 16);
        });
    }
}

/// `addr4.o`'s 70008-byte function crosses into page 1, whose first row is synthetic and
/// carries the rule in effect at 0x10000.
#[test]
fn function_over_a_page_boundary() {
    for v in ["v1", "v2", "v3"] {
        with_table(&format!("{v}/x86_64/addr4.o"), |_, t| {
            let pages: Vec<u32> = t.pages().iter().map(|(p, _)| *p).collect();
            assert_eq!(pages, [0, 1], "{v}");
            let page1: Vec<(u16, UnwindRule)> = t.pages()[1].1.iter().map(|r| (r.addr_lo, t.rule(r.rule))).collect();
            let carried = t.lookup(0xffff);
            assert_eq!(carried.cfa_offset, 16);
            assert_eq!(
                page1,
                [(0, carried), (0x1177, t.lookup(0x11177)), (0x1178, UnwindRule::NO_INFO)]
            );
        });
    }
}

/// aarch64 `cfi`: `_start` is outermost, the entry rows keep RA in the link register
/// (topmost only), PAC rows are mangled, the signal function keeps its flag, and the RA
/// saved 70000 bytes below the CFA is a rule like any other (offsets are 32 bits). aarch64
/// of v3 only: older versions have no signal bit.
#[test]
fn aarch64_cfi_rules() {
    with_table("v3/aarch64/cfi", |s, t| {
        let f = s.functions();
        assert_eq!(t.lookup(f[0].start).kind, KIND_OUTERMOST);
        let entry = t.lookup(f[1].start);
        assert_eq!((entry.kind, entry.flags), (KIND_CFA, FLAG_TOPMOST_ONLY));
        let signed = t.lookup(f[2].start + 4);
        assert_eq!(signed.flags, FLAG_TOPMOST_ONLY | FLAG_MANGLED_RA);
        let saved = t.lookup(f[2].start + 8);
        assert_eq!(saved.flags, FLAG_RA_SAVED | FLAG_MANGLED_RA | 1, "FP saved too");
        let far = t.lookup(f[3].start + 12);
        assert_eq!((far.kind, far.ra_offset), (KIND_CFA, -70000), "RA at CFA - 70000");
        assert!((f[4].start..f[4].end()).all(|pc| t.lookup(pc).flags & FLAG_SIGNAL != 0));
        assert_eq!(reasons(t), []);
    });
}

/// amd64 v3 `cfi`: FLEX rows on r10 are topmost-only, DRAP rows whose FP is `*(FP + 0)` and
/// rows with RA or FP in a register are NO_INFO with their reasons.
#[test]
fn amd64_flex_rules() {
    with_table("v3/x86_64/cfi", |s, t| {
        let f = s.functions();
        assert_eq!(t.lookup(f[0].start).kind, KIND_OUTERMOST);
        let r10 = t.lookup(f[3].start + 5);
        assert_eq!(
            (r10.cfa_reg, r10.flags),
            (REG_DWARF_BASE + 10, FLAG_RA_SAVED | FLAG_TOPMOST_ONLY)
        );
        assert_eq!(t.lookup(f[3].start + 0x13).kind, KIND_NO_INFO, "DRAP: FP = *(FP + 0)");
        assert_eq!(t.lookup(f[5].start + 2).kind, KIND_NO_INFO, "RA in r11");
        assert_eq!(t.lookup(f[6].start + 3).kind, KIND_NO_INFO, "FP in r8");
        assert_ne!(t.lookup(f[4].start).flags & FLAG_SIGNAL, 0);
        assert_eq!(
            reasons(t),
            [
                ("ra in register", 1),
                ("fp in register", 1),
                ("fp register expression", 4)
            ]
        );
    });
}
