//! Unit tests of where a JavaScript frame is in its function, against a fake heap laid out
//! as Node.js 20's V8 lays it out (`super::super::tests`); each test says what it proves.

use std::sync::{Arc, Mutex};

use super::*;
use crate::v8::layout::Layout;
use crate::v8::{
    FrameAt, V8,
    tests::{Heap, layout, runtime, smi},
};

const BYTE_ARRAY: u16 = 190;
const FIXED_ARRAY: u16 = 175;
const WEAK_FIXED_ARRAY: u16 = 240;

/// A position as V8 packs it: the script offset plus one from bit 1, the inlining id plus
/// one from bit 31.
fn position(offset: u64, inlined: Option<u64>) -> u64 {
    (offset + 1) << 1 | inlined.map_or(0, |i| i + 1) << 31
}

/// V8's encoding of a table (`source-position-table.cc`): each entry's steps from the last,
/// zig-zag, 7 bits a byte; a statement's offset step as it is, another's as -step - 1.
fn encode(entries: &[(u32, u64, bool)]) -> Vec<u8> {
    fn number(out: &mut Vec<u8>, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        loop {
            let more = z > 0x7f;
            out.push((z & 0x7f) as u8 | if more { 0x80 } else { 0 });
            z >>= 7;
            if !more {
                break;
            }
        }
    }
    let (mut out, mut offset, mut pos) = (Vec::new(), 0i64, 0i64);
    for &(o, p, statement) in entries {
        let step = i64::from(o) - offset;
        number(&mut out, if statement { step } else { -step - 1 });
        number(&mut out, p as i64 - pos);
        (offset, pos) = (i64::from(o), p as i64);
    }
    out
}

/// The table of Node.js 20's module wrapper around a script whose last line is `main();`
/// (character 353), byte for byte as read from a running node: the function's entry (offset
/// 0, then 1, at character 0), the call at bytecode 23, the return at 27 (character 360).
/// Its frame, calling `main`, kept 75 in its offset's slot: the call's offset, 23.
#[test]
fn positions_decode_as_v8_writes_them() {
    let at_353 = position(353, None);
    assert_eq!(at_353, 708);
    let bytes = [0x01, 0x04, 0x03, 0x00, 0x2c, 0x84, 0x0b, 0x08, 0x1c];
    let entries = [(0, 2), (1, 2), (23, at_353), (27, position(360, None))];
    assert_eq!(decode_positions(&bytes), Ok(entries.to_vec()));
    assert_eq!(
        encode(&[(0, 2, false), (1, 2, false), (23, at_353, true), (27, 722, true)]),
        bytes
    );
    assert_eq!(bytecode_offset(&layout(), 75), Some(23));
    assert_eq!(script_offset(at_353), Some(353));
    assert_eq!(inlining_id(at_353), None);
    // Inlined, unknown, external.
    assert_eq!(inlining_id(position(5, Some(2))), Some(2));
    assert_eq!(script_offset(0), None);
    assert_eq!(script_offset(at_353 | 1), None);
    // The entry at or before an offset.
    let table = decode_positions(&bytes).unwrap();
    assert_eq!(position_at(&table, 22), Some(2));
    assert_eq!(position_at(&table, 23), Some(at_353));
    assert_eq!(position_at(&table, 26), Some(at_353));
    assert_eq!(position_at(&table, 1000), Some(722));
    assert_eq!(position_at(&[(4, 9)], 3), None);
    // Cut inside an entry, a number that never ends, an offset too large.
    assert_eq!(decode_positions(&bytes[..5]), Err(V8Error::Table));
    assert_eq!(decode_positions(&[0x80; 12]), Err(V8Error::Table));
    assert_eq!(decode_positions(&encode(&[(0, 2, true)])[..1]), Err(V8Error::Table));
    // An offset past 32 bits (a step of 2^33), and steps that would take it past 63 bits
    // (2^63 - 1 after 2^32 - 1): an error, not an overflow.
    assert_eq!(
        decode_positions(&[0x80, 0x80, 0x80, 0x80, 0x40, 0x00]),
        Err(V8Error::Table)
    );
    let mut huge = encode(&[(u32::MAX, 0, true)]);
    huge.extend([0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00]);
    assert_eq!(decode_positions(&huge), Err(V8Error::Table));
}

/// A script's lines: the line of a character offset, none past the source; one-byte,
/// two-byte and external sources.
#[test]
fn lines_are_counted_from_the_source() {
    let mut h = Heap::new();
    let script = h.script("/srv/a.js", "one\ntwo\n\nfour");
    let lines = line_starts(&layout(), script, &mut |a, b| h.mem.read(a, b))
        .unwrap()
        .unwrap();
    assert_eq!(lines, vec![0, 4, 8, 9, 13]);
    let at = |o| line_of(&lines, o);
    assert_eq!(
        (at(0), at(3), at(4), at(8), at(9), at(12), at(13)),
        (Some(1), Some(1), Some(2), Some(3), Some(4), Some(4), None)
    );
    // Two-byte characters (a script with any beyond Latin-1), counted in UTF-16 units as V8's
    // positions are; an external one-byte source (Node's own modules), through the address
    // of its characters.
    let (name, two) = (h.string("/srv/b.js"), h.two_byte("ł\n→\n"));
    let script = h.object(167, &[two, name]);
    let lines = line_starts(&layout(), script, &mut |a, b| h.mem.read(a, b)).unwrap();
    assert_eq!(lines, Some(vec![0, 2, 4, 4]));
    let chars = 0x7700_0000;
    h.mem.put(chars, b"a\nb\n");
    let external = h.object(42, &[4 << 32, 0x1234, chars]);
    let script = h.object(167, &[external, name]);
    let lines = line_starts(&layout(), script, &mut |a, b| h.mem.read(a, b)).unwrap();
    assert_eq!(lines, Some(vec![0, 2, 4, 4]));
    // Not read: a source that is no string, an external string whose characters V8 does not
    // point to, one of another kind (two-byte external).
    let not_a_string = h.mem_word_free();
    let unpointed = h.object(42, &[4 << 32, 0x1234, 0]);
    let other = h.object(34, &[4 << 32, 0x1234, chars]);
    for source in [not_a_string, unpointed, other] {
        let script = h.object(167, &[source, name]);
        assert_eq!(line_starts(&layout(), script, &mut |a, b| h.mem.read(a, b)), Ok(None));
    }
}

impl Heap {
    /// A word that is no heap object (a Smi).
    fn mem_word_free(&self) -> u64 {
        smi(7)
    }

    /// A byte array holding `bytes`.
    fn bytes(&mut self, bytes: &[u8]) -> u64 {
        let map = self.map(BYTE_ARRAY);
        let at = self.alloc(16 + bytes.len() as u64);
        let mut all = map.to_le_bytes().to_vec();
        all.extend_from_slice(&smi(bytes.len() as i64).to_le_bytes());
        all.extend_from_slice(bytes);
        self.mem.put(at, &all);
        at + 1
    }

    /// A fixed array (of `kind`) of `elements`.
    fn array(&mut self, kind: u16, elements: &[u64]) -> u64 {
        let mut words = vec![smi(elements.len() as i64)];
        words.extend_from_slice(elements);
        self.object(kind, &words)
    }

    /// Compiled code for `shared`, its instructions (`size` bytes) at `start` (64-aligned),
    /// its table `entries`, the functions `inlined` into it (each: where it was called, its
    /// shared info); its `Code`'s tagged address. `flags` 13 is TurboFan's kind.
    fn code(
        &mut self,
        start: u64,
        size: u32,
        flags: u32,
        shared: u64,
        entries: &[(u32, u64, bool)],
        inlined: &[(u64, u64)],
    ) -> u64 {
        let table = self.bytes(&encode(entries));
        let mut inlining = Vec::new();
        for (i, &(call, _)) in inlined.iter().enumerate() {
            inlining.extend_from_slice(&call.to_le_bytes());
            inlining.extend_from_slice(&(i as u32).to_le_bytes());
            inlining.extend_from_slice(&[0; 4]);
        }
        let inlining = self.bytes(&inlining);
        // Weak references to the inlined functions.
        let literals: Vec<u64> = inlined.iter().map(|&(_, f)| f | 2).collect();
        let literals = self.array(WEAK_FIXED_ARRAY, &literals);
        let data = self.array(FIXED_ARRAY, &[0, smi(1), literals, 0, 0, 0, shared, inlining]);
        let istream = start - 16;
        let code = self.object(
            245,
            &[0, data, table, istream + 1, start, u64::from(flags), u64::from(size)],
        );
        let map = self.map(252);
        let mut header = map.to_le_bytes().to_vec();
        header.extend_from_slice(&code.to_le_bytes());
        // The instructions: bytes that look like nothing in particular.
        header.extend(std::iter::repeat_n(0xcc, size as usize));
        self.mem.put(istream, &header);
        code
    }
}

/// Compiled code is found from any PC in its instructions, back to its instruction stream's
/// header: its function, its instructions' bounds, its table; a PC past them, or before any
/// code, finds none.
#[test]
fn code_is_found_from_a_pc_in_it() {
    let mut h = Heap::new();
    let script = h.script("/srv/a.js", "x");
    let name = h.string("f");
    let shared = h.shared(name, script);
    let start = 0x5000_0040;
    h.code(
        start,
        400,
        13,
        shared,
        &[(0, position(5, None), true), (40, position(9, None), false)],
        &[],
    );
    let read = |h: &Heap, pc| code_at(&layout(), pc, &mut |a, b| h.mem.read(a, b));
    let code = read(&h, start + 300).unwrap();
    assert_eq!(
        (code.start, code.end, code.shared, code.baseline),
        (start, start + 400, shared, false)
    );
    assert_eq!(code.chain(300 - 1), Some(vec![(shared, Some(9))]));
    assert_eq!(code.chain(39), Some(vec![(shared, Some(5))]));
    assert_eq!(read(&h, start), Ok(code.clone()));
    // Past its instructions (its metadata, or other code): not this code.
    h.mem.put(start + 400, &[0xcc; 600]);
    assert_eq!(read(&h, start + 400), Err(V8Error::NotCode));
    // Nothing mapped before it.
    assert_eq!(read(&h, 0x4000_0000), Err(V8Error::Unreadable));
}

/// Instructions that look like a header (a heap object's map word where one would be) are
/// passed over: a map of another kind, or an instruction stream whose code is elsewhere.
#[test]
fn instructions_that_look_like_a_header_are_passed_over() {
    let mut h = Heap::new();
    let script = h.script("/srv/a.js", "x");
    let name = h.string("f");
    let shared = h.shared(name, script);
    let start = 0x5000_0040;
    h.code(start, 1000, 13, shared, &[(0, position(3, None), true)], &[]);
    // At the next two 64-byte boundaries: a string's map, and an instruction stream's map
    // with a code that does not start there.
    let string_map = h.map(8);
    let istream_map = h.map(252);
    let code = h.object(245, &[0, 0, 0, 0, start + 4096, 13, 100]);
    let mut bytes = h.mem.piece(start - 16).unwrap().to_vec();
    bytes[64..72].copy_from_slice(&string_map.to_le_bytes());
    bytes[128..136].copy_from_slice(&istream_map.to_le_bytes());
    bytes[136..144].copy_from_slice(&code.to_le_bytes());
    h.mem.put(start - 16, &bytes);
    let found = code_at(&layout(), start + 200, &mut |a, b| h.mem.read(a, b)).unwrap();
    assert_eq!((found.start, found.shared), (start, shared));
}

/// Code with functions inlined into it: the frame stands for the inlined function at its
/// position, then (innermost first) each caller at its call, its own function last; a table
/// that names an inlined function it does not list gives no chain, and baseline code no
/// positions at all.
#[test]
fn inlined_functions_are_frames_of_their_own() {
    let mut h = Heap::new();
    let script = h.script("/srv/a.js", "x");
    let (outer, middle, inner) = (h.string("outer"), h.string("middle"), h.string("inner"));
    let (outer, middle, inner) = (
        h.shared(outer, script),
        h.shared(middle, script),
        h.shared(inner, script),
    );
    let start = 0x5000_0040;
    // `middle` inlined into `outer` (called at 100), `inner` into `middle` (called at 50).
    let entries = [
        (0, position(90, None), true),
        (20, position(7, Some(1)), false),
        (30, position(60, Some(0)), false),
        (40, position(3, Some(5)), false),
    ];
    let inlined = [(position(100, None), middle), (position(50, Some(0)), inner)];
    h.code(start, 200, 13, outer, &entries, &inlined);
    let code = code_at(&layout(), start + 25, &mut |a, b| h.mem.read(a, b)).unwrap();
    assert_eq!(code.inlined, inlined.to_vec());
    assert_eq!(
        code.chain(25),
        Some(vec![(inner, Some(7)), (middle, Some(50)), (outer, Some(100))])
    );
    assert_eq!(code.chain(35), Some(vec![(middle, Some(60)), (outer, Some(100))]));
    assert_eq!(code.chain(10), Some(vec![(outer, Some(90))]));
    assert_eq!(code.chain(45), None, "inlining id 5 is not listed");
    // Baseline code (kind 11): found, without positions.
    let start = 0x6000_0040;
    h.code(start, 100, 11, outer, &entries, &[]);
    let code = code_at(&layout(), start + 10, &mut |a, b| h.mem.read(a, b)).unwrap();
    assert!(code.baseline);
    assert_eq!(code.chain(10), None);
}

/// Forged code is refused by reason: a table announcing more bytes than allowed, a function
/// that is no shared info, an inlined function that is none.
#[test]
fn forged_code_is_refused_by_reason() {
    let mut h = Heap::new();
    let script = h.script("/srv/a.js", "x");
    let name = h.string("f");
    let shared = h.shared(name, script);
    let start = 0x5000_0040;
    let code = h.code(start, 100, 13, shared, &[(0, position(1, None), true)], &[]);
    let read = |h: &Heap| code_at(&layout(), start + 8, &mut |a, b| h.mem.read(a, b));
    assert!(read(&h).is_ok());
    // A table announcing 2^30 bytes.
    let huge = h.object(BYTE_ARRAY, &[smi(1 << 30)]);
    let mut forged = h.mem.piece(code - 1).unwrap().to_vec();
    forged[24..32].copy_from_slice(&huge.to_le_bytes());
    let mut h2 = Heap::new();
    h2.mem = h.mem.clone();
    h2.mem.put(code - 1, &forged);
    assert_eq!(read(&h2), Err(V8Error::Table));
    // Its own function: a script.
    h.code(start + 0x1000, 100, 13, script, &[(0, position(1, None), true)], &[]);
    assert_eq!(
        code_at(&layout(), start + 0x1008, &mut |a, b| h.mem.read(a, b)),
        Err(V8Error::NotShared)
    );
    // An inlined function that is a script.
    h.code(
        start + 0x2000,
        100,
        13,
        shared,
        &[(0, position(1, Some(0)), true)],
        &[(position(1, None), script)],
    );
    assert_eq!(
        code_at(&layout(), start + 0x2008, &mut |a, b| h.mem.read(a, b)),
        Err(V8Error::NotShared)
    );
}

/// A function's bytecode positions: from its bytecode array, or through its baseline code's;
/// a function without bytecode (a builtin's: a Smi) or whose table is not made yet
/// (`undefined`) has none, by reason. An interpreted frame's slot is the offset from the
/// array's tagged address less one.
#[test]
fn bytecode_positions_are_read_through_the_function() {
    let mut h = Heap::new();
    let script = h.script("/srv/a.js", "x");
    let name = h.string("f");
    let table = h.bytes(&encode(&[
        (0, position(2, None), true),
        (23, position(353, None), false),
    ]));
    let bytecode = h.object(191, &[smi(27), 0, 0, table]);
    let shared = h.object(262, &[bytecode, name, 0, script]);
    let read = |h: &Heap, shared| bytecode_positions(&layout(), shared, &mut |a, b| h.mem.read(a, b));
    let (positions, data) = read(&h, shared).unwrap();
    assert_eq!(positions, vec![(0, position(2, None)), (23, position(353, None))]);
    assert_eq!(data, bytecode);
    assert_eq!(bytecode_offset(&layout(), 23 + 52), Some(23));
    assert_eq!(bytecode_offset(&layout(), 3), None);
    let baseline = h.object(245, &[0, bytecode]);
    let through = h.object(262, &[baseline, name, 0, script]);
    assert_eq!(read(&h, through), Ok((positions, baseline)));
    let builtin = h.object(262, &[smi(40), name, 0, script]);
    assert_eq!(read(&h, builtin), Err(V8Error::NoBytecode));
    let undefined = h.undefined();
    let lazy = h.object(191, &[smi(27), 0, 0, undefined]);
    let lazy = h.object(262, &[lazy, name, 0, script]);
    assert_eq!(read(&h, lazy), Err(V8Error::Table));
    assert_eq!(read(&h, script), Err(V8Error::NotShared));
}

/// The runtime: a compiled frame becomes its inlined function's frame and its own, each at its
/// running line; an interpreted caller is at its bytecode offset's line; the sampled
/// interpreted frame, whose offset may not be saved yet, and a frame whose code is another
/// function's, are named without a line (counted by reason).
#[test]
fn frames_are_named_at_their_running_lines() {
    let mut h = Heap::new();
    let source = "function leaf() {}\nfunction main() {\n  leaf();\n}\nmain();\n";
    let script = h.script("/srv/a.js", source);
    let (leaf, main) = (h.string("leaf"), h.string("main"));
    let (leaf, main) = (h.shared(leaf, script), h.shared(main, script));
    let call = source.find("leaf();").unwrap() as u64;
    let start = 0x5000_0040;
    let entries = [(0, position(19, None), true), (30, position(5, Some(0)), false)];
    h.code(start, 100, 13, main, &entries, &[(position(call, None), leaf)]);
    let table = h.bytes(&encode(&[
        (0, position(19, None), true),
        (4, position(call, None), false),
    ]));
    let bytecode = h.object(191, &[smi(9), 0, 0, table]);
    let name = h.string("main");
    let interpreted = h.object(262, &[bytecode, name, 0, script]);
    let memory = Arc::new(Mutex::new(h.mem.clone()));
    let v8 = runtime(&memory);
    let named = |out: &[(u32, bool)]| -> Vec<(String, u32, bool)> {
        out.iter()
            .map(|&(f, inlined)| {
                let f = v8.function(f).unwrap();
                (f.name, f.line, inlined)
            })
            .collect()
    };
    let mut out = Vec::new();
    let at = |lookup, jit, sampled| FrameAt { lookup, jit, sampled };
    assert!(v8.frames(7, main, at(start + 31, true, false), 1, &mut out));
    assert_eq!(named(&out), [("leaf".into(), 1, true), ("main".into(), 3, false)]);
    assert_eq!((v8.stats().lined, v8.stats().inlined), (2, 1));
    // Interpreted, calling: at its bytecode offset (4, kept as 4 + 52 plus one).
    let word = interpreted | (4 + 52 + 1) << tracer_common::frame_word::BCI_SHIFT;
    out.clear();
    assert!(v8.frames(7, word, at(0x40_0000, false, false), 2, &mut out));
    assert_eq!(named(&out), [("main".into(), 3, false)]);
    // Sampled: no line.
    out.clear();
    assert!(v8.frames(7, word, at(0x40_0000, false, true), 3, &mut out));
    assert_eq!(named(&out), [("main".into(), 0, false)]);
    // Compiled code of another function than the frame's.
    out.clear();
    assert!(v8.frames(7, leaf, at(start + 31, true, false), 4, &mut out));
    assert_eq!(named(&out), [("leaf".into(), 0, false)]);
    let reasons = v8.stats().unlined_by_reason;
    assert_eq!(reasons.get("sampled_frame"), Some(&1));
    assert_eq!(reasons.get("code_of_another"), Some(&1));
    // A frame whose function cannot be named: none.
    out.clear();
    assert!(!v8.frames(7, script, at(start + 31, true, false), 5, &mut out));
    assert!(out.is_empty());
}

/// Sizes of a made-up V8's eight bytecodes at operand scales 1, 2 and 4: 0 to 3 the
/// prefixes, 4 without operands, 5 with two (a byte each when unscaled), 6 with one.
const SIZES: [u8; 24] = [
    1, 1, 1, 1, 1, 3, 2, 0, //
    1, 1, 1, 1, 1, 5, 3, 0, //
    1, 1, 1, 1, 1, 9, 5, 0,
];

/// Baseline code's instructions map to bytecodes through their sizes: the function's entry
/// (no bytecode), then each bytecode in turn, a prefixed one sized at its scale; nothing past
/// the last. A map whose bytecodes, so sized, do not end at their end or are not as many as
/// the table's sizes (another V8's sizes, a bytecode they do not know, a table cut short) is
/// none.
#[test]
fn baseline_instructions_map_to_their_bytecodes() {
    // Bytecodes at 0 (4), 1 (5), 4 (wide 5: 1 + 5 bytes), 10 (6).
    let bytecodes = [4, 5, 1, 2, 0, 5, 1, 0, 2, 0, 6, 3];
    // Instructions: the entry 10 bytes, then 4, 8, 6 and 5 for the four bytecodes.
    let table = [10, 4, 8, 6, 5];
    let map = baseline_map(&table, &bytecodes, &SIZES).expect("a consistent map");
    let expected = [
        (5, None),
        (10, Some(0)),
        (13, Some(0)),
        (14, Some(1)),
        (21, Some(1)),
        (22, Some(4)),
        (27, Some(4)),
        (28, Some(10)),
        (32, Some(10)),
        (33, None),
    ];
    for (offset, bytecode) in expected {
        assert_eq!(baseline_offset(&map, offset), bytecode, "at {offset}");
    }
    // An extra-wide prefix (scale 4): 1 + 9 bytes.
    let wide = [1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 4];
    let map = baseline_map(&[0, 3, 3], &wide, &SIZES).expect("a consistent map");
    assert_eq!(baseline_offset(&map, 4), Some(10));
    // Bytecode 7 (size 0: unknown), one past the sizes, one operand short at the end.
    for bytes in [&[7, 4][..], &[200, 4], &[4, 5, 1]] {
        assert_eq!(baseline_map(&[0, 3, 3], bytes, &SIZES), None, "{bytes:?}");
    }
    // Sizes for fewer or more bytecodes than the table has, a table of huge steps.
    assert_eq!(baseline_map(&[10, 4], &bytecodes, &SIZES), None);
    assert_eq!(baseline_map(&[10, 4, 8, 6, 5, 1], &bytecodes, &SIZES), None);
    let huge = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0x01,
    ];
    assert_eq!(baseline_map(&huge, &bytecodes, &SIZES), None);
}

/// V8 13.6's sizes (`super::super::bytecodes`) decode the bytecode array of a function as
/// Node.js 24 compiled it, read from a running node 24 in baseline code (the module wrapper of
/// a script whose last line calls `main`: 27 bytes, 11 bytecodes), with the instructions its
/// baseline code keeps per bytecode: to its end, the call at 22 (its return address 276).
#[test]
fn v8_13_sizes_decode_node_24s_bytecodes() {
    let bytecodes = [
        140, 0, 2, 28, 248, 137, 1, 0, 2, 39, 2, 137, 2, 1, 2, 39, 3, 137, 3, 2, 2, 206, 104, 249, 0, 14, 179,
    ];
    let table = [22, 24, 12, 27, 56, 27, 56, 27, 4, 21, 7, 17];
    let sizes = crate::v8::bytecodes::V8_13_SIZES;
    let map = baseline_map(&table, &bytecodes, &sizes).expect("node 24's bytecodes decode");
    assert_eq!(map.len(), 12);
    assert_eq!(baseline_offset(&map, 275), Some(22));
    assert_eq!(baseline_offset(&map, 276), Some(25));
    // Sizes of another V8 (the made-up ones above) do not.
    assert_eq!(baseline_map(&table, &bytecodes, &SIZES), None);
}

/// A baseline frame is at the line of the bytecode its PC is in, when it is its function's
/// baseline code (else no line, `code_of_another`); without the bytecodes' sizes, no line
/// (`baseline`).
#[test]
fn baseline_frames_are_at_their_bytecodes_line() {
    let mut h = Heap::new();
    let source = "function f() {\n  g();\n  h();\n}\n";
    let script = h.script("/srv/a.js", source);
    let g_call = source.find("g()").unwrap() as u64;
    let h_call = source.find("h()").unwrap() as u64;
    // Keyed one past each bytecode's index: bytecode 1 (`g()`) at 2, bytecode 4 (`h()`) at 5.
    let positions = h.bytes(&encode(&[
        (0, position(9, None), true),
        (2, position(g_call, None), true),
        (5, position(h_call, None), true),
    ]));
    // Bytecodes at 0 (4), 1 (5), 4 (6), 6 (4).
    let bytecode = h.object(191, &[smi(7), 0, 0, positions]);
    let bytes = [4u8, 5, 0, 0, 6, 0, 4];
    let mut raw = h.mem.piece(bytecode - 1).unwrap().to_vec();
    raw.resize(54, 0);
    raw.extend_from_slice(&bytes);
    h.mem.put(bytecode - 1, &raw);
    let name = h.string("f");
    let start = 0x5000_0040;
    // Instructions: entry 8, then 4, 20, 6, 2 for the four bytecodes.
    let table = h.bytes(&[8, 4, 20, 6, 2]);
    let code = h.object(245, &[0, bytecode, table, start - 16 + 1, start, 11, 40]);
    let map = h.map(252);
    let mut stream = map.to_le_bytes().to_vec();
    stream.extend_from_slice(&code.to_le_bytes());
    stream.extend(std::iter::repeat_n(0xcc, 40));
    h.mem.put(start - 16, &stream);
    let shared = h.object(262, &[code, name, 0, script]);
    let other = h.object(262, &[bytecode, name, 0, script]);
    let memory = Arc::new(Mutex::new(h.mem.clone()));
    let mut v8 = runtime(&memory);
    let sized = Layout {
        bytecode_sizes: Some(SIZES.to_vec()),
        ..layout()
    };
    v8.procs.insert(
        7,
        crate::v8::Proc {
            layout: Arc::new(sized),
            uid: 0,
        },
    );
    let line = |v8: &V8, shared, lookup, time| {
        let mut out = Vec::new();
        let at = FrameAt {
            lookup,
            jit: true,
            sampled: false,
        };
        assert!(v8.frames(7, shared, at, time, &mut out));
        v8.function(out[0].0).unwrap().line
    };
    // In bytecode 1 (instructions 12..32): `g()` on line 2; in bytecode 4 (32..38): line 3.
    assert_eq!(line(&v8, shared, start + 20, 1), 2);
    assert_eq!(line(&v8, shared, start + 33, 2), 3);
    // The entry: no bytecode.
    assert_eq!(line(&v8, shared, start + 3, 3), 0);
    // A function whose baseline code is not this one.
    assert_eq!(line(&v8, other, start + 20, 4), 0);
    assert_eq!(v8.stats().unlined_by_reason.get("code_of_another"), Some(&1));
    // Without the sizes: no line.
    let v8 = runtime(&memory);
    assert_eq!(line(&v8, shared, start + 20, 5), 0);
    assert_eq!(v8.stats().unlined_by_reason.get("baseline"), Some(&1));
}
