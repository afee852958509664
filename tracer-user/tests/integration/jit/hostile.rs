//! Hostile perf maps: placeholder.
