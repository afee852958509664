//! Programs started the ordinary way, through glibc's `_start` and `__libc_start_main`, whose
//! own code has `.sframe` and whose libc has only `.eh_frame`: the walk crosses from SFrame rows
//! to `.eh_frame` rows and ends, complete, at `_start` (whose crt1.o code carries CFI but no
//! SFrame, so its rows come from the program's own `.eh_frame`); samples in the vDSO unwind
//! through the vDSO's own `.eh_frame`, read from the process.

use std::process::Command;

use crate::support::{SFRAME_CFLAGS, SUMMARY_JSON, Summary, gcc};

const PROGRAM: &str = r#"
#include <stdlib.h>
static volatile unsigned long sink;
__attribute__((noipa)) void c(long n) { for (long i = 0; i < n; i++) sink += i; }
__attribute__((noipa)) void b(long n) { c(n); sink++; }
__attribute__((noipa)) void a(long n) { b(n); sink++; }
int main(int argc, char **argv) { for (;;) a(1L << 20); }
"#;

/// Samples a trace needs at least.
const ENOUGH: u64 = 100;
/// The longest a trace samples (doubling from 2 s) to get [`ENOUGH`] samples: an emulated
/// guest on a busy host can give the program a small share of 2 s.
const MAX_SECS: u32 = 32;

/// Compile `source` with SFrame into `dir/name` and trace it for 2 s (longer, doubling up to
/// [`MAX_SECS`], while it took fewer than [`ENOUGH`] samples); the folded stacks (glibc's
/// `__libc_start_main_impl` named `__libc_start_main`), the sample count, and the stderr with
/// the summary as JSON.
fn trace(dir: &std::path::Path, name: &str, source: &str) -> (Vec<(String, u64)>, u64, String) {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).expect("write source");
    let exe = dir.join(name);
    gcc(&src, &exe, &SFRAME_CFLAGS);
    let mut secs = 2;
    let (stacks, total, stderr) = loop {
        let out = Command::new(env!("CARGO_BIN_EXE_sframe-trace"))
            .args(SUMMARY_JSON)
            .args(["-F", "499", "-d", &secs.to_string(), "--no-kernel", "--"])
            .arg(&exe)
            .output()
            .expect("run sframe-trace");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert!(out.status.success(), "{stderr}");
        let stacks: Vec<(String, u64)> = stdout
            .lines()
            .map(|line| {
                let (stack, count) = line.rsplit_once(' ').expect("folded line");
                (
                    stack.replace("__libc_start_main_impl", "__libc_start_main"),
                    count.parse().expect("count"),
                )
            })
            .collect();
        let total: u64 = stacks.iter().map(|(_, n)| n).sum();
        if total >= ENOUGH || secs >= MAX_SECS {
            break (stacks, total, stderr);
        }
        eprintln!("{name}: {total} samples in {secs} s, sampling longer");
        secs *= 2;
    };
    assert!(total >= ENOUGH, "too few samples ({total}) in {secs} s: {stderr}");
    let complete = Summary::of(&stderr).count("stacks.complete");
    assert!(
        complete as f64 >= 0.99 * total as f64,
        "{complete} complete of {total}: {stderr}"
    );
    (stacks, total, stderr)
}

/// At least 99% of samples are exactly `_start;__libc_start_main;__libc_start_call_main;main;a;b;c`
/// and at least 99% of the walks end complete.
#[test]
fn stacks_cross_from_sframe_into_glibc_eh_frame() {
    privileged_test!(paired);
    let dir = tempfile::tempdir().expect("tempdir");
    let (stacks, total, stderr) = trace(dir.path(), "chain", PROGRAM);
    let expected = "chain;_start;__libc_start_main;__libc_start_call_main;main;a;b;c";
    let exact: u64 = stacks.iter().filter(|(s, _)| s == expected).map(|(_, n)| n).sum();
    assert!(
        exact as f64 >= 0.99 * total as f64,
        "{exact} of {total} exact:\n{stacks:?}\n{stderr}"
    );
    // libc's frames (`__libc_start_call_main`, `__libc_start_main`) took `.eh_frame` rows.
    let summary = Summary::of(&stderr);
    assert!(summary.count("user_frames.eh_frame") >= 2 * exact, "{stderr}");
    assert!(summary.count("tables.eh_frame") >= 1, "{stderr}");
}

/// A loop reading the clock spends its time in the vDSO: those samples unwind through the
/// vDSO's `.eh_frame` and glibc's back to `_start`, complete.
#[test]
fn samples_in_the_vdso_unwind_completely() {
    privileged_test!(paired);
    let dir = tempfile::tempdir().expect("tempdir");
    let (stacks, total, stderr) = trace(dir.path(), "clock", CLOCK);
    let chain = "clock;_start;__libc_start_main;__libc_start_call_main;main;tick";
    let on_chain: u64 = stacks
        .iter()
        .filter(|(s, _)| s.starts_with(chain))
        .map(|(_, n)| n)
        .sum();
    assert!(
        on_chain as f64 >= 0.99 * total as f64,
        "{on_chain} of {total} on the chain:\n{stacks:?}"
    );
    // The vDSO's clock_gettime, called from glibc's, called from tick.
    let in_vdso: u64 = stacks
        .iter()
        .filter(|(s, _)| {
            let callees: Vec<&str> = s.strip_prefix(chain).unwrap_or_default().split(';').skip(1).collect();
            matches!(callees.as_slice(), [libc, vdso] if libc.contains("clock_gettime") && vdso.contains("clock_gettime"))
        })
        .map(|(_, n)| n)
        .sum();
    assert!(
        in_vdso as f64 >= 0.3 * total as f64,
        "{in_vdso} of {total} in the vDSO:\n{stacks:?}\n{stderr}"
    );
}

const CLOCK: &str = r#"
#include <time.h>
static volatile long sink;
__attribute__((noipa)) void tick(void) {
    struct timespec t;
    for (;;) { clock_gettime(CLOCK_MONOTONIC, &t); sink += t.tv_nsec; }
}
int main(void) { tick(); }
"#;

/// A callback through libc: `qsort` (libc, `.eh_frame`) calls back into the program (SFrame).
/// Every sample in the comparator unwinds completely through glibc's merge sort to `_start`.
#[test]
fn callbacks_through_libc_unwind_completely() {
    privileged_test!(paired);
    let dir = tempfile::tempdir().expect("tempdir");
    let (stacks, total, _) = trace(dir.path(), "qsort", QSORT);
    let chain = "qsort;_start;__libc_start_main;__libc_start_call_main;main;sort;";
    let (mut in_cmp, mut exact) = (0, 0);
    for (stack, n) in &stacks {
        if !stack.ends_with(";cmp") {
            continue;
        }
        in_cmp += n;
        // Between `sort` and `cmp`: glibc's qsort and its recursive merge sort, nothing else.
        let inner = stack.strip_prefix(chain).and_then(|s| s.strip_suffix(";cmp"));
        if inner.is_some_and(|frames| frames.split(';').all(|f| f.contains("qsort") || f.contains("msort"))) {
            exact += n;
        }
    }
    assert!(
        in_cmp as f64 >= 0.8 * total as f64,
        "{in_cmp} of {total} in cmp:\n{stacks:?}"
    );
    assert!(
        exact as f64 >= 0.99 * in_cmp as f64,
        "{exact} of {in_cmp} exact:\n{stacks:?}"
    );
}

const QSORT: &str = r#"
#include <stdlib.h>
static volatile long sink;
__attribute__((noipa)) int cmp(const void *a, const void *b) {
    for (int i = 0; i < 2000; i++) sink += i;
    return *(const int *)a - *(const int *)b;
}
__attribute__((noipa)) void sort(int *v, int n) { qsort(v, n, sizeof *v, cmp); }
int main(void) {
    static int v[4096];
    for (;;) {
        for (int i = 0; i < 4096; i++) v[i] = (i * 7919) % 4096;
        sort(v, 4096);
    }
}
"#;
