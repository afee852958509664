//! tracer-unwind: sframe-trace's pure readers of unwind information. Bytes in, rows out: an
//! object file's bytes (or the reads of one at offsets, through `object::ReadRef`) become
//! SFrame functions and rows (`sframe`), the sections found in ELF files (`elf`, `compressed`,
//! `objfile`: which parts of a file to read, within what limits), call-frame information
//! (`cfi`), Go's function table (`gopclntab`), the kernel's paged unwind tables (`table`), the
//! renderings and checks built on them (`dump`, `check`, `dwarfdepth`), and the rules that make
//! names other users control safe to print (`names`).
//!
//! What it is not: it opens no file, makes no system call, loads nothing into the kernel and
//! knows nothing of processes or their mappings. Those are tracer-user's (its `sys` layer reads
//! the files this crate names the parts of). Hence the crate's rules, which an xtask test
//! checks: no `unsafe` (forbidden below), no aya, tokio, blazesym or libc, and no cargo
//! features (the crate is the same in the tracer, in fuzz/ and in the benchmarks). Every byte
//! it reads may be hostile: reads are bounded, and what is wrong is a typed error, never a
//! panic. (`testing`, hidden, is test support for this crate and tracer-user: it builds Go
//! programs and writes fuzz seeds, and the tracer never calls it.)
#![forbid(unsafe_code)]

pub mod cfi;
pub mod check;
pub mod compressed;
pub mod dump;
pub mod dwarfdepth;
pub mod elf;
pub mod gopclntab;
pub mod names;
pub mod objfile;
pub mod schema;
pub mod sframe;
pub mod table;
#[doc(hidden)]
pub mod testing;
