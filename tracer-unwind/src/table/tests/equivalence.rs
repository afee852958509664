//! The optimised build against the straightforward one on real objects (every ELF file of
//! `fixtures/bin`, this machine's libc, ld.so and libstdc++): the fast CFI evaluator gives
//! gimli's rows for every FDE, the whole table is the same, and the kernel-equivalent lookup
//! gives, at every transition and its neighbours and at every page edge, the rule in effect in
//! the flat transition list (NO_INFO in the gaps between functions). Corrupted `.eh_frame`
//! sections check that the two evaluators also agree on what they reject.

use std::path::{Path, PathBuf};

use object::{Object as _, ObjectSection as _};
use tracer_common::unwind::{PAGE_SHIFT, UnwindRule};

use crate::cfi::{CfiTable, Evaluator, FdeRows};
use crate::table::{Unsupported, finish, object::flatten_object};

/// Shared objects of this machine that every Debian/Ubuntu x86-64 host has.
const SYSTEM: [&str; 3] = [
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/lib64/ld-linux-x86-64.so.2",
    "/lib/x86_64-linux-gnu/libstdc++.so.6",
];

/// Corrupted copies of each file in `evaluators_agree_on_corrupted_cfi`.
const ROUNDS: usize = 1000;

/// Every ELF file under `fixtures/bin`, then the system objects present here.
pub(super) fn corpus() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if std::fs::read(&path).is_ok_and(|b| b.starts_with(b"\x7fELF")) {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/bin"),
        &mut files,
    );
    assert!(files.len() > 20, "fixtures/bin has {} ELF files", files.len());
    files.extend(SYSTEM.iter().map(PathBuf::from).filter(|p| p.exists()));
    files
}

/// Each FDE's rows from both evaluators: equal rows, or both refused. Returns the FDEs seen
/// and how many of them both refused.
fn same_fde_rows(bytes: &[u8], what: &str) -> (usize, usize) {
    let Ok(Some(table)) = CfiTable::from_elf(bytes) else {
        return (0, 0);
    };
    let mut refused = 0;
    let fdes = table.fdes();
    let (mut fast, mut gimli) = (table.row_reader(Evaluator::Fast), table.row_reader(Evaluator::Gimli));
    let empty = || FdeRows {
        signal: false,
        rows: Vec::new(),
    };
    for fde in &fdes {
        let (mut a, mut b) = (empty(), empty());
        let (ra, rb) = (fast.fde_rows(fde, &mut a), gimli.fde_rows(fde, &mut b));
        assert_eq!(
            ra.is_ok(),
            rb.is_ok(),
            "{what}: FDE {fde:x?}: fast {ra:?}, gimli {rb:?}"
        );
        if ra.is_ok() {
            assert_eq!(a, b, "{what}: FDE {fde:x?}");
        } else {
            refused += 1;
        }
    }
    (fdes.len(), refused)
}

/// The rule in effect at `addr` in a flat transition list (NO_INFO before the first).
pub(super) fn in_effect(transitions: &[(u64, UnwindRule)], addr: u64) -> UnwindRule {
    let after = transitions.partition_point(|&(at, _)| at <= addr);
    after.checked_sub(1).map_or(UnwindRule::NO_INFO, |i| transitions[i].1)
}

/// For every object of the corpus: the same rows per FDE, the same table from both
/// evaluators, and its lookup equal to the flat list's rule at every transition, one byte
/// before and after it, and at the first and last byte of every page and the byte before it.
#[test]
fn optimised_table_equals_straightforward_lookup() {
    let (mut checked, mut fdes, mut lookups) = (0, 0, 0);
    for path in corpus() {
        let what = path.display().to_string();
        let bytes = std::fs::read(&path).expect("read");
        fdes += same_fde_rows(&bytes, &what).0;
        let Ok(Some((reference, _))) = flatten_object(&bytes, Evaluator::Gimli) else {
            continue;
        };
        let (fast, _) = flatten_object(&bytes, Evaluator::Fast)
            .expect("builds like the reference")
            .expect("has a table like the reference");
        assert_eq!(fast.transitions, reference.transitions, "{what}");
        let transitions = reference.transitions.clone();
        let (table, reference) = (finish(fast), finish(reference));
        assert_eq!(table.pages(), reference.pages(), "{what}");
        assert_eq!(table.rules(), reference.rules(), "{what}");
        assert_eq!(table.stats(), reference.stats(), "{what}");
        let stats = table.stats();
        assert!(
            !stats.unsupported.contains_key(&Unsupported::TooManyRules)
                && !stats.unsupported.contains_key(&Unsupported::TooManyPages),
            "{what}: the lookup would differ by design"
        );
        let page_edges = table.pages().iter().flat_map(|&(page, _)| {
            let base = u64::from(page) << PAGE_SHIFT;
            [base.saturating_sub(1), base, base + (1 << PAGE_SHIFT) - 1]
        });
        let around = transitions
            .iter()
            .flat_map(|&(at, _)| [at.saturating_sub(1), at, at + 1]);
        for addr in around.chain(page_edges) {
            assert_eq!(table.lookup(addr), in_effect(&transitions, addr), "{what} at {addr:#x}");
            lookups += 1;
        }
        checked += 1;
    }
    eprintln!("{checked} objects, {fdes} FDEs, {lookups} lookups");
    assert!(checked > 20, "only {checked} objects had a table");
}

/// Random byte corruptions of `.eh_frame` (x86-64 and aarch64 fixtures, PAC included):
/// both evaluators still give the same rows for every FDE or both refuse it.
#[test]
fn evaluators_agree_on_corrupted_cfi() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/bin/v2");
    let mut files = vec![
        dir.join("x86_64/chain"),
        dir.join("aarch64/chain-pac.o"),
        dir.join("aarch64/cfi"),
    ];
    files.retain(|p| p.exists());
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    let mut rng = crate::testing::Rng::new(0x2545_f491_4f6c_dd1d);
    let mut next = move || rng.next_u64();
    for path in files {
        let bytes = std::fs::read(&path).expect("read");
        let Some(range) = object::File::parse(&*bytes)
            .ok()
            .and_then(|o| o.section_by_name(".eh_frame")?.file_range())
        else {
            continue;
        };
        let (start, len) = (range.0 as usize, (range.1 as usize).min(1 << 16));
        let (mut unreadable, mut fdes, mut refused) = (0, 0, 0);
        for round in 0..ROUNDS {
            let mut mutated = bytes.clone();
            for _ in 0..1 + next() % 4 {
                let at = start + (next() as usize) % len;
                mutated[at] = next() as u8;
            }
            let what = format!("{} round {round}", path.display());
            let (seen, both_refused) = same_fde_rows(&mutated, &what);
            unreadable += usize::from(seen == 0);
            (fdes, refused) = (fdes + seen, refused + both_refused);
        }
        eprintln!(
            "{}: {fdes} FDEs compared ({refused} refused by both), {unreadable} of {ROUNDS} files unreadable",
            path.display()
        );
    }
}
