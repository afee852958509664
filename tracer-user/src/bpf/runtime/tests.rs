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
