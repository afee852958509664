//! Stacks on events (`-e`), end to end: the fixtures/events workload (no frame pointers, SFrame)
//! is started paused, the tracer attaches with `--pid` and one event, the workload runs its
//! known chains a known number of times and exits, and the stacks of the event must be exactly
//! those chains with exactly those counts: a uprobe and a uretprobe on `target` (called through
//! `a -> b` and through `c`), a kprobe on the `getppid` system call and the
//! `sched_process_fork` tracepoint (user and kernel stacks), and off-CPU time in
//! `main -> sleeper -> nap` with each sample weighing about the time slept. Privileged, like
//! every tracing test.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use sframe_trace::{
    bpf::{Kernel, KernelConfig},
    event::EventSet,
};

use sframe_trace::tables::TableSet;

use crate::support::{Running, Tracer, compile_fixture, tracer_binary};

/// The counts of fixtures/events/events.c.
const TARGET_VIA_B: u64 = 300;
const TARGET_VIA_C: u64 = 200;
const PPID_CALLS: u64 = 50;
const FORKS: u64 = 20;
const NAPS: usize = 5;
const NAP_NS: u64 = 50_000_000;

/// The workload, built in a temporary directory.
struct Workload {
    dir: tempfile::TempDir,
}

impl Workload {
    fn build() -> Workload {
        let dir = tempfile::tempdir().expect("tempdir");
        compile_fixture("events/events", &dir.path().join("events"), &[]);
        Workload { dir }
    }

    fn exe(&self) -> PathBuf {
        self.dir.path().join("events")
    }

    /// Start the workload (paused on stdin once loaded), trace it with `sframe-trace --pid PID ARGS -o OUT`,
    /// let it run and end, and return the tracer's output and stderr.
    fn trace(&self, args: &[&str]) -> (String, String) {
        self.trace_through(&[], args)
    }

    /// [`Workload::trace`] with the tracer started through `launcher` (a command that ends by
    /// running its arguments).
    fn trace_through(&self, launcher: &[&str], args: &[&str]) -> (String, String) {
        let mut workload = Running(
            Command::new(self.exe())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("start the workload"),
        );
        // Loaded (its libraries mapped) once it says so; the tracer reads its mappings then.
        let mut ready = [0u8];
        let mut stdout = workload.0.stdout.take().expect("stdout");
        std::io::Read::read_exact(&mut stdout, &mut ready).expect("the workload's ready byte");
        let output = self.dir.path().join("out");
        let pid = workload.pid().to_string();
        let output_arg = output.to_str().expect("utf-8 path");
        let mut full = vec!["--pid", &pid, "-o", output_arg];
        full.extend(args);
        let tracer = match launcher.split_first() {
            None => Tracer::start(&full),
            Some((program, launcher_args)) => {
                let mut command = Command::new(program);
                command.args(launcher_args).arg(tracer_binary()).args(&full);
                Tracer::spawn(command)
            }
        };
        let mut stdin = workload.0.stdin.take().expect("stdin");
        stdin.write_all(b"x").expect("start the workload");
        drop(stdin);
        let stderr = tracer.finish();
        let _ = workload.0.wait();
        let text = std::fs::read_to_string(&output).expect("read the output");
        (text, stderr)
    }
}

/// Folded lines as (frames, count).
fn folded(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .map(|line| {
            let (stack, count) = line.rsplit_once(' ').expect("STACK COUNT");
            (stack.to_owned(), count.parse().expect("count"))
        })
        .collect()
}

/// The summed count of the lines `pick` accepts.
fn count(lines: &[(String, u64)], pick: impl Fn(&str) -> bool) -> u64 {
    lines.iter().filter(|(stack, _)| pick(stack)).map(|(_, n)| n).sum()
}

/// Every event's programs load (each kind's entry program and walker copy; offcpu where the
/// kernel has `bpf_task_pt_regs`) and stay far from the verifier's limits, and the cpu-clock
/// walker is the one with VMA lookups wherever the kernel has `bpf_find_vma` (regression: on
/// 7.2 the verifier gave up on `walk_user_vma` at its 1M-instruction limit after 53 s, and the
/// tracer silently fell back to the walker without lookups).
#[test]
fn event_programs_load_within_limits() {
    privileged_test!();
    let task_regs = aya::sys::is_helper_supported(
        aya::programs::ProgramType::RawTracePoint,
        aya::sys::BpfHelper::BPF_FUNC_task_pt_regs,
    )
    .expect("probe bpf_task_pt_regs");
    let find_vma = [
        aya::sys::BpfHelper::BPF_FUNC_get_current_task_btf,
        aya::sys::BpfHelper::BPF_FUNC_find_vma,
    ]
    .into_iter()
    .all(|helper| {
        aya::sys::is_helper_supported(aya::programs::ProgramType::PerfEvent, helper).expect("probe a helper")
    });
    let mut specs: Vec<String> = [
        "cpu-clock",
        "uprobe:/bin/true:main",
        "uretprobe:/bin/true:main",
        "kprobe:do_nanosleep",
        "tracepoint:syscalls:sys_enter_getppid",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    if task_regs {
        specs.push("offcpu".to_owned());
    }
    let events = EventSet::parse(&specs, None).expect("events");
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    runtime.block_on(async {
        let config = KernelConfig {
            frequency: 99,
            max_depth: 64,
            kernel_stacks: true,
            all_processes: false,
            max_processes: 4,
            table_capacity: None,
            events,
            ring_buffer_bytes: sframe_trace::bpf::DEFAULT_RING_BUFFER_BYTES,
            copy_stacks: false,
        };
        let kernel = Kernel::load(&config, &mut TableSet::new()).expect("load every event's programs");
        let sizes = kernel.program_sizes().expect("program info");
        if find_vma && std::env::var_os(sframe_trace::bpf::NO_FIND_VMA).is_none() {
            assert!(
                sizes.iter().any(|(name, _)| *name == tracer_common::vma::PROG_WALK_VMA),
                "the kernel has bpf_find_vma, yet the walker with VMA lookups did not load ({}): {sizes:?}",
                kernel.vma_lookups().err().unwrap_or("no reason given")
            );
            // So does the tracepoint walker (stacks at exit and exec, tracepoint events).
            assert!(
                sizes
                    .iter()
                    .any(|(name, _)| *name == tracer_common::event::PROG_WALK_TRACEPOINT_VMA),
                "the tracepoint walker with VMA lookups did not load: {sizes:?}"
            );
        }
        // cpu-clock's two; the walkers of probes and tracepoints; four entry programs; offcpu's two.
        assert_eq!(sizes.len(), 2 + 2 + 4 + 2 * usize::from(task_regs), "{sizes:?}");
        for (program, instructions) in sizes {
            eprintln!("{program}: {instructions} instructions verified");
            assert!(
                instructions < 100_000,
                "{program} needs {instructions} verifier instructions"
            );
        }
    });
}

/// Whether the kernel has kprobes; says loudly that the test is skipped when not.
fn has_kprobes(test: &str) -> bool {
    if Path::new("/sys/bus/event_source/devices/kprobe").exists() {
        return true;
    }
    crate::support::skipped(test, "this kernel has no kprobes (CONFIG_KPROBES); vm-test runs it");
    false
}

/// A uprobe on `target` records its two true caller chains, complete down to `_start`, each
/// exactly as often as it was called, and nothing else.
#[test]
fn uprobe_records_the_exact_callers() {
    privileged_test!();
    let workload = Workload::build();
    let spec = format!("uprobe:{}:target", workload.exe().display());
    let (text, stderr) = workload.trace(&["-e", &spec]);
    let lines = folded(&text);
    let via_b = count(&lines, |s| {
        s.starts_with("events;_start;") && s.ends_with(";main;a;b;target")
    });
    let via_c = count(&lines, |s| {
        s.starts_with("events;_start;") && s.ends_with(";main;c;target")
    });
    assert_eq!(
        (via_b, via_c),
        (TARGET_VIA_B, TARGET_VIA_C),
        "stacks:\n{text}\n{stderr}"
    );
    assert_eq!(
        count(&lines, |_| true),
        TARGET_VIA_B + TARGET_VIA_C,
        "other stacks:\n{text}"
    );
    assert!(
        stderr.contains(&format!(" on {spec};")),
        "the first line names the event: {stderr}"
    );
}

/// A uretprobe on `target` takes the stack where it returns to: in `b` (under `a`) and in `c`.
#[test]
fn uretprobe_records_the_returns() {
    privileged_test!();
    let workload = Workload::build();
    let spec = format!("uretprobe:{}:target", workload.exe().display());
    let (text, stderr) = workload.trace(&["-e", &spec]);
    let lines = folded(&text);
    let in_b = count(&lines, |s| s.starts_with("events;_start;") && s.ends_with(";main;a;b"));
    let in_c = count(&lines, |s| s.starts_with("events;_start;") && s.ends_with(";main;c"));
    assert_eq!((in_b, in_c), (TARGET_VIA_B, TARGET_VIA_C), "stacks:\n{text}\n{stderr}");
    assert_eq!(
        count(&lines, |_| true),
        TARGET_VIA_B + TARGET_VIA_C,
        "other stacks:\n{text}"
    );
}

/// System calls from `main -> caller`, `calls` of them: the user stack down to `_start`
/// (through libc's `.eh_frame`) and the kernel stack from the system-call entry to the
/// innermost kernel function, which `hit` accepts.
fn check_syscall_stacks(text: &str, stderr: &str, caller: &str, calls: u64, hit: impl Fn(&str) -> bool) {
    let lines = folded(text);
    let (entry, dispatch) = SYSCALL_ENTRY;
    let exact = count(&lines, |s| {
        let Some((user, kernel)) = s.split_once(&format!(";{entry}")) else {
            return false;
        };
        user.starts_with("events;_start;")
            && user.contains(&format!(";main;{caller};"))
            && kernel.contains(&format!(";{dispatch};"))
            && kernel.rsplit(';').next().is_some_and(&hit)
    });
    assert_eq!(exact, calls, "stacks:\n{text}\n{stderr}");
    assert_eq!(count(&lines, |_| true), calls, "other stacks:\n{text}");
}

/// The outermost kernel frame of a system call on this architecture (the first after the user
/// frames), and the system-call dispatch frame the kernel stack must pass through: x86-64's
/// `syscall` entry and `do_syscall_64`; aarch64's synchronous exception vector from 64-bit user
/// mode and its supervisor-call handler (`el0t_64_sync;el0t_64_sync_handler;el0_svc;...`).
#[cfg(target_arch = "x86_64")]
const SYSCALL_ENTRY: (&str, &str) = ("entry_SYSCALL_64", "do_syscall_64");
#[cfg(target_arch = "aarch64")]
const SYSCALL_ENTRY: (&str, &str) = ("el0t_64_sync", "el0_svc");

/// The kernel's entry of the `getppid` system call on this architecture.
#[cfg(target_arch = "x86_64")]
const GETPPID_KPROBE: &str = "kprobe:__x64_sys_getppid";
#[cfg(target_arch = "aarch64")]
const GETPPID_KPROBE: &str = "kprobe:__arm64_sys_getppid";

/// A kprobe on the `getppid` system call has both stacks, once per call.
#[test]
fn kprobe_has_user_and_kernel_stacks() {
    privileged_test!();
    if !has_kprobes("kprobe_has_user_and_kernel_stacks") {
        return;
    }
    let workload = Workload::build();
    let (text, stderr) = workload.trace(&["-e", GETPPID_KPROBE]);
    // The probed function, or the one it is an alias of (`__do_sys_getppid` on 6.1).
    check_syscall_stacks(&text, &stderr, "pp", PPID_CALLS, |innermost| {
        innermost.ends_with("sys_getppid")
    });
}

/// The `sched:sched_process_fork` tracepoint has both stacks, once per fork, the innermost
/// kernel frame in `kernel_clone`: the tracer's own machinery (its program, the tracepoint's
/// perf glue) is not part of them. (Not a `syscalls:` tracepoint: before 6.x their programs
/// get the user registers of the system call, and so no kernel stack.)
#[test]
fn tracepoint_has_user_and_kernel_stacks() {
    privileged_test!();
    let workload = Workload::build();
    let (text, stderr) = workload.trace(&["-e", "tracepoint:sched:sched_process_fork"]);
    check_syscall_stacks(&text, &stderr, "forker", FORKS, |innermost| innermost == "kernel_clone");
}

/// Runs its arguments in a private mount namespace without tracefs: every tracefs and debugfs
/// mount unmounted, and checked gone (exit 97 otherwise).
const WITHOUT_TRACEFS: &str = r#"
for _ in 1 2 3 4 5; do
    grep -E ' (/sys/kernel/tracing|/sys/kernel/debug)[/ ]' /proc/self/mountinfo | cut -d' ' -f5 | sort -r |
        while read -r mount; do umount -l "$mount"; done
done
if grep -qE ' - (tracefs|debugfs) ' /proc/self/mountinfo \
    || [ -e /sys/kernel/tracing/events ] || [ -e /sys/kernel/debug/tracing/events ]; then
    echo "tracefs is still mounted" >&2
    exit 97
fi
exec "$@"
"#;

/// The tracer's stderr says it mounted tracefs itself, and warns of nothing about it (nor about
/// the `munmap` tracepoints, which attach through it).
fn assert_mounted_tracefs_quietly(stderr: &str) {
    assert!(
        stderr.contains("sframe-trace: mounted tracefs at /sys/kernel/tracing"),
        "tracefs was not mounted by the tracer: {stderr}"
    );
    for line in stderr.lines() {
        assert!(
            !line.contains("munmap") && (!line.contains("tracefs") || line.contains("mounted tracefs at")),
            "a warning about tracefs: {line}\n{stderr}"
        );
    }
}

/// Regression (a tracepoint event failed with "tracefs not found" right after the tracer
/// mounted tracefs, because the `munmap` tracepoints were attached before the mount and the
/// miss was remembered): in a mount namespace where tracefs is not mounted, a tracepoint event
/// attaches and has its exact stacks, and plain sampling samples, both without a warning.
#[test]
fn tracefs_is_mounted_before_the_first_attach() {
    privileged_test!();
    let unshare = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        WITHOUT_TRACEFS,
        "sh",
    ];
    let workload = Workload::build();
    let (text, stderr) = workload.trace_through(&unshare, &["-e", "tracepoint:sched:sched_process_fork"]);
    assert_mounted_tracefs_quietly(&stderr);
    check_syscall_stacks(&text, &stderr, "forker", FORKS, |innermost| innermost == "kernel_clone");

    // Plain sampling: a program that spins in `main -> a -> b -> c`.
    let chain = compile_fixture("follow/chain", &workload.dir.path().join("chain"), &[]);
    let spinning = Running(Command::new(&chain).spawn().expect("start chain"));
    let out = workload.dir.path().join("chain.folded");
    let pid = spinning.pid().to_string();
    let args = [
        "-F",
        "999",
        "-d",
        "2",
        "--no-kernel",
        "--pid",
        &pid,
        "-o",
        out.to_str().expect("path"),
    ];
    let mut command = Command::new(unshare[0]);
    command.args(&unshare[1..]).arg(tracer_binary()).args(args);
    let stderr = Tracer::spawn(command).finish();
    assert_mounted_tracefs_quietly(&stderr);
    let text = std::fs::read_to_string(&out).expect("read the output");
    let sampled = count(&folded(&text), |s| s.ends_with(";main;a;b;c"));
    assert!(
        sampled >= 100,
        "too few samples of the spinning program:\n{text}\n{stderr}"
    );
}

/// Off-CPU samples of the workload: each `nap` blocks in `nanosleep` for about `NAP_NS`, and
/// each shows as exactly one sample in `main -> sleeper -> nap` (switches that leave the task
/// runnable are not blocks), with the kernel stack down to the scheduler and a weight of the
/// time blocked. Kernels without `bpf_task_pt_regs` (before
/// 5.15) refuse offcpu with one sentence instead.
#[test]
fn offcpu_weighs_the_time_blocked() {
    privileged_test!();
    let workload = Workload::build();
    let task_regs = aya::sys::is_helper_supported(
        aya::programs::ProgramType::RawTracePoint,
        aya::sys::BpfHelper::BPF_FUNC_task_pt_regs,
    )
    .expect("probe bpf_task_pt_regs");
    if !task_regs {
        let out = Command::new(env!("CARGO_BIN_EXE_sframe-trace"))
            .args(["-e", "offcpu", "-d", "1", "-o", "/dev/null", "--", "true"])
            .output()
            .expect("run sframe-trace");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("offcpu needs Linux 5.15 or newer"), "{stderr}");
        return;
    }
    let (text, stderr) = workload.trace(&["-e", "offcpu", "-f", "json"]);
    let mut naps = Vec::new();
    for line in text.lines() {
        let sample: serde_json::Value = serde_json::from_str(line).expect("json");
        assert_eq!(sample["event"], "offcpu", "{line}");
        let names: Vec<&str> = sample["frames"]
            .as_array()
            .expect("frames")
            .iter()
            .rev()
            .map(|f| f["symbol"].as_str().unwrap_or("?"))
            .collect();
        let chain = names.join(";");
        if chain.contains(";main;sleeper;nap;") {
            assert!(chain.starts_with("_start;"), "incomplete: {chain}");
            assert!(
                chain.ends_with(";schedule;__schedule"),
                "kernel stack (ending in the switch): {chain}"
            );
            naps.push(sample["weight_ns"].as_u64().expect("weight"));
        }
    }
    assert_eq!(naps.len(), NAPS, "samples:\n{text}\n{stderr}");
    // About the time asleep. A little less is possible: the weight runs from the switch-out,
    // and `nanosleep` arms its timer before it switches out (in an emulated arm64 guest on a
    // busy host that gap was 0.14 ms; a guest whose CPU the host takes away between the two
    // stretches it). More by the wait for a CPU once woken, which on a machine busy with the
    // rest of the suite took up to 100 ms.
    for weight in naps {
        assert!(
            (NAP_NS - NAP_NS / 5..NAP_NS + 500_000_000).contains(&weight),
            "a nap of {NAP_NS} ns weighs {weight} ns"
        );
    }
}
