//! ELF discovery and the SFrame reader on real files: C programs compiled at test time with
//! the host gcc (`-Wa,--gsframe`; binutils 2.40 writes v1) as executables, shared objects and
//! relocatable objects, the same executable stripped of its section headers, and small ELF
//! files crafted here for the classes and byte orders the host toolchain cannot produce.

use std::path::{Path, PathBuf};
use std::process::Command;

use tracer_unwind::elf::{self, ElfError, FoundBy};
use tracer_unwind::sframe::Section;

use crate::support::SFRAME_CFLAGS;

/// A small program with a leaf, a frame-pointer function (alloca) and main.
pub const PROGRAM: &str = r#"
#include <stdio.h>
#include <alloca.h>
__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) int mid(int n) {
    char *p = alloca(n);
    for (int i = 0; i < n; i++) p[i] = (char)i;
    int s = 0;
    for (int i = 0; i < n; i++) s += p[i] * leaf(i);
    return s;
}
int main(int argc, char **argv) { (void)argv; printf("%d\n", mid(argc + 10)); return 0; }
"#;

/// Compile `source` with the host gcc into `dir/name` ([`SFRAME_CFLAGS`] plus `extra`). Panics
/// with gcc's message: these tests need gcc.
pub fn compile(dir: &Path, name: &str, source: &str, extra: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).expect("write source");
    let out = dir.join(name);
    crate::support::gcc(&src, &out, &[&SFRAME_CFLAGS[..], extra].concat());
    out
}

/// `nm` symbols: (value, type letter, name).
fn nm(path: &Path) -> Vec<(u64, char, String)> {
    let out = Command::new("nm").arg(path).output().expect("run nm");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let value = u64::from_str_radix(it.next()?, 16).ok()?;
            let kind = it.next()?.chars().next()?;
            Some((value, kind, it.next()?.to_owned()))
        })
        .collect()
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// Every function of a compiled executable has rows, and `main` resolves to a row.
#[test]
fn compiled_executable_has_rows_for_every_function() {
    let dir = tempdir();
    let exe = compile(dir.path(), "prog", PROGRAM, &[]);
    let bytes = std::fs::read(&exe).expect("read");
    let found = elf::find_sframe(&bytes).expect("ELF").expect(".sframe");
    assert_eq!(found.found_by, FoundBy::SectionName);
    let s = Section::parse(&found.data, found.vaddr).expect("parses");
    assert_eq!(s.header().version, 1, "binutils 2.40 writes v1");
    assert!(s.functions().len() >= 3);
    for f in s.functions() {
        let rows = s.rows(f).expect("rows decode");
        assert!(!rows.is_empty(), "function at {:#x} has rows", f.start);
    }
    let main = nm(&exe).into_iter().find(|s| s.2 == "main").expect("main in nm").0;
    let (f, row) = s.find_row(main).expect("lookup").expect("main is covered");
    assert!(f.contains(main) && u64::from(row.start) <= main - f.start);
}

/// With section headers gone, `PT_GNU_SFRAME` finds the same bytes at the same address.
#[test]
fn program_header_when_section_headers_are_stripped() {
    let dir = tempdir();
    let exe = compile(dir.path(), "prog", PROGRAM, &[]);
    let bytes = std::fs::read(&exe).expect("read");
    let by_name = elf::find_sframe(&bytes).expect("ELF").expect(".sframe");
    // binutils 2.40 has no `strip --strip-section-headers`: zero e_shoff, e_shnum, e_shstrndx.
    let mut stripped = bytes.clone();
    stripped[0x28..0x30].fill(0);
    stripped[0x3c..0x40].fill(0);
    let by_segment = elf::find_sframe(&stripped).expect("ELF").expect("PT_GNU_SFRAME");
    assert_eq!(by_segment.found_by, FoundBy::ProgramHeader);
    // ld 2.40 sizes the segment before merging shrinks the section: it may carry padding.
    assert!(by_segment.data.starts_with(&by_name.data) && by_segment.vaddr == by_name.vaddr);
    let s = Section::parse(&by_segment.data, by_segment.vaddr).expect("parses");
    let main = nm(&exe).into_iter().find(|s| s.2 == "main").expect("main").0;
    assert!(s.find_row(main).expect("lookup").is_some());
}

/// A shared object's section is found and decodes.
#[test]
fn shared_object() {
    let dir = tempdir();
    let so = compile(dir.path(), "libprog.so", PROGRAM, &["-shared", "-fPIC"]);
    let bytes = std::fs::read(&so).expect("read");
    let found = elf::find_sframe(&bytes).expect("ELF").expect(".sframe");
    let s = Section::parse(&found.data, found.vaddr).expect("parses");
    assert_eq!(tracer_unwind::sframe::decode_all(&s), Ok(u64::from(s.num_rows())));
    let (_, sh_addr) = elf::find_section(&bytes, ".sframe").expect("ELF").expect("section");
    assert_eq!(sh_addr, found.vaddr);
}

/// In a `.o`, relocated starts are the functions' section offsets (their `nm` values).
#[test]
fn relocatable_object_starts_are_section_offsets() {
    let dir = tempdir();
    let obj = compile(dir.path(), "prog.o", PROGRAM, &["-c"]);
    let bytes = std::fs::read(&obj).expect("read");
    let found = elf::find_sframe(&bytes).expect("ELF").expect(".sframe");
    assert!(matches!(found.data, std::borrow::Cow::Owned(_)), "relocated copy");
    let s = Section::parse(&found.data, found.vaddr).expect("parses");
    let mut starts: Vec<u64> = s.functions().iter().map(|f| f.start).collect();
    let mut symbols: Vec<u64> = nm(&obj)
        .into_iter()
        .filter(|s| matches!(s.1, 'T' | 't'))
        .map(|s| s.0)
        .collect();
    starts.sort_unstable();
    symbols.sort_unstable();
    assert_eq!(starts, symbols);
    assert!(
        starts.iter().any(|&s| s != 0),
        "not every function at 0 (as unrelocated)"
    );
}

/// Files without `.sframe`, non-ELF input, and sections reaching past the file.
#[test]
fn absent_and_invalid() {
    let dir = tempdir();
    let src = dir.path().join("plain.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").expect("write");
    let plain = dir.path().join("plain");
    let gcc = Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(&plain)
        .arg(&src)
        .status()
        .expect("run gcc");
    assert!(gcc.success());
    let bytes = std::fs::read(&plain).expect("read");
    assert_eq!(elf::find_sframe(&bytes), Ok(None));
    assert!(elf::find_section(&bytes, ".text").expect("ELF").is_some());
    assert_eq!(elf::find_section(&bytes, ".sframe"), Ok(None));
    assert_eq!(elf::find_sframe(b"\x7fELF nonsense"), Err(ElfError::NotElf));
    assert_eq!(elf::find_sframe(b"MZ"), Err(ElfError::NotElf));
    let past = craft(&Craft {
        sections: true,
        sframe_offset: Some(1 << 20),
        ..Craft::default()
    });
    assert!(matches!(
        elf::find_sframe(&past),
        Err(ElfError::OutOfFile { offset: 0x100000, .. })
    ));
}

/// ELF32/64, both byte orders, with or without section headers (and NOBITS) are found right.
#[test]
fn crafted_elf_in_every_class_and_byte_order() {
    let section = sframe_hex();
    for class64 in [false, true] {
        for big in [false, true] {
            for sections in [false, true] {
                let c = Craft {
                    class64,
                    big,
                    sections,
                    ..Craft::default()
                };
                let file = craft(&c);
                let found = elf::find_sframe(&file).expect("ELF").expect("found");
                let how = if sections {
                    FoundBy::SectionName
                } else {
                    FoundBy::ProgramHeader
                };
                assert_eq!(
                    (found.data.as_ref(), found.vaddr, found.found_by),
                    (&section[..], 0x402000, how)
                );
                let s = Section::parse(&found.data, found.vaddr).expect("parses");
                assert_eq!(s.functions()[0].start, 0x401000);
            }
            let nobits = craft(&Craft {
                class64,
                big,
                sections: true,
                nobits: true,
                ..Craft::default()
            });
            assert_eq!(
                elf::find_sframe(&nobits),
                Ok(None),
                "NOBITS: no data, even with the segment"
            );
        }
    }
}

/// The v1 worked example of docs/sframe-format.md (section at 0x402000, function at 0x401000).
fn sframe_hex() -> Vec<u8> {
    crate::corrupt::golden_sections().swap_remove(0)
}

/// Shape of a crafted ELF file: one PT_GNU_SFRAME segment and optionally section headers
/// (null, `.sframe`, `.shstrtab`).
#[derive(Default)]
pub struct Craft {
    pub class64: bool,
    pub big: bool,
    pub sections: bool,
    pub nobits: bool,
    pub compressed: bool,
    /// Override the `.sframe` file offset (to point past the file).
    pub sframe_offset: Option<u64>,
}

pub fn craft(c: &Craft) -> Vec<u8> {
    let w = if c.class64 { 8 } else { 4 };
    let (eh, ph, sh) = if c.class64 { (64, 56, 64) } else { (52, 32, 40) };
    let data = sframe_hex();
    let strtab = b"\0.sframe\0.shstrtab\0";
    let (data_at, vaddr, len) = (eh + ph, 0x402000, data.len() as u64);
    let strtab_at = data_at + len;
    let (shoff, shnum, shstrndx) = if c.sections {
        (strtab_at + strtab.len() as u64, 3, 2)
    } else {
        (0, 0, 0)
    };
    let mut out = vec![0x7f, b'E', b'L', b'F', 1 + u8::from(c.class64), 1 + u8::from(c.big), 1];
    out.resize(16, 0);
    let machine = if c.big { 22 } else { 62 };
    let mut fields = vec![(2, 2), (machine, 2), (1, 4), (0, w), (eh, w), (shoff, w), (0, 4)];
    fields.extend([eh, ph, 1, sh, shnum, shstrndx].map(|v| (v, 2)));
    // PT_GNU_SFRAME; p_flags comes second in ELF64, second to last in ELF32.
    fields.push((0x6474_e554, 4));
    if c.class64 {
        fields.push((4, 4));
    }
    fields.extend([data_at, vaddr, vaddr, len, len].map(|v| (v, w)));
    if !c.class64 {
        fields.push((4, 4));
    }
    fields.push((8, w));
    for (v, n) in fields {
        put(&mut out, v, n, c.big);
    }
    out.extend_from_slice(&data);
    out.extend_from_slice(strtab);
    if c.sections {
        let ty = if c.nobits { 8 } else { 1 };
        let flags = if c.compressed { 0x802 } else { 2 };
        let at = c.sframe_offset.unwrap_or(data_at);
        let strtab_len = strtab.len() as u64;
        for [name, ty, flags, addr, offset, size, align] in [
            [0; 7],
            [1, ty, flags, vaddr, at, len, 8],
            [9, 3, 0, 0, strtab_at, strtab_len, 1],
        ] {
            let header = [(name, 4), (ty, 4), (flags, w), (addr, w), (offset, w), (size, w)];
            for (v, n) in header.into_iter().chain([(0, 4), (0, 4), (align, w), (0, w)]) {
                put(&mut out, v, n, c.big);
            }
        }
    }
    out
}

/// The low `n` bytes of `v` in the chosen byte order.
fn put(out: &mut Vec<u8>, v: u64, n: usize, big: bool) {
    let b = if big { v.to_be_bytes() } else { v.to_le_bytes() };
    out.extend_from_slice(if big { &b[8 - n..] } else { &b[..n] });
}
