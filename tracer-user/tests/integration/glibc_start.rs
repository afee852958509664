//! A program started the ordinary way, through glibc's `_start` and `__libc_start_main`, whose
//! own code has `.sframe` and whose libc has only `.eh_frame`: the walk crosses from SFrame rows
//! to `.eh_frame` rows and ends, complete, at `_start` (whose crt1.o code carries CFI but no
//! SFrame, so its rows come from the program's own `.eh_frame`).

use std::process::Command;

use crate::support::privileged;

const PROGRAM: &str = r#"
#include <stdlib.h>
static volatile unsigned long sink;
__attribute__((noipa)) void c(long n) { for (long i = 0; i < n; i++) sink += i; }
__attribute__((noipa)) void b(long n) { c(n); sink++; }
__attribute__((noipa)) void a(long n) { b(n); sink++; }
int main(int argc, char **argv) { for (;;) a(1L << 20); }
"#;

/// At least 99% of samples are exactly `_start;__libc_start_main;__libc_start_call_main;main;a;b;c`
/// and at least 99% of the walks end complete.
#[test]
fn stacks_cross_from_sframe_into_glibc_eh_frame() {
    let Some(_serial) = privileged("stacks_cross_from_sframe_into_glibc_eh_frame") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("chain.c");
    std::fs::write(&src, PROGRAM).expect("write source");
    let exe = dir.path().join("chain");
    let gcc = Command::new("gcc")
        .args([
            "-O2",
            "-fomit-frame-pointer",
            "-fno-optimize-sibling-calls",
            "-Wa,--gsframe",
            "-o",
        ])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("run gcc");
    assert!(gcc.success());
    let out = Command::new(env!("CARGO_BIN_EXE_sframe-trace"))
        .args(["-F", "499", "-d", "2", "--no-kernel", "--"])
        .arg(&exe)
        .output()
        .expect("run sframe-trace");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    let expected = "chain;_start;__libc_start_main;__libc_start_call_main;main;a;b;c";
    let (mut exact, mut total) = (0u64, 0u64);
    for line in stdout.lines() {
        let (stack, count) = line.rsplit_once(' ').expect("folded line");
        let count: u64 = count.parse().expect("count");
        // glibc 2.34+ names the implementation `__libc_start_main_impl`.
        if stack.replace("__libc_start_main_impl", "__libc_start_main") == expected {
            exact += count;
        }
        total += count;
    }
    assert!(total >= 100, "too few samples ({total}): {stderr}");
    assert!(
        exact as f64 >= 0.99 * total as f64,
        "{exact} of {total} exact:\n{stdout}\n{stderr}"
    );
    let complete = stderr
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("stacks: ")?
                .split_once(" complete")?
                .0
                .parse::<u64>()
                .ok()
        })
        .expect("stacks line in the summary");
    assert!(
        complete as f64 >= 0.99 * total as f64,
        "{complete} complete of {total}: {stderr}"
    );
    assert!(stderr.contains(" from .eh_frame"), "{stderr}");
}
