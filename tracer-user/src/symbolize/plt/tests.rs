//! PLT stubs named as binutils' objdump names them (its synthetic `NAME@plt` symbols), for
//! libraries linked in every PLT layout the host's linkers make.

use std::{collections::BTreeSet, process::Command};

use super::Plt;

/// A library that calls other objects' functions, one of its own exported functions, and takes
/// a function's address (which puts its stub in `.plt.got` when it is also called).
const SOURCE: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int exported(int x) { return x * 3; }
int (*taken)(const char *) = puts;
int use(const char *s) { puts(s); exported(2); return (int)strlen(s) + abs(-4) + taken(s); }
"#;

/// Stubs as `(address, name)`.
type Stubs = BTreeSet<(u64, String)>;

/// Build [`SOURCE`] with `gcc` and `flags`, and return the library and objdump's stubs; `None`
/// when this host has no such compiler (outside CI).
fn build(gcc: &str, objdump: &str, flags: &[&str]) -> Option<(Vec<u8>, Stubs)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, out) = (dir.path().join("lib.c"), dir.path().join("lib.so"));
    std::fs::write(&src, SOURCE).expect("write source");
    match Command::new(gcc)
        .args(["-O2", "-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(&src)
        .args(flags)
        .output()
    {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!("{gcc} {flags:?} failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            // The cross compiler comes with `cargo xtask setup`; CI always has it.
            assert!(std::env::var("CI").as_deref() != Ok("true"), "no {gcc}: {e}");
            eprintln!("skipped: no {gcc} ({e})");
            return None;
        }
    }
    let listing = Command::new(objdump)
        .args(["-d", "-j", ".plt", "-j", ".plt.sec", "-j", ".plt.got"])
        .arg(&out)
        .output()
        .expect("run objdump");
    assert!(listing.status.success(), "{objdump} failed");
    // "0000000000001030 <puts@plt>:"; not "<puts@plt-0x10>" (the lazy-binding header) or
    // "<.plt>" (the section).
    let stubs = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .filter_map(|line| {
            let (addr, rest) = line.split_once(" <")?;
            let name = rest.strip_suffix(">:")?;
            (name.ends_with("@plt") && !name.starts_with('.')).then(|| (u64::from_str_radix(addr, 16).ok(), name))
        })
        .map(|(addr, name)| (addr.expect("hex address"), name.to_owned()))
        .collect();
    Some((std::fs::read(&out).expect("read library"), stubs))
}

fn ours(bytes: &[u8]) -> Stubs {
    Plt::of(bytes).stubs().map(|(a, n)| (a, n.to_owned())).collect()
}

#[test]
fn x86_64_stubs_are_named_as_objdump_names_them() {
    let layouts: [&[&str]; 4] = [
        &[],
        &["-Wl,-z,now"],
        &["-fcf-protection", "-Wl,-z,ibtplt"],
        &["-fcf-protection=full", "-Wl,-z,ibt"],
    ];
    for flags in layouts {
        let Some((bytes, expected)) = build("gcc", "objdump", flags) else {
            return;
        };
        assert!(expected.len() >= 4, "{flags:?}: objdump named {expected:?}");
        assert_eq!(ours(&bytes), expected, "{flags:?}");
    }
}

#[test]
fn aarch64_stubs_are_named_as_objdump_names_them() {
    let layouts: [&[&str]; 2] = [&[], &["-mbranch-protection=standard", "-Wl,-z,force-bti"]];
    for flags in layouts {
        let Some((bytes, expected)) = build("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-objdump", flags) else {
            return;
        };
        assert!(expected.len() >= 4, "{flags:?}: objdump named {expected:?}");
        assert_eq!(ours(&bytes), expected, "{flags:?}");
    }
}

#[test]
fn every_byte_of_a_stub_has_its_name_and_nothing_else_does() {
    let Some((bytes, expected)) = build("gcc", "objdump", &[]) else {
        return;
    };
    let plt = Plt::of(&*bytes);
    let (&(first, _), &(last, _)) = (expected.first().expect("a stub"), expected.last().expect("a stub"));
    // The lazy-binding header before the first stub, and whatever follows the last one (a
    // `.plt.got` stub of 8 bytes).
    assert_eq!(plt.name(first - 1), None);
    assert_eq!(plt.name(last + 8), None);
    for (addr, name) in &expected {
        for offset in *addr..addr + 8 {
            assert_eq!(plt.name(offset), Some(name.as_str()), "{offset:#x}");
        }
    }
}

#[test]
fn damaged_files_give_no_stubs_and_never_panic() {
    let Some((bytes, expected)) = build("gcc", "objdump", &[]) else {
        return;
    };
    assert!(!expected.is_empty());
    for len in (0..bytes.len()).step_by(97) {
        let _ = Plt::of(&bytes[..len]);
    }
    let mut rng = tracer_unwind::testing::Rng::new(0x91e7_0c5a_d3b2_7f01);
    for _ in 0..2000 {
        let mut damaged = bytes.clone();
        for _ in 0..1 + rng.below(8) {
            let at = rng.below(damaged.len());
            damaged[at] = rng.next_u64() as u8;
        }
        let plt = Plt::of(&*damaged);
        // Stubs stay disjoint and sorted whatever the bytes say.
        let starts: Vec<u64> = plt.stubs().map(|(a, _)| a).collect();
        assert!(starts.windows(2).all(|w| w[0] < w[1]));
    }
    assert_eq!(Plt::of(&b"\x7fELF not really"[..]), Plt::default());
}
