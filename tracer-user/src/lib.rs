//! sframe-trace as a library: the processes and their files (`procmaps`, `registry`, `jit`,
//! `python`), the system-call layer (`sys`), the tables loaded into the kernel (`tables`), the
//! kernel plumbing that loads the embedded eBPF program (`bpf`), naming and outputs, and the
//! session that sequences them (`trace`). The pure readers of unwind information (SFrame,
//! `.eh_frame`, ELF, Go's tables, the table builder) are the tracer-unwind crate, used by name
//! (`tracer_unwind::sframe`). The binary (`main.rs`) is glue over this.
//! Every system call and `unsafe` block is in [`sys`] (safe wrappers); the rest of the crate
//! denies `unsafe` code (docs/design.md, "How the code is layered").

#![deny(unsafe_code)]

pub mod bpf;
pub mod event;
pub mod export;
pub mod frame;
pub mod heap;
pub mod jit;
pub mod manager;
pub mod offline;
pub mod outfile;
pub mod priority;
pub mod procmaps;
pub mod profile;
pub mod python;
pub mod registry;
pub mod runtime;
pub mod runtimes;
pub mod snapshots;
pub mod symbolize;
pub mod symfiles;
#[allow(unsafe_code)]
pub mod sys;
pub mod tables;
pub mod trace;
pub mod v8;
