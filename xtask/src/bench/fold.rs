//! The tracers' outputs as one shape: stacks of function names, outermost first, with their
//! sample counts. Each tracer symbolized its own frames; this only reads what it printed
//! (`sframe-trace`'s folded lines, `perf script`'s call chains, bpftrace's printed `ustack`
//! map) and drops what is not a user frame name (kernel frames, `+offset` suffixes). Pure text
//! in, stacks out.

/// One distinct stack, outermost frame first, and how many samples had it.
pub type Stack = (Vec<String>, u64);

/// `comm;outermost;...;innermost COUNT` lines (the command name is dropped).
pub fn folded(text: &str) -> Vec<Stack> {
    text.lines()
        .filter_map(|line| {
            let (stack, count) = line.rsplit_once(' ')?;
            let frames = stack.split(';').skip(1).map(str::to_owned).collect();
            Some((frames, count.trim().parse().ok()?))
        })
        .collect()
}

/// `perf script -F comm,ip,sym,dso` output: per sample a header line, then one tab-indented
/// line per frame, innermost first (`ADDR SYMBOL (DSO)`), then a blank line. Kernel frames are
/// left out.
pub fn perf_script(text: &str) -> Vec<Stack> {
    let mut stacks = Vec::new();
    let mut frames: Vec<String> = Vec::new();
    let mut in_sample = false;
    for line in text.lines().chain(std::iter::once("")) {
        if line.trim().is_empty() {
            if in_sample {
                frames.reverse();
                stacks.push((std::mem::take(&mut frames), 1));
            }
            in_sample = false;
        } else if !line.starts_with('\t') {
            in_sample = true;
        } else if let Some(frame) = perf_frame(line) {
            frames.push(frame);
        }
    }
    stacks
}

/// The symbol of one `perf script` frame line, `None` for a kernel frame.
fn perf_frame(line: &str) -> Option<String> {
    let line = line.trim();
    let (rest, dso) = match line.rsplit_once(" (") {
        Some((rest, dso)) => (rest, dso.trim_end_matches(')')),
        None => (line, ""),
    };
    if dso.starts_with("[kernel") {
        return None;
    }
    let symbol = rest.split_once(' ').map_or("[unknown]", |(_, s)| s.trim());
    Some(strip_offset(symbol).to_owned())
}

/// bpftrace's `@[ustack] = count()` map as printed at exit: `@[`, one frame per line
/// (innermost first, `symbol+offset` or a bare address), `]: COUNT`.
pub fn bpftrace(text: &str) -> Vec<Stack> {
    let mut stacks = Vec::new();
    let mut frames: Option<Vec<String>> = None;
    for line in text.lines() {
        let line = line.trim();
        if line == "@[" {
            frames = Some(Vec::new());
        } else if let Some(count) = line.strip_prefix("]: ") {
            if let (Some(mut f), Ok(n)) = (frames.take(), count.parse()) {
                f.reverse();
                stacks.push((f, n));
            }
        } else if let Some(f) = frames.as_mut()
            && !line.is_empty()
        {
            f.push(strip_offset(line).to_owned());
        }
    }
    stacks
}

/// `name+0x1f` or `name+31` → `name`; anything else unchanged.
fn strip_offset(symbol: &str) -> &str {
    match symbol.rsplit_once('+') {
        Some((name, off))
            if !name.is_empty()
                && !off.is_empty()
                && off.trim_start_matches("0x").chars().all(|c| c.is_ascii_hexdigit()) =>
        {
            name
        }
        _ => symbol,
    }
}

/// Samples in all, and samples whose stack is exactly `chain`.
pub fn exact(stacks: &[Stack], chain: &[String]) -> (u64, u64) {
    let total = stacks.iter().map(|(_, n)| n).sum();
    let good = stacks.iter().filter(|(f, _)| f == chain).map(|(_, n)| n).sum();
    (total, good)
}

/// Samples in all and the frames they hold, for the average depth of the stacks.
pub fn frames(stacks: &[Stack]) -> (u64, u64) {
    let samples = stacks.iter().map(|(_, n)| n).sum();
    let frames = stacks.iter().map(|(f, n)| f.len() as u64 * n).sum();
    (samples, frames)
}

#[cfg(test)]
mod tests;
