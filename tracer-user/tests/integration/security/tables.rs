//! A user who maps, runs and unmaps fresh memfd copies of a plugin with tens of thousands of
//! unwind rows (issue 29, defect 6), in a `--pid` session with 4 MiB of table maps: the tables of the unmapped copies
//! are released within seconds (not kept for the 10 s of a named file), the copies the user
//! then keeps mapped at once get no more than half the table maps' rows (the rest refused as
//! `over_share`, counted in the summary), and a process that starts its program afterwards
//! (a launcher that execs it) is loaded and unwound exactly.

use std::{
    io::{BufRead as _, BufReader, Write as _},
    os::unix::fs::PermissionsExt as _,
    path::Path,
    process::{ChildStdin, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use super::{LIMIT, as_nobody, sticky_dir};
use crate::support::{
    Running, SFRAME_CFLAGS, SUMMARY_JSON, Summary, Tracer, gcc, own_name, ticks_per_second, wait_for_cpu,
};

/// Functions of the plugin: three SFrame rows each (entry, after the stack adjustment, before
/// the return), some 24k rows in all, in a file under the 2 MB the tracer builds at once.
const FUNCTIONS: usize = 8_000;

/// The table maps of the session (`--max-table-memory`): some 800k rows.
const TABLE_MEMORY: &str = "4M";

/// Copies the attacker maps, runs and unmaps one after the other (about 0.2 s each), and copies
/// it then keeps mapped at once (more rows than the whole table maps hold).
const CHURN: usize = 40;
const HOARD: usize = 40;

/// The attacker: waits for a line on stdin, then maps (memfd_create, write, dlopen of
/// /proc/self/fd/N), runs (~0.2 s) and unmaps (dlclose, close) CHURN fresh copies of the
/// plugin, says `churned`; on the next line maps and runs HOARD copies and keeps them, says
/// `hoarded`; exits on the next line. Arguments: plugin, churn, hoard.
const ATTACKER: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
static char *bytes; static long size;
static void *load(int *fd) {
    *fd = memfd_create("plugin", 0);
    if (*fd < 0 || write(*fd, bytes, size) != size) { perror("memfd"); exit(2); }
    char path[64]; snprintf(path, sizeof path, "/proc/self/fd/%d", *fd);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); exit(2); }
    return h;
}
static void run(void *h) { long (*entry)(long) = (long (*)(long))dlsym(h, "plugin_entry"); if (entry) entry(2000000); }
static void await_line(void) { char line[16]; if (!fgets(line, sizeof line, stdin)) exit(0); }
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 2; }
    fseek(f, 0, SEEK_END); size = ftell(f); rewind(f);
    bytes = malloc(size);
    if (fread(bytes, 1, size, f) != (size_t)size) return 2;
    fclose(f);
    int churn = atoi(argv[2]), hoard = atoi(argv[3]);
    await_line();
    for (int i = 0; i < churn; i++) { int fd; void *h = load(&fd); run(h); usleep(200000); dlclose(h); close(fd); }
    printf("churned\n"); fflush(stdout);
    await_line();
    for (int i = 0; i < hoard; i++) { int fd; run(load(&fd)); }
    printf("hoarded\n"); fflush(stdout);
    await_line();
    return 0;
}
"#;

/// The honest program: `main` → `mid` → `leaf`, some seconds of CPU.
const HONEST: &str = r#"
__attribute__((noinline)) long leaf(long n) { long s = 0; for (long i = 0; i < n; i++) s += i * i % 7; return s; }
__attribute__((noinline)) long mid(long n) { return leaf(n) + 1; }
int main(void) { long t = 0; for (int j = 0; j < 200; j++) t += mid(20000000 + j); return (int)(t & 1); }
"#;

/// The plugin's source: FUNCTIONS functions that each call a helper (so each adjusts the stack:
/// three rows), and `plugin_entry`, which calls some of them.
fn plugin_source() -> String {
    let mut c = String::from("__attribute__((noinline)) long helper(long x) { return x * 2654435761L >> 7; }\n");
    for i in 0..FUNCTIONS {
        c.push_str(&format!(
            "__attribute__((noinline)) long f{i}(long x) {{ return helper(x + {i}) * 3 + {i}; }}\n"
        ));
    }
    c.push_str(
        "long plugin_entry(long n) { long s = 0; for (long i = 0; i < n; i++) s += f0(i) ^ f1(s); return s; }\n",
    );
    c
}

/// The numbers of a `tables: N loaded, R rows` line of the tracer's `sframe_trace::tables` log.
fn tables_line(line: &str) -> Option<(u64, u64)> {
    let rest = line.split("tables: ").nth(1)?;
    let (n, rest) = rest.split_once(" loaded, ")?;
    Some((n.parse().ok()?, rest.strip_suffix(" rows")?.parse().ok()?))
}

/// A child's stdout lines, sent on as they come.
fn lines_of(child: &mut std::process::Child) -> mpsc::Receiver<String> {
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    receive
}

/// Write a line to `stdin` and wait (at most [`LIMIT`]) for `said` from `lines`.
fn step(stdin: &mut ChildStdin, lines: &mpsc::Receiver<String>, said: &str) {
    stdin
        .write_all(b"go\n")
        .and_then(|()| stdin.flush())
        .expect("tell the attacker");
    let line = lines
        .recv_timeout(LIMIT)
        .unwrap_or_else(|e| panic!("the attacker did not say {said}: {e}"));
    assert_eq!(line, said);
}

/// Regression (issue 29: one process mapping fresh memfd copies of a 96k-row plugin kept 138
/// tables loaded, 65 copies were refused for room and a process started later was never
/// loaded): the copies' tables are released within 5 s of the churn's end, the copies kept
/// mapped at once hold at most half the rows (the others counted `over_share`), and the honest
/// program exec'ed afterwards is loaded and every sample in `leaf` has its exact stack.
#[test]
fn unmapped_copies_are_released_and_one_process_gets_a_share() {
    privileged_test!(paired);
    let dir = sticky_dir();
    let src = dir.path().join("plugin.c");
    std::fs::write(&src, plugin_source()).expect("write the plugin");
    let plugin = gcc(
        &src,
        &dir.path().join("plugin.so"),
        &[&SFRAME_CFLAGS[..], &["-shared", "-fPIC"]].concat(),
    );
    let compile = |name: &str, source: &str, extra: &[&str]| {
        let src = dir.path().join(format!("{name}.c"));
        std::fs::write(&src, source).expect("write a program");
        gcc(&src, &dir.path().join(name), &[&SFRAME_CFLAGS[..], extra].concat())
    };
    let attacker_bin = compile("attacker", ATTACKER, &[]);
    let honest_name = own_name(dir.path(), "honest");
    let honest = compile(&honest_name, HONEST, &[]);
    for file in [&plugin, &attacker_bin, &honest] {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let mut attacker = as_nobody(&[
        attacker_bin.as_os_str(),
        plugin.as_os_str(),
        CHURN.to_string().as_ref(),
        HOARD.to_string().as_ref(),
    ])
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .spawn()
    .expect("start the attacker");
    let mut attacker_in = attacker.stdin.take().expect("stdin");
    let attacker_said = lines_of(&mut attacker);
    let attacker = Running(attacker);
    // The honest program, exec'ed by a shell once told.
    let mut launcher = as_nobody(&[
        "sh".as_ref(),
        "-c".as_ref(),
        "read go; exec \"$0\"".as_ref(),
        honest.as_os_str(),
    ])
    .stdin(Stdio::piped())
    .spawn()
    .expect("start the launcher");
    let mut launcher_in = launcher.stdin.take().expect("stdin");
    let launcher = Running(launcher);
    let out = dir.path().join("out.folded");
    let pids = format!("{},{}", attacker.pid(), launcher.pid());
    let mut tracer = Tracer::start_logging(
        &[
            SUMMARY_JSON[0],
            SUMMARY_JSON[1],
            "--no-kernel",
            "--max-table-memory",
            TABLE_MEMORY,
            "-F",
            "499",
            "--pid",
            &pids,
            "-o",
            out.to_str().expect("a UTF-8 path"),
        ],
        "sframe_trace::tables=debug,sframe_trace::load",
    );
    tracer.drain();
    let at_start = tracer
        .stderr
        .iter()
        .rev()
        .find_map(|l| tables_line(l))
        .unwrap_or_else(|| panic!("no tables line at the start: {}", tracer.stderr.join("\n")))
        .0;

    // Map, run and unmap: the copies' tables go within seconds of the last unmap (a named
    // file's table would stay for 10 s).
    step(&mut attacker_in, &attacker_said, "churned");
    let churned = Instant::now();
    tracer.drain();
    let most = tracer
        .stderr
        .iter()
        .filter_map(|l| tables_line(l))
        .map(|(n, _)| n)
        .max()
        .unwrap_or(0);
    assert!(most > at_start, "no copy was ever loaded: {}", tracer.stderr.join("\n"));
    let mut rows_after = 0;
    // Released within 8 s of the churn's end (a named file's table stays 10 s), unless they
    // are already (a last copy unmapped before the tracer read it was never loaded).
    match tracer.stderr.iter().rev().find_map(|l| tables_line(l)) {
        Some((n, rows)) if n <= at_start => rows_after = rows,
        _ => {
            let limit = Duration::from_secs(8).saturating_sub(churned.elapsed());
            tracer.wait_within("released the copies' tables", limit, |line| match tables_line(line) {
                Some((n, rows)) if n <= at_start => {
                    rows_after = rows;
                    true
                }
                _ => false,
            });
        }
    }
    assert!(
        most <= at_start + (CHURN as u64) / 2,
        "{most} tables loaded at once during the churn (from {at_start})"
    );

    // Keep many mapped at once: the copies past half the rows are refused.
    step(&mut attacker_in, &attacker_said, "hoarded");
    let seen = tracer.stderr.len();
    tracer.wait_within("refused a copy over its share", LIMIT, |line| {
        line.contains("over share: process")
    });
    tracer.drain();
    let hoarded = tracer.stderr[seen..]
        .iter()
        .filter_map(|l| tables_line(l))
        .map(|(_, rows)| rows)
        .max()
        .unwrap_or(rows_after);
    // The launcher's program starts: it is loaded, and unwound exactly.
    launcher_in.write_all(b"go\n").expect("tell the launcher");
    drop(launcher_in);
    let loaded = format!("pid {} loaded", launcher.pid());
    tracer.wait_within("loaded the honest program", LIMIT, |line| line.ends_with(&loaded));
    wait_for_cpu(launcher.pid(), ticks_per_second());
    drop(attacker_in);
    let stderr = tracer.interrupt();
    let summary = Summary::of(&stderr);
    assert!(
        summary.count("tables.without_by_reason.over_share") > 0,
        "no copy counted over the share: {stderr}"
    );
    assert!(summary.count("processes.unloaded") > 0, "{stderr}");
    // Rows are 4 bytes, and most of the table maps' bytes: the copies held at once take at
    // most half of them.
    let capacity = summary.count("tables.capacity_bytes");
    let taken = hoarded.saturating_sub(rows_after) * 4;
    eprintln!(
        "tables at the start {at_start}, at most {most} in the churn; rows {rows_after} after it, {hoarded} hoarded; \
         {} refused over the share, {} unloaded; {capacity} bytes of table maps",
        summary.count("tables.without_by_reason.over_share"),
        summary.count("processes.unloaded"),
    );
    assert!(
        taken <= capacity / 2,
        "the copies kept mapped took {taken} bytes of rows, of {capacity} bytes of table maps"
    );
    judge_honest(&out, &honest_name);
}

/// Every sample of the honest program in `leaf` is `_start` … `main;mid;leaf` (glibc's entry
/// named by either of its names), and there are some.
fn judge_honest(out: &Path, name: &str) {
    let comm: String = name.chars().take(15).collect();
    let text = std::fs::read_to_string(out).expect("read the output");
    let exact = ["__libc_start_main", "__libc_start_main_impl"]
        .map(|entry| format!("{comm};_start;{entry};__libc_start_call_main;main;mid;leaf"));
    let mut good = 0;
    for line in text.lines().filter(|l| l.starts_with(&format!("{comm};"))) {
        let (stack, count) = line.rsplit_once(' ').expect("a folded line");
        if stack.ends_with(";leaf") {
            assert!(
                exact.iter().any(|e| e == stack),
                "a wrong stack of the honest program: {stack}"
            );
            good += count.parse::<u64>().expect("a count");
        }
    }
    assert!(good > 0, "no sample of the honest program in leaf: {text}");
}
