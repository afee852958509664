//! Why a refused read of `/proc/PID/maps` is said to be refused.

use super::denial_cause;

/// Regression (`--pid 1` as root on a host whose pid 1 cannot be read blamed missing
/// privileges): only a user without root is told to get root; root is told what refused it.
#[test]
fn root_is_not_told_to_get_root() {
    assert!(denial_cause((1000, false), Some(1)).contains("run it with sudo"));
    for (ids, yama) in [
        ((0, false), Some(1)),
        ((0, true), Some(2)),
        ((0, true), None),
        ((0, true), Some(3)),
    ] {
        let why = denial_cause(ids, yama);
        assert!(
            !why.contains("sudo") && !why.contains("needs root"),
            "{ids:?} {yama:?}: {why}"
        );
    }
    assert!(denial_cause((0, false), None).contains("without CAP_SYS_PTRACE"));
    assert!(denial_cause((0, true), None).contains("although running as root with CAP_SYS_PTRACE"));
    assert!(denial_cause((0, true), Some(3)).contains("ptrace_scope is 3"));
}
