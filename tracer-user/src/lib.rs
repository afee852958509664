//! sframe-trace as a library: pure readers of unwind information (SFrame, `.eh_frame`, ELF
//! discovery), the renderers and checks built on them, and, behind the `ebpf` feature, the kernel
//! plumbing that loads the embedded eBPF program. The binary (`main.rs`) is glue over this.

pub mod heap;
pub mod jit;
pub mod priority;
pub mod procmaps;
pub mod python;
pub mod registry;
pub mod sys;
pub mod tables;

#[cfg(feature = "ebpf")]
pub mod bpf;
#[cfg(feature = "ebpf")]
pub mod event;
#[cfg(feature = "ebpf")]
pub mod export;
#[cfg(feature = "ebpf")]
pub mod offline;
#[cfg(feature = "ebpf")]
pub mod outfile;
#[cfg(feature = "ebpf")]
pub mod profile;
#[cfg(feature = "ebpf")]
pub mod snapshots;
#[cfg(feature = "ebpf")]
pub mod symbolize;
#[cfg(feature = "ebpf")]
pub mod symfiles;
#[cfg(feature = "ebpf")]
pub mod trace;
