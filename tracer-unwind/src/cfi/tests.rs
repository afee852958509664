//! Unit tests of the CFI reader on hand-assembled `.eh_frame`, `.eh_frame_hdr` and `.debug_frame`
//! bytes describing the same two functions, so all three lookup paths must agree.

use std::borrow::Cow;

use gimli::RunTimeEndian;

use super::table::Sections;
use super::*;

const EH_FRAME: u64 = 0x2000;
const EH_FRAME_HDR: u64 = 0x1800;
/// `(start, size, FDE program)`: f1 is a classic push-rbp/mov-rsp-rbp frame, f2 an outermost
/// frame whose CFA becomes an expression.
type Fn = (u64, u32, &'static [u8]);
const FUNCTIONS: [Fn; 2] = [
    (
        0x1000,
        0x20,
        &[0x41, 0x0e, 0x10, 0x86, 0x02, 0x43, 0x0d, 0x06, 0x50, 0x0c, 0x07, 0x08],
    ),
    (0x1040, 0x10, &[0x07, 0x10, 0x42, 0x0f, 0x02, 0x77, 0x08]),
];
/// CIE program: `CFA = rsp + 8; rip at CFA - 8`.
const CIE_PROGRAM: [u8; 5] = [0x0c, 0x07, 0x08, 0x90, 0x01];

/// Appends one length-prefixed entry padded with `DW_CFA_nop` to a multiple of 4.
fn entry(out: &mut Vec<u8>, mut body: Vec<u8>) {
    while !body.len().is_multiple_of(4) {
        body.push(0);
    }
    out.extend_from_slice(&u32::try_from(body.len()).unwrap().to_le_bytes());
    out.extend_from_slice(&body);
}

/// `.eh_frame` at `EH_FRAME` for all `FUNCTIONS`, and the offsets of its FDEs.
fn eh_frame() -> (Vec<u8>, Vec<usize>) {
    eh_frame_of(&FUNCTIONS)
}

fn eh_frame_of(functions: &[Fn]) -> (Vec<u8>, Vec<usize>) {
    let mut out = Vec::new();
    eh_cie(&mut out, b'R');
    let offsets = functions.iter().map(|f| eh_fde(&mut out, 0, *f)).collect();
    out.extend_from_slice(&[0; 4]);
    (out, offsets)
}

/// Appends a CIE with augmentation `z<letter>` (`R`: FDE pointers pcrel sdata4).
fn eh_cie(out: &mut Vec<u8>, letter: u8) {
    let mut cie = vec![0, 0, 0, 0, 1, b'z', letter, 0, 1, 0x78, 16, 1, 0x1b];
    cie.extend_from_slice(&CIE_PROGRAM);
    entry(out, cie);
}

/// Appends an FDE using the CIE at `cie`; returns the FDE's offset.
fn eh_fde(out: &mut Vec<u8>, cie: usize, (start, size, program): Fn) -> usize {
    let offset = out.len();
    let cie_pointer = u32::try_from(offset + 4 - cie).unwrap();
    let field = EH_FRAME + offset as u64 + 8;
    let pc_begin = i32::try_from(start as i64 - field as i64).unwrap();
    let mut fde = cie_pointer.to_le_bytes().to_vec();
    fde.extend_from_slice(&pc_begin.to_le_bytes());
    fde.extend_from_slice(&size.to_le_bytes());
    fde.push(0);
    fde.extend_from_slice(program);
    entry(out, fde);
    offset
}

/// `.eh_frame_hdr` at `EH_FRAME_HDR` with a search table over `eh_frame()`.
fn eh_frame_hdr(fde_offsets: &[usize]) -> Vec<u8> {
    let rel = |to: u64, from: u64| i32::try_from(to as i64 - from as i64).unwrap().to_le_bytes();
    let mut out = vec![1, 0x1b, 0x03, 0x3b];
    out.extend_from_slice(&rel(EH_FRAME, EH_FRAME_HDR + 4));
    out.extend_from_slice(&u32::try_from(FUNCTIONS.len()).unwrap().to_le_bytes());
    for ((start, _, _), offset) in FUNCTIONS.iter().zip(fde_offsets) {
        out.extend_from_slice(&rel(*start, EH_FRAME_HDR));
        out.extend_from_slice(&rel(EH_FRAME + *offset as u64, EH_FRAME_HDR));
    }
    out
}

/// `.debug_frame` (CIE version 1, absolute 8-byte addresses) with the same programs.
fn debug_frame() -> Vec<u8> {
    debug_frame_of(&FUNCTIONS)
}

fn debug_frame_of(functions: &[Fn]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut cie = vec![0xff, 0xff, 0xff, 0xff, 1, 0, 1, 0x78, 16];
    cie.extend_from_slice(&CIE_PROGRAM);
    entry(&mut out, cie);
    for &(start, size, program) in functions {
        let mut fde = 0u32.to_le_bytes().to_vec();
        fde.extend_from_slice(&start.to_le_bytes());
        fde.extend_from_slice(&u64::from(size).to_le_bytes());
        fde.extend_from_slice(program);
        entry(&mut out, fde);
    }
    out
}

fn table<'a>(
    eh: Option<&'a [u8]>,
    hdr: Option<&'a [u8]>,
    debug: Option<&'a [u8]>,
) -> Result<Option<CfiTable<'a>>, CfiError> {
    let sections = Sections {
        text: Some(0x1000),
        eh_frame: eh.map(|d| (Cow::Borrowed(d), EH_FRAME)),
        eh_frame_hdr: hdr.map(|d| (Cow::Borrowed(d), EH_FRAME_HDR)),
        debug_frame: debug.map(|d| (Cow::Borrowed(d), 0)),
    };
    CfiTable::from_sections(Arch::X86_64, RunTimeEndian::Little, 8, sections)
}

fn sp(offset: i64) -> CfiCfa {
    CfiCfa::RegOffset { reg: 7, offset }
}

/// `(pc, CFA, RA, FP, row_start)` as a reader of the programs above works them out by hand.
fn expected() -> Vec<(u64, CfiCfa, CfiReg, CfiReg, u64)> {
    let fp16 = CfiCfa::RegOffset { reg: 6, offset: 16 };
    let (ra, saved) = (CfiReg::Offset(-8), CfiReg::Offset(-16));
    vec![
        (0x1000, sp(8), ra, CfiReg::SameValue, 0x1000),
        (0x1001, sp(16), ra, saved, 0x1001),
        (0x1003, sp(16), ra, saved, 0x1001),
        (0x1004, fp16, ra, saved, 0x1004),
        (0x1013, fp16, ra, saved, 0x1004),
        (0x1014, sp(8), ra, saved, 0x1014),
        (0x101f, sp(8), ra, saved, 0x1014),
        (0x1040, sp(8), CfiReg::Undefined, CfiReg::SameValue, 0x1040),
        (0x1042, CfiCfa::Expression, CfiReg::Undefined, CfiReg::SameValue, 0x1042),
        (0x104f, CfiCfa::Expression, CfiReg::Undefined, CfiReg::SameValue, 0x1042),
    ]
}

fn assert_matches_hand_evaluation(table: &CfiTable<'_>) {
    for (pc, cfa, ra, fp, row_start) in expected() {
        let rule = table
            .rule_at(pc)
            .unwrap()
            .unwrap_or_else(|| panic!("no rule at {pc:#x}"));
        assert_eq!(
            (rule.cfa, rule.ra, rule.fp, rule.row_start),
            (cfa, ra, fp, row_start),
            "at {pc:#x}"
        );
        let (start, size, _) = FUNCTIONS[usize::from(pc >= 0x1040)];
        assert_eq!(
            (rule.fde_start, rule.fde_end),
            (start, start + u64::from(size)),
            "at {pc:#x}"
        );
        assert!(!rule.signal);
    }
    for pc in [0, 0xfff, 0x1020, 0x103f, 0x1050, u64::MAX] {
        assert_eq!(table.rule_at(pc).unwrap(), None, "at {pc:#x}");
    }
}

/// Scanning `.eh_frame` (no `.eh_frame_hdr`) yields the rules worked out by hand.
#[test]
fn eh_frame_scan_matches_hand_evaluation() {
    let (eh, _) = eh_frame();
    let table = table(Some(&eh), None, None).unwrap().unwrap();
    assert_eq!(table.sources(), [CfiSource::EhFrame]);
    assert_matches_hand_evaluation(&table);
}

/// The `.eh_frame_hdr` binary search finds the same FDEs as the scan.
#[test]
fn eh_frame_hdr_search_matches_hand_evaluation() {
    let (eh, offsets) = eh_frame();
    let hdr = eh_frame_hdr(&offsets);
    let table = table(Some(&eh), Some(&hdr), None).unwrap().unwrap();
    assert_eq!(table.sources(), [CfiSource::EhFrameHdr]);
    assert_matches_hand_evaluation(&table);
}

/// `.debug_frame` is read (CIE id 0xffffffff, absolute addresses) when there is no `.eh_frame`.
#[test]
fn debug_frame_matches_hand_evaluation() {
    let debug = debug_frame();
    let table = table(None, None, Some(&debug)).unwrap().unwrap();
    assert_eq!(table.sources(), [CfiSource::DebugFrame]);
    assert_matches_hand_evaluation(&table);
}

/// `.debug_frame` answers for the addresses `.eh_frame` does not cover, and only for those.
#[test]
fn debug_frame_covers_what_eh_frame_does_not() {
    let (eh, _) = eh_frame_of(&FUNCTIONS[..1]);
    let debug = debug_frame_of(&FUNCTIONS);
    let table = table(Some(&eh), None, Some(&debug)).unwrap().unwrap();
    assert_eq!(table.sources(), [CfiSource::EhFrame, CfiSource::DebugFrame]);
    assert_matches_hand_evaluation(&table);
    assert_eq!(table.rule_at(0x1001).unwrap().unwrap().source, CfiSource::EhFrame);
    assert_eq!(table.rule_at(0x1042).unwrap().unwrap().source, CfiSource::DebugFrame);
    let sources: Vec<_> = table.fdes().iter().map(|f| (f.start, f.source)).collect();
    assert_eq!(
        sources,
        [
            (0x1000, CfiSource::EhFrame),
            (0x1000, CfiSource::DebugFrame),
            (0x1040, CfiSource::DebugFrame)
        ]
    );
}

/// `fdes()` lists every FDE's range and section offset, sorted.
#[test]
fn fdes_lists_ranges_and_offsets() {
    let (eh, offsets) = eh_frame();
    let table = table(Some(&eh), None, None).unwrap().unwrap();
    let want: Vec<_> = FUNCTIONS
        .iter()
        .zip(&offsets)
        .map(|((start, size, _), off)| FdeRange {
            start: *start,
            end: start + u64::from(*size),
            source: CfiSource::EhFrame,
            offset: *off as u64,
        })
        .collect();
    assert_eq!(table.fdes(), want);
}

/// No CFI section at all is `None`, not an error.
#[test]
fn no_sections_is_none() {
    assert!(table(None, None, None).unwrap().is_none());
}

/// Bytes that are not an ELF file are a typed error.
#[test]
fn not_elf_is_an_error() {
    assert!(matches!(
        CfiTable::from_elf(b"definitely not ELF"),
        Err(CfiError::Elf(_))
    ));
}

/// Every truncation and every single-byte corruption of each section gives rules or typed
/// errors, never a panic.
#[test]
fn malformed_sections_never_panic() {
    let (eh, offsets) = eh_frame();
    let hdr = eh_frame_hdr(&offsets);
    let probe = |t: Result<Option<CfiTable<'_>>, CfiError>| {
        if let Ok(Some(t)) = t {
            for pc in (0xff8..0x1058).step_by(3) {
                let _ = t.rule_at(pc);
            }
            let _ = t.fdes();
        }
    };
    for len in 0..eh.len() {
        probe(table(Some(&eh[..len]), Some(&hdr), None));
        probe(table(Some(&eh[..len]), None, None));
    }
    for len in 0..hdr.len() {
        probe(table(Some(&eh), Some(&hdr[..len]), None));
    }
    for i in 0..eh.len() {
        for value in [0x00, 0x7f, 0xff] {
            let mut bad = eh.clone();
            bad[i] = value;
            probe(table(Some(&bad), Some(&hdr), None));
            probe(table(Some(&bad), None, None));
        }
    }
    for i in 0..hdr.len() {
        for value in [0x00, 0x7f, 0xff] {
            let mut bad = hdr.clone();
            bad[i] = value;
            probe(table(Some(&eh), Some(&bad), None));
        }
    }
    let debug = debug_frame();
    for i in 0..debug.len() {
        probe(table(None, None, Some(&debug[..i])));
        for value in [0x00, 0x7f, 0xff] {
            let mut bad = debug.clone();
            bad[i] = value;
            probe(table(None, None, Some(&bad)));
        }
    }
}

/// An `.eh_frame_hdr` claiming more entries than it can hold is rejected when the table is
/// built (regression: gimli's own search multiplied that count unchecked and panicked).
#[test]
fn eh_frame_hdr_count_beyond_section_is_an_error() {
    let (eh, offsets) = eh_frame();
    let mut hdr = eh_frame_hdr(&offsets);
    hdr[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    let err = table(Some(&eh), Some(&hdr), None).unwrap_err();
    assert!(
        matches!(
            err,
            CfiError::HeaderCount {
                address: EH_FRAME_HDR,
                ..
            }
        ),
        "{err}"
    );
}

/// An FDE whose CIE gimli cannot read (the aarch64 `B` augmentation) is skipped and listed as
/// unreadable; the entries after it are still indexed.
#[test]
fn unreadable_entry_does_not_hide_the_rest() {
    let mut eh = Vec::new();
    eh_cie(&mut eh, b'B');
    let bad = eh_fde(&mut eh, 0, FUNCTIONS[0]);
    let good_cie = eh.len();
    eh_cie(&mut eh, b'R');
    eh_fde(&mut eh, good_cie, FUNCTIONS[1]);
    eh.extend_from_slice(&[0; 4]);
    let table = table(Some(&eh), None, None).unwrap().unwrap();
    let unreadable: Vec<_> = table.unreadable().collect();
    assert!(
        matches!(unreadable[..], [CfiError::Entry { offset, .. }] if *offset == bad as u64),
        "{unreadable:?}"
    );
    assert!(
        unreadable[0].is_unsupported(),
        "an unknown augmentation is the reader's limit, not bad input"
    );
    assert_eq!(table.rule_at(0x1001).unwrap(), None);
    assert_eq!(table.rule_at(0x1042).unwrap().unwrap().cfa, CfiCfa::Expression);
}
