//! The tables loaded into the kernel: which object's rows are where in the shared maps
//! ([`TableSet`], `set`), where a freed object's rows may go (`rowspace`), and which file each
//! loaded table belongs to (`files`, the `FILES` map, whose segments are read from the file).
//! The tables themselves are built by `tracer_unwind::table` from bytes; this is the part that
//! knows processes' files and the kernel maps' capacity.

pub mod files;
mod rowspace;
pub mod set;

pub use set::{AddError, Capacity, Changes, TableSet};
