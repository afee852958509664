//! Go tables against the Go linker's own `.debug_frame` (written from the same deltas, so it
//! must agree wherever it describes the code), in a program built by each toolchain the host
//! has; the frame pointer saved where the code saves it; a table mangled at random gives rules
//! or none, never a panic.

use std::path::Path;

use tracer_common::unwind::{FLAG_FP_SAVED, FLAG_RA_SAVED, KIND_CFA, REG_SP, UnwindRule};

use super::flatten;
use crate::table::{cfi, transitions::Flat};
use crate::testing::{Rng, go};

/// The rule `flat` gives `addr`.
fn at(flat: &Flat, addr: u64) -> UnwindRule {
    let i = flat.transitions.partition_point(|&(a, _)| a <= addr);
    i.checked_sub(1).map_or(UnwindRule::NO_INFO, |i| flat.transitions[i].1)
}

/// The test program built by one toolchain: its bytes, normal and stripped, and the version.
type Built = (Vec<u8>, Vec<u8>, String);

/// The test program built by each toolchain, `None` outside CI when there is no Go.
fn programs() -> Option<Vec<Built>> {
    let mut built = Vec::new();
    for toolchain in go::toolchains() {
        let dir = tempfile::tempdir().expect("tempdir");
        match go::build_spin(&toolchain, dir.path()) {
            Ok((normal, stripped)) => built.push((
                std::fs::read(normal).expect("read"),
                std::fs::read(stripped).expect("read"),
                go::version(&toolchain).expect("version"),
            )),
            Err(e) if toolchain == Path::new("go") => {
                assert!(std::env::var("CI").as_deref() != Ok("true"), "no Go toolchain: {e}");
                eprintln!("skipped: {e}");
                return None;
            }
            Err(e) => panic!("{e}"),
        }
    }
    Some(built)
}

#[test]
/// At every address of the stripped build, the rule from `.gopclntab` computes the CFA and
/// return address as the unstripped build's `.debug_frame` does, wherever that describes it;
/// and most of the code is described, most functions' frame pointer saved.
fn rules_agree_with_the_go_linkers_debug_frame() {
    let Some(built) = programs() else { return };
    for (normal, stripped, version) in built {
        let ours = flatten(&stripped).expect("a Go table");
        assert!(flatten(&normal).is_some());
        let reference = cfi::flatten_file(&normal, None).expect("cfi").expect("a .debug_frame");
        let (mut compared, mut fp_saved) = (0, 0);
        for &(addr, rule) in &ours.transitions {
            let want = at(&reference, addr);
            if rule.flags & FLAG_FP_SAVED != 0 {
                fp_saved += 1;
                assert_eq!(rule.fp_offset, -16, "{version} {addr:#x}");
            }
            if want.kind != KIND_CFA || rule.kind != KIND_CFA {
                continue;
            }
            compared += 1;
            assert_eq!(
                (
                    rule.cfa_reg,
                    rule.cfa_offset,
                    rule.flags & FLAG_RA_SAVED,
                    rule.ra_offset
                ),
                (
                    want.cfa_reg,
                    want.cfa_offset,
                    want.flags & FLAG_RA_SAVED,
                    want.ra_offset
                ),
                "{version} at {addr:#x}: ours {rule:?}, .debug_frame {want:?}"
            );
            assert_eq!(rule.cfa_reg, REG_SP);
        }
        assert!(compared > 1000, "{version}: {compared} rules compared");
        assert!(
            fp_saved * 4 > ours.functions,
            "{version}: {fp_saved} saved of {}",
            ours.functions
        );
    }
}

#[test]
/// A `.gopclntab` mangled at random (in the stripped build's own bytes) gives a table or none,
/// never a panic or a hang.
fn mangled_tables_give_rules_or_none() {
    let Some(built) = programs() else { return };
    let stripped = &built[0].1;
    let section = crate::gopclntab::Section::find(&stripped[..]).expect("section");
    let mut rng = Rng::new(0x60);
    for round in 0..40 {
        let mut mangled = stripped.clone();
        // The header in some rounds, anywhere in the table in the others.
        let span = if round % 4 == 0 { 96 } else { section.size as usize };
        for _ in 0..1 + rng.below(32) {
            let at = section.offset as usize + rng.below(span);
            mangled[at] = rng.next_u64() as u8;
        }
        if let Some(flat) = flatten(&mangled) {
            assert!(flat.transitions.windows(2).all(|w| w[0].0 < w[1].0), "ascending");
        }
    }
}

#[test]
/// The functions the table flags as top frames include `runtime.goexit`, `runtime.mstart`,
/// `runtime.rt0_go` and `runtime.sigtramp`, and each of them is `OUTERMOST` in the rules.
fn top_frames_are_outermost() {
    let Some(built) = programs() else { return };
    for (_, stripped, version) in built {
        let section = crate::gopclntab::Section::find(&stripped[..]).expect("section");
        let data = &stripped[section.offset as usize..(section.offset + section.size) as usize];
        let mut table = crate::gopclntab::Table::parse(data, section.size).expect("parse");
        table.relocate(section.text_start(table.text_start()).expect("text start"));
        let flat = flatten(&stripped).expect("rules");
        let mut budget = usize::MAX;
        let mut tops = Vec::new();
        for i in 0..table.functions() {
            // A record without deltas (no code of its own) has no frame.
            let Some(frame) = table.frame(data, i, &mut budget) else {
                continue;
            };
            if frame.top {
                let name = table.locate(data, frame.range.start).expect("named").function;
                assert_eq!(
                    at(&flat, frame.range.start).kind,
                    tracer_common::unwind::KIND_OUTERMOST,
                    "{name}"
                );
                tops.push(name);
            }
        }
        for base in ["runtime.goexit", "runtime.mstart", "runtime.rt0_go", "runtime.sigtramp"] {
            assert!(
                tops.iter().any(|t| t.strip_suffix(".abi0").unwrap_or(t) == base),
                "{version}: {tops:?}"
            );
        }
    }
}

#[test]
/// Functions that switch stacks (`runtime.mcall`, `runtime.systemstack`, `runtime.morestack`)
/// have rules for the innermost frame only; the program's own functions have ordinary ones.
fn stack_switches_hold_in_the_innermost_frame_only() {
    use tracer_common::unwind::FLAG_TOPMOST_ONLY;
    let Some(built) = programs() else { return };
    for (_, stripped, version) in built {
        let section = crate::gopclntab::Section::find(&stripped[..]).expect("section");
        let data = &stripped[section.offset as usize..(section.offset + section.size) as usize];
        let mut table = crate::gopclntab::Table::parse(data, section.size).expect("parse");
        table.relocate(section.text_start(table.text_start()).expect("text start"));
        let flat = flatten(&stripped).expect("rules");
        let mut budget = usize::MAX;
        let mut seen = Vec::new();
        for i in 0..table.functions() {
            // A record without deltas (no code of its own) has no frame.
            let Some(frame) = table.frame(data, i, &mut budget) else {
                continue;
            };
            let name = table.locate(data, frame.range.start).expect("named").function;
            let name = name.strip_suffix(".abi0").unwrap_or(&name).to_owned();
            // The rule in effect at its entry (an equal rule before it is not repeated), then
            // those inside it.
            let inside = flat
                .transitions
                .iter()
                .filter(|(a, _)| frame.range.contains(a))
                .map(|&(_, r)| r);
            let topmost_only = std::iter::once(at(&flat, frame.range.start))
                .chain(inside)
                .filter(|r| r.kind == KIND_CFA)
                .all(|r| r.flags & FLAG_TOPMOST_ONLY != 0);
            match name.as_str() {
                "runtime.mcall" | "runtime.systemstack" | "runtime.morestack" => {
                    assert!(frame.sp_write && topmost_only, "{version}: {name}");
                    seen.push(name);
                }
                "main.leaf" | "main.middle" | "main.outer" | "main.worker" => {
                    assert!(!frame.sp_write && !topmost_only, "{version}: {name}");
                    seen.push(name);
                }
                _ => {}
            }
        }
        assert_eq!(seen.len(), 7, "{version}: {seen:?}");
    }
}
