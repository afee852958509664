//! One integration-test binary; each module covers one area. No `unsafe` here: system calls
//! go through `sframe_trace::sys`.

#![deny(unsafe_code)]

// First: its macros (`privileged_test!`) are used by the modules below.
#[macro_use]
mod support;

mod check;
mod cli;
mod compressed;
mod consumers;
mod corrupt;
mod debuginfo;
mod differential;
mod dist;
mod eh_frame;
mod events;
mod external;
mod first_minutes;
mod first_sample;
mod follow;
mod formats;
mod generated_docs;
mod glibc_start;
mod golang;
mod golden;
mod hardening;
mod health;
mod jit;
mod lifecycle;
mod live;
mod offline;
mod oracle;
mod otlp;
mod otlp_container;
mod otlp_runtime;
mod otlp_tls;
mod privileged;
mod procmaps;
mod python;
mod python_reuse;
mod python_root;
mod python_session;
mod reader;
mod readme;
mod replay;
mod security;
mod symbols;
mod table;
mod trace;
mod walker;
