//! Hostile files on disk: copies of a real program (and of a plugin) whose unwind sections,
//! section headers or SFrame program header are corrupted or cut off in place, so that they
//! still run (the loader reads only the program headers and the loaded bytes), run as
//! processes under a system-wide tracer. The tracer must survive them, write its output and
//! count the objects it could not read.

use std::{path::Path, process::Command, time::Duration};

use super::{chain_programs, compile, read_folded};
use crate::support::{Rng, Running, SUMMARY_JSON, Summary, Tracer};

/// `PT_GNU_SFRAME`.
const PT_GNU_SFRAME: u32 = 0x6474_e554;
const PT_LOAD: u32 = 1;

fn u16_at(b: &[u8], at: usize) -> usize {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("2 bytes")).into()
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], at: usize) -> usize {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes")) as usize
}
fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// The section headers of an ELF64 little-endian file: (name, offset of its header, file
/// offset, size).
fn sections(elf: &[u8]) -> Vec<(String, usize, usize, usize)> {
    let (shoff, shentsize, shnum, shstrndx) = (
        u64_at(elf, 0x28),
        u16_at(elf, 0x3a),
        u16_at(elf, 0x3c),
        u16_at(elf, 0x3e),
    );
    let header = |i: usize| shoff + i * shentsize;
    let strtab = u64_at(elf, header(shstrndx) + 24);
    (0..shnum)
        .map(|i| {
            let h = header(i);
            let name_at = strtab + u32_at(elf, h) as usize;
            let end = elf[name_at..].iter().position(|&c| c == 0).expect("a name") + name_at;
            let name = String::from_utf8_lossy(&elf[name_at..end]).into_owned();
            (name, h, u64_at(elf, h + 24), u64_at(elf, h + 32))
        })
        .collect()
}

/// The file range of section `name`.
fn section(elf: &[u8], name: &str) -> std::ops::Range<usize> {
    let (_, _, offset, size) = sections(elf)
        .into_iter()
        .find(|(n, ..)| n == name)
        .unwrap_or_else(|| panic!("no section {name}"));
    offset..offset + size
}

/// The program headers: (type, offset of the header).
fn segments(elf: &[u8]) -> Vec<(u32, usize)> {
    let (phoff, phentsize, phnum) = (u64_at(elf, 0x20), u16_at(elf, 0x36), u16_at(elf, 0x38));
    (0..phnum)
        .map(|i| phoff + i * phentsize)
        .map(|h| (u32_at(elf, h), h))
        .collect()
}

fn junk(bytes: &mut [u8], rng: &mut Rng) {
    for b in bytes {
        *b = rng.next_u64() as u8;
    }
}

/// The corruptions, each a name (the program's file name and command name) and what it does to
/// the bytes of a program that has `.sframe`, `.eh_frame` and `.eh_frame_hdr`.
type Corruption = (&'static str, fn(&mut Vec<u8>, &mut Rng));

const CORRUPTIONS: [Corruption; 10] = [
    ("h_sframe_junk", |elf, rng| {
        let r = section(elf, ".sframe");
        junk(&mut elf[r], rng)
    }),
    ("h_sframe_fdes", |elf, _| {
        // The header's function count (offset 8 in v1, v2 and v3).
        let r = section(elf, ".sframe");
        put_u32(elf, r.start + 8, u32::MAX)
    }),
    ("h_sframe_tail", |elf, rng| {
        // The descriptors and rows, after the 28-byte header.
        let r = section(elf, ".sframe");
        junk(&mut elf[r.start + 28..r.end], rng)
    }),
    ("h_ehframe_junk", |elf, rng| {
        let r = section(elf, ".eh_frame");
        junk(&mut elf[r], rng)
    }),
    ("h_ehhdr_count", |elf, _| {
        // The search table's entry count (udata4 after the 4 encoding bytes and the pointer).
        let r = section(elf, ".eh_frame_hdr");
        put_u32(elf, r.start + 8, 0x7fff_ffff)
    }),
    ("h_unwind_zero", |elf, _| {
        for name in [".sframe", ".eh_frame", ".eh_frame_hdr"] {
            let r = section(elf, name);
            elf[r].fill(0);
        }
    }),
    ("h_sizes_huge", |elf, _| {
        for (name, header, ..) in sections(elf) {
            if matches!(name.as_str(), ".sframe" | ".eh_frame" | ".eh_frame_hdr") {
                put_u64(elf, header + 32, 0x7fff_ffff_ffff);
            }
        }
    }),
    ("h_phdr_sframe", |elf, _| {
        for (kind, header) in segments(elf) {
            if kind == PT_GNU_SFRAME {
                put_u64(elf, header + 8, 0xffff_ff00);
                put_u64(elf, header + 32, 0x10_0000);
            }
        }
    }),
    ("h_shstr_junk", |elf, rng| {
        let r = section(elf, ".shstrtab");
        junk(&mut elf[r], rng)
    }),
    ("h_truncated", |elf, _| {
        // Everything after the loaded bytes: section headers, symbols, section names.
        let end = segments(elf)
            .into_iter()
            .filter(|&(kind, _)| kind == PT_LOAD)
            .map(|(_, h)| u64_at(elf, h + 8) + u64_at(elf, h + 32))
            .max()
            .expect("a PT_LOAD");
        elf.truncate(end);
    }),
];

/// Start `path` (with `args`), retrying while a fork elsewhere still holds it open for writing.
fn start(path: &Path, args: &[&str], plugin: Option<&Path>) -> Running {
    for _ in 0..100 {
        let mut command = Command::new(path);
        command.args(args);
        if let Some(plugin) = plugin {
            command.env("PLUGIN", plugin);
        }
        match command.spawn() {
            Ok(child) => return Running(child),
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("start {}: {e}", path.display()),
        }
    }
    panic!("{} stays busy", path.display())
}

/// Ten corrupted copies of a program and a plugin with corrupted unwind sections (dlopen'ed and
/// dlclose'd again and again by a host) run under a system-wide tracer: it survives, its output
/// parses, and the objects it could not read are counted and named in the summary.
#[test]
fn corrupted_programs_are_survived_and_counted() {
    privileged_test!();
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, _) = chain_programs(dir.path());
    let original = std::fs::read(&first).expect("read first");
    let mut rng = Rng(0x686f_7374);
    let mut running = Vec::new();
    for (i, (name, corrupt)) in CORRUPTIONS.into_iter().enumerate() {
        let mut bytes = original.clone();
        // A build-id of its own, as another build would have: objects are told apart by it.
        let note = section(&bytes, ".note.gnu.build-id");
        bytes[note.start + 16] ^= i as u8 + 1;
        corrupt(&mut bytes, &mut rng);
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).expect("write a corrupted copy");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        running.push((name, start(&path, &["0", "3"], None)));
    }
    let plugin = compile(dir.path(), "churn_plugin", "libchurn.so", &["-shared", "-fPIC"]);
    let mut bytes = std::fs::read(&plugin).expect("read the plugin");
    for name in [".sframe", ".eh_frame_hdr"] {
        let r = section(&bytes, name);
        junk(&mut bytes[r], &mut rng);
    }
    let bad_plugin = dir.path().join("libh_plugin.so");
    std::fs::write(&bad_plugin, &bytes).expect("write the corrupted plugin");
    let host = compile(dir.path(), "churn", "h_host", &[]);
    let mut h_host = start(&host, &["30", "50"], Some(&bad_plugin));
    h_host.wait_working(&host);
    running.push(("h_host", h_host));
    let out = dir.path().join("stacks.folded");
    let stderr = Tracer::start(&[
        SUMMARY_JSON[0],
        SUMMARY_JSON[1],
        "-a",
        "-F",
        "999",
        "-d",
        "4",
        "--no-kernel",
        "-o",
        out.to_str().expect("path"),
    ])
    .finish();
    let summary = Summary::of(&stderr);
    let (samples, lost) = (summary.count("samples"), summary.count("lost"));
    eprintln!("{stderr}\n{samples} samples, {lost} lost");
    // Corrupted files must stay runnable: none may have died. `h_host` ends by itself after
    // 30 s, which a slow run on a busy machine can outlast; the others run until killed.
    for (name, process) in &mut running {
        match process.0.try_wait().expect("try_wait") {
            None => {}
            Some(status) => assert!(
                *name == "h_host" && status.success(),
                "{name} ended ({status}): corrupted files must stay runnable"
            ),
        }
    }
    let lines = read_folded(&out);
    for name in ["h_sframe_junk", "h_truncated", "h_host"] {
        assert!(lines.iter().any(|l| l.comm == name), "no samples of {name}");
    }
    // Eight of the eleven cannot be read (the others keep an unwind source that reads): each
    // is counted, and named with why.
    let unreadable = summary.count("tables.without_by_reason.unreadable");
    assert!(
        unreadable >= 7,
        "the corrupted objects should be counted as unreadable: {stderr}"
    );
    let ours = dir.path().to_string_lossy().into_owned();
    let named = summary
        .notes()
        .iter()
        .filter(|n| n.contains(&ours) && n.contains("/h_"))
        .count();
    assert!(named >= 7, "the unreadable objects are named: {stderr}");
}
