//! A process is exact from its first sample. Short-lived programs without frame pointers, with
//! SFrame and unique command names, are started hundreds of times while the tracer samples
//! every process at 999 Hz, so that many of their samples are taken before the tracer has
//! loaded them (in the dynamic loader, in libc's start, in their first calls, inside their
//! exec and exit). Every sample of those processes is judged against the machine code by the
//! disassembly oracle ([`crate::oracle`]): no stack may be wrong, and the share that is exact
//! down to `_start` is asked of each test. Run by `cargo xtask test` with the release tracer
//! (`SFRAME_TRACE_BIN`): a debug build, system-wide on a busy host, falls behind the processes
//! it should load.

mod brief;
mod exits;
mod launchers;
mod pprof;
mod tally;
