//! jitdump records read, and the ELF image built from them: the unwind table the tracer
//! builds from that image must follow the JIT code's pushes exactly (the same code and
//! `.eh_frame` as fixtures/jit/jit.c writes).

use super::*;
use crate::jit::elf::image;

/// fixtures/jit/jit.c's `jit_outer`: push rbx; sub rsp,0x20; mov rbx,rdi; mov rdi,rsi;
/// call rbx; add rsp,0x20; pop rbx; ret.
const CODE: [u8; 19] = [
    0x53, 0x48, 0x83, 0xec, 0x20, 0x48, 0x89, 0xfb, 0x48, 0x89, 0xf7, 0xff, 0xd3, 0x48, 0x83, 0xc4, 0x20, 0x5b, 0xc3,
];

/// Its `.eh_frame` for code at `code`, placed at `eh`, then a terminator.
fn eh_frame(code: u64, eh: u64) -> Vec<u8> {
    let mut out = vec![
        20, 0, 0, 0, 0, 0, 0, 0, 1, b'z', b'R', 0, 1, 0x78, 16, 1, 0x1b, 0x0c, 7, 8, 0x90, 1, 0, 0,
    ];
    out.extend_from_slice(&28u32.to_ne_bytes());
    out.extend_from_slice(&28u32.to_ne_bytes());
    out.extend_from_slice(&(code.wrapping_sub(eh + 32) as i32).to_ne_bytes());
    out.extend_from_slice(&(CODE.len() as u32).to_ne_bytes());
    out.extend_from_slice(&[
        0, 0x41, 0x0e, 16, 0x83, 2, 0x44, 0x0e, 48, 0x4c, 0x0e, 16, 0x41, 0x0e, 8, 0,
    ]);
    out.extend_from_slice(&[0; 4]);
    out
}

pub(crate) fn record(id: u32, body: &[u8]) -> Vec<u8> {
    let mut out = id.to_ne_bytes().to_vec();
    out.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
    out.extend_from_slice(&7u64.to_ne_bytes());
    out.extend_from_slice(body);
    out
}

pub(crate) fn header() -> Vec<u8> {
    let mut out = Vec::new();
    for word in [0x4A69_5444u32, 1, 40, 62, 0, 1234] {
        out.extend_from_slice(&word.to_ne_bytes());
    }
    out.extend_from_slice(&[0; 16]);
    out
}

pub(crate) fn load(addr: u64, name: &str, code: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&1234u32.to_ne_bytes());
    body.extend_from_slice(&1234u32.to_ne_bytes());
    for word in [addr, addr, code.len() as u64, 0] {
        body.extend_from_slice(&word.to_ne_bytes());
    }
    body.extend_from_slice(name.as_bytes());
    body.push(0);
    body.extend_from_slice(code);
    record(0, &body)
}

pub(crate) fn unwinding(eh: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    for word in [eh.len() as u64, 0, eh.len() as u64] {
        body.extend_from_slice(&word.to_ne_bytes());
    }
    body.extend_from_slice(eh);
    record(4, &body)
}

fn moved(from: u64, to: u64) -> Vec<u8> {
    let mut body = vec![0; 16];
    for word in [from, to, CODE.len() as u64, 0] {
        body.extend_from_slice(&word.to_ne_bytes());
    }
    record(1, &body)
}

const REGION: u64 = 0x7f12_3456_0000;

/// The dump jit.c writes for code at `code` (its `.eh_frame` 8-aligned after it).
fn fixture(code: u64) -> Vec<u8> {
    let mut bytes = header();
    bytes.extend(unwinding(&eh_frame(code, code + 24)));
    bytes.extend(load(code, "jit_outer", &CODE));
    bytes
}

#[test]
fn loads_moves_and_unwind_information_are_read() {
    let mut bytes = fixture(REGION + 64);
    bytes.extend(load(REGION + 0x200, "other", &[0xc3]));
    bytes.extend(moved(REGION + 0x200, REGION + 0x300));
    let dump = parse(&bytes).unwrap();
    assert_eq!((dump.machine, dump.malformed), (62, 0));
    let loads = dump.within(REGION, REGION + 0x1000);
    assert_eq!(loads.len(), 2);
    assert_eq!((loads[0].addr, loads[0].name.as_str()), (REGION + 64, "jit_outer"));
    assert_eq!(loads[0].code, CODE);
    assert!(loads[0].unwind.is_some());
    assert_eq!((loads[1].addr, loads[1].name.as_str()), (REGION + 0x300, "other"));
    assert!(
        loads[1].unwind.is_none(),
        "unwind information goes with the next load only"
    );
    assert!(
        dump.within(REGION, REGION + 0x300).len() == 1,
        "a load must fit the range whole"
    );
}

#[test]
fn hostile_dumps_are_refused_or_cut_never_trusted_past_a_lie() {
    assert_eq!(parse(b"JiT"), Err(DumpError::Short));
    let mut swapped = header();
    swapped[..4].copy_from_slice(&0x4A69_5444u32.swap_bytes().to_ne_bytes());
    assert!(matches!(parse(&swapped), Err(DumpError::Magic(_))));
    let mut big_header = header();
    big_header[8..12].copy_from_slice(&1000u32.to_ne_bytes());
    assert!(matches!(parse(&big_header), Err(DumpError::HeaderSize(1000))));
    // A record whose size is too small to be one stops the reading, counted.
    let mut bytes = fixture(REGION + 64);
    bytes.extend_from_slice(&0u32.to_ne_bytes());
    bytes.extend_from_slice(&4u32.to_ne_bytes());
    bytes.extend_from_slice(&[0; 8]);
    bytes.extend(load(REGION + 0x400, "after_the_lie", &[0xc3]));
    let dump = parse(&bytes).unwrap();
    assert_eq!(dump.malformed, 1);
    assert_eq!(dump.loads.len(), 1);
    // A load whose code size runs past its record is skipped and counted.
    let mut bytes = header();
    let mut bad = load(REGION, "short", &[0xc3]);
    let size_at = 16 + 8 + 16;
    bad[size_at..size_at + 8].copy_from_slice(&u64::MAX.to_ne_bytes());
    bytes.extend(bad);
    bytes.extend(load(REGION + 0x10, "fine", &[0xc3]));
    let dump = parse(&bytes).unwrap();
    assert_eq!(dump.malformed, 1);
    assert_eq!(
        dump.within(0, u64::MAX)
            .iter()
            .map(|l| l.name.as_str())
            .collect::<Vec<_>>(),
        ["fine"]
    );
    // A record cut short (still being written) ends the reading, not counted.
    let mut bytes = fixture(REGION + 64);
    let next = load(REGION + 0x400, "half", &CODE);
    bytes.extend_from_slice(&next[..next.len() - 5]);
    let dump = parse(&bytes).unwrap();
    assert_eq!((dump.loads.len(), dump.malformed), (1, 0));
}

#[test]
fn the_image_unwinds_the_jit_code_exactly() {
    use tracer_common::unwind::KIND_CFA;
    let code = REGION + 64;
    let mut bytes = fixture(code);
    // A second function with its own .eh_frame, elsewhere in the region.
    let second = REGION + 0x800;
    bytes.extend(unwinding(&eh_frame(second, second + 24)));
    bytes.extend(load(second, "second", &CODE));
    let dump = parse(&bytes).unwrap();
    let loads = dump.within(REGION, REGION + 0x1000);
    let (elf, unusable) = image(&loads, dump.machine, REGION).expect("an image");
    assert_eq!(unusable, 0);
    let (table, _) = tracer_unwind::table::build_object(&elf).unwrap().expect("a table");
    // (offset in the function, CFA offset from SP) after each push and pop.
    for start in [code, second] {
        for (at, cfa) in [(0, 8), (1, 16), (5, 48), (13, 48), (17, 16), (18, 8)] {
            let rule = table.lookup(start - REGION + at);
            assert_eq!(rule.kind, KIND_CFA, "{start:#x}+{at}");
            assert_eq!(rule.cfa_offset, cfa, "CFA at {start:#x}+{at}");
            assert_eq!(rule.ra_offset, -8, "RA at {start:#x}+{at}");
        }
    }
    assert_eq!(
        table.lookup(0x10).kind,
        tracer_common::unwind::KIND_NO_INFO,
        "before the code"
    );
}
