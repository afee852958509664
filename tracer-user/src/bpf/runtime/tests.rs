//! Unit tests of `bpf::runtime`; each test says what it proves.

use super::*;

/// A refusal under a memlock limit that stays is the one sentence about the limit; any
/// other failure, or no limit, keeps its own cause.
#[test]
fn load_failures_are_explained() {
    let refused = || anyhow::Error::new(std::io::Error::from_raw_os_error(1)).context("creating map EVENTS");
    let text = format!("{:#}", explain_load_failure(refused(), Some(64 << 10)));
    assert!(
        text.starts_with("the locked-memory limit (64 KiB, `ulimit -l`) is too low"),
        "{text}"
    );
    assert!(!text.contains('\n'));
    let text = format!("{:#}", explain_load_failure(refused(), None));
    assert!(text.starts_with("loading the eBPF object"), "{text}");
    let other = anyhow::Error::new(std::io::Error::from_raw_os_error(22));
    let text = format!("{:#}", explain_load_failure(other, Some(64 << 10)));
    assert!(text.starts_with("loading the eBPF object"), "{text}");
}

/// A program the verifier gives up on is one message naming it, the kernel's answer and the
/// end of the log where the verifier says why, not the whole log (regression: 7.2's refusal
/// of `walk_user_vma` was a 150 KB warning).
#[test]
fn a_rejection_keeps_the_end_of_the_verifier_log() {
    let mut log: String = (0..5000)
        .map(|i| format!("{i}: (bf) r7 = r1 ; R1=scalar()\n"))
        .collect();
    log.push_str("BPF program is too large. Processed 1000001 insn\nverification time 53094240 usec\n\n");
    let err = ProgramError::LoadError {
        io_error: std::io::Error::from_raw_os_error(7),
        verifier_log: aya_obj::VerifierLog::new(log),
    };
    let text = format!("{:#}", rejected("walk_user_vma", err));
    assert!(
        text.starts_with("the kernel verifier rejected walk_user_vma ("),
        "{text}"
    );
    assert!(text.contains("(4994 lines before)"), "{text}");
    assert!(text.contains("Processed 1000001 insn"), "{text}");
    assert!(text.ends_with("verification time 53094240 usec"), "{text}");
    assert!(!text.contains("\n  4993: "), "{text}");
    assert!(text.lines().count() <= VERIFIER_LINES + 2, "{text}");
}

/// A short log is kept whole, without a count of lines left out.
#[test]
fn a_short_log_is_kept_whole() {
    assert_eq!(log_tail("a\n\nb\n", 8), "  a\n  b");
    assert_eq!(log_tail("", 8), "");
}
