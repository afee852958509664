//! One integration-test binary; each module covers one area. No `unsafe` here: system calls
//! go through `sframe_trace::sys`.

#![deny(unsafe_code)]

// First: its macros (`privileged_test!`) are used by the modules below.
#[macro_use]
mod support;

mod check;
mod cli;
mod compressed;
#[cfg(feature = "ebpf")]
mod consumers;
mod corrupt;
#[cfg(feature = "ebpf")]
mod debuginfo;
mod differential;
#[cfg(feature = "ebpf")]
mod dist;
mod eh_frame;
#[cfg(feature = "ebpf")]
mod events;
#[cfg(feature = "ebpf")]
mod external;
#[cfg(feature = "ebpf")]
mod first_minutes;
#[cfg(feature = "ebpf")]
mod first_sample;
#[cfg(feature = "ebpf")]
mod follow;
#[cfg(feature = "ebpf")]
mod formats;
mod generated_docs;
#[cfg(feature = "ebpf")]
mod glibc_start;
#[cfg(feature = "ebpf")]
mod golang;
mod golden;
#[cfg(feature = "ebpf")]
mod hardening;
#[cfg(feature = "ebpf")]
mod health;
#[cfg(feature = "ebpf")]
mod jit;
#[cfg(feature = "ebpf")]
mod lifecycle;
#[cfg(feature = "ebpf")]
mod live;
#[cfg(feature = "ebpf")]
mod offline;
#[cfg(feature = "ebpf")]
mod oracle;
#[cfg(feature = "ebpf")]
mod otlp;
#[cfg(feature = "ebpf")]
mod otlp_container;
#[cfg(feature = "ebpf")]
mod otlp_runtime;
#[cfg(feature = "ebpf")]
mod otlp_tls;
#[cfg(feature = "ebpf")]
mod privileged;
mod procmaps;
#[cfg(feature = "ebpf")]
mod python;
#[cfg(feature = "ebpf")]
mod python_root;
#[cfg(feature = "ebpf")]
mod python_session;
mod reader;
mod readme;
#[cfg(feature = "ebpf")]
mod replay;
#[cfg(feature = "ebpf")]
mod security;
#[cfg(feature = "ebpf")]
mod symbols;
mod table;
#[cfg(feature = "ebpf")]
mod trace;
#[cfg(feature = "ebpf")]
mod walker;
