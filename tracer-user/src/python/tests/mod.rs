//! Unit tests of interpreter detection, the layouts and the line table; each says what it
//! proves. Tables and line ranges under test were printed by the real interpreters
//! (`co_linetable`, `co_lines()`); the interpreters themselves are read where installed by
//! `cargo xtask setup` (Debian's `/usr/bin/python3.11`).

use tracer_common::python::NO_FIELD;

use super::{
    debug_offsets::{DEBUG_COOKIE, from_debug_offsets},
    layout::*,
    linetable::line_of,
    *,
};

mod debug_offsets;
mod merge;
mod older;

/// A function of four branches over nine lines (first line 2), compiled by 3.11.
const TABLE_3_11: &str = "8000d80c0d8045dd0d12903189588c58f000050517f0000505178801d80b0c8871893590418a3a883ad80c119061d81617f103011718f100010d1988458845f006000d129051894a88458845f006000c11804c";
/// `co_lines()` of it: `[start, end)` byte offsets and their line.
const LINES_3_11: &[(i64, i64, i32)] = &[
    (0, 2, 2),
    (2, 6, 3),
    (6, 40, 4),
    (40, 58, 5),
    (58, 62, 6),
    (62, 64, 7),
    (64, 76, 6),
    (76, 88, 9),
    (88, 92, 12),
];
/// The same function compiled by 3.13.
const TABLE_3_13: &str = "8000d80c0d8045dc0d1290318e588801d80b0c8871893590418b3ad80c11d81617f103011718f100010d198a45f006000d129051894a8a45f10b000e16f010000c11804c";
const LINES_3_13: &[(i64, i64, i32)] = &[
    (0, 2, 2),
    (2, 6, 3),
    (6, 34, 4),
    (34, 52, 5),
    (52, 54, 6),
    (54, 56, 7),
    (56, 70, 6),
    (70, 84, 9),
    (84, 88, 4),
    (88, 92, 12),
];

/// The bytes of a hex string.
fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Every code unit of both tables is on the line the interpreter itself gives it, and past the
/// end of the code there is none.
#[test]
fn line_table_matches_the_interpreters() {
    for (table, lines) in [(TABLE_3_11, LINES_3_11), (TABLE_3_13, LINES_3_13)] {
        let table = hex(table);
        for &(start, end, line) in lines {
            for offset in (start..end).step_by(2) {
                assert_eq!(line_of(&table, 2, offset), Some(line), "offset {offset}");
            }
        }
        let end = lines.last().unwrap().1;
        assert_eq!(line_of(&table, 2, end), None);
    }
}

/// A frame that has not run its first instruction is on the first line; a table that starts
/// mid-entry, or ends inside a number, gives no line; kind 15 is no location.
#[test]
fn line_table_edges() {
    assert_eq!(line_of(&[], 7, -2), Some(7));
    assert_eq!(line_of(&[0x00, 0x80], 7, 0), None);
    // Kind 13 (no columns) with a varint that never ends.
    assert_eq!(line_of(&[0x80 | 13 << 3, 0x7f, 0x7f], 7, 0), None);
    // Kind 15 over 2 units, then kind 13 with delta -2 (svarint 5).
    let table = [0x80 | 15 << 3 | 1, 0x80 | 13 << 3, 5];
    assert_eq!(line_of(&table, 10, 2), None);
    assert_eq!(line_of(&table, 10, 4), Some(8));
    // Kind 14: delta +3, then end line, column, end column (skipped).
    let table = [0x80 | 14 << 3, 6, 0, 1, 2];
    assert_eq!(line_of(&table, 10, 0), Some(13));
    // A varint longer than 64 bits.
    let mut long = vec![0x80 | 13 << 3];
    long.extend([0x7f; 12]);
    assert_eq!(line_of(&long, 1, 0), None);
}

/// 3.13 debug offsets as the interpreter's `_PyRuntime` starts (values of 3.13.0).
fn debug_offsets_3_13() -> Vec<u8> {
    let words: [u64; 71] = [
        0, 283320, 608, 632, 194968, 7272, 7264, 7344, 7400, 7656, 7640, 7648, 16, 7752, 0, 7768, 7760, 304, 0, 8, 16,
        72, 152, 160, 232, 32, 80, 8, 0, 56, 72, 70, 208, 112, 120, 128, 136, 68, 52, 96, 104, 200, 16, 8, 416, 24, 88,
        168, 32, 24, 16, 40, 24, 16, 48, 32, 40, 24, 16, 32, 16, 24, 40, 16, 32, 64, 32, 16, 40, 240, 200,
    ];
    let mut bytes = DEBUG_COOKIE.to_vec();
    bytes.extend(0x030d00f0u64.to_le_bytes());
    for w in words {
        bytes.extend(w.to_le_bytes());
    }
    bytes
}

/// 3.13's layout comes from its debug offsets, and agrees with the DWARF of 3.13.0
/// (`PyThreadState.current_frame` 72, `native_thread_id` 160, `_PyInterpreterFrame.previous`
/// 8, `f_executable` 0, `instr_ptr` 56, `owner` 70, `co_firstlineno` 68, `co_code_adaptive`
/// 200, `PyInterpreterState.threads.head` 7344, `_PyRuntime.interpreters.head` 632).
#[test]
fn debug_offsets_give_the_3_13_layout() {
    let layout = for_version(3, 13, Some(&debug_offsets_3_13())).unwrap();
    let k = layout.kernel;
    assert_eq!(
        (
            k.runtime_interpreters_head,
            k.interp_threads_head,
            k.tstate_next,
            k.tstate_native_thread_id
        ),
        (632, 7344, 8, 160)
    );
    assert_eq!((k.tstate_frame, k.cframe_current_frame), (72, NO_FIELD));
    assert_eq!(
        (
            k.frame_code,
            k.frame_previous,
            k.frame_instr,
            k.frame_owner,
            k.frame_is_entry
        ),
        (0, 8, 56, 70, NO_FIELD)
    );
    let c = layout.code;
    assert_eq!(
        (
            c.filename,
            c.name,
            c.qualname,
            c.linetable,
            c.firstlineno,
            c.code_adaptive
        ),
        (112, 120, 128, 136, 68, 200)
    );
    assert_eq!(
        (c.str_length, c.str_state, c.str_ascii_size, c.bytes_size, c.bytes_data),
        (16, 32, 40, 16, 32)
    );
}

/// Debug offsets that are not 3.13's, or point outside their structures, are refused.
#[test]
fn hostile_debug_offsets_are_refused() {
    let good = debug_offsets_3_13();
    assert!(matches!(
        from_debug_offsets(&good[..100], 3, 13),
        Err(PythonError::DebugOffsets(_))
    ));
    let mut cookie = good.clone();
    cookie[0] = b'y';
    assert!(matches!(
        from_debug_offsets(&cookie, 3, 13),
        Err(PythonError::DebugOffsets(_))
    ));
    assert!(matches!(
        from_debug_offsets(&good, 3, 14),
        Err(PythonError::DebugOffsets(_))
    ));
    let mut free = good.clone();
    free[16] = 1;
    assert_eq!(
        from_debug_offsets(&free, 3, 13),
        Err(PythonError::FreeThreaded { major: 3, minor: 13 })
    );
    // `thread_state.native_thread_id` past `thread_state.size`.
    let mut outside = good.clone();
    outside[200..208].copy_from_slice(&400u64.to_le_bytes());
    assert!(matches!(
        from_debug_offsets(&outside, 3, 13),
        Err(PythonError::DebugOffsets(_))
    ));
    // An offset that wraps when the field's width is added.
    let mut wraps = good;
    wraps[248..256].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(
        from_debug_offsets(&wraps, 3, 13),
        Err(PythonError::DebugOffsets(_))
    ));
}

/// Versions without a table or debug offsets are refused by name (3.5 and 2.7 keep frames
/// otherwise; 3.16 publishes debug offsets whose layout the tracer does not know).
#[test]
fn other_versions_are_refused() {
    for (major, minor) in [(3, 5), (3, 16), (2, 7), (4, 0)] {
        assert_eq!(
            for_version(major, minor, None),
            Err(PythonError::Unsupported { major, minor })
        );
        assert_eq!(
            from_debug_offsets(&debug_offsets::debug_offsets_3_14(), major, minor),
            Err(PythonError::Unsupported { major, minor })
        );
    }
    assert_eq!(
        PythonError::Unsupported { major: 3, minor: 16 }.to_string(),
        "CPython 3.16: not supported (3.6 to 3.15 are)"
    );
    assert_eq!(for_version(3, 14, None), Err(PythonError::Unreadable("_PyRuntime")));
    assert_eq!(for_version(3, 15, None), Err(PythonError::Unreadable("_PyRuntime")));
    assert_eq!(for_version(3, 13, None), Err(PythonError::Unreadable("_PyRuntime")));
    assert_eq!(for_version(3, 11, None), Ok(V3_11));
    assert_eq!(for_version(3, 12, None), Ok(V3_12));
}

/// Debian's `python3.11` (installed by `cargo xtask setup` with python3-venv): found as 3.11
/// with its evaluation loop and runtime where its dynamic symbols put them (stripped: no cold
/// part named). A library that is no interpreter is `None`.
#[test]
fn debian_python3_11_is_detected() {
    let bytes = std::fs::read("/usr/bin/python3.11").expect("/usr/bin/python3.11 (cargo xtask setup installs it)");
    let image = detect(&*bytes).unwrap().expect("an interpreter");
    assert_eq!((image.major, image.minor), (3, 11));
    assert_eq!(image.layout, V3_11);
    let dynsym = symbols("/usr/bin/python3.11");
    assert_eq!(Some(&image.runtime), dynsym.get("_PyRuntime").map(|s| &s.0));
    let eval = dynsym["_PyEval_EvalFrameDefault"];
    assert_eq!(image.eval, (eval.0, eval.0 + eval.1));
    assert!(eval.1 > 1000, "the whole evaluation loop");
    let libc =
        std::fs::read("/lib/x86_64-linux-gnu/libc.so.6").or_else(|_| std::fs::read("/lib/aarch64-linux-gnu/libc.so.6"));
    assert_eq!(detect(&*libc.expect("libc")).unwrap(), None);
    assert!(detect(&b"not an ELF"[..]).is_err());
}

/// Name -> (address, size) of a file's dynamic symbols, as `readelf` prints them.
fn symbols(path: &str) -> std::collections::HashMap<String, (u64, u64)> {
    let out = std::process::Command::new("readelf")
        .args(["-W", "--dyn-syms", path])
        .output()
        .expect("readelf");
    let mut map = std::collections::HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 8 && f[0].ends_with(':') {
            let size = f[2]
                .strip_prefix("0x")
                .map_or_else(|| f[2].parse().ok(), |h| u64::from_str_radix(h, 16).ok());
            if let (Ok(addr), Some(size)) = (u64::from_str_radix(f[1], 16), size) {
                map.insert(f[7].to_string(), (addr, size));
            }
        }
    }
    map
}

use super::testing::FakeMemory as Fake;

/// A code object (3.11 and 3.13 layouts) with an ASCII file name, a two-byte qualified name
/// and the 3.11 table: read back, and its lines from instruction pointers.
#[test]
fn code_object_from_memory() {
    for layout in [V3_11, for_version(3, 13, Some(&debug_offsets_3_13())).unwrap()] {
        let c = layout.code;
        let (code, qual, file, table) = (0x10_000u64, 0x20_000u64, 0x30_000u64, 0x40_000u64);
        let mut m = Fake::default();
        m.code(&c, code, [qual, file, table], 2);
        m.string(&c, qual, "Klasse.métode→", 2);
        m.string(&c, file, "/srv/app.py", 1);
        let lines = hex(TABLE_3_11);
        m.bytes(&c, table, &lines);
        let mut bytes = vec![0u8; usize::from(c.bytes_data)];
        bytes[usize::from(c.bytes_size)..][..8].copy_from_slice(&(lines.len() as u64).to_ne_bytes());
        bytes.extend(&lines);
        let info = code::read_code(&c, code, &mut |a, b| m.read(a, b)).unwrap();
        assert_eq!(
            (info.qualname.as_str(), info.filename.as_str(), info.first_line),
            ("Klasse.métode→", "/srv/app.py", 2)
        );
        let start = code + u64::from(c.code_adaptive);
        assert_eq!(info.line(&c, code, start + 40), Some(5));
        assert_eq!(info.line(&c, code, start - 2), Some(2), "before the first instruction");
        // A line table claimed too long, a string not compact: errors, no allocation of it.
        bytes[usize::from(c.bytes_size)..][..8].copy_from_slice(&u64::MAX.to_ne_bytes());
        m.put(table, &bytes);
        assert_eq!(
            code::read_code(&c, code, &mut |a, b| m.read(a, b)),
            Err(code::CodeError::BadLineTable)
        );
        m.put(qual, &[0; 64]);
        m.put(table, &{
            let mut b = bytes.clone();
            b[usize::from(c.bytes_size)..][..8].copy_from_slice(&1u64.to_ne_bytes());
            b
        });
        assert_eq!(
            code::read_code(&c, code, &mut |a, b| m.read(a, b)),
            Err(code::CodeError::BadString)
        );
        assert_eq!(
            code::read_code(&c, 0x99, &mut |a, b| m.read(a, b)),
            Err(code::CodeError::Unreadable)
        );
    }
}

/// A live Debian 3.11 process (our own child): a method's code object read from
/// `/proc/PID/mem` gives the qualified name, file and first line the interpreter reports.
#[test]
fn code_object_of_a_live_interpreter() {
    use std::io::{BufRead as _, Read as _};
    use std::os::unix::fs::FileExt as _;
    let script = "import sys\nclass Kls:\n    def méthode(self):\n        return 1\nprint(id(Kls.méthode.__code__), flush=True)\nsys.stdin.read()\n";
    let mut child = std::process::Command::new("/usr/bin/python3.11")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("/usr/bin/python3.11 (cargo xtask setup installs it)");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let code: u64 = line.trim().parse().unwrap();
    let mem = std::fs::File::open(format!("/proc/{}/mem", child.id())).unwrap();
    let info = code::read_code(&V3_11.code, code, &mut |a, b| mem.read_exact_at(b, a).is_ok());
    drop(child.stdin.take());
    let mut rest = String::new();
    child.stdout.take().unwrap().read_to_string(&mut rest).unwrap();
    child.wait().unwrap();
    let info = info.unwrap();
    assert_eq!(
        (info.qualname.as_str(), info.filename.as_str(), info.first_line),
        ("Kls.méthode", "<string>", 3)
    );
    // RESUME, then the return: line 3 then 4.
    let start = code + u64::from(V3_11.code.code_adaptive);
    assert_eq!(info.line(&V3_11.code, code, start), Some(3));
    assert_eq!(info.line(&V3_11.code, code, start + 2), Some(4));
}

/// The kernel's record of a process: every address moved by the bias, the layout's offsets.
#[test]
fn proc_info_adds_the_bias() {
    let image = PythonImage {
        major: 3,
        minor: 11,
        micro: Some(2),
        runtime: 0xa5b740,
        eval: (0x52b0f0, 0x538a4c),
        cold: Some((0x10, 0x14)),
        layout: V3_11,
    };
    let info = image.proc_info(0x5555_0000_0000);
    assert_eq!(info.runtime, 0x5555_00a5_b740);
    assert_eq!((info.eval_start, info.eval_end), (0x5555_0052_b0f0, 0x5555_0053_8a4c));
    assert_eq!((info.cold_start, info.cold_end), (0x5555_0000_0010, 0x5555_0000_0014));
    assert_eq!(info.offsets, V3_11.kernel);
    let info = PythonImage { cold: None, ..image }.proc_info(0x1000);
    assert_eq!((info.cold_start, info.cold_end), (0, 0));
}
