//! Unit tests of `trace::folded`; each test says what it proves.

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
                truncated: None,
                frames: chain("_start;main;leaf"),
                count: 12
            },
            Stack {
                comm: "plt".into(),
                truncated: None,
                frames: chain("[unknown];0x7f00"),
                count: 3
            },
            Stack {
                comm: "noinfo".into(),
                truncated: None,
                frames: vec![],
                count: 2
            },
        ]
    );
}

/// A cut stack's annotation is kept apart from its frames, and two stacks that differ only in
/// why they were cut are two lines, not a repeated one (the tracer prints both: a PC alone in
/// an exit, cut `exec_or_exit` or `no_mapping`).
#[test]
fn stacks_cut_for_different_reasons_are_not_repeated() {
    let got = stacks(
        "deep;[truncated: exec_or_exit];[unknown 0x7f01] 2\ndeep;[truncated: no_mapping];[unknown 0x7f01] 1\n\
         deep;main 1\ndeep;main 1",
    );
    assert_eq!(got[0].truncated.as_deref(), Some("[truncated: exec_or_exit]"));
    assert_eq!(got[0].frames, chain("[unknown 0x7f01]"));
    assert_eq!(repeated_lines(&got), vec![("deep;main".to_owned(), 2)]);
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

/// A stack whose innermost frame is off the chain (libc printing at exit, the loader) counts as
/// taken outside it when the chain's functions in it are one outer block that is a run of the
/// chain; a chain function called from code off the chain, or an outer block out of order, is
/// wrong.
#[test]
fn innermost_part_counts_code_off_the_chain_apart() {
    let want = chain("_start;main;run;recurse;recurse;leaf");
    let v = Verdict::innermost_part(
        &stacks(
            "noinfo;main;__fprintf;__vfprintf_internal 2\nnoinfo;_start;_dl_start 1\n\
             noinfo;_dl_start;_dl_sysdep_start 1\nnoinfo;recurse;leaf 4\n\
             noinfo;run;main;__fprintf 1\nnoinfo;main;__fprintf;run;write 1\n\
             noinfo;main;__fprintf;leaf 1\nother;main;__fprintf 1",
        ),
        "noinfo",
        &want,
    );
    assert_eq!((v.good, v.outside, v.total), (4, 4, 12));
    assert_eq!(v.wrong.len(), 4, "{:?}", v.wrong);
    assert!(v.to_string().contains("4 taken off the chain"), "{v}");
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

/// Issue 31: a cut stack's `[truncated: REASON]` frame, first after the command name, is left
/// out, so a truncated stack is still judged by its frames; a frame of that name elsewhere is
/// kept.
#[test]
fn the_truncation_marker_is_not_a_frame() {
    let got = stacks("app;[truncated: no_info];main;leaf 4\napp;main;[truncated: x] 1\n");
    assert_eq!(got[0].frames, chain("main;leaf"));
    assert_eq!(got[1].frames, chain("main;[truncated: x]"));
    let verdict = Verdict::innermost_part(&got[..1], "app", &chain("_start;main;leaf"));
    assert_eq!(verdict.good, 4);
}
