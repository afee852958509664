//! Reading `sframe-trace`'s folded output and judging it against a known call chain: parse the
//! lines, count the samples that are exactly the chain (or, for a binary without unwind
//! information, an innermost part of it), and describe the wrong stacks readably. Pure text in,
//! verdicts out; running the tracer is the parent module's job.

use std::{collections::BTreeMap, fmt};

/// One folded line: `comm;outermost;...;innermost COUNT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stack {
    pub comm: String,
    /// The `[truncated: REASON]` annotation of a cut stack, as printed.
    pub truncated: Option<String>,
    pub frames: Vec<String>,
    pub count: u64,
}

/// Parse folded output; blank lines are ignored, anything else malformed is an error naming
/// the line. The `[truncated: REASON]` frame a cut stack starts with is an annotation, not a
/// frame of the chain: it is left out (the judges tell a cut stack by its frames).
pub fn parse(text: &str) -> Result<Vec<Stack>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            let bad = |why: &str| format!("folded line {}: {why}: {line:?}", i + 1);
            let (stack, count) = line.rsplit_once(' ').ok_or_else(|| bad("no count"))?;
            let count = count.parse().map_err(|_| bad("the count is not a number"))?;
            let mut parts = stack.split(';').peekable();
            let comm = parts.next().unwrap_or_default().to_owned();
            let truncated = parts
                .next_if(|f| f.starts_with("[truncated: ") && f.ends_with(']'))
                .map(str::to_owned);
            let frames: Vec<String> = parts.map(str::to_owned).collect();
            if comm.is_empty() || frames.iter().any(String::is_empty) {
                return Err(bad("empty comm or frame"));
            }
            Ok(Stack {
                comm,
                truncated,
                frames,
                count,
            })
        })
        .collect()
}

/// Stacks printed on more than one line (the format has one line per distinct stack), compressed
/// (see [`compress`]), with their number of lines.
pub fn repeated_lines(stacks: &[Stack]) -> Vec<(String, usize)> {
    let mut lines: BTreeMap<(&str, Option<&str>, &[String]), usize> = BTreeMap::new();
    for s in stacks {
        *lines.entry((&s.comm, s.truncated.as_deref(), &s.frames)).or_default() += 1;
    }
    lines
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|((comm, truncated, frames), n)| {
            let marker = truncated.map(|t| format!("{t};")).unwrap_or_default();
            (format!("{comm};{marker}{}", compress(frames)), n)
        })
        .collect()
}

/// How one traced run compares with its expected chain.
#[derive(Debug)]
pub struct Verdict {
    /// Samples in the output (sum of the counts).
    pub total: u64,
    /// Samples whose stack passed the check.
    pub good: u64,
    /// Samples taken in code off the chain (the dynamic loader before `main`, libc printing
    /// after the loop) whose frames are true as far as the chain can tell: only the
    /// innermost-part check counts them (see [`Verdict::innermost_part`]).
    pub outside: u64,
    /// The other stacks, most frequent first: (count, description).
    pub wrong: Vec<(u64, String)>,
}

impl Verdict {
    fn judge(stacks: &[Stack], chain: &[String], comm: &str, class: impl Fn(&[String]) -> Class) -> Verdict {
        let mut verdict = Verdict {
            total: 0,
            good: 0,
            outside: 0,
            wrong: Vec::new(),
        };
        for s in stacks {
            verdict.total += s.count;
            let class = if s.comm == comm { class(&s.frames) } else { Class::Wrong };
            match class {
                Class::Good => verdict.good += s.count,
                Class::Outside => verdict.outside += s.count,
                Class::Wrong => verdict.wrong.push((s.count, describe(s, chain))),
            }
        }
        verdict.wrong.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        verdict
    }

    /// Samples from `comm` whose frames are exactly `chain`.
    pub fn exact(stacks: &[Stack], comm: &str, chain: &[String]) -> Verdict {
        Verdict::judge(stacks, chain, comm, |frames| {
            if frames == chain { Class::Good } else { Class::Wrong }
        })
    }

    /// Samples from `comm` whose frames are a non-empty innermost part (suffix) of `chain`:
    /// possibly truncated, but without a single frame that is not the real caller.
    ///
    /// A sample whose innermost frame is off the chain was taken in code the chain does not
    /// describe (the loader, or libc printing at exit: `main;__fprintf;...`). It counts as
    /// `outside` when the chain's functions in it are one outer block (nothing of the chain
    /// called from code off it) that is a contiguous run of the chain; otherwise it is wrong.
    pub fn innermost_part(stacks: &[Stack], comm: &str, chain: &[String]) -> Verdict {
        Verdict::judge(stacks, chain, comm, |frames| {
            let on_chain = |f: &String| chain.contains(f);
            if frames.is_empty() {
                Class::Wrong
            } else if chain.ends_with(frames) {
                Class::Good
            } else if frames.last().is_some_and(on_chain) {
                Class::Wrong
            } else {
                let outer = frames.iter().take_while(|f| on_chain(f)).count();
                let block = &frames[..outer];
                let consistent = !frames[outer..].iter().any(on_chain)
                    && (block.is_empty() || chain.windows(outer).any(|w| w == block));
                if consistent { Class::Outside } else { Class::Wrong }
            }
        })
    }

    /// Fraction of the samples that passed (0 when there are none).
    pub fn accuracy(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.good as f64 / self.total as f64
        }
    }
}

impl fmt::Display for Verdict {
    /// `99.80% (998 of 1000 samples)`, then the three most frequent wrong stacks.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.2}% ({} of {} samples)",
            self.accuracy() * 100.0,
            self.good,
            self.total
        )?;
        if self.outside > 0 {
            write!(f, ", {} taken off the chain", self.outside)?;
        }
        for (count, stack) in self.wrong.iter().take(3) {
            write!(f, "\n      wrong x{count}: {stack}")?;
        }
        if self.wrong.len() > 3 {
            write!(f, "\n      ... and {} more distinct wrong stacks", self.wrong.len() - 3)?;
        }
        Ok(())
    }
}

/// How one stack fares in a check.
enum Class {
    Good,
    Outside,
    Wrong,
}

/// A stack, runs of a repeated frame shortened (`recurse x100`), and how much of its inner end
/// agrees with the chain.
fn describe(stack: &Stack, chain: &[String]) -> String {
    let agree = stack
        .frames
        .iter()
        .rev()
        .zip(chain.iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    format!(
        "{};{}  [{} frames; the innermost {agree} agree with the expected {}]",
        stack.comm,
        compress(&stack.frames),
        stack.frames.len(),
        chain.len()
    )
}

/// Frames joined with `;`, a run of n > 1 equal frames written `name xn`.
pub fn compress(frames: &[String]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < frames.len() {
        let run = frames[i..].iter().take_while(|f| **f == frames[i]).count();
        out.push(if run > 1 {
            format!("{} x{run}", frames[i])
        } else {
            frames[i].clone()
        });
        i += run;
    }
    out.join(";")
}

#[cfg(test)]
mod tests;
