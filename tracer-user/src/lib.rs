//! sframe-trace as a library: pure readers of unwind information (SFrame, `.eh_frame`, ELF
//! discovery), the renderers and checks built on them, and, behind the `ebpf` feature, the kernel
//! plumbing that loads the embedded eBPF program. The binary (`main.rs`) is glue over this.
//! Every system call and `unsafe` block is in [`sys`] (safe wrappers); the rest of the crate
//! denies `unsafe` code (docs/design.md, "How the code is layered").

#![deny(unsafe_code)]

pub mod cfi;
pub mod check;
pub mod compressed;
pub mod dump;
pub mod dwarfdepth;
pub mod elf;
pub mod gopclntab;
pub mod heap;
pub mod jit;
pub mod names;
// Its unsafe code moves into sys with the pure-crate split.
#[allow(unsafe_code)]
pub mod objfile;
pub mod priority;
pub mod procmaps;
pub mod python;
pub mod registry;
pub mod schema;
pub mod sframe;
#[allow(unsafe_code)]
pub mod sys;
// Its unsafe code moves into sys with the pure-crate split.
#[allow(unsafe_code)]
pub mod table;
#[doc(hidden)]
pub mod testing;

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
