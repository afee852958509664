//! The in-kernel walker end to end: programs compiled here spin in `main -> a -> b -> c`; their
//! tables are built from `/proc/PID/maps` as the tracer does, the real eBPF program samples them,
//! and every user stack is checked against the known call chain (symbols from `nm`). They need
//! root; under `CI=true` they fail instead of skipping, elsewhere they skip with a loud message.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sframe_trace::bpf::Kernel;
use sframe_trace::procmaps::{MappingKind, executable_mappings};
use sframe_trace::registry::Catalog;
use sframe_trace::tables::TableSet;
use tracer_common::{
    sample::Sample,
    trace::{ExecMapping, SOURCE_FP},
};

use crate::support::{Running, SFRAME_CFLAGS, gcc};
use tracer_common::walk::StopReason;

/// The program: `c` spins (volatile work, so it stays in `c`; with `-DSYSCALLS` it mostly
/// waits in `getppid`'s system call), every call is a real call. `main` says `ready` first:
/// its mappings are then final (the dynamic loader is done), and the test reads them. `c`'s counter lives on the
/// stack so that `c` gets a frame pointer when built with them: gcc gives a leaf that uses no
/// stack none, hiding its caller from any frame-pointer unwinder.
const SOURCE: &str = r#"
#include <unistd.h>
volatile unsigned long sink;
volatile int forever = 1;
__attribute__((noinline)) void c(void) {
    for (volatile unsigned long i = 0; i < 100000000UL && forever; i++) {
        sink += i;
#ifdef SYSCALLS
        sink += getppid();
#endif
    }
}
__attribute__((noinline)) void b(void) { c(); sink++; }
__attribute__((noinline)) void a(void) { b(); sink++; }
int main(void) {
    if (write(1, "ready\n", 6) != 6) return 1;
    while (forever) a();
    return 0;
}
"#;

/// No `.eh_frame` either: the registry builds a table from whatever unwind information an
/// object has, and gcc emits `.eh_frame` unless told not to, so a build "without SFrame" is
/// not one without unwind information.
const NO_UNWIND_TABLES: &[&str] = &["-fno-asynchronous-unwind-tables", "-fno-unwind-tables"];

/// Flags shared by every build: calls stay calls.
const COMMON: &[&str] = &["-O2", "-fno-optimize-sibling-calls"];

/// Compile [`SOURCE`] with `flags` (after [`COMMON`]) into `dir/name`.
fn compile(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join("chain.c");
    std::fs::write(&src, SOURCE).expect("write source");
    gcc(&src, &dir.join(name), &[COMMON, flags].concat())
}

/// The function symbols of `exe`: `(object-relative start, size, name)`.
fn functions(exe: &Path) -> Vec<(u64, u64, String)> {
    let out = Command::new("nm")
        .args(["-S", "--defined-only"])
        .arg(exe)
        .output()
        .expect("run nm");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (addr, size, kind, name) = (f.next()?, f.next()?, f.next()?, f.next()?);
            let kind = kind.chars().next()?;
            (kind == 't' || kind == 'T').then_some(())?;
            Some((
                u64::from_str_radix(addr, 16).ok()?,
                u64::from_str_radix(size, 16).ok()?,
                name.to_owned(),
            ))
        })
        .collect()
}

/// A traced process: its mappings as loaded, and how to name its frames.
struct Traced {
    mappings: Vec<ExecMapping>,
    /// `[start, end)` and bias of the executable's own mappings.
    exe: Vec<(u64, u64, u64)>,
    symbols: Vec<(u64, u64, String)>,
}

impl Traced {
    /// The function of the executable holding runtime address `addr`, `None` outside it.
    fn function(&self, addr: u64) -> Option<&str> {
        let &(_, _, bias) = self.exe.iter().find(|&&(s, e, _)| (s..e).contains(&addr))?;
        let rel = addr.wrapping_sub(bias);
        let found = self
            .symbols
            .iter()
            .find(|(start, size, _)| (*start..start + size.max(&1)).contains(&rel));
        Some(found.map_or("?", |(_, _, name)| name.as_str()))
    }

    /// Names of the user frames: frame 0 at its pc, callers at `ra - 1`; `None` outside the
    /// executable.
    fn names(&self, sample: &Sample) -> Vec<Option<&str>> {
        let n = (sample.num_user as usize).min(sample.user.len());
        (0..n)
            .map(|i| self.function(if i == 0 { sample.user[i] } else { sample.user[i] - 1 }))
            .collect()
    }
}

/// Register `pid` with the tracer's own registry, as the session does: each mapped object's
/// table (`.sframe`, else `.eh_frame`; none without either) and the process's mappings.
fn tables_for(pid: u32, exe: &Path) -> (Catalog, Traced) {
    let mut catalog = Catalog::with_tables(TableSet::new());
    let exe = exe.canonicalize().expect("canonical exe path");
    let found = executable_mappings(pid).expect("read mappings");
    let exe_ranges: Vec<(u64, u64, u64)> = found
        .iter()
        .filter(|m| m.path == exe)
        .filter_map(|m| match &m.kind {
            MappingKind::File { bias, .. } => Some((m.start, m.end, *bias)),
            _ => None,
        })
        .collect();
    assert!(!exe_ranges.is_empty(), "the executable is not mapped");
    let mappings = catalog.add_process(pid, &found);
    let traced = Traced {
        mappings,
        exe: exe_ranges,
        symbols: functions(&exe),
    };
    (catalog, traced)
}

/// Wait for the program's `ready` line (it reached `main`).
fn wait_ready(program: &mut Running) {
    use std::io::BufRead as _;
    let stdout = program.0.stdout.take().expect("piped stdout");
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the program's stdout");
    assert_eq!(line, "ready\n", "the program did not reach main");
}

/// What one traced run produced.
struct Run {
    samples: Vec<Sample>,
    stops: BTreeMap<&'static str, u64>,
    counters: BTreeMap<&'static str, u64>,
    traced: Traced,
    /// `/proc/PID/maps` as the run ended, for [`explain`].
    maps_at_end: String,
}

/// Start `exe`, trace it for about a second, and return its samples.
/// Samples a [`trace`] collects: about a second of the program's CPU time at 499 Hz.
const SAMPLES: usize = 450;
/// How long a [`trace`] waits for them at most (a host busy with other work gives the program
/// a fraction of a CPU).
const PATIENCE: Duration = Duration::from_secs(60);

fn trace(exe: &Path, kernel_stacks: bool) -> Run {
    let child = Command::new(exe)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the program");
    let mut spinner = Running(child);
    // Its mappings are read once, as the tracer reads a process's before it traces it; the
    // tracer reads them again when the loader maps more code, this test does not: it waits
    // until the loader is done (CPU time used says nothing of that under emulation on a busy
    // host, where the guest's clock runs while it waits for a host CPU).
    wait_ready(&mut spinner);
    spinner.wait_working(exe);
    let pid = spinner.0.id();
    let (mut catalog, traced) = tables_for(pid, exe);
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let (mut samples, stops, counters) = runtime.block_on(async {
        let config = crate::support::kernel_config(64, kernel_stacks);
        let mut kernel = Kernel::load(&config, &mut catalog.loader.tables).expect("load the eBPF program");
        for (program, instructions) in kernel.program_sizes().expect("program info") {
            eprintln!("{program}: {instructions} instructions verified");
            assert!(
                instructions < 100_000,
                "{program} needs {instructions} verifier instructions"
            );
        }
        kernel.set_process(pid, &traced.mappings).expect("set the process");
        let mut events = kernel.events().expect("events");
        kernel.attach().expect("attach");
        // Samples of about a second of the program's CPU time, however busy the host (the
        // program shares it): at 499 Hz, until `SAMPLES` came, or `PATIENCE` passed.
        let mut samples = Vec::new();
        let end = Instant::now() + PATIENCE;
        while samples.len() < SAMPLES
            && let Ok(Some(sample)) = tokio::time::timeout_at(end.into(), events.next()).await
        {
            samples.push(*sample);
        }
        kernel.detach();
        while let Some(sample) = events.try_next() {
            samples.push(*sample);
        }
        let stops: BTreeMap<_, _> = kernel
            .stop_reasons()
            .expect("stop reasons")
            .into_iter()
            .filter(|&(_, n)| n > 0)
            .map(|(r, n)| (r.name(), n))
            .collect();
        let counters: BTreeMap<_, _> = kernel
            .counters()
            .expect("counters")
            .into_iter()
            .map(|(c, n)| (c.name(), n))
            .collect();
        (samples, stops, counters)
    });
    let maps_at_end = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    drop(spinner);
    samples.retain(|s| s.tgid == pid);
    Run {
        samples,
        stops,
        counters,
        traced,
        maps_at_end,
    }
}

/// The real caller of each function of the program. `?` is code of the executable without a
/// symbol: the PLT stub of `getppid`, which only `c` calls.
fn caller(function: &str) -> Option<&'static str> {
    match function {
        "?" => Some("c"),
        "c" => Some("b"),
        "b" => Some("a"),
        "a" => Some("main"),
        _ => None,
    }
}

/// Every frame is the real caller of the frame below it as far as the executable tells:
/// (libc's `getppid`, then) `c -> b -> a -> main`, then only frames outside the executable
/// (libc) or `_start`. Returns the violation.
fn check_chain(names: &[Option<&str>]) -> Result<(), String> {
    for pair in names.windows(2) {
        let (callee, found) = (pair[0], pair[1]);
        let ok = match (callee, found) {
            (Some(f), None) => caller(f).is_none(),
            (Some(f), Some(g)) => caller(f) == Some(g),
            // Outside the executable: libc, called by `c` alone (getppid), or by `_start`.
            (None, Some(g)) => g == "_start" || g == "c",
            (None, None) => true,
        };
        if !ok {
            return Err(format!("{found:?} is not the caller of {callee:?} in {names:?}"));
        }
    }
    Ok(())
}

/// Samples whose first frames read exactly `c, b, a, main`, out of those sampled in `c`.
fn complete_chains(run: &Run) -> (usize, usize) {
    let in_c: Vec<_> = run
        .samples
        .iter()
        .map(|s| run.traced.names(s))
        .filter(|names| names.first() == Some(&Some("c")))
        .collect();
    let full = [Some("c"), Some("b"), Some("a"), Some("main")];
    let complete = in_c.iter().filter(|names| names.starts_with(&full)).count();
    (complete, in_c.len())
}

fn report(what: &str, run: &Run) {
    let depths: BTreeMap<u32, usize> = run.samples.iter().fold(BTreeMap::new(), |mut m, s| {
        *m.entry(s.num_user).or_default() += 1;
        m
    });
    eprintln!(
        "{what}: {} samples, depths {depths:?}, stops {:?}",
        run.samples.len(),
        run.stops
    );
    if let Some(s) = run.samples.first() {
        eprintln!("  e.g. {:?}", run.traced.names(s));
    }
}

/// What a failed judgement needs: the mappings the kernel had, those the process had at the
/// end, the counters, and the first samples that did not reach `main` with their registers.
fn explain(run: &Run) -> String {
    use std::fmt::Write as _;
    let mut out = String::from("mappings given to the kernel (start end bias object):\n");
    for m in &run.traced.mappings {
        let _ = writeln!(out, "  {:#x} {:#x} {:#x} {}", m.start, m.end, m.bias, m.object);
    }
    let _ = writeln!(out, "/proc/PID/maps at the end:\n{}", run.maps_at_end);
    let _ = writeln!(out, "counters: {:?}", run.counters);
    let full = [Some("c"), Some("b"), Some("a"), Some("main")];
    for s in run
        .samples
        .iter()
        .filter(|s| !run.traced.names(s).starts_with(&full))
        .take(3)
    {
        let n = (s.num_user as usize).min(s.user.len());
        let _ = writeln!(
            out,
            "sample: stop {} frames {:x?} names {:?} copy regs {:x?} ({} words)",
            s.stop,
            &s.user[..n],
            run.traced.names(s),
            s.copy.regs,
            s.copy.len
        );
    }
    out
}

/// With SFrame and no frame pointers, most samples unwind exactly through c, b, a, main, and no
/// walk ever records a frame that is not the real caller.
#[test]
fn sframe_stacks_are_exact() {
    privileged_test!(paired);
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile(dir.path(), "sframe", &SFRAME_CFLAGS);
    let run = trace(&exe, false);
    report("sframe", &run);
    // ~499 on an idle machine; the rest of the suite may take part of the CPU meanwhile.
    assert!(run.samples.len() >= 50, "too few samples: {}", run.samples.len());
    for s in &run.samples {
        check_chain(&run.traced.names(s)).unwrap_or_else(|e| panic!("invented frame: {e}"));
        assert!(StopReason::try_from(s.stop).is_ok(), "stop code {}", s.stop);
    }
    let (complete, in_c) = complete_chains(&run);
    assert!(
        complete * 10 >= in_c * 9 && in_c * 2 >= run.samples.len(),
        "only {complete} of {in_c} samples in c unwound to main ({} samples)\n{}",
        run.samples.len(),
        explain(&run)
    );
    assert!(run.stops.values().sum::<u64>() >= run.samples.len() as u64);
}

/// Frame pointers in every function. aarch64 gcc leaves leaf functions without a frame
/// record even then (`-momit-leaf-frame-pointer` is its default), and a frame-pointer walk
/// cannot prove whose record x29 points at in such a leaf (`tracer_common::walk`'s
/// `frame_pointer.rs`): `c` gets one explicitly.
#[cfg(target_arch = "x86_64")]
const FRAME_POINTERS: &[&str] = &["-fno-omit-frame-pointer"];
#[cfg(target_arch = "aarch64")]
const FRAME_POINTERS: &[&str] = &["-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer"];

/// Without unwind information but with frame pointers, the fallback finds the same chain and
/// marks every caller it found from the executable's frames as a frame-pointer frame.
#[test]
fn frame_pointer_fallback_finds_the_chain() {
    privileged_test!(paired);
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile(dir.path(), "fp", &[FRAME_POINTERS, NO_UNWIND_TABLES].concat());
    let run = trace(&exe, false);
    report("frame pointers", &run);
    // ~499 on an idle machine; the rest of the suite may take part of the CPU meanwhile.
    assert!(run.samples.len() >= 50, "too few samples: {}", run.samples.len());
    for s in &run.samples {
        // Each caller found by unwinding a frame of the executable (which has no table):
        // libc's frames have their `.eh_frame`.
        let n = s.num_user as usize;
        let in_exe = |addr: u64| {
            run.traced
                .exe
                .iter()
                .any(|&(start, end, _)| (start..end).contains(&addr))
        };
        assert!(
            (1..n)
                .filter(|&i| in_exe(s.user[i - 1]))
                .all(|i| s.user_source[i] == SOURCE_FP),
            "not all FP: {:?}",
            &s.user_source[..n]
        );
    }
    let (complete, in_c) = complete_chains(&run);
    assert!(
        complete * 10 >= in_c * 9 && in_c * 2 >= run.samples.len(),
        "only {complete} of {in_c} samples in c unwound to main\n{}",
        explain(&run)
    );
}

/// Without SFrame and without frame pointers there is nothing to unwind with: stacks are
/// truncated, but no walk records a frame that is not the real caller. (On aarch64 x29 then
/// still points at a frame record of libc's, `__libc_start_call_main`'s: following it from `c`
/// would skip `b`, `a` and `main`.)
#[test]
fn no_unwind_info_truncates_but_never_invents() {
    privileged_test!(paired);
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile(
        dir.path(),
        "bare",
        &[&["-fomit-frame-pointer"], NO_UNWIND_TABLES].concat(),
    );
    let run = trace(&exe, false);
    report("no unwind info", &run);
    // ~499 on an idle machine; the rest of the suite may take part of the CPU meanwhile.
    assert!(run.samples.len() >= 50, "too few samples: {}", run.samples.len());
    for s in &run.samples {
        check_chain(&run.traced.names(s)).unwrap_or_else(|e| panic!("invented frame: {e}"));
    }
    let (complete, _) = complete_chains(&run);
    assert!(
        complete * 10 <= run.samples.len(),
        "{complete} complete stacks without unwind info?"
    );
}

/// Samples that hit the kernel (mostly in a system call) carry the kernel stack, and their user
/// stack starts (mostly in libc) from the task's saved user registers, without invented frames; kernels
/// without `bpf_task_pt_regs` count them as `no_user_regs` instead.
#[test]
fn kernel_samples_have_both_stacks() {
    privileged_test!(paired);
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile(dir.path(), "syscalls", &[&SFRAME_CFLAGS[..], &["-DSYSCALLS"]].concat());
    let run = trace(&exe, true);
    report("system calls", &run);
    for s in &run.samples {
        check_chain(&run.traced.names(s)).unwrap_or_else(|e| panic!("invented frame: {e}"));
    }
    let in_kernel: Vec<_> = run.samples.iter().filter(|s| s.num_kernel > 0).collect();
    let task_regs = aya::sys::is_helper_supported(
        aya::programs::ProgramType::PerfEvent,
        aya::sys::BpfHelper::BPF_FUNC_task_pt_regs,
    )
    .expect("probe bpf_task_pt_regs");
    if !task_regs {
        assert!(
            run.counters["no_user_regs"] >= 100,
            "kernel-mode samples: {:?}",
            run.counters
        );
        return;
    }
    // Every sample that interrupted the kernel has its kernel stack.
    assert_eq!(run.counters["kernel_stack_failed"], 0, "{:?}", run.counters);
    // The program spends most of its time in system calls. On aarch64 (seen under qemu: 63 of
    // 160 and 49 of 389 samples) most samples still land in user mode, at libc's system-call
    // wrapper: `getppid` runs with interrupts unmasked only briefly, and a timer interrupt that
    // arrives during the entry or exit, where they are masked, is taken after the return to
    // user mode (the likely reason: `kernel_stack_failed` stays 0). There the samples in the kernel and those at libc's wrapper make the bulk,
    // and some interrupt the kernel.
    let user_in_libc = run
        .samples
        .iter()
        .filter(|s| s.num_kernel == 0 && run.traced.names(s).first() == Some(&None))
        .count();
    eprintln!(
        "  {} with a kernel stack, {user_in_libc} user-mode in libc, counters {:?}",
        in_kernel.len(),
        run.counters
    );
    let enough = if cfg!(target_arch = "aarch64") {
        (in_kernel.len() + user_in_libc) * 10 >= run.samples.len() * 8 && in_kernel.len() >= 10
    } else {
        in_kernel.len() >= 100
    };
    assert!(
        enough,
        "only {} of {} samples with a kernel stack ({user_in_libc} user-mode ones in libc)",
        in_kernel.len(),
        run.samples.len()
    );
    // Most kernel-mode samples interrupt a system call, whose user pc is in libc; a few
    // interrupt an interrupt taken in the program's own loop (more under emulation, where
    // interrupts are slow), with the program's pc: sound either way (checked above).
    let in_libc = in_kernel.iter().filter(|s| run.traced.names(s)[0].is_none()).count();
    assert!(
        in_libc * 10 >= in_kernel.len() * 8,
        "only {in_libc} of {} kernel-mode samples have their user pc in libc",
        in_kernel.len()
    );
}
