//! The folded format: one line per distinct stack, `comm;outermost;...;innermost COUNT` — user
//! frames from the outermost (`_start`) to the sampled function, then kernel frames from the
//! system-call entry to the sampled kernel function. Read by flamegraph.pl, inferno, speedscope.

use std::{collections::BTreeMap, io::Write};

use super::{profile::Profile, symbolize::Names};

/// Write `profile` as folded lines, sorted for stable output. Stacks that differ only in
/// addresses inside the same functions share one line.
pub fn write(out: &mut impl Write, profile: &Profile, names: &Names) -> std::io::Result<()> {
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    for (stack, &count) in &profile.stacks {
        let mut line = sanitize(&stack.comm);
        for frame in stack.user.iter().rev().chain(stack.kernel.iter().rev()) {
            line.push(';');
            line.push_str(&sanitize(&names.get(frame)));
        }
        *lines.entry(line).or_default() += count;
    }
    for (line, count) in lines {
        writeln!(out, "{line} {count}")?;
    }
    out.flush()
}

/// A frame name can hold neither the frame separator nor a line break.
fn sanitize(name: &str) -> String {
    name.replace([';', '\n'], "_")
}
