//! Unit tests of bias and build-id on ELF files crafted here: ELF64 little-endian and ELF32
//! big-endian, PIE, non-PIE and lld-style packed segment layouts.

use super::{ElfFacts, ImageError, inspect};

const PT_LOAD: u32 = 1;
const PT_NOTE: u32 = 4;
const R: u32 = 4;
const RX: u32 = 5;

struct Segment {
    p_type: u32,
    flags: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
}

fn load(flags: u32, offset: u64, vaddr: u64, filesz: u64) -> Segment {
    Segment {
        p_type: PT_LOAD,
        flags,
        offset,
        vaddr,
        filesz,
    }
}

/// Builds an ELF file: header, program headers, then `notes` (a PT_NOTE is added for them).
struct Elf {
    is64: bool,
    big: bool,
    out: Vec<u8>,
}

impl Elf {
    fn put(&mut self, value: u64, width: usize) {
        let bytes = if self.big {
            value.to_be_bytes()[8 - width..].to_vec()
        } else {
            value.to_le_bytes()[..width].to_vec()
        };
        self.out.extend(bytes);
    }

    /// A word that is 8 bytes in ELF64 and 4 in ELF32.
    fn word(&mut self, value: u64) {
        self.put(value, if self.is64 { 8 } else { 4 });
    }

    fn build(is64: bool, big: bool, mut segments: Vec<Segment>, notes: &[(&[u8], u32, &[u8])]) -> Vec<u8> {
        let mut elf = Elf {
            is64,
            big,
            out: Vec::new(),
        };
        let (ehsize, phentsize) = if is64 { (64, 56) } else { (52, 32) };
        let mut note_bytes = Vec::new();
        for &(name, n_type, desc) in notes {
            let mut n = Elf {
                is64,
                big,
                out: Vec::new(),
            };
            n.put(name.len() as u64, 4);
            n.put(desc.len() as u64, 4);
            n.put(n_type.into(), 4);
            for part in [name, desc] {
                n.out.extend(part);
                n.out.resize(n.out.len().next_multiple_of(4), 0);
            }
            note_bytes.extend(n.out);
        }
        if !notes.is_empty() {
            let offset = (ehsize + phentsize * (segments.len() + 1)) as u64;
            let filesz = note_bytes.len() as u64;
            segments.push(Segment {
                p_type: PT_NOTE,
                flags: R,
                offset,
                vaddr: offset,
                filesz,
            });
        }
        elf.out.extend([
            0x7f,
            b'E',
            b'L',
            b'F',
            if is64 { 2 } else { 1 },
            if big { 2 } else { 1 },
            1,
        ]);
        elf.out.resize(16, 0);
        elf.put(3, 2); // ET_DYN
        elf.put(62, 2); // EM_X86_64
        elf.put(1, 4);
        elf.word(0); // e_entry
        elf.word(ehsize as u64); // e_phoff
        elf.word(0); // e_shoff
        elf.put(0, 4);
        for value in [ehsize, phentsize, segments.len(), 0, 0, 0] {
            elf.put(value as u64, 2);
        }
        for s in &segments {
            elf.put(s.p_type.into(), 4);
            if is64 {
                elf.put(s.flags.into(), 4);
            }
            for value in [s.offset, s.vaddr, s.vaddr, s.filesz, s.filesz] {
                elf.word(value);
            }
            if !is64 {
                elf.put(s.flags.into(), 4);
            }
            elf.word(if s.p_type == PT_NOTE { 4 } else { 0x1000 });
        }
        elf.out.extend(note_bytes);
        elf.out
    }
}

const ID: &[u8] = &[0xde, 0xad, 0xbe, 0xef, 0x01, 0x02];

fn gnu_id() -> (&'static [u8], u32, &'static [u8]) {
    (b"GNU\0", 3, ID)
}

/// A PIE linked at 0: bias is the load address of the segment minus its vaddr.
#[test]
fn pie_bias_and_build_id() {
    let file = Elf::build(
        true,
        false,
        vec![load(R, 0, 0, 0x1000), load(RX, 0x1000, 0x1000, 0x2000)],
        &[gnu_id()],
    );
    let facts = inspect(file.as_slice(), 0x5555_5555_5000, 0x5555_5555_7000, 0x1000);
    assert_eq!(
        facts,
        Ok(ElfFacts {
            bias: 0x5555_5555_4000,
            build_id: Some(ID.into()),
        })
    );
}

/// A non-PIE executable mapped at its link address has bias 0.
#[test]
fn non_pie_bias_zero() {
    let file = Elf::build(true, false, vec![load(RX, 0x1000, 0x40_1000, 0x800)], &[]);
    let facts = inspect(file.as_slice(), 0x40_1000, 0x40_2000, 0x1000).expect("inspect");
    assert_eq!((facts.bias, facts.build_id), (0, None));
}

/// lld packs segments: the executable mapping starts at a file offset below the executable
/// segment's `p_offset`, inside the read-only segment; the executable segment still decides.
#[test]
fn packed_segments() {
    let file = Elf::build(
        true,
        false,
        vec![load(R, 0, 0, 0x5a4), load(RX, 0x5b0, 0x15b0, 0x200)],
        &[],
    );
    let start = 0x7f00_0000_1000;
    let facts = inspect(file.as_slice(), start, start + 0x1000, 0).expect("inspect");
    assert_eq!(facts.bias, start - 0x1000);
    // pc of the segment's first byte maps back to its vaddr.
    assert_eq!(start + 0x5b0 - facts.bias, 0x15b0);
}

/// A mapping split by mprotect (start and offset advanced together) keeps the same bias.
#[test]
fn split_mapping_same_bias() {
    let file = Elf::build(true, false, vec![load(RX, 0x1000, 0x1000, 0x4000)], &[]);
    let whole = inspect(file.as_slice(), 0x10_1000, 0x10_5000, 0x1000).expect("whole");
    let tail = inspect(file.as_slice(), 0x10_3000, 0x10_5000, 0x3000).expect("tail");
    assert_eq!(whole.bias, tail.bias);
    assert_eq!(whole.bias, 0x10_0000);
}

/// Old binaries under READ_IMPLIES_EXEC map non-executable segments executable: any covering
/// PT_LOAD is used when no executable one covers the mapping.
#[test]
fn falls_back_to_non_executable_segment() {
    let file = Elf::build(
        true,
        false,
        vec![load(RX, 0, 0, 0x1000), load(R, 0x2000, 0x3000, 0x1000)],
        &[],
    );
    let facts = inspect(file.as_slice(), 0x8000_2000, 0x8000_3000, 0x2000).expect("inspect");
    assert_eq!(facts.bias, 0x8000_2000 - 0x3000);
}

/// Notes other than a non-empty GNU build-id are skipped.
#[test]
fn other_notes_ignored() {
    let notes: [(&[u8], u32, &[u8]); 3] = [(b"XYZ\0", 3, b"abcd"), (b"GNU\0", 1, b"abcd"), (b"GNU\0", 3, b"")];
    let file = Elf::build(true, false, vec![load(RX, 0, 0, 0x1000)], &notes);
    assert_eq!(
        inspect(file.as_slice(), 0x1000, 0x2000, 0).map(|f| f.build_id),
        Ok(None)
    );
    let mut with_id = notes.to_vec();
    with_id.push(gnu_id());
    let file = Elf::build(true, false, vec![load(RX, 0, 0, 0x1000)], &with_id);
    assert_eq!(
        inspect(file.as_slice(), 0x1000, 0x2000, 0).map(|f| f.build_id),
        Ok(Some(ID.into()))
    );
}

/// ELF32 big-endian files are read too.
#[test]
fn elf32_big_endian() {
    let file = Elf::build(false, true, vec![load(RX, 0x1000, 0x1_1000, 0x1000)], &[gnu_id()]);
    let facts = inspect(file.as_slice(), 0x40_1000, 0x40_2000, 0x1000).expect("inspect");
    assert_eq!(facts.bias, 0x40_1000 - 0x1_1000);
    assert_eq!(facts.build_id, Some(ID.into()));
}

/// No covering segment, non-ELF bytes and truncated program headers are typed errors.
#[test]
fn errors() {
    let file = Elf::build(true, false, vec![load(RX, 0x1000, 0x1000, 0x1000)], &[]);
    assert_eq!(
        inspect(file.as_slice(), 0x1000, 0x2000, 0x3000),
        Err(ImageError::NoSegment {
            file_offset: 0x3000,
            end: 0x4000
        })
    );
    assert_eq!(inspect(&b"#!/bin/sh\n"[..], 0, 0x1000, 0), Err(ImageError::NotElf));
    let truncated = &file[..80];
    assert!(matches!(
        inspect(truncated, 0, 0x1000, 0),
        Err(ImageError::Malformed {
            what: "program headers",
            ..
        })
    ));
}
