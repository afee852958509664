//! Unit tests of the V8 reader and runtime against a fake heap laid out as Node.js 20's V8
//! lays it out; each test says what it proves.

use std::sync::{Arc, Mutex};

use super::{
    layout::Layout,
    read::{self, JsFunction, MAX_NAME},
    *,
};
use crate::python::testing::FakeMemory;

/// Node.js 20's V8 (11.3) on x86-64, as its `v8dbg_*` constants give it.
pub(super) fn layout() -> Layout {
    Layout {
        major: 11,
        fp_context: 8,
        fp_function: 16,
        function_shared: 24,
        shared_name_or_scope_info: 16,
        shared_script: 32,
        script_name: 16,
        script_source: 8,
        map_instance_type: 12,
        string_length: 12,
        seq_chars: 16,
        cons_first: 16,
        cons_second: 24,
        thin_actual: 16,
        first_nonstring_type: 128,
        string_encoding_mask: 8,
        one_byte_tag: 8,
        string_representation_mask: 7,
        seq_tag: 0,
        cons_tag: 1,
        thin_tag: 5,
        shared_type: 262,
        scope_info_type: 261,
        script_type: 167,
        scope_context_locals: 2,
        scope_first_vars: 3,
        smi_shift: 32,
        fp_bytecode_offset: 40,
        bytecode_data: 54,
        istream_header: 16,
        bytecode_array_type: 191,
        code_type: 245,
        istream_type: 252,
        deopt_literals: 2,
        deopt_shared: 6,
        deopt_inlining: 7,
        kind_baseline: 11,
        kind_mask: 15,
        byte_array_type: 190,
        external_resource: 16,
        external_one_byte_type: 42,
        bytecode_sizes: None,
        code: layout::CodeLayout::of(11).expect("V8 11 is known"),
    }
}

const ONE_BYTE: u16 = 8;
const TWO_BYTE: u16 = 0;
const CONS: u16 = 9;
const UNDEFINED: u16 = 131;

pub(super) fn smi(v: i64) -> u64 {
    (v as u64) << 32
}

/// A fake heap: maps made on demand (one per instance type), objects at tagged addresses.
pub(super) struct Heap {
    pub(super) mem: FakeMemory,
    next: u64,
    maps: std::collections::HashMap<u16, u64>,
}

impl Heap {
    pub(super) fn new() -> Heap {
        Heap {
            mem: FakeMemory::default(),
            next: 0x1000_0000,
            maps: Default::default(),
        }
    }

    pub(super) fn map(&mut self, kind: u16) -> u64 {
        if let Some(&m) = self.maps.get(&kind) {
            return m;
        }
        let at = self.alloc(16);
        let mut bytes = vec![0u8; 16];
        bytes[12..14].copy_from_slice(&kind.to_le_bytes());
        self.mem.put(at, &bytes);
        self.maps.insert(kind, at + 1);
        at + 1
    }

    pub(super) fn alloc(&mut self, size: u64) -> u64 {
        let at = self.next;
        self.next += size.div_ceil(16) * 16 + 16;
        at
    }

    /// An object of `kind` whose words after the map are `words`; its tagged address.
    pub(super) fn object(&mut self, kind: u16, words: &[u64]) -> u64 {
        let map = self.map(kind);
        let at = self.alloc(8 + 8 * words.len() as u64);
        let mut bytes = map.to_le_bytes().to_vec();
        words.iter().for_each(|w| bytes.extend_from_slice(&w.to_le_bytes()));
        self.mem.put(at, &bytes);
        at + 1
    }

    pub(super) fn string(&mut self, s: &str) -> u64 {
        let map = self.map(ONE_BYTE);
        let at = self.alloc(16 + s.len() as u64);
        let mut bytes = map.to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0; 4]);
        bytes.extend_from_slice(&(s.len() as i32).to_le_bytes());
        bytes.extend_from_slice(s.as_bytes());
        self.mem.put(at, &bytes);
        at + 1
    }

    pub(super) fn two_byte(&mut self, s: &str) -> u64 {
        let map = self.map(TWO_BYTE);
        let units: Vec<u16> = s.encode_utf16().collect();
        let at = self.alloc(16 + 2 * units.len() as u64);
        let mut bytes = map.to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0; 4]);
        bytes.extend_from_slice(&(units.len() as i32).to_le_bytes());
        units.iter().for_each(|u| bytes.extend_from_slice(&u.to_le_bytes()));
        self.mem.put(at, &bytes);
        at + 1
    }

    fn cons(&mut self, first: u64, second: u64) -> u64 {
        // map, hash+length, first, second
        self.object(CONS, &[0, first, second])
    }

    pub(super) fn script(&mut self, name: &str, source: &str) -> u64 {
        let (name, source) = (self.string(name), self.string(source));
        self.object(167, &[source, name])
    }

    /// A scope description with `locals` context locals, then the function's name and slot,
    /// the inferred name, and the start and end.
    pub(super) fn scope(&mut self, locals: &[&str], name: u64, inferred: u64, start: i64) -> u64 {
        let mut words = vec![smi(0x4171c2), smi(1), smi(locals.len() as i64)];
        for l in locals {
            let s = self.string(l);
            words.push(s);
        }
        words.extend(locals.iter().map(|_| smi(0)));
        words.extend([name, smi(-1), inferred, smi(start), smi(start + 10)]);
        self.object(261, &words)
    }

    pub(super) fn shared(&mut self, name_or_scope: u64, script: u64) -> u64 {
        self.object(262, &[0, name_or_scope, 0, script])
    }

    pub(super) fn undefined(&mut self) -> u64 {
        self.object(UNDEFINED, &[])
    }

    fn read(&self, shared: u64) -> Result<JsFunction, V8Error> {
        read::function(&layout(), shared, &mut |a, b| self.mem.read(a, b)).map(|(f, _)| f)
    }
}

fn js(name: &str, file: &str, line: u32) -> JsFunction {
    JsFunction {
        name: name.into(),
        file: file.into(),
        line,
    }
}

/// A compiled function is named from its scope description (past its context locals), its
/// script's name is its file, and its start's line is counted in the script's source.
#[test]
fn a_compiled_function_is_named_with_its_file_and_line() {
    let mut h = Heap::new();
    let script = h.script("/srv/app.js", "// one\n// two\nfunction descend(depth) {}\n");
    let name = h.string("descend");
    let undefined = h.undefined();
    let at = "// one\n// two\nfunction descend".len() as i64;
    let scope = h.scope(&["a", "b"], name, undefined, at);
    let shared = h.shared(scope, script);
    assert_eq!(h.read(shared), Ok(js("descend", "/srv/app.js", 3)));
}

/// An anonymous function takes the name V8 inferred for it (`Module._compile`), or else
/// `(anonymous)`; a function not compiled yet keeps its name in place of the scope.
#[test]
fn anonymous_and_uncompiled_functions_are_named_as_v8_names_them() {
    let mut h = Heap::new();
    let script = h.script("node:internal/modules/cjs/loader", "x");
    let (empty, inferred, undefined) = (h.string(""), h.string("Module._compile"), h.undefined());
    let scope = h.scope(&[], empty, inferred, 0);
    let shared = h.shared(scope, script);
    assert_eq!(h.read(shared).unwrap().name, "Module._compile");
    let scope = h.scope(&[], empty, undefined, 0);
    let shared = h.shared(scope, script);
    assert_eq!(
        h.read(shared),
        Ok(js("(anonymous)", "node:internal/modules/cjs/loader", 1))
    );
    let (first, second) = (h.string("lazy"), h.two_byte("Łoader"));
    let name = h.cons(first, second);
    let shared = h.shared(name, script);
    assert_eq!(
        h.read(shared),
        Ok(js("lazyŁoader", "node:internal/modules/cjs/loader", 0))
    );
}

/// Hostile or foreign memory is an error by name, never a name: an address that is no
/// shared info, a scope of another layout, a string whose parts loop forever, memory that
/// cannot be read; and a name that never ends is cut at `MAX_NAME` characters.
#[test]
fn forged_objects_are_refused_by_reason() {
    let mut h = Heap::new();
    let script = h.script("a.js", "x");
    let name = h.string("f");
    // A script where the shared info should be.
    assert_eq!(h.read(script), Err(V8Error::NotShared));
    // Untagged, past user space, unmapped.
    assert_eq!(h.read(0x1000_0000), Err(V8Error::NotShared));
    assert_eq!(h.read(1 << 50 | 1), Err(V8Error::NotShared));
    assert_eq!(h.read(0x7000_0001), Err(V8Error::Unreadable));
    // A scope whose locals count is no Smi, or absurd, or whose name slot holds a Smi.
    let bad = h.object(261, &[smi(0), smi(0), 7]);
    let shared = h.shared(bad, script);
    assert_eq!(h.read(shared), Err(V8Error::ScopeInfo));
    let huge = h.object(261, &[smi(0), smi(0), smi(1 << 20)]);
    let shared = h.shared(huge, script);
    assert_eq!(h.read(shared), Err(V8Error::ScopeInfo));
    let shifted = h.object(261, &[smi(0), smi(0), smi(0), smi(3), smi(-1), name, smi(0), smi(1)]);
    let shared = h.shared(shifted, script);
    assert_eq!(h.read(shared), Err(V8Error::ScopeInfo));
    // A string made of itself.
    let at = h.alloc(32);
    let map = h.map(CONS);
    let looped = at + 1;
    let bytes: Vec<u8> = [map, 0, looped, looped].iter().flat_map(|w| w.to_le_bytes()).collect();
    h.mem.put(at, &bytes);
    let shared = h.shared(looped, script);
    assert_eq!(h.read(shared), Err(V8Error::NotAString));
    // A name announcing more characters than it has: cut, or unreadable.
    let long = h.string(&"n".repeat(400));
    let shared = h.shared(long, script);
    assert_eq!(h.read(shared).unwrap().name.len(), MAX_NAME as usize);
    let liar = h.alloc(24);
    let mut bytes = h.map(ONE_BYTE).to_le_bytes().to_vec();
    bytes.extend_from_slice(&[0, 0, 0, 0, 100, 0, 0, 0, b'a', b'b']);
    h.mem.put(liar, &bytes);
    let shared = h.shared(liar + 1, script);
    assert_eq!(h.read(shared), Err(V8Error::Unreadable));
    // A start past the source: no line, still named.
    let scope = h.scope(&[], name, name, 1 << 30);
    let shared = h.shared(scope, script);
    assert_eq!(h.read(shared), Ok(js("f", "a.js", 0)));
}

/// A runtime reading `memory` (changed by the test as it goes), knowing process 7 as a V8.
pub(super) fn runtime(memory: &Arc<Mutex<FakeMemory>>) -> V8 {
    let shared = Arc::clone(memory);
    let mut v8 = V8::default();
    v8.inner.get_mut().reader = MemReader::with(Box::new(move || {
        let memory = Arc::clone(&shared);
        Box::new(move |_pid, addr, buf: &mut [u8]| memory.lock().unwrap().read(addr, buf))
    }));
    v8.procs.insert(
        7,
        Proc {
            layout: Arc::new(layout()),
            uid: 0,
        },
    );
    v8
}

/// The runtime names a frame once per shared info and reuses it, checks it again once it is
/// old and reads it anew when another function took its address (counted `replaced`); a
/// frame of a process it does not know is not named, and one whose shared info cannot be read
/// is counted by reason.
#[test]
fn cached_names_are_checked_again_and_replaced() {
    let mut h = Heap::new();
    let script = h.script("/srv/app.js", "x");
    let (first, second) = (h.string("first"), h.string("second"));
    let shared = h.shared(first, script);
    let memory = Arc::new(Mutex::new(h.mem.clone()));
    let v8 = runtime(&memory);
    let name = |v8: &V8, f: Option<u32>| f.and_then(|f| v8.function(f)).map(|f| f.name);
    assert_eq!(name(&v8, v8.frame(7, shared, 1)), Some("first".into()));
    // Changed in memory, but checked again only once old.
    let at = shared - 1;
    let mut bytes = memory.lock().unwrap().piece(at).unwrap().to_vec();
    bytes[16..24].copy_from_slice(&second.to_le_bytes());
    memory.lock().unwrap().put(at, &bytes);
    assert_eq!(name(&v8, v8.frame(7, shared, 2)), Some("first".into()));
    assert_eq!(name(&v8, v8.frame(7, shared, 2 + RECHECK_NS)), Some("second".into()));
    assert_eq!(v8.stats().replaced, 1);
    assert_eq!(v8.stats().functions, 2);
    assert_eq!(v8.frame(8, shared, 3), None);
    assert_eq!(v8.frame(7, script, 4), None);
    assert_eq!(v8.stats().unnamed_by_reason.get("not_shared_info"), Some(&1));
    assert_eq!(v8.stats().frames, 3);
    let mut v8 = v8;
    v8.forget(7);
    assert!(!v8.runs(7));
}

/// A shared info that could not be named is read again once its error is old (not counted
/// as replaced), and named then if it has become a function.
#[test]
fn what_could_not_be_named_is_read_again() {
    let mut h = Heap::new();
    let script = h.script("/srv/app.js", "x");
    let name = h.string("made");
    let shared = h.shared(name, script);
    let full = h.mem.clone();
    h.mem.remove(shared - 1);
    let memory = Arc::new(Mutex::new(h.mem.clone()));
    let v8 = runtime(&memory);
    assert_eq!(v8.frame(7, shared, 1), None);
    *memory.lock().unwrap() = full;
    assert_eq!(v8.frame(7, shared, 2), None, "the error is kept a while");
    let named = v8.frame(7, shared, 2 + RECHECK_NS).and_then(|f| v8.function(f));
    assert_eq!(named.map(|f| f.name).as_deref(), Some("made"));
    assert_eq!(v8.stats().replaced, 0);
    assert_eq!(v8.stats().unnamed_by_reason.get("unreadable"), Some(&2));
}

/// V8 13 (Node.js 24) keeps a function's start and end in its scope description's header,
/// before the locals (the first local's name at slot 5), and names its fields otherwise: the
/// same function is read the same way.
#[test]
fn v8_13_keeps_positions_in_the_header() {
    let mut h = Heap::new();
    let script = h.script("/srv/app.js", "\n\nfunction late() {}\n");
    let (name, local, undefined) = (h.string("late"), h.string("x"), h.undefined());
    let at = "\n\nfunction late".len() as i64;
    let words = [
        0,
        smi(0),
        smi(1),
        smi(at),
        smi(at + 5),
        local,
        smi(0),
        name,
        smi(-1),
        undefined,
    ];
    let scope = h.object(280, &words);
    let shared = h.object(282, &[0, 0, scope, 0, script]);
    let layout = Layout {
        major: 13,
        function_shared: 32,
        shared_name_or_scope_info: 24,
        shared_script: 40,
        shared_type: 282,
        scope_info_type: 280,
        scope_first_vars: 5,
        ..layout()
    };
    let read = read::function(&layout, shared, &mut |a, b| h.mem.read(a, b)).map(|(f, _)| f);
    assert_eq!(read, Ok(js("late", "/srv/app.js", 3)));
}
