use std::collections::BTreeMap;

use gimli::{BaseAddresses, CfaRule, EhFrame, NativeEndian, Register, RegisterRule, UnwindContext, UnwindSection as _};

use crate::python::testing::FakeMemory;

use super::{
    HotSpotError, HotSpots, dump_of,
    heap::{self, BlobKind},
    unwind::{self, Rule},
    vmstructs::{CodeRange, EXPORTS, Exports, Layout, MAX_ENTRIES, Memory},
};

/// A process's memory (pieces of bytes by address), counting its reads.
#[derive(Default)]
struct Fake {
    mem: FakeMemory,
    reads: usize,
}

impl Memory for Fake {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        self.reads += 1;
        self.mem.read(addr, buf)
    }
}

impl Fake {
    fn put(&mut self, addr: u64, bytes: &[u8]) {
        self.mem.put(addr, bytes);
    }

    fn word(&mut self, addr: u64, value: u64) {
        self.put(addr, &value.to_le_bytes());
    }

    /// `text` and its NUL, in a region of 256 bytes (what follows a string is readable).
    fn string(&mut self, addr: u64, text: &str) {
        let mut b = text.as_bytes().to_vec();
        b.resize(256, 0);
        self.put(addr, &b);
    }
}

/// JDK 17's offsets (as its vmStructs give them on x86-64).
const FIELDS: [(&str, &str, u64); 27] = [
    ("GrowableArrayBase", "_len", 0),
    ("GrowableArray<int>", "_data", 8),
    ("CodeHeap", "_memory", 8),
    ("CodeHeap", "_log2_segment_size", 256),
    ("VirtualSpace", "_low", 16),
    ("VirtualSpace", "_high", 24),
    ("HeapBlock", "_header", 0),
    ("HeapBlock::Header", "_length", 0),
    ("HeapBlock::Header", "_used", 8),
    ("CodeBlob", "_name", 96),
    ("CodeBlob", "_size", 12),
    ("CodeBlob", "_frame_complete_offset", 20),
    ("CodeBlob", "_frame_size", 28),
    ("CodeBlob", "_code_begin", 32),
    ("CodeBlob", "_code_end", 40),
    ("CompiledMethod", "_method", 112),
    ("nmethod", "_stub_offset", 252),
    ("Method", "_constMethod", 8),
    ("ConstMethod", "_constants", 8),
    ("ConstMethod", "_name_index", 34),
    ("ConstantPool", "_pool_holder", 24),
    ("Klass", "_name", 24),
    ("Symbol", "_length", 4),
    ("Symbol", "_body", 6),
    ("Unrelated", "_field", 1),
    ("CodeCache", "_heaps", 0x9000),
    ("Abstract_VM_Version", "_s_vm_release", 0x9100),
];
const SIZES: [(&str, u64); 4] = [
    ("HeapBlock", 16),
    ("ConstantPool", 72),
    ("PcDesc", 16),
    ("ConstMethod", 48),
];

/// Where the fake's tables are.
const EXPORTS_AT: u64 = 0x1000;
const STRUCTS: u64 = 0x10_000;
const TYPES_AT: u64 = 0x20_000;
const STRINGS: u64 = 0x30_000;
const STRIDE: u64 = 48;

/// A fake JVM's tables, `release` its version; `fields` may leave some out.
fn jvm(release: &str, fields: &[(&str, &str, u64)]) -> (Fake, Exports) {
    let mut m = Fake::default();
    let mut strings = STRINGS;
    let mut string = |m: &mut Fake, s: &str| {
        let at = strings;
        m.string(at, s);
        strings += 0x100;
        at
    };
    for (i, &(t, f, v)) in fields.iter().enumerate() {
        let mut entry = vec![0u8; STRIDE as usize];
        let (tp, fp) = (string(&mut m, t), string(&mut m, f));
        let is_static = matches!(t, "CodeCache" | "Abstract_VM_Version");
        entry[0..8].copy_from_slice(&tp.to_le_bytes());
        entry[8..16].copy_from_slice(&fp.to_le_bytes());
        let type_string = match (t, f) {
            ("HeapBlock::Header", "_length") if release.starts_with("25") => "uint32_t",
            ("HeapBlock::Header", "_length") => "size_t",
            ("CodeBlob", "_frame_complete_offset") if release.starts_with("25") => "int16_t",
            ("ConstMethod", "_flags") => "u2",
            _ => "int",
        };
        let sp = string(&mut m, type_string);
        entry[16..24].copy_from_slice(&sp.to_le_bytes());
        entry[24..28].copy_from_slice(&u32::from(is_static).to_le_bytes());
        entry[32..40].copy_from_slice(&(if is_static { 0 } else { v }).to_le_bytes());
        entry[40..48].copy_from_slice(&(if is_static { v } else { 0 }).to_le_bytes());
        m.put(STRUCTS + i as u64 * STRIDE, &entry);
    }
    m.put(STRUCTS + fields.len() as u64 * STRIDE, &[0; STRIDE as usize]);
    for (i, &(t, size)) in SIZES.iter().enumerate() {
        let tp = string(&mut m, t);
        let mut entry = vec![0u8; 32];
        entry[0..8].copy_from_slice(&tp.to_le_bytes());
        entry[24..32].copy_from_slice(&size.to_le_bytes());
        m.put(TYPES_AT + i as u64 * 32, &entry);
    }
    m.put(TYPES_AT + SIZES.len() as u64 * 32, &[0; 32]);
    let release_at = string(&mut m, release);
    m.word(0x9100, release_at);
    // The exported variables: the arrays' addresses, the strides, the parts' offsets.
    let values = [STRUCTS, STRIDE, 0, 8, 16, 24, 32, 40, TYPES_AT, 32, 0, 24];
    let mut exported = [0u64; EXPORTS.len()];
    for (i, v) in values.iter().enumerate() {
        let at = EXPORTS_AT + i as u64 * 8;
        m.word(at, *v);
        exported[i] = at;
    }
    (m, Exports::from_values(exported))
}

/// The tables of a JDK 17 are read into the offsets the walk uses.
#[test]
fn the_layout_is_read_from_the_jvm_s_own_tables() {
    let (mut m, exports) = jvm("17.0.15+6-Debian-1deb12u1", &FIELDS);
    let layout = Layout::read(&mut m, &exports).expect("layout");
    assert_eq!(layout.major, 17);
    assert_eq!(layout.release, "17.0.15+6-Debian-1deb12u1");
    assert_eq!(layout.code_heaps, 0x9000);
    assert_eq!(
        (layout.blob_name, layout.blob_frame_size, layout.compiled_method),
        (96, 28, 112)
    );
    assert_eq!((layout.block_size, layout.block_used, layout.pool_size), (16, 8, 72));
    assert_eq!((layout.space_low, layout.space_high, layout.symbol_body), (16, 24, 6));
}

/// JDK 25 keeps a blob's code as offsets, a block's length in 32 bits, the frame-complete
/// offset in 16, and a compiled method's `Method` in `nmethod`: read as such.
#[test]
fn jdk_25_s_layout_is_read_as_its_types_say() {
    let mut fields: Vec<(&str, &str, u64)> = FIELDS
        .iter()
        .copied()
        .filter(|f| !matches!(f.1, "_code_begin" | "_code_end") && f.0 != "CompiledMethod")
        .collect();
    fields.extend([
        ("CodeBlob", "_code_offset", 36),
        ("CodeBlob", "_data_offset", 40),
        ("nmethod", "_method", 80),
    ]);
    let (mut m, exports) = jvm("25.0.3+9-LTS", &fields);
    let layout = Layout::read(&mut m, &exports).expect("layout");
    assert_eq!(layout.major, 25);
    assert_eq!(layout.blob_code, CodeRange::Offsets);
    assert_eq!((layout.blob_code_begin, layout.blob_code_end), (36, 40));
    assert_eq!((layout.block_length_width, layout.blob_frame_complete_width), (4, 2));
    assert_eq!(layout.compiled_method, 80);
    // Without either way of keeping the code's range: refused.
    fields.retain(|f| f.1 != "_code_offset");
    let (mut m, exports) = jvm("25.0.3+9-LTS", &fields);
    assert_eq!(
        Layout::read(&mut m, &exports),
        Err(HotSpotError::Missing("CodeBlob::_code_offset".into()))
    );
}

/// A version not known by name, a table without a field the walk needs, tables without an
/// end or with absurd strides, and tables that cannot be read: each refused by its reason.
#[test]
fn jvms_the_walk_does_not_know_are_refused_by_reason() {
    for release in ["11.0.25+9", "22.0.2", "1.8.0_392-b08", "", "x"] {
        let (mut m, exports) = jvm(release, &FIELDS);
        let error = Layout::read(&mut m, &exports).expect_err(release);
        assert_eq!(error.reason(), "unknown_version", "{release}: {error}");
    }
    let without: Vec<_> = FIELDS.iter().copied().filter(|f| f.1 != "_frame_size").collect();
    let (mut m, exports) = jvm("17.0.1", &without);
    assert_eq!(
        Layout::read(&mut m, &exports),
        Err(HotSpotError::Missing("CodeBlob::_frame_size".into()))
    );
    // No terminating entry: the reading stops at the limit (the memory repeats one entry).
    let (mut m, exports) = jvm("17.0.1", &FIELDS);
    let one = m.mem.piece(STRUCTS).expect("the first entry").to_vec();
    let mut endless = Vec::new();
    for _ in 0..=MAX_ENTRIES {
        endless.extend_from_slice(&one);
    }
    m.put(0x1000_0000, &endless);
    m.word(EXPORTS_AT, 0x1000_0000);
    assert_eq!(
        Layout::read(&mut m, &exports),
        Err(HotSpotError::Malformed("vmStructs has no end"))
    );
    // A stride that cannot hold the entry's parts.
    let (mut m, exports) = jvm("17.0.1", &FIELDS);
    m.word(EXPORTS_AT + 8, 4);
    assert_eq!(
        Layout::read(&mut m, &exports),
        Err(HotSpotError::Malformed("vmStructs entry layout"))
    );
    // A JVM starting: its exports not set yet (zero), for the structs or the types. Not
    // ready (read again later), not malformed.
    for at in [EXPORTS_AT + 8, EXPORTS_AT + 9 * 8] {
        let (mut m, exports) = jvm("17.0.1", &FIELDS);
        m.word(at, 0);
        assert_eq!(Layout::read(&mut m, &exports), Err(HotSpotError::NotReady), "{at:#x}");
    }
    // The array's pointer leads nowhere.
    let (mut m, exports) = jvm("17.0.1", &FIELDS);
    m.word(EXPORTS_AT, 0xdead_0000);
    assert_eq!(
        Layout::read(&mut m, &exports),
        Err(HotSpotError::Unreadable("vmStructs"))
    );
    // A name without an end within the bound is no name: that entry is skipped.
    let (mut m, exports) = jvm("17.0.1", &FIELDS);
    m.put(STRINGS, &[b'a'; 4096]);
    assert_eq!(
        Layout::read(&mut m, &exports),
        Err(HotSpotError::Missing("GrowableArrayBase::_len".into()))
    );
}

/// The bytes of a C2 method as this JVM compiles it (no stack bang): `sub rsp, 24; mov [rsp+16],
/// rbp`, a body, the epilogue with its return poll, more body, the poll's stub.
fn c2_method() -> Vec<u8> {
    let mut code = vec![0x48, 0x81, 0xec, 0x18, 0, 0, 0, 0x48, 0x89, 0x6c, 0x24, 0x10];
    code.extend_from_slice(&[0x90; 8]); // body: 12..20
    code.extend_from_slice(&[0x48, 0x83, 0xc4, 0x10, 0x5d]); // 20..25
    code.extend_from_slice(&[0x49, 0x3b, 0xa7, 0x40, 3, 0, 0, 0x0f, 0x87, 6, 0, 0, 0, 0xc3]); // 25..39
    code.extend_from_slice(&[0x90; 6]); // body: 39..45
    code.extend_from_slice(&[
        0x49, 0xba, 1, 2, 3, 4, 5, 6, 7, 8, 0x4d, 0x89, 0x97, 0x58, 3, 0, 0, 0xe9, 0, 0, 0, 0,
    ]); // 45..67
    code.extend_from_slice(&[0x90; 5]); // 67..72
    code
}

/// A C2 method's rules: before the `sub` the caller's frame, after it the frame without the
/// saved `rbp`, then the whole frame; the epilogue's `add` and `pop`, its return, and the return
/// poll's stub each get theirs; the stubs after the body none.
#[test]
fn a_compiled_method_s_rules_follow_its_prologue_and_epilogues() {
    let code = c2_method();
    let frame = |cfa, rbp_saved| Rule::Frame { cfa, rbp_saved };
    let rules = unwind::rules(&code, 32, Some(12), Some(67));
    assert_eq!(
        rules,
        vec![
            (7, 12, frame(32, false)),
            (12, 24, frame(32, true)),
            (24, 25, frame(16, true)),
            (25, 39, frame(8, false)),
            (39, 45, frame(32, true)),
            (45, 67, frame(8, false)),
        ]
    );
    // C1 (and C2 with a stack bang), its entry patched over by a `jmp`: `push rbp; sub rsp`.
    let mut c1 = vec![0xe9, 0x3b, 0x74, 0x58, 0x07, 0xfe, 0xff, 0x55, 0x48, 0x83, 0xec, 0x30];
    c1.extend_from_slice(&[0x90; 4]);
    c1.extend_from_slice(&[0x48, 0x83, 0xc4, 0x30, 0x5d, 0xe9, 1, 2, 3, 4]); // 16..26
    c1.extend_from_slice(&[0x90; 4]);
    assert_eq!(
        unwind::rules(&c1, 64, Some(12), None),
        vec![
            (0, 8, frame(8, false)),
            (8, 12, frame(16, true)),
            (12, 20, frame(64, true)),
            (20, 21, frame(16, true)),
            (21, 26, frame(8, false)),
            (26, 30, frame(64, true)),
        ]
    );
}

/// JDK 25's shapes: C2's entry barrier (`cmp [r15+0x20], 1; jne`) and C1's (`cmp; je +5;
/// call`) after the frame is built run in the built frame; its return poll compares with an
/// 8-bit displacement (`cmp rsp, [r15+0x28]`). Bytes as temurin 25 compiled them.
#[test]
fn jdk_25_s_entry_barriers_and_return_polls_are_known() {
    let frame = |cfa, rbp_saved| Rule::Frame { cfa, rbp_saved };
    // C2: sub rsp, 0x18; mov [rsp+0x10], rbp; cmp dword [r15+0x20], 1; jne; body; epilogue.
    let mut c2 = vec![0x48, 0x81, 0xec, 0x18, 0, 0, 0, 0x48, 0x89, 0x6c, 0x24, 0x10];
    c2.extend_from_slice(&[0x41, 0x81, 0x7f, 0x20, 1, 0, 0, 0, 0x0f, 0x85, 0xf9, 1, 0, 0]); // 12..26
    c2.extend_from_slice(&[0x90; 4]); // 26..30
    c2.extend_from_slice(&[0x48, 0x83, 0xc4, 0x10, 0x5d]); // 30..35
    c2.extend_from_slice(&[0x49, 0x3b, 0x67, 0x28, 0x0f, 0x87, 6, 0, 0, 0, 0xc3]); // 35..46
    c2.extend_from_slice(&[0x90; 2]);
    assert_eq!(
        unwind::rules(&c2, 32, Some(26), None),
        vec![
            (7, 12, frame(32, false)),
            (12, 34, frame(32, true)),
            (34, 35, frame(16, true)),
            (35, 46, frame(8, false)),
            (46, 48, frame(32, true)),
        ]
    );
    // C1: stack bang; push rbp; sub rsp, 0x30; cmp dword [r15+0x20], 1; je +5; call.
    let mut c1 = vec![0x89, 0x84, 0x24, 0, 0xc0, 0xfe, 0xff, 0x55, 0x48, 0x83, 0xec, 0x30];
    c1.extend_from_slice(&[
        0x41, 0x81, 0x7f, 0x20, 1, 0, 0, 0, 0x74, 0x05, 0xe8, 0xa5, 0xef, 0x56, 0x07,
    ]); // 12..27
    c1.extend_from_slice(&[0x90; 3]);
    assert_eq!(
        unwind::rules(&c1, 64, Some(27), None),
        vec![
            (0, 8, frame(8, false)),
            (8, 12, frame(16, true)),
            (12, 30, frame(64, true)),
        ]
    );
}

/// What does not match the frame size, or a shape not known, gets no rule rather than a
/// guess: a prologue of another size, an epilogue whose end is unknown (the rest of the body),
/// a frame smaller than its return address and saved `rbp`, a complete offset past the body.
#[test]
fn code_that_matches_no_known_shape_gets_no_rule() {
    let code = c2_method();
    // Another frame size: neither the prologue nor the epilogue match; the body keeps its rule
    // (and the return poll's stub, which runs after any epilogue, its own).
    assert_eq!(
        unwind::rules(&code, 48, Some(12), Some(67)),
        vec![
            (
                12,
                45,
                Rule::Frame {
                    cfa: 48,
                    rbp_saved: true
                }
            ),
            (
                45,
                67,
                Rule::Frame {
                    cfa: 8,
                    rbp_saved: false
                }
            )
        ]
    );
    // The epilogue's end is not a known one: no rule from its `pop` on.
    let mut odd = code.clone();
    odd[25] = 0x90;
    let rules = unwind::rules(&odd, 32, Some(12), Some(67));
    assert_eq!(rules.last().map(|r| r.1), Some(25), "{rules:?}");
    assert!(unwind::rules(&code, 8, Some(12), None).is_empty());
    assert!(unwind::rules(&code, 36, Some(12), None).is_empty());
    assert!(unwind::rules(&code, 32, Some(70), Some(67)).is_empty());
    assert!(unwind::rules(&code, 32, None, None).is_empty());
}

/// The `.eh_frame` written for the rules says, at every byte of the code, what the rules say
/// (read back with gimli), and nothing where they give none.
#[test]
fn the_written_eh_frame_says_what_the_rules_say() {
    let code = c2_method();
    let rules = unwind::rules(&code, 32, Some(12), Some(67));
    let (code_at, eh_at) = (0x7f00_0000_1000u64, 0x7f00_0000_1048u64);
    let bytes = unwind::eh_frame(&rules, code_at, eh_at);
    let mut terminated = bytes.clone();
    terminated.extend_from_slice(&[0; 4]);
    let section = EhFrame::new(&terminated, NativeEndian);
    let bases = BaseAddresses::default().set_eh_frame(eh_at);
    let mut ctx = Box::new(UnwindContext::new());
    for offset in 0..code.len() as u32 {
        let want = rules.iter().find(|r| r.0 <= offset && offset < r.1).map(|r| r.2);
        let got = section
            .unwind_info_for_address(&bases, &mut ctx, code_at + u64::from(offset), EhFrame::cie_from_offset)
            .ok()
            .map(|row| {
                let CfaRule::RegisterAndOffset { register, offset } = *row.cfa() else {
                    panic!("a CFA not from rsp");
                };
                assert_eq!(register, Register(7));
                assert!(matches!(row.register(Register(16)), Some(RegisterRule::Offset(-8))));
                let rbp_saved = match row.register(Register(6)) {
                    Some(RegisterRule::Offset(-16)) => true,
                    None | Some(RegisterRule::Undefined | RegisterRule::SameValue) => false,
                    _ => panic!("rbp neither saved nor left"),
                };
                Rule::Frame {
                    cfa: offset as u32,
                    rbp_saved,
                }
            });
        assert_eq!(got, want, "at {offset}");
    }
}

/// Where the fake's code heap is.
const HEAP: u64 = 0x100_000;
const HEAP_STRUCT: u64 = 0x50_000;
/// Where a blob's code starts, from the blob (after all the fields the walk reads).
const CODE: usize = 0x110;
/// The interpreter's code.
const INTERPRETER: u64 = HEAP + 0x410 + CODE as u64;

/// A fake JVM with one code heap of 128-byte segments: a compiled method (`c2_method`, named
/// `java.lang.String.length`), a free block, the interpreter, and whatever `extra` blocks add.
fn jvm_with_heap(extra: &[(u64, Vec<u8>)]) -> (Fake, Layout) {
    jvm_with_heap_of(&FIELDS, extra)
}

/// [`jvm_with_heap`] with the vmStructs `fields`.
fn jvm_with_heap_of(fields: &[(&str, &str, u64)], extra: &[(u64, Vec<u8>)]) -> (Fake, Layout) {
    let (mut m, exports) = jvm("17.0.15", fields);
    let layout = Layout::read(&mut m, &exports).expect("layout");
    let mut heap = vec![0u8; 0x1000];
    let block = |heap: &mut Vec<u8>, at: usize, segments: u64, used: bool| {
        heap[at..at + 8].copy_from_slice(&segments.to_le_bytes());
        heap[at + 8] = u8::from(used);
    };
    let blob = |heap: &mut Vec<u8>, at: usize, name: u64, code: &[u8], frame_words: i32, complete: i32| {
        let b = at + 16;
        let code_begin = HEAP + (b + CODE) as u64;
        heap[b + 96..b + 104].copy_from_slice(&name.to_le_bytes());
        heap[b + 20..b + 24].copy_from_slice(&complete.to_le_bytes());
        heap[b + 28..b + 32].copy_from_slice(&frame_words.to_le_bytes());
        heap[b + 32..b + 40].copy_from_slice(&code_begin.to_le_bytes());
        heap[b + 40..b + 48].copy_from_slice(&(code_begin + code.len() as u64).to_le_bytes());
        heap[b + CODE..b + CODE + code.len()].copy_from_slice(code);
        b
    };
    m.string(0x40_000, "nmethod");
    m.string(0x40_100, "Interpreter");
    // 0x000: the compiled method (4 segments), its Method chain.
    block(&mut heap, 0, 4, true);
    let b = blob(&mut heap, 0, 0x40_000, &c2_method(), 4, 12);
    heap[b + 112..b + 120].copy_from_slice(&0x60_000u64.to_le_bytes());
    heap[b + 252..b + 256].copy_from_slice(&(CODE as i32 + 67).to_le_bytes());
    m.word(0x60_000 + 8, 0x61_000); // Method::_constMethod
    m.put(0x61_000, &[0; 40]);
    m.word(0x61_000 + 8, 0x62_000); // ConstMethod::_constants
    m.put(0x61_000 + 34, &5u16.to_le_bytes()); // name index
    m.word(0x62_000 + 24, 0x63_000); // pool holder
    m.word(0x62_000 + 72 + 5 * 8, 0x65_000); // the name's Symbol
    m.word(0x63_000 + 24, 0x64_000); // Klass::_name
    let symbol = |m: &mut Fake, at: u64, text: &str| {
        let mut b = vec![0, 0, 0, 0];
        b.extend_from_slice(&(text.len() as u16).to_le_bytes());
        b.extend_from_slice(text.as_bytes());
        m.put(at, &b);
    };
    symbol(&mut m, 0x64_000, "java/lang/String");
    symbol(&mut m, 0x65_000, "length");
    // 0x200: free.
    block(&mut heap, 0x200, 4, false);
    // 0x400: the interpreter.
    block(&mut heap, 0x400, 4, true);
    blob(&mut heap, 0x400, 0x40_100, &[0x55; 64], 0, -1);
    for (at, bytes) in extra {
        heap[*at as usize..*at as usize + bytes.len()].copy_from_slice(bytes);
    }
    m.put(HEAP, &heap);
    // The heap list: one heap, its committed range, 128-byte segments.
    m.word(0x9000, 0x70_000);
    m.put(0x70_000, &[1, 0, 0, 0, 1, 0, 0, 0]);
    m.word(0x70_008, 0x71_000);
    m.word(0x71_000, HEAP_STRUCT);
    let mut heap_struct = vec![0u8; 264];
    heap_struct[8 + 16..8 + 24].copy_from_slice(&HEAP.to_le_bytes());
    heap_struct[8 + 24..8 + 32].copy_from_slice(&(HEAP + 0x1000).to_le_bytes());
    heap_struct[256..260].copy_from_slice(&7i32.to_le_bytes());
    m.put(HEAP_STRUCT, &heap_struct);
    (m, layout)
}

/// The code heap's blobs are found, the compiled one named `Class.method` with its frame and
/// its body's end, the interpreter as code that keeps frame pointers; a free block is none.
#[test]
fn the_code_heap_s_blobs_are_read_and_named() {
    let (mut m, layout) = jvm_with_heap(&[]);
    let scan = heap::scan(&mut m, &layout).expect("scan");
    assert_eq!(scan.heaps, vec![(HEAP, HEAP + 0x1000)]);
    // The used blocks, apart where the free one is.
    assert_eq!(scan.used, vec![(HEAP, HEAP + 0x200), (HEAP + 0x400, HEAP + 0x600)]);
    assert_eq!((scan.malformed, scan.unnamed), (0, 0));
    let kinds: Vec<(BlobKind, &str)> = scan.blobs.iter().map(|b| (b.kind, b.name.as_str())).collect();
    assert_eq!(
        kinds,
        vec![
            (BlobKind::Compiled, "java.lang.String.length"),
            (BlobKind::FramePointer, "Interpreter")
        ]
    );
    let method = &scan.blobs[0];
    assert_eq!(
        (method.frame_bytes, method.frame_complete, method.body_end),
        (32, Some(12), Some(67))
    );
    assert_eq!(method.code, c2_method());
    // Made loads: the method with its unwind rules, the interpreter's range kept aside.
    let (dump, frame_pointer_code, compiled) = dump_of(scan);
    assert_eq!(compiled, 1);
    assert_eq!(dump.loads.len(), 2);
    assert!(dump.loads.values().next().is_some_and(|l| l.unwind.is_some()));
    assert_eq!(
        frame_pointer_code,
        BTreeMap::from([(INTERPRETER, (INTERPRETER + 64, true))])
    );
}

/// [`FIELDS`] with JDK 17's fields of compiled methods' scopes (in the blob) and of methods'
/// line tables, at offsets of the fake's.
fn in_blob_fields() -> Vec<(&'static str, &'static str, u64)> {
    let mut fields = FIELDS.to_vec();
    fields.extend([
        ("nmethod", "_metadata_offset", 200),
        ("nmethod", "_scopes_pcs_offset", 204),
        ("nmethod", "_dependencies_offset", 208),
        ("CompiledMethod", "_scopes_data_begin", 216),
        ("PcDesc", "_pc_offset", 0),
        ("PcDesc", "_scope_decode_offset", 4),
        ("ConstMethod", "_flags", 28),
        ("ConstMethod", "_code_size", 32),
    ]);
    fields
}

/// The fake's method (`java.lang.String.length`) gets a line table after its 10 bytes of
/// bytecodes: bci 0 at line 2, 4 at 3.
fn with_line_table(m: &mut Fake) {
    m.put(0x61_000 + 28, &1u16.to_le_bytes());
    m.put(0x61_000 + 32, &10u16.to_le_bytes());
    // (To the end of its page: a table is read a page at a time.)
    let mut table = vec![2, (4 << 3) | 1, 0];
    table.resize(0x1000 - 58, 0);
    m.put(0x61_000 + 48 + 10, &table);
}

/// The Java scopes of a compiled method (its `PcDesc`s, scope descriptions and metadata in
/// its blob, where the fields say) give each described PC its method and line, read from the
/// method's line table; a JVM whose layout lacks them has none, and a part out of its block
/// leaves the method without scopes.
#[test]
fn compiled_methods_give_their_pcs_methods_and_lines() {
    let fields = in_blob_fields();
    // In the method's block (its blob at 16, its header at HEAP + 16): the metadata (the
    // method) at 0x190, one scope (the method at bci 4) at 0x198, one PcDesc (PC 0x20) at 0x1a0.
    let b = 16usize;
    let int = |v: i32| v.to_le_bytes().to_vec();
    let mut pc_desc = int(0x20);
    pc_desc.extend(int(1));
    pc_desc.extend([0; 8]);
    let parts = |metadata_offset: i32| {
        vec![
            ((b + 200) as u64, int(metadata_offset)),
            ((b + 204) as u64, int(0x1a0 - 16)),
            ((b + 208) as u64, int(0x1b0 - 16)),
            ((b + 216) as u64, (HEAP + 0x198).to_le_bytes().to_vec()),
            (0x190, 0x60_000u64.to_le_bytes().to_vec()),
            (0x198, vec![0, 0, 1, 5, 0]),
            (0x1a0, pc_desc.clone()),
        ]
    };
    let (mut m, layout) = jvm_with_heap_of(&fields, &parts(0x190 - 16));
    assert!(layout.scopes.is_some());
    with_line_table(&mut m);
    let scan = heap::scan(&mut m, &layout).expect("scan");
    let java = &scan.blobs[0].java;
    assert_eq!(java.len(), 1);
    assert_eq!((java[0].pc_offset, java[0].scopes.clone()), (0x20, vec![(0x60_000, 4)]));
    let method = &scan.methods[&0x60_000];
    assert_eq!(method.name.as_deref(), Some("java.lang.String.length"));
    assert_eq!(
        super::scopes::line_at(&method.lines, 4, scan.coding.expect("coding")),
        Some(3)
    );
    // Metadata said to start before the block: no scopes.
    let (mut m, layout) = jvm_with_heap_of(&fields, &parts(-0x100));
    let scan = heap::scan(&mut m, &layout).expect("scan");
    assert!(scan.blobs[0].java.is_empty() && scan.methods.is_empty());
    // Without the fields (as 25's layout is read): none either.
    let (mut m, layout) = jvm_with_heap_of(&FIELDS, &parts(0x190 - 16));
    assert!(layout.scopes.is_none());
    let scan = heap::scan(&mut m, &layout).expect("scan");
    assert!(scan.blobs[0].java.is_empty() && scan.coding.is_none());
}

/// Since JDK 23 the scopes are apart from the blob: the `PcDesc`s and scope descriptions in
/// its immutable data, the metadata after the relocations in its mutable data, read from the
/// process; sizes past the bound, or data that cannot be read, leave the method without.
#[test]
fn scopes_apart_from_the_blob_are_read_from_the_process() {
    let mut fields = FIELDS.to_vec();
    fields.extend([
        ("nmethod", "_immutable_data", 200),
        ("nmethod", "_immutable_data_size", 208),
        ("nmethod", "_scopes_pcs_offset", 212),
        ("nmethod", "_scopes_data_offset", 216),
        ("CodeBlob", "_mutable_data", 224),
        ("CodeBlob", "_mutable_data_size", 232),
        ("CodeBlob", "_relocation_size", 236),
        ("PcDesc", "_pc_offset", 0),
        ("PcDesc", "_scope_decode_offset", 4),
        ("ConstMethod", "_flags", 28),
        ("ConstMethod", "_code_size", 32),
    ]);
    let b = 16u64;
    let int = |v: i32| v.to_le_bytes().to_vec();
    let blob = |immutable_size: i32| {
        vec![
            (b + 200, 0x80_000u64.to_le_bytes().to_vec()),
            (b + 208, int(immutable_size)),
            (b + 212, int(0)),
            (b + 216, int(16)),
            (b + 224, 0x81_000u64.to_le_bytes().to_vec()),
            (b + 232, int(16)),
            (b + 236, int(8)),
        ]
    };
    let mut immutable = int(0x20);
    immutable.extend(int(1));
    immutable.extend([0; 8]);
    immutable.extend([0, 0, 1, 5, 0]);
    let mut mutable = vec![0xee; 8];
    mutable.extend(0x60_000u64.to_le_bytes());
    let (mut m, layout) = jvm_with_heap_of(&fields, &blob(21));
    m.put(0x80_000, &immutable);
    m.put(0x81_000, &mutable);
    let scan = heap::scan(&mut m, &layout).expect("scan");
    assert_eq!(scan.blobs[0].java.len(), 1);
    assert_eq!(scan.blobs[0].java[0].scopes, vec![(0x60_000, 4)]);
    assert_eq!(scan.unscoped, 0);
    // Said to be larger than the bound, or than what can be read.
    for size in [(heap::MAX_SCOPE_BYTES + 1) as i32, 64] {
        let (mut m, layout) = jvm_with_heap_of(&fields, &blob(size));
        m.put(0x80_000, &immutable);
        m.put(0x81_000, &mutable);
        let scan = heap::scan(&mut m, &layout).expect("scan");
        assert!(scan.blobs[0].java.is_empty(), "{size}");
        assert_eq!(scan.unscoped, 1);
    }
}

/// An interpreted frame's `Method*` (the word the kernel kept) is named `Class.method`, once
/// per method (cached), at the line of its bytecode index when the kernel kept one; a word
/// that is no method leaves the frame unnamed, counted.
#[test]
fn interpreted_frames_are_named_by_their_method() {
    let (mut m, layout) = jvm_with_heap_of(&in_blob_fields(), &[]);
    with_line_table(&mut m);
    let layout = std::sync::Arc::new(layout);
    let memory = m.mem.clone();
    let reader = crate::python::pymem::MemReader::with(Box::new(move || {
        let memory = memory.clone();
        Box::new(move |_pid, addr, buf: &mut [u8]| memory.read(addr, buf))
    }));
    let interpreted = super::interpreted::Interpreted::with_reader(reader);
    let named = interpreted.frame(7, 0, &layout, (0x60_000, Some(4)), 1);
    assert_eq!(
        named.and_then(|(i, _)| interpreted.name(i)).as_deref(),
        Some("java.lang.String.length")
    );
    assert_eq!(named.map(|(_, line)| line), Some(3));
    let index = named.map(|(i, _)| i);
    assert_eq!(
        interpreted.frame(7, 0, &layout, (0x60_000, Some(0)), 2),
        index.zip(Some(2))
    );
    assert_eq!(
        interpreted.frame(7, 0, &layout, (0x60_000, None), 2),
        index.zip(Some(0))
    );
    assert_eq!(interpreted.frame(7, 0, &layout, (0x66_000, Some(0)), 2), None);
    let stats = interpreted.stats();
    assert_eq!(stats.named, 3);
    assert_eq!(stats.unnamed_by_reason.get("unreadable"), Some(&1));
}

/// Forged heaps: a blob whose code leaves its block, a frame size out of bounds, a Method
/// chain that leads nowhere (named as unknown, counted), a block length running past the heap
/// (the walk of that heap ends), a heap list too long, a heap larger than the bound: counted or
/// refused, and never more than the heap's bytes read.
#[test]
fn forged_code_heaps_are_counted_or_refused() {
    // The interpreter's code runs past its block; the method's Method is not readable.
    let (mut m, layout) = jvm_with_heap(&[(0x400 + 16 + 40, (HEAP + 0x2000).to_le_bytes().to_vec())]);
    m.mem.remove(0x60_000 + 8);
    let scan = heap::scan(&mut m, &layout).expect("scan");
    assert_eq!((scan.malformed, scan.unnamed, scan.blobs.len()), (1, 1, 1));
    assert_eq!(scan.blobs[0].name, "[unknown Java method]");
    // A frame of a million words.
    let (mut m, layout) = jvm_with_heap(&[(16 + 28, 1_000_000i32.to_le_bytes().to_vec())]);
    assert_eq!(heap::scan(&mut m, &layout).expect("scan").malformed, 1);
    // A block whose length runs past the heap: nothing after it is taken.
    let (mut m, layout) = jvm_with_heap(&[(0x200, u64::MAX.to_le_bytes().to_vec())]);
    let scan = heap::scan(&mut m, &layout).expect("scan");
    assert_eq!(scan.blobs.len(), 1);
    // A list of a thousand heaps; a heap of a terabyte.
    let (mut m, layout) = jvm_with_heap(&[]);
    m.put(0x70_000, &[0xe8, 3, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        heap::scan(&mut m, &layout).map(|_| ()),
        Err(HotSpotError::Malformed("code heap count"))
    );
    let (mut m, layout) = jvm_with_heap(&[]);
    let mut heap_struct = m.mem.piece(HEAP_STRUCT).expect("the heap").to_vec();
    heap_struct[8 + 24..8 + 32].copy_from_slice(&(HEAP + (1 << 40)).to_le_bytes());
    m.put(HEAP_STRUCT, &heap_struct);
    let reads = m.reads;
    assert_eq!(
        heap::scan(&mut m, &layout).map(|_| ()),
        Err(HotSpotError::Malformed("code heap bounds"))
    );
    assert!(m.reads - reads < 16);
}

/// The frame-pointer code of a process is its own: another pid, or an address outside it, is
/// not trusted.
#[test]
fn frame_pointer_code_belongs_to_its_process() {
    let (mut m, layout) = jvm_with_heap(&[]);
    let scan = heap::scan(&mut m, &layout).expect("scan");
    let (_, frame_pointer_code, _) = dump_of(scan);
    let mut jvms = HotSpots::default();
    jvms.jvms.entry(7).or_default().frame_pointer_code = frame_pointer_code;
    let interpreter = INTERPRETER;
    assert!(jvms.keeps_frame_pointer(7, interpreter));
    assert!(jvms.keeps_frame_pointer(7, interpreter + 63));
    assert!(!jvms.keeps_frame_pointer(7, interpreter + 64));
    assert!(!jvms.keeps_frame_pointer(7, interpreter - 1));
    assert!(!jvms.keeps_frame_pointer(8, interpreter));
    jvms.forget(7);
    assert!(!jvms.keeps_frame_pointer(7, interpreter));
}

/// A JVM starting (its code cache not made yet, its tables not relocated yet) is read again,
/// not refused: refused only after [`super::MAX_FAILED_READS`] such reads, or counted by the
/// last reason when the session ends first; a malformed one is refused at once.
#[test]
fn a_starting_jvm_is_read_again_and_a_malformed_one_refused() {
    let mut jvms = HotSpots::default();
    for _ in 0..3 {
        assert!(jvms.settle(7, None, Err(HotSpotError::NotReady)).is_none());
    }
    assert!(jvms.knows(7), "to be read again");
    assert!(jvms.stats.refused_by_reason.is_empty());
    assert!(jvms.settle(7, None, Ok(heap::Scan::default())).is_some());
    jvms.end();
    assert!(jvms.stats.refused_by_reason.is_empty(), "read at last: nothing counted");

    assert!(
        jvms.settle(8, None, Err(HotSpotError::Unreadable("vmStructs")))
            .is_none()
    );
    jvms.end();
    assert_eq!(jvms.stats.refused_by_reason.get("unreadable"), Some(&1));
    jvms.end();
    assert_eq!(jvms.stats.refused_by_reason.get("unreadable"), Some(&1), "counted once");

    for _ in 0..super::MAX_FAILED_READS {
        jvms.settle(9, None, Err(HotSpotError::NotReady));
    }
    assert!(jvms.knows(9));
    jvms.settle(9, None, Err(HotSpotError::NotReady));
    assert!(!jvms.knows(9), "refused after the last read allowed");
    assert_eq!(jvms.stats.refused_by_reason.get("not_ready"), Some(&1));

    jvms.settle(10, None, Err(HotSpotError::Malformed("code heap count")));
    assert!(!jvms.knows(10));
    assert_eq!(jvms.stats.refused_by_reason.get("malformed"), Some(&1));
}
