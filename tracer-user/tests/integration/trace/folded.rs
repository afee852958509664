//! Reading `sframe-trace`'s folded output and judging it against a known call chain: parse the
//! lines, count the samples that are exactly the chain (or, for a binary without unwind
//! information, an innermost part of it), and describe the wrong stacks readably. Pure text in,
//! verdicts out; running the tracer is the parent module's job.

use std::{collections::BTreeMap, fmt};

/// One folded line: `comm;outermost;...;innermost COUNT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stack {
    pub comm: String,
    pub frames: Vec<String>,
    pub count: u64,
}

/// Parse folded output; blank lines are ignored, anything else malformed is an error naming
/// the line.
pub fn parse(text: &str) -> Result<Vec<Stack>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            let bad = |why: &str| format!("folded line {}: {why}: {line:?}", i + 1);
            let (stack, count) = line.rsplit_once(' ').ok_or_else(|| bad("no count"))?;
            let count = count.parse().map_err(|_| bad("the count is not a number"))?;
            let mut parts = stack.split(';');
            let comm = parts.next().unwrap_or_default().to_owned();
            let frames: Vec<String> = parts.map(str::to_owned).collect();
            if comm.is_empty() || frames.iter().any(String::is_empty) {
                return Err(bad("empty comm or frame"));
            }
            Ok(Stack { comm, frames, count })
        })
        .collect()
}

/// Stacks printed on more than one line (the format has one line per distinct stack), compressed
/// (see [`compress`]), with their number of lines.
pub fn repeated_lines(stacks: &[Stack]) -> Vec<(String, usize)> {
    let mut lines: BTreeMap<(&str, &[String]), usize> = BTreeMap::new();
    for s in stacks {
        *lines.entry((&s.comm, &s.frames)).or_default() += 1;
    }
    lines
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|((comm, frames), n)| (format!("{comm};{}", compress(frames)), n))
        .collect()
}

/// How one traced run compares with its expected chain.
#[derive(Debug)]
pub struct Verdict {
    /// Samples in the output (sum of the counts).
    pub total: u64,
    /// Samples whose stack passed the check.
    pub good: u64,
    /// The other stacks, most frequent first: (count, description).
    pub wrong: Vec<(u64, String)>,
}

impl Verdict {
    fn judge(stacks: &[Stack], chain: &[String], comm: &str, ok: impl Fn(&[String]) -> bool) -> Verdict {
        let mut verdict = Verdict {
            total: 0,
            good: 0,
            wrong: Vec::new(),
        };
        for s in stacks {
            verdict.total += s.count;
            if s.comm == comm && ok(&s.frames) {
                verdict.good += s.count;
            } else {
                verdict.wrong.push((s.count, describe(s, chain)));
            }
        }
        verdict.wrong.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        verdict
    }

    /// Samples from `comm` whose frames are exactly `chain`.
    pub fn exact(stacks: &[Stack], comm: &str, chain: &[String]) -> Verdict {
        Verdict::judge(stacks, chain, comm, |frames| frames == chain)
    }

    /// Samples from `comm` whose frames are a non-empty innermost part (suffix) of `chain`:
    /// possibly truncated, but without a single frame that is not the real caller.
    pub fn innermost_part(stacks: &[Stack], comm: &str, chain: &[String]) -> Verdict {
        Verdict::judge(stacks, chain, comm, |frames| {
            !frames.is_empty() && chain.ends_with(frames)
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
        for (count, stack) in self.wrong.iter().take(3) {
            write!(f, "\n      wrong x{count}: {stack}")?;
        }
        if self.wrong.len() > 3 {
            write!(f, "\n      ... and {} more distinct wrong stacks", self.wrong.len() - 3)?;
        }
        Ok(())
    }
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

/// The number of user frames unwound with frame pointers, from the summary on stderr.
/// Written against `  user frames: N from SFrame tables, M from frame pointers`; also reads
/// `fp: M`, `fp=M`, `M fp`, `frame-pointer frames M`: within a `,`/`;`/`(`/`)`-separated part
/// of a line naming frame pointers (or `fp` as a word), the number nearest to that name.
pub fn frame_pointer_frames(summary: &str) -> Option<u64> {
    for line in summary.lines() {
        let line = line.to_lowercase();
        let line = [
            "frame pointers",
            "frame pointer",
            "frame-pointers",
            "frame-pointer",
            "frame_pointer",
        ]
        .iter()
        .fold(line, |l, name| l.replace(name, " fp "));
        for part in line.split([',', ';', '(', ')']) {
            let tokens: Vec<&str> = part
                .split(|c: char| !c.is_ascii_alphanumeric())
                .filter(|t| !t.is_empty())
                .collect();
            let Some(at) = tokens.iter().position(|t| *t == "fp") else {
                continue;
            };
            let nearest = tokens
                .iter()
                .enumerate()
                .filter_map(|(i, t)| t.parse::<u64>().ok().map(|n| (i.abs_diff(at), i < at, n)))
                .min_by_key(|&(distance, before, _)| (distance, before));
            if let Some((_, _, n)) = nearest {
                return Some(n);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(frames: &str) -> Vec<String> {
        frames.split(';').map(str::to_owned).collect()
    }

    fn stacks(text: &str) -> Vec<Stack> {
        parse(text).expect("valid folded text")
    }

    /// Folded lines split into comm, frames (outermost first) and count; a comm alone is a stack
    /// without frames.
    #[test]
    fn parses_folded_lines() {
        let got = stacks("deep;_start;main;leaf 12\n\nplt;[unknown];0x7f00 3\nnoinfo 2\n");
        assert_eq!(
            got,
            vec![
                Stack {
                    comm: "deep".into(),
                    frames: chain("_start;main;leaf"),
                    count: 12
                },
                Stack {
                    comm: "plt".into(),
                    frames: chain("[unknown];0x7f00"),
                    count: 3
                },
                Stack {
                    comm: "noinfo".into(),
                    frames: vec![],
                    count: 2
                },
            ]
        );
    }

    /// A line without a numeric count, or with an empty frame, is rejected with its line number.
    #[test]
    fn rejects_malformed_lines() {
        assert!(parse("deep;main").unwrap_err().contains("line 1"));
        assert!(parse("deep;main 1\ndeep;main x").unwrap_err().contains("line 2"));
        assert!(parse("deep;;main 1").unwrap_err().contains("empty"));
        assert!(parse(";main 1").is_err());
    }

    /// Only stacks equal to the whole chain, from the right comm, count as exact.
    #[test]
    fn exact_counts_only_the_whole_chain() {
        let want = chain("_start;main;big;spin");
        let v = Verdict::exact(
            &stacks(
                "bigframe;_start;main;big;spin 97\nbigframe;main;big;spin 2\nother;_start;main;big;spin 1\n\
                 bigframe;_start;_start;main;big;spin 1\nbigframe;_start;main;big;spin;extra 1",
            ),
            "bigframe",
            &want,
        );
        assert_eq!((v.good, v.total), (97, 102));
        assert_eq!(v.wrong.len(), 4);
        assert_eq!(v.wrong[0].0, 2, "most frequent wrong stack first");
        assert!((v.accuracy() - 97.0 / 102.0).abs() < 1e-12);
    }

    /// Truncated stacks pass the innermost-part check; a stack with any frame off the chain, a
    /// missing middle frame, an outer part, or no frame at all does not.
    #[test]
    fn innermost_part_accepts_only_true_suffixes() {
        let want = chain("_start;main;run;recurse;recurse;leaf");
        let v = Verdict::innermost_part(
            &stacks(
                "noinfo;leaf 5\nnoinfo;recurse;leaf 4\nnoinfo;_start;main;run;recurse;recurse;leaf 3\n\
                 noinfo;main;leaf 1\nnoinfo;[unknown];leaf 1\nnoinfo;_start;main 1\nnoinfo 1\n\
                 noinfo;run;recurse;leaf 1",
            ),
            "noinfo",
            &want,
        );
        assert_eq!((v.good, v.total), (12, 17));
        assert_eq!(v.wrong.len(), 5);
    }

    /// No samples is 0% accurate, not a pass.
    #[test]
    fn no_samples_is_zero_accuracy() {
        assert_eq!(Verdict::exact(&[], "deep", &chain("main")).accuracy(), 0.0);
    }

    /// The report shows the accuracy and the three most frequent wrong stacks, compressed, with
    /// how many of their innermost frames agree.
    #[test]
    fn report_shows_top_three_wrong_stacks() {
        let mut want = chain("_start;main;run");
        want.extend(std::iter::repeat_n("recurse".to_owned(), 100));
        want.push("leaf".into());
        let recursion = vec!["recurse"; 100].join(";");
        let text = format!(
            "deep;_start;main;run;{recursion};leaf 990\ndeep;0x2;_start;main;run;{recursion};leaf 4\n\
             deep;run;{recursion};leaf 3\ndeep;leaf 2\ndeep;[unknown] 1"
        );
        let v = Verdict::exact(&stacks(&text), "deep", &want);
        let report = v.to_string();
        assert!(report.starts_with("99.00% (990 of 1000 samples)"), "{report}");
        assert!(
            report.contains("wrong x4: deep;0x2;_start;main;run;recurse x100;leaf  [105 frames; the innermost 104 agree with the expected 104]"),
            "{report}"
        );
        assert!(
            report.contains("wrong x3: deep;run;recurse x100;leaf  [102 frames;"),
            "{report}"
        );
        assert!(
            report.contains("wrong x2: deep;leaf  [1 frames; the innermost 1 agree"),
            "{report}"
        );
        assert!(!report.contains("[unknown]"), "only three wrong stacks: {report}");
        assert!(report.contains("and 1 more"), "{report}");
    }

    /// A stack printed on two lines is reported once, with its number of lines.
    #[test]
    fn finds_repeated_lines() {
        let got = repeated_lines(&stacks(
            "noinfo;leaf 1\nnoinfo;recurse;leaf 2\nnoinfo;leaf 494\nother;leaf 3\nnoinfo;leaf 4",
        ));
        assert_eq!(got, vec![("noinfo;leaf".to_owned(), 3)]);
        assert!(repeated_lines(&stacks("a;b 1\na;b;b 1\nb;b 1")).is_empty());
    }

    /// Runs of a repeated frame are shortened; single frames are not.
    #[test]
    fn compresses_repeated_frames() {
        assert_eq!(compress(&chain("a;b;b;b;c;b")), "a;b x3;c;b");
        assert_eq!(compress(&[]), "");
    }

    /// The frame-pointer count is read from the tracer's summary line and a few other shapes,
    /// never from the SFrame count next to it.
    #[test]
    fn reads_frame_pointer_frames_from_the_summary() {
        let summary = "sframe-trace: 998 samples in 2.0 s (the duration ended), 0 lost\n  \
                       stacks: 998 complete, 0 truncated\n  \
                       user frames: 5 from SFrame tables, 103794 from frame pointers\n";
        assert_eq!(frame_pointer_frames(summary), Some(103_794));
        assert_eq!(frame_pointer_frames("frames: sframe=10 fp=20"), Some(20));
        assert_eq!(frame_pointer_frames("frames: 10 sframe, 20 fp"), Some(20));
        assert_eq!(frame_pointer_frames("Frame-pointer frames: 7"), Some(7));
        assert_eq!(frame_pointer_frames("frames: 10 from SFrame tables"), None);
        assert_eq!(frame_pointer_frames("lost 3 samples"), None);
    }
}
