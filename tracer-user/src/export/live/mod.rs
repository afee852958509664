//! `--live`: the terminal view of a running session. [`model`] folds a symbolized profile into
//! the hottest functions (self and total) and stacks, [`screen`] lays them out as lines of text
//! for a given terminal size and applies the keys, [`terminal`] owns the terminal (raw mode,
//! alternate screen, keys) on a thread of its own. None of them samples or symbolizes: the
//! session hands them snapshots (`trace::live`).

pub mod model;
pub mod screen;
pub mod terminal;
