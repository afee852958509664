//! CPython 3.6 to 3.10: their layouts pinned against pyenv's interpreters (the DWARF of each
//! `libpython`, read by gdb), their detection by the API each version added, and the two line
//! tables of those versions against the line numbers the interpreters themselves give. Under
//! `CI=true` a missing pyenv interpreter or gdb fails; elsewhere it is skipped, loudly.

use std::path::PathBuf;

use super::hex;

use super::super::{
    code::{CodeInfo, instr_offset},
    layout::*,
    linetable::{line_of_310, line_of_lnotab},
    *,
};

/// The function every table below was printed from (first line 2): a loop with a branch,
/// then a `while` loop going back up a line.
const _SOURCE: &str = "
def f(x):
    s = 0
    for i in range(x):
        if i % 3 == 0:
            s += i
        else:
            s -= 1
    while s > 100:
        s //= 2
    return s
";

/// `co_lnotab` of it by 3.6.15, and `dis.findlinestarts` as `[start, end)` byte ranges.
const LNOTAB_3_6: &str = "000104010e010c010a020c010a010c01";
const LINES_3_6: &[(i64, i64, i32)] = &[
    (0, 4, 3),
    (4, 18, 4),
    (18, 30, 5),
    (30, 40, 6),
    (40, 52, 8),
    (52, 62, 9),
    (62, 74, 10),
    (74, 78, 11),
];
/// The same by 3.8.18.
const LNOTAB_3_8: &str = "000104010c010c010a020a0108010a01";
const LINES_3_8: &[(i64, i64, i32)] = &[
    (0, 4, 3),
    (4, 16, 4),
    (16, 28, 5),
    (28, 38, 6),
    (38, 48, 8),
    (48, 56, 9),
    (56, 66, 10),
    (66, 70, 11),
];
/// `co_linetable` of it by 3.10.13 and its `co_lines()` (a line delta of -1 included).
const LINETABLE_3_10: &str = "04010c010c010a010a020801080108ff0402";
const LINES_3_10: &[(i64, i64, i32)] = &[
    (0, 4, 3),
    (4, 16, 4),
    (16, 28, 5),
    (28, 38, 6),
    (38, 48, 8),
    (48, 56, 9),
    (56, 64, 10),
    (64, 72, 9),
    (72, 76, 11),
];

/// Every byte of the code is on the line the interpreter gives it, by both older tables; a
/// frame not started (`f_lasti` -1) is on the first line.
#[test]
fn older_line_tables_match_the_interpreters() {
    for (table, lines) in [(LNOTAB_3_6, LINES_3_6), (LNOTAB_3_8, LINES_3_8)] {
        let table = hex(table);
        for &(start, end, line) in lines {
            for offset in start..end {
                assert_eq!(line_of_lnotab(&table, 2, offset), Some(line), "offset {offset}");
            }
        }
        assert_eq!(line_of_lnotab(&table, 2, -1), Some(2));
    }
    let table = hex(LINETABLE_3_10);
    for &(start, end, line) in LINES_3_10 {
        for offset in start..end {
            assert_eq!(line_of_310(&table, 2, offset), Some(line), "offset {offset}");
        }
    }
    assert_eq!(line_of_310(&table, 2, -2), Some(2));
    assert_eq!(line_of_310(&table, 2, 76), None, "past the code");
    // -128: no line; an odd last byte is no pair.
    assert_eq!(line_of_310(&[4, 0x80, 4], 2, 0), None);
    assert_eq!(line_of_310(&[4, 0x80, 4], 2, 5), None);
}

/// A frame's recorded `f_lasti` (its 32 bits) is a byte offset before 3.10 and counts code
/// units in 3.10; -1 (not started) is before the code. The line follows from it.
#[test]
fn lasti_becomes_a_byte_offset() {
    assert_eq!(instr_offset(&V3_9.code, 0x1000, 40), 40);
    assert_eq!(instr_offset(&V3_10.code, 0x1000, 20), 40);
    assert_eq!(instr_offset(&V3_9.code, 0x1000, 0xffff_ffff), -1);
    assert_eq!(instr_offset(&V3_10.code, 0x1000, 0xffff_ffff), -2);
    let code = CodeInfo {
        qualname: "f".into(),
        filename: "t".into(),
        first_line: 2,
        linetable: hex(LINETABLE_3_10),
        header: [0; 4],
    };
    // Code unit 32 is byte 64: the `while` line again.
    assert_eq!(code.line(&V3_10.code, 0x1000, 32), Some(9));
    let code = CodeInfo {
        linetable: hex(LNOTAB_3_8),
        ..code
    };
    assert_eq!(code.line(&V3_8.code, 0x1000, 16), Some(5));
}

/// Whether a missing tool or interpreter fails (under CI) or skips this test.
fn required<T>(what: &str, found: Option<T>) -> Option<T> {
    if found.is_none() {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{what} is missing");
        eprintln!("skipped: {what} is missing");
    }
    found
}

/// pyenv's `libpython3.MINOR*.so.1.0`.
fn pyenv_lib(minor: &str) -> Option<PathBuf> {
    let out = std::process::Command::new("pyenv").arg("root").output().ok()?;
    let root = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let version = std::fs::read_dir(root.join("versions"))
        .ok()?
        .filter_map(|e| Some(e.ok()?.path()))
        .find(|v| {
            v.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{minor}.")))
        })?;
    std::fs::read_dir(version.join("lib"))
        .ok()?
        .filter_map(|e| Some(e.ok()?.path()))
        .find(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy().into_owned();
            name.starts_with(&format!("libpython{minor}")) && name.ends_with(".so.1.0")
        })
}

/// The values gdb prints for `exprs` in `lib` (its DWARF): `&((T *)0)->field` offsets and
/// `sizeof`s.
fn dwarf(lib: &std::path::Path, exprs: &[String]) -> Vec<u64> {
    let mut command = std::process::Command::new("gdb");
    command.args(["-batch", "-nx"]).arg(lib);
    for e in exprs {
        command.args(["-ex", &format!("print {e}")]);
    }
    let out = command.output().expect("gdb runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let values: Vec<u64> = text
        .lines()
        .filter(|l| l.starts_with('$'))
        .map(|l| {
            let last = l.rsplit(' ').next().unwrap_or_default();
            last.strip_prefix("0x")
                .map_or_else(|| last.parse(), |h| u64::from_str_radix(h, 16))
                .unwrap_or_else(|_| panic!("gdb printed {l}"))
        })
        .collect();
    assert_eq!(
        values.len(),
        exprs.len(),
        "gdb: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    values
}

/// pyenv's 3.6 to 3.10 are detected as their versions with the layout tables, and every offset
/// of those tables is the one the interpreter's DWARF gives.
#[test]
fn older_layouts_are_the_interpreters_dwarf() {
    if required("gdb", std::process::Command::new("gdb").arg("--version").output().ok()).is_none() {
        return;
    }
    for minor in ["3.6", "3.7", "3.8", "3.9", "3.10"] {
        let Some(lib) = required(&format!("pyenv's libpython{minor}"), pyenv_lib(minor)) else {
            continue;
        };
        let image = detect(&*std::fs::read(&lib).unwrap()).unwrap().expect("an interpreter");
        let minor_number: u8 = minor[2..].parse().unwrap();
        assert_eq!((image.major, image.minor), (3, minor_number), "{}", lib.display());
        let layout = for_version(3, minor_number, None).unwrap();
        assert_eq!(image.layout, layout);
        let (k, c) = (layout.kernel, layout.code);
        let table = if minor == "3.10" { "co_linetable" } else { "co_lnotab" };
        let field = |t: &str, f: &str| format!("(unsigned long) &(({t} *) 0)->{f}");
        let mut exprs = vec![
            field("struct _is", "tstate_head"),
            field("struct _ts", "next"),
            field("struct _ts", "frame"),
            field("struct _ts", "thread_id"),
            field("struct _frame", "f_back"),
            field("struct _frame", "f_code"),
            field("struct _frame", "f_lasti"),
            field("PyCodeObject", "co_filename"),
            field("PyCodeObject", "co_name"),
            field("PyCodeObject", table),
            field("PyCodeObject", "co_firstlineno"),
            field("PyASCIIObject", "length"),
            field("PyASCIIObject", "state"),
            "sizeof(PyASCIIObject)".to_owned(),
            "sizeof(PyCompactUnicodeObject)".to_owned(),
            field("PyBytesObject", "ob_base.ob_size"),
            field("PyBytesObject", "ob_sval"),
        ];
        let mut want = vec![
            k.interp_threads_head,
            k.tstate_next,
            k.tstate_frame,
            k.tstate_native_thread_id,
            k.frame_previous,
            k.frame_code,
            k.frame_instr,
            c.filename,
            c.name,
            c.linetable,
            c.firstlineno,
            c.str_length,
            c.str_state,
            c.str_ascii_size,
            c.str_compact_size,
            c.bytes_size,
            c.bytes_data,
        ];
        if minor != "3.6" {
            exprs.push(field("_PyRuntimeState", "interpreters.head"));
            want.push(k.runtime_interpreters_head);
        }
        let got = dwarf(&lib, &exprs);
        let want: Vec<u64> = want.into_iter().map(u64::from).collect();
        assert_eq!(got, want, "{minor}: {exprs:#?}");
        assert_eq!(c.qualname, c.name, "no qualified name before 3.11");
    }
}

/// pyenv's 2.7 (`PyEval_EvalFrameEx`, no `_PyEval_EvalFrameDefault`) is refused by name, not
/// taken for an object without an interpreter.
#[test]
fn python_2_7_is_refused() {
    let Some(lib) = required("pyenv's libpython2.7", pyenv_lib("2.7")) else {
        return;
    };
    let bytes = std::fs::read(&lib).unwrap();
    assert_eq!(detect(&*bytes), Err(PythonError::TooOld));
    assert!(PythonError::TooOld.to_string().contains("2.7"));
}

/// pyenv's 3.6 stripped of its `.symtab` (where its `interp_head` is) is refused by name, not
/// taken for an object without an interpreter.
#[test]
fn a_stripped_3_6_is_refused() {
    let Some(lib) = required("pyenv's libpython3.6", pyenv_lib("3.6")) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let stripped = dir.path().join("libpython3.6m.so.1.0");
    let status = std::process::Command::new("strip")
        .arg("--strip-all")
        .arg(&lib)
        .arg("-o")
        .arg(&stripped)
        .status()
        .expect("strip runs");
    assert!(status.success());
    assert_eq!(
        detect(&*std::fs::read(&stripped).unwrap()),
        Err(PythonError::NoSymbolTable)
    );
}

/// On arm64, 3.6 to 3.10 are refused by name: pyenv's libpython3.9 with its ELF header's
/// machine made aarch64 is the same interpreter to every reader but the walk, which cannot
/// find its threads there. The x86-64 file itself is detected.
#[test]
fn older_interpreters_on_arm64_are_refused_by_name() {
    let Some(lib) = required("pyenv's libpython3.9", pyenv_lib("3.9")) else {
        return;
    };
    let mut bytes = std::fs::read(&lib).unwrap();
    assert!(matches!(detect(&*bytes), Ok(Some(image)) if image.minor == 9));
    // e_machine, at offset 18 of a 64-bit little-endian ELF header: EM_AARCH64.
    assert_eq!(u16::from_le_bytes([bytes[18], bytes[19]]), 62, "an x86-64 file");
    bytes[18..20].copy_from_slice(&183u16.to_le_bytes());
    let err = detect(&*bytes).expect_err("refused");
    assert_eq!(
        err,
        PythonError::ThreadsByTlsBase {
            major: 3,
            minor: 9,
            arch: "aarch64".to_owned()
        }
    );
    assert!(err.to_string().contains("CPython 3.9 on aarch64"), "{err}");
}
