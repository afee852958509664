//! The events stacks are taken on, besides cpu-clock sampling: probes (kprobe, uprobe,
//! uretprobe), tracepoints and off-CPU time (`sched_switch`). Names of their programs, maps and
//! globals, and the event ids the kernel writes into `Sample::event`. Nothing here knows what
//! the user asked for; userspace maps ids to the names given on its command line.
//!
//! Every kind of event has its own entry programs, which fill the per-CPU walk state as the
//! cpu-clock program does and tail-call a copy of the user-stack walker of their own program
//! type (a tail call must stay within one program type):
//! - kprobe, uprobe, uretprobe: [`PROBE_SLOTS`] entry programs each ([`PROG_KPROBES`], ...),
//!   one per event, so that the program itself says which event fired (kprobes and
//!   tracepoints have no attach cookie in aya, and cookies need 5.15); all are kprobe-type
//!   programs and share [`PROG_WALK_PROBE`] through [`MAP_PROGS_PROBE`].
//! - tracepoint: [`PROG_TRACEPOINTS`], walker [`PROG_WALK_TRACEPOINT`] in
//!   [`MAP_PROGS_TRACEPOINT`].
//! - offcpu: the raw tracepoint [`PROG_ON_SWITCH`] on `sched_switch`. When a traced task blocks
//!   (switched out in a sleeping state, not preempted, not exiting), its stack is walked (it is still `current`)
//!   by [`PROG_WALK_SWITCH`] ([`MAP_PROGS_SWITCH`]) and parked in [`MAP_PARKED`] under its thread
//!   id with the switch-out time; when it is switched in again after at least
//!   [`GLOBAL_MIN_BLOCK_NS`], the parked sample is shipped with the time blocked as its weight.
//!
//! Not an event: [`PROG_ON_CALL_ENTRY`], on the `syscalls` tracepoints of the calls that take
//! a thread's address space away ([`TRACEPOINTS_CALL_ENTRY`]), walks the thread's user stack
//! as the call begins and ships it as a record of its own ([`EVENT_CALL_ENTRY`]). Userspace
//! keeps it for the samples of that thread taken later in the call, whose own walk finds no
//! stack once `exit` has freed the memory or `execve` has replaced it.
//!   The switched-in task is not `current` yet, so its thread id is read from its
//!   `task_struct` at offsets userspace finds in the kernel's BTF ([`GLOBAL_TASK_PID_OFFSET`];
//!   also [`GLOBAL_TASK_STATE_OFFSET`], [`GLOBAL_TASK_FLAGS_OFFSET`] for the switched-out one).

/// Entry programs per probe or tracepoint kind: at most this many events of each kind.
pub const PROBE_SLOTS: usize = 8;

/// What kind of event took a sample: the high bits of its event id.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    CpuClock = 0,
    Offcpu = 1,
    Kprobe = 2,
    Uprobe = 3,
    Uretprobe = 4,
    Tracepoint = 5,
}

/// The id in `Sample::event` of the event of `kind` in entry-program slot `slot` (0 for
/// cpu-clock and offcpu, which have one program each).
pub const fn event_id(kind: EventKind, slot: u32) -> u32 {
    ((kind as u32) << 8) | slot
}

/// The event id of cpu-clock samples.
pub const EVENT_CPU_CLOCK: u32 = event_id(EventKind::CpuClock, 0);
/// The event id of off-CPU samples.
pub const EVENT_OFFCPU: u32 = event_id(EventKind::Offcpu, 0);

/// kprobe entry programs, by slot.
pub const PROG_KPROBES: [&str; PROBE_SLOTS] = [
    "on_kprobe_0",
    "on_kprobe_1",
    "on_kprobe_2",
    "on_kprobe_3",
    "on_kprobe_4",
    "on_kprobe_5",
    "on_kprobe_6",
    "on_kprobe_7",
];
/// uprobe entry programs, by slot.
pub const PROG_UPROBES: [&str; PROBE_SLOTS] = [
    "on_uprobe_0",
    "on_uprobe_1",
    "on_uprobe_2",
    "on_uprobe_3",
    "on_uprobe_4",
    "on_uprobe_5",
    "on_uprobe_6",
    "on_uprobe_7",
];
/// uretprobe entry programs, by slot.
pub const PROG_URETPROBES: [&str; PROBE_SLOTS] = [
    "on_uretprobe_0",
    "on_uretprobe_1",
    "on_uretprobe_2",
    "on_uretprobe_3",
    "on_uretprobe_4",
    "on_uretprobe_5",
    "on_uretprobe_6",
    "on_uretprobe_7",
];
/// tracepoint entry programs, by slot.
pub const PROG_TRACEPOINTS: [&str; PROBE_SLOTS] = [
    "on_tracepoint_0",
    "on_tracepoint_1",
    "on_tracepoint_2",
    "on_tracepoint_3",
    "on_tracepoint_4",
    "on_tracepoint_5",
    "on_tracepoint_6",
    "on_tracepoint_7",
];

/// The user-stack walker of kprobe-type programs (kprobes, uprobes, uretprobes).
pub const PROG_WALK_PROBE: &str = "walk_user_probe";
/// Its program array (one slot, `trace::PROG_WALK_SLOT`).
pub const MAP_PROGS_PROBE: &str = "PROGS_PROBE";
/// The user-stack walker of tracepoint programs.
pub const PROG_WALK_TRACEPOINT: &str = "walk_user_tracepoint";
/// The same, finding the mappings `PROCS` does not know through the process's VMAs (as
/// `crate::vma::PROG_WALK_VMA` does for cpu-clock samples; outside an interrupt, every lookup
/// can have the VMA lock): loaded instead of it where the cpu-clock walker is the VMA one, so
/// that the stacks at exit and exec of a process not read yet (a launcher living a
/// millisecond, a child sharing its parent's memory until its exec) are walked whole.
pub const PROG_WALK_TRACEPOINT_VMA: &str = "walk_user_tracepoint_vma";
/// Its program array.
pub const MAP_PROGS_TRACEPOINT: &str = "PROGS_TRACEPOINT";

/// The tracepoint program that walks a thread's user stack at the entry of `exit` and
/// `exit_group` (module docs); it shares [`PROG_WALK_TRACEPOINT`].
pub const PROG_ON_CALL_ENTRY: &str = "on_call_entry";
/// The `syscalls` tracepoints it attaches to.
pub const TRACEPOINTS_CALL_ENTRY: [&str; 2] = ["sys_enter_exit", "sys_enter_exit_group"];
/// The same for `execve` and `execveat`, at most once per [`EXEC_ENTRY_INTERVAL_NS`] per
/// process: a thread exits once, but a process can fail execs in a loop, and each walk is
/// taken from the sampling budget of every traced process (the ring buffer is shared).
pub const PROG_ON_EXEC_ENTRY: &str = "on_exec_entry";
/// The `syscalls` tracepoints it attaches to.
pub const TRACEPOINTS_EXEC_ENTRY: [&str; 2] = ["sys_enter_execve", "sys_enter_execveat"];
/// The shortest time between two walks at an exec's entry in one process (a real exec takes
/// longer: it loads a program).
pub const EXEC_ENTRY_INTERVAL_NS: u64 = 1_000_000;
/// LRU hash `tgid -> u64`: when each process's last exec entry was walked.
pub const MAP_EXEC_ENTRIES: &str = "EXEC_ENTRIES";
/// Processes [`MAP_EXEC_ENTRIES`] remembers (past it the least recent is forgotten, and its
/// next exec is walked).
pub const EXEC_ENTRIES: u32 = 4096;
/// The tracepoint program that walks a thread's user stack as a signal that ends its process
/// is delivered to it (the threads an `exit_group` or an exec kills, a fatal signal's target):
/// they leave through the kernel's exit without entering `exit` themselves. It ships the same
/// records as [`PROG_ON_CALL_ENTRY`], for signals [`ends_process`] accepts.
pub const PROG_ON_FATAL_SIGNAL: &str = "on_fatal_signal";
/// Its tracepoint's category and name.
pub const TRACEPOINT_SIGNAL_DELIVER: (&str, &str) = ("signal", "signal_deliver");
/// Offsets in that tracepoint's record (its `format`, stable since Linux 3.x): `int sig`,
/// `unsigned long sa_handler`.
pub const SIGNAL_SIG_OFFSET: usize = 8;
pub const SIGNAL_HANDLER_OFFSET: usize = 24;

/// Whether signal `sig` delivered with handler `handler` ends the process: the default
/// action (`SIG_DFL`, 0) of a signal whose default is to terminate, with or without a core
/// dump (every signal but the ignored `SIGCHLD`, `SIGURG`, `SIGWINCH` and the job-control
/// `SIGCONT`, `SIGSTOP`, `SIGTSTP`, `SIGTTIN`, `SIGTTOU`; the numbers of x86-64 and aarch64).
pub const fn ends_process(sig: i32, handler: u64) -> bool {
    sig >= 1 && handler == 0 && !matches!(sig, 17..=23 | 28)
}

/// `Sample::event` of its records: no event kind has this id (kinds are small numbers in the
/// bits above the slot), so no sample of an event is taken for one.
pub const EVENT_CALL_ENTRY: u32 = 0xffff_ff00;

/// The raw tracepoint program of `offcpu`.
pub const PROG_ON_SWITCH: &str = "on_switch";
/// The raw tracepoint it attaches to.
pub const TRACEPOINT_SWITCH: &str = "sched_switch";
/// The user-stack walker of raw tracepoint programs, which parks its samples.
pub const PROG_WALK_SWITCH: &str = "walk_user_switch";
/// Its program array.
pub const MAP_PROGS_SWITCH: &str = "PROGS_SWITCH";
/// LRU hash `tid -> Sample`: the stacks of blocked tasks, `time_ns` their switch-out time.
/// Userspace sizes it: [`PARKED_ENTRIES`] with offcpu, 1 without.
pub const MAP_PARKED: &str = "PARKED";
/// Tasks blocked at once whose stacks are kept (about 5.7 KiB each, 12 MiB in all); beyond
/// that the least recently parked are forgotten, and their blocks go unrecorded.
pub const PARKED_ENTRIES: u32 = 2048;

/// Read-only global: the shortest block that is recorded, in nanoseconds (`--min-block`).
pub const GLOBAL_MIN_BLOCK_NS: &str = "MIN_BLOCK_NS";
/// Read-only global: byte offset of `pid` (the thread id) in the kernel's `task_struct`.
pub const GLOBAL_TASK_PID_OFFSET: &str = "TASK_PID_OFFSET";
/// Read-only global: byte offset of `flags` in `task_struct` (`PF_EXITING` is not parked: an
/// exiting task is never switched in again).
pub const GLOBAL_TASK_FLAGS_OFFSET: &str = "TASK_FLAGS_OFFSET";
/// Read-only global: byte offset of `__state` in `task_struct` (5.14+): a task switched out
/// in state 0 (`TASK_RUNNING`) was not blocked, only made to wait for the CPU (a wake-up that
/// came before the switch, a yield).
pub const GLOBAL_TASK_STATE_OFFSET: &str = "TASK_STATE_OFFSET";
/// `PF_EXITING` of `task_struct::flags` (include/linux/sched.h).
pub const PF_EXITING: u32 = 0x4;

#[cfg(test)]
mod tests;
