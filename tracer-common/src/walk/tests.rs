//! Host tests of the walker semantics against fake stacks and synthetic pages.

extern crate std;

use std::vec::Vec;

use super::*;
use crate::unwind::REG_DWARF_BASE;

/// Where the fake stacks start (frame 0's SP).
pub(super) const BASE: u64 = 0x7fff_0000;
/// Frames the test walker takes at most.
const MAX_DEPTH: usize = 64;

/// A stack of words from [`BASE`] up; reads outside it, unaligned reads and reads of
/// `fail` fail (as `bpf_probe_read_user` would on an unmapped address).
pub(super) struct FakeStack {
    words: Vec<u64>,
    fail: Option<u64>,
}

impl FakeStack {
    pub(super) fn new(words: &[u64]) -> Self {
        FakeStack {
            words: words.to_vec(),
            fail: None,
        }
    }

    pub(super) fn failing_at(words: &[u64], addr: u64) -> Self {
        FakeStack {
            fail: Some(addr),
            ..FakeStack::new(words)
        }
    }

    pub(super) fn read(&self, addr: u64) -> Option<u64> {
        if Some(addr) == self.fail || addr < BASE || !(addr - BASE).is_multiple_of(8) {
            return None;
        }
        self.words.get(usize::try_from((addr - BASE) / 8).ok()?).copied()
    }
}

pub(super) fn rule(kind: u8, cfa_reg: u8, cfa_offset: i32, flags: u8, ra_offset: i32, fp_offset: i32) -> UnwindRule {
    UnwindRule {
        kind,
        cfa_reg,
        flags,
        _pad: 0,
        cfa_offset,
        fp_offset,
        ra_offset,
    }
}

/// x86-64 `CFA = SP + off`, RA at `CFA - 8`.
pub(super) fn sp_rule(cfa_offset: i32) -> UnwindRule {
    rule(KIND_CFA, REG_SP, cfa_offset, FLAG_RA_SAVED, -8, 0)
}

pub(super) fn regs(pc: u64, sp: u64, fp: u64) -> Regs {
    Regs { pc, sp, fp, lr: 0 }
}

/// The walker loop of the design with a function table `table(lookup_pc) -> rule`: the
/// frames it visits and why it stopped.
fn walk(table: impl Fn(u64) -> UnwindRule, start: Regs, stack: &FakeStack) -> (Vec<Regs>, StopReason) {
    let mut frames = Vec::new();
    let mut regs = start;
    for depth in 0..MAX_DEPTH {
        frames.push(regs);
        let topmost = depth == 0;
        match step(&table(lookup_pc(&regs, topmost)), &regs, topmost, |a| stack.read(a)) {
            Step::Next(next) => regs = next,
            Step::Stop(reason) => return (frames, reason),
        }
    }
    (frames, StopReason::MaxDepth)
}

/// Three functions: a leaf (`CFA = SP + 8`), a middle one (`CFA = SP + 16`, FP saved at
/// `CFA - 16`) ending at 0x2100, and an outermost one; anything else has no information.
fn three_functions(pc: u64) -> UnwindRule {
    match pc {
        0x1000..0x1100 => sp_rule(8),
        0x2000..0x2100 => rule(KIND_CFA, REG_SP, 16, FLAG_RA_SAVED | FLAG_FP_SAVED, -8, -16),
        0x3000..0x3100 => rule(KIND_OUTERMOST, 0, 0, 0, 0, 0),
        _ => UnwindRule::NO_INFO,
    }
}

/// A 3-frame SP-based chain walks to the outermost frame, restores the saved FP, and looks
/// callers up at `pc - 1` (the leaf's return address is the end of the middle function).
#[test]
fn three_frame_sp_chain_reaches_outermost() {
    let stack = FakeStack::new(&[0x2100, 0xf00d, 0x3010, 0]);
    let (frames, reason) = walk(three_functions, regs(0x1010, BASE, 0x1234), &stack);
    assert_eq!(reason, StopReason::Outermost);
    assert_eq!(
        frames,
        [
            regs(0x1010, BASE, 0x1234),
            regs(0x2100, BASE + 8, 0x1234),
            regs(0x3010, BASE + 24, 0xf00d),
        ]
    );
}

/// Looking the caller up at its return address itself (no `- 1`) would have found no
/// information: `lookup_pc` is what makes the chain above work.
#[test]
fn lookup_pc_subtracts_one_above_frame_zero() {
    let r = regs(0x2100, 0, 0);
    assert_eq!(lookup_pc(&r, true), 0x2100);
    assert_eq!(lookup_pc(&r, false), 0x20ff);
    assert_eq!(three_functions(0x2100), UnwindRule::NO_INFO);
    assert_eq!(lookup_pc(&regs(0, 0, 0), false), u64::MAX);
}

/// `CFA = FP + 16` (a frame with alloca: SP far below FP): `(sp, fp) = (cfa, *(cfa - 16))`.
#[test]
fn fp_based_cfa() {
    let fp = BASE + 0x100;
    let mut words = [0u64; 0x30];
    words[0x100 / 8] = BASE + 0x200; // saved FP at CFA - 16
    words[0x108 / 8] = 0x5555; // RA at CFA - 8
    let stack = FakeStack::new(&words);
    let r = rule(KIND_CFA, REG_FP, 16, FLAG_RA_SAVED | FLAG_FP_SAVED, -8, -16);
    let next = step(&r, &regs(0x1000, BASE, fp), false, |a| stack.read(a));
    assert_eq!(next, Step::Next(regs(0x5555, fp + 16, BASE + 0x200)));
}

/// `KIND_CFA_DEREF`: `cfa = *(sp + 16)`, then RA at `cfa - 8`.
#[test]
fn cfa_deref() {
    let cfa = BASE + 0x40;
    let mut words = [0u64; 9];
    words[2] = cfa;
    words[7] = 0x6666;
    let stack = FakeStack::new(&words);
    let r = rule(KIND_CFA_DEREF, REG_SP, 16, FLAG_RA_SAVED, -8, 0);
    assert_eq!(
        step(&r, &regs(0x1000, BASE, 7), false, |a| stack.read(a)),
        Step::Next(regs(0x6666, cfa, 7))
    );
}

/// An aarch64 leaf (`CFA = SP`, RA in LR, topmost-only) unwinds in frame 0, PAC bits
/// stripped when mangled, and is refused in frame 1.
#[test]
fn topmost_only_rule_only_in_frame_zero() {
    let leaf = rule(KIND_CFA, REG_SP, 0, FLAG_TOPMOST_ONLY, 0, 0);
    let frame0 = Regs {
        lr: 0x4444,
        ..regs(0x1000, BASE, 9)
    };
    let no_read = |_| -> Option<u64> { panic!("no read expected") };
    assert_eq!(step(&leaf, &frame0, true, no_read), Step::Next(regs(0x4444, BASE, 9)));
    assert_eq!(
        step(&leaf, &frame0, false, no_read),
        Step::Stop(StopReason::TopmostOnlyRule)
    );
    let signed = Regs {
        lr: 0x002a_0000_0000_4444,
        ..frame0
    };
    let mangled = UnwindRule {
        flags: FLAG_TOPMOST_ONLY | FLAG_MANGLED_RA,
        ..leaf
    };
    assert_eq!(
        step(&mangled, &signed, true, no_read),
        Step::Next(regs(0x4444, BASE, 9))
    );
}

/// A CFA based on a general register stops with `CfaRegister` in frame 0 (not tracked)
/// and `TopmostOnlyRule` above it.
#[test]
fn cfa_on_a_general_register() {
    let r = rule(
        KIND_CFA,
        REG_DWARF_BASE + 10,
        8,
        FLAG_RA_SAVED | FLAG_TOPMOST_ONLY,
        -8,
        0,
    );
    let stack = FakeStack::new(&[0x1111]);
    let start = regs(0x1000, BASE, 0);
    assert_eq!(
        step(&r, &start, true, |a| stack.read(a)),
        Step::Stop(StopReason::CfaRegister)
    );
    assert_eq!(
        step(&r, &start, false, |a| stack.read(a)),
        Step::Stop(StopReason::TopmostOnlyRule)
    );
}

/// Each of the three reads of a step, failing, gives its own reason.
#[test]
fn read_failures_at_each_read() {
    let cfa = BASE + 0x28;
    let words = [0, 0, cfa, 0x7777, 0x8888];
    let r = rule(KIND_CFA_DEREF, REG_SP, 16, FLAG_RA_SAVED | FLAG_FP_SAVED, -8, -16);
    let start = regs(0x1000, BASE, 0);
    let run = |stack: FakeStack| step(&r, &start, false, |a| stack.read(a));
    assert_eq!(run(FakeStack::new(&words)), Step::Next(regs(0x8888, cfa, 0x7777)));
    assert_eq!(
        run(FakeStack::failing_at(&words, BASE + 16)),
        Step::Stop(StopReason::CfaReadFailed)
    );
    assert_eq!(
        run(FakeStack::failing_at(&words, cfa - 8)),
        Step::Stop(StopReason::RaReadFailed)
    );
    assert_eq!(
        run(FakeStack::failing_at(&words, cfa - 16)),
        Step::Stop(StopReason::FpReadFailed)
    );
}

/// A CFA below SP (or overflowing either way) stops; a CFA equal to SP stops above frame 0
/// and is allowed in frame 0.
#[test]
fn sp_not_advancing() {
    let stack = FakeStack::new(&[0x1111, 0x2222]);
    let start = regs(0x1000, BASE + 8, 0);
    let run = |r: UnwindRule, topmost| step(&r, &start, topmost, |a| stack.read(a));
    assert_eq!(run(sp_rule(-8), true), Step::Stop(StopReason::SpNotAdvancing));
    assert_eq!(run(sp_rule(0), false), Step::Stop(StopReason::SpNotAdvancing));
    assert_eq!(run(sp_rule(0), true), Step::Next(regs(0x1111, BASE + 8, 0)));
    assert_eq!(run(sp_rule(i32::MIN), true), Step::Stop(StopReason::SpNotAdvancing));
    let high = regs(0x1000, u64::MAX - 4, 0);
    assert_eq!(
        step(&sp_rule(8), &high, true, |a| stack.read(a)),
        Step::Stop(StopReason::SpNotAdvancing)
    );
}

/// A zero return address stops, also when it is zero only after stripping PAC bits.
#[test]
fn zero_ra() {
    let stack = FakeStack::new(&[0, 0xffff_0000_0000_0000]);
    let mangled = UnwindRule {
        flags: FLAG_RA_SAVED | FLAG_MANGLED_RA,
        ..sp_rule(16)
    };
    let start = regs(0x1000, BASE, 0);
    assert_eq!(
        step(&sp_rule(8), &start, true, |a| stack.read(a)),
        Step::Stop(StopReason::ZeroRa)
    );
    assert_eq!(
        step(&mangled, &start, true, |a| stack.read(a)),
        Step::Stop(StopReason::ZeroRa)
    );
}

/// Outermost, no-info, signal (on any kind) and malformed rules stop without reading.
#[test]
fn stopping_rules() {
    let start = regs(0x1000, BASE, 0);
    let no_read = |_| -> Option<u64> { panic!("no read expected") };
    let cases = [
        (rule(KIND_OUTERMOST, 0, 0, 0, 0, 0), StopReason::Outermost),
        (UnwindRule::NO_INFO, StopReason::NoInfo),
        (
            rule(KIND_CFA, REG_SP, 8, FLAG_RA_SAVED | FLAG_SIGNAL, -8, 0),
            StopReason::Signal,
        ),
        (rule(KIND_OUTERMOST, 0, 0, FLAG_SIGNAL, 0, 0), StopReason::Signal),
        (rule(KIND_NO_INFO, 0, 0, FLAG_SIGNAL, 0, 0), StopReason::Signal),
        (rule(9, REG_SP, 8, FLAG_RA_SAVED, -8, 0), StopReason::BadRule),
        (rule(KIND_CFA, REG_SP, 8, 0, 0, 0), StopReason::BadRule),
    ];
    for (r, reason) in cases {
        assert_eq!(step(&r, &start, true, no_read), Step::Stop(reason), "{r:?}");
    }
}

/// A chain whose every frame is valid still ends: the walker loop stops at its depth limit.
#[test]
fn walk_is_bounded_by_depth() {
    let words: Vec<u64> = (0..2 * MAX_DEPTH as u64).map(|_| 0x1010).collect();
    let stack = FakeStack::new(&words);
    let (frames, reason) = walk(|_| sp_rule(8), regs(0x1010, BASE, 0), &stack);
    assert_eq!(reason, StopReason::MaxDepth);
    assert_eq!(frames.len(), MAX_DEPTH);
}

fn row(addr_lo: u16, rule: u16) -> UnwindRow {
    UnwindRow { addr_lo, rule }
}

/// The reference: a linear scan for the last row at or below `pc_lo`.
fn linear(rows: &[UnwindRow], pc_lo: u16) -> Option<u16> {
    rows.iter().rev().find(|r| r.addr_lo <= pc_lo).map(|r| r.rule)
}

fn search(rows: &[UnwindRow], pc_lo: u16) -> Option<u16> {
    search_page(rows.len() as u32, pc_lo, |i| rows.get(i as usize).copied())
}

/// Edge cases: no rows, one row, the page's first and last address, a first row not at 0.
#[test]
fn search_page_edges() {
    assert_eq!(search(&[], 0), None);
    assert_eq!(search(&[row(0, 7)], 0), Some(7));
    assert_eq!(search(&[row(0, 7)], 0xffff), Some(7));
    let rows = [row(0, 1), row(0x10, 2), row(0xffff, 3)];
    assert_eq!(search(&rows, 0), Some(1));
    assert_eq!(search(&rows, 0xf), Some(1));
    assert_eq!(search(&rows, 0x10), Some(2));
    assert_eq!(search(&rows, 0xfffe), Some(2));
    assert_eq!(search(&rows, 0xffff), Some(3));
    assert_eq!(search(&[row(0x10, 1)], 0xf), None);
}

/// A full page of 65536 rows (computed, not stored) is searched exactly, at every
/// address, in at most `PAGE_SEARCH_STEPS` row reads.
#[test]
fn search_page_full_page_is_bounded() {
    for pc_lo in 0..=u16::MAX {
        let mut reads = 0;
        let found = search_page(1 << 16, pc_lo, |i| {
            reads += 1;
            Some(row(i as u16, (i as u16) ^ 0x5a5a))
        });
        assert_eq!(found, Some(pc_lo ^ 0x5a5a));
        assert!(reads <= PAGE_SEARCH_STEPS, "{reads} reads at {pc_lo:#x}");
    }
}

/// More rows than a page can hold: the search still stops after `PAGE_SEARCH_STEPS`
/// reads and answers nothing rather than a wrong row.
#[test]
fn search_page_oversized_count_is_bounded() {
    let mut reads = 0;
    let found = search_page(u32::MAX, 0, |_| {
        reads += 1;
        Some(row(0, 1))
    });
    assert_eq!(found, None);
    assert_eq!(reads, PAGE_SEARCH_STEPS);
}

/// A failing row read (at the first probe, or deeper) gives `None`.
#[test]
fn search_page_read_failure() {
    assert_eq!(search_page(10, 5, |_| None), None);
    let rows: Vec<UnwindRow> = (0..100).map(|i| row(i * 10, i)).collect();
    let failing = |pc_lo| {
        search_page(
            100,
            pc_lo,
            |i| if i == 50 { None } else { rows.get(i as usize).copied() },
        )
    };
    assert_eq!(failing(0), None);
    assert_eq!(failing(999), None);
}

/// `search_page` agrees with a linear scan on random sorted row sets (xorshift64,
/// fixed seed), at random addresses and at and around every row start.
#[test]
fn search_page_matches_linear_scan() {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..500 {
        let len = if round % 100 == 0 {
            2000
        } else {
            (next() % 300) as usize
        };
        let mut starts: Vec<u16> = (0..len).map(|_| next() as u16).collect();
        starts.push(0);
        starts.sort_unstable();
        starts.dedup();
        let rows: Vec<UnwindRow> = starts.iter().map(|&a| row(a, next() as u16)).collect();
        let probes = starts
            .iter()
            .flat_map(|&a| [a.wrapping_sub(1), a, a.wrapping_add(1)])
            .chain((0..100).map(|_| next() as u16));
        for pc_lo in probes {
            assert_eq!(
                search(&rows, pc_lo),
                linear(&rows, pc_lo),
                "{pc_lo:#x} in {} rows",
                rows.len()
            );
        }
    }
}

/// `ALL` lists every reason exactly once, at its own code, with a distinct name, and
/// round-trips through u32.
#[test]
fn stop_reasons_are_dense_and_round_trip() {
    for (i, r) in StopReason::ALL.iter().enumerate() {
        assert_eq!(*r as u32, i as u32);
        assert_eq!(StopReason::try_from(i as u32), Ok(*r));
        assert!(StopReason::ALL[..i].iter().all(|o| o.name() != r.name()));
    }
    assert_eq!(StopReason::try_from(StopReason::COUNT), Err(StopReason::COUNT));
}
