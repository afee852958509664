//! The verdicts on a short-lived program's samples, as both first-sample tests count them:
//! exact, short (with why), wrong (with why), and those taken where the process had no user
//! stack of its own.

use std::collections::BTreeMap;

use super::pprof::Traced;
use crate::oracle::Oracle;

/// Whether `stack` was taken where the program has no user stack of its own, so that no
/// frame of it can be exact: the tracer says so (`exec_or_exit`: the sampled PC in no VMA of
/// the process), the sample holds at most that PC (no caller invented), and its kernel stack,
/// judged here by name, is inside an exec (the registers still the old image's) or an exit
/// (the memory already freed). A sample whose kernel stack is missing is judged as any other.
fn outside(stack: &Traced) -> bool {
    stack.truncated.as_deref() == Some("exec_or_exit")
        && stack.frames.len() <= 1
        && stack.kernel.iter().any(|f| f.contains("exec") || f.contains("exit"))
}

/// The judged samples of the processes a test started.
#[derive(Default)]
pub struct Tally {
    exact: u64,
    short: u64,
    wrong_samples: u64,
    /// Each wrong stack, with why.
    wrong: Vec<String>,
    /// Taken inside an exec or exit with no stack of their own (see [`outside`]).
    outside: u64,
    /// The short samples by why and their functions.
    shorts: BTreeMap<String, u64>,
    /// Stacks complete down to the loader's entry code that the tracer called truncated.
    loader_marked_short: Vec<String>,
}

impl Tally {
    /// Judge one distinct stack.
    pub fn add(&mut self, oracle: &mut Oracle, stack: &Traced) {
        let frames = &stack.frames;
        if outside(stack) {
            self.outside += stack.count;
            return;
        }
        // A frame in no known object: the sampled PC of a process never loaded (short); a
        // caller there would have been invented (wrong).
        if let Some(at) = frames.iter().position(|f| f.object.as_os_str().is_empty()) {
            if at == 0 && frames.len() == 1 {
                self.short += stack.count;
                let why = format!(
                    "frame 0 in no known object ({}) over {}",
                    stack.truncated.as_deref().unwrap_or("not called truncated"),
                    stack.kernel.first().map_or("no kernel frame", String::as_str)
                );
                *self.shorts.entry(why).or_default() += stack.count;
            } else {
                self.wrong_samples += stack.count;
                self.wrong
                    .push(format!("{} x frame {at} in no known object", stack.count));
            }
            return;
        }
        match (oracle.edges(frames), oracle.judge(frames)) {
            (Err(why), _) => {
                self.wrong_samples += stack.count;
                self.wrong
                    .push(format!("{} x {why}: {:?}", stack.count, oracle.names(frames)));
            }
            (Ok(()), Ok(())) => self.exact += stack.count,
            // The loader's entry code after its call to `_dl_start` (same assembly block as
            // `_start`, RTLD_START), where it calls the libraries' initializers: outermost, and
            // the tracer must say so (no truncation label: its table marks that code).
            (Ok(()), Err(_)) if oracle.names(frames).last().is_some_and(|n| n == "_dl_start_user") => {
                match &stack.truncated {
                    None => self.exact += stack.count,
                    Some(why) => {
                        self.short += stack.count;
                        self.loader_marked_short
                            .push(format!("{} x {why}: {:?}", stack.count, oracle.names(frames)));
                    }
                }
            }
            // Inside the exec of the test's own spawned child, before the program's image:
            // the stack at the call's entry, which starts where glibc's `clone3` started the
            // child (its outermost frame, as the tracer must say).
            (Ok(()), Err(_))
                if stack.truncated.is_none()
                    && oracle
                        .names(frames)
                        .last()
                        .is_some_and(|n| n == "clone3" || n == "clone") =>
            {
                self.exact += stack.count
            }
            (Ok(()), Err(why)) => {
                self.short += stack.count;
                let names = oracle.names(frames).join(";");
                let stop = stack.truncated.as_deref().unwrap_or("not called truncated");
                *self.shorts.entry(format!("{why} ({stop}) [{names}]")).or_default() += stack.count;
            }
        }
    }

    /// Add `other`'s verdicts to these.
    pub fn merge(&mut self, other: Tally) {
        self.exact += other.exact;
        self.short += other.short;
        self.wrong_samples += other.wrong_samples;
        self.wrong.extend(other.wrong);
        self.outside += other.outside;
        for (why, n) in other.shorts {
            *self.shorts.entry(why).or_default() += n;
        }
        self.loader_marked_short.extend(other.loader_marked_short);
    }

    /// The samples judged (those with no stack of their own left out).
    pub fn total(&self) -> u64 {
        self.exact + self.short + self.wrong_samples
    }

    /// One line of figures, then the most frequent reasons a sample was short.
    pub fn report(&self) -> String {
        let total = self.total();
        let mut text = format!(
            "{total} samples, {} exact ({:.2} %), {} short, {} wrong ({:.2} % exact with the {} samples \
             inside execs and exits with no stack)",
            self.exact,
            100.0 * self.exact as f64 / total.max(1) as f64,
            self.short,
            self.wrong_samples,
            100.0 * self.exact as f64 / (total + self.outside).max(1) as f64,
            self.outside,
        );
        for (why, n) in self.shorts.iter().take(15) {
            text.push_str(&format!("\n  short {n} x {why}"));
        }
        text
    }

    /// No stack wrong, none complete but called truncated, and at least `percent` % exact.
    pub fn assert_exact(&self, percent: u64) {
        assert!(self.wrong.is_empty(), "wrong stacks:\n{}", self.wrong.join("\n"));
        assert!(
            self.loader_marked_short.is_empty(),
            "stacks down to the loader's entry code called truncated:\n{}",
            self.loader_marked_short.join("\n")
        );
        assert!(
            self.exact * 100 >= self.total() * percent,
            "{} of {} samples exact: fewer than {percent} %",
            self.exact,
            self.total()
        );
    }
}
