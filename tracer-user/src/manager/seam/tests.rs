//! Unit tests of `manager::seam`: the kernel's refusals become typed errors.

use anyhow::Context as _;

use super::{SeamError, full_or_failed};

/// A map insert the kernel refused with `E2BIG`, as aya reports it.
fn refused(errno: i32) -> aya::maps::MapError {
    aya::maps::MapError::SyscallError(aya::sys::SyscallError {
        call: "bpf_map_update_elem",
        io_error: std::io::Error::from_raw_os_error(errno),
    })
}

/// `E2BIG` on an insert, under any context, is the map full (named); any other errno, or an
/// error that is not the kernel's, is a failure that keeps its message.
#[test]
fn a_full_map_is_told_apart_from_a_failure() {
    const E2BIG: i32 = 7;
    const EPERM: i32 = 1;
    let full = Err::<(), _>(refused(E2BIG)).context("adding process 7 to PROCS");
    assert!(matches!(
        full_or_failed("PROCS", full.unwrap_err()),
        SeamError::Full("PROCS")
    ));
    let denied = Err::<(), _>(refused(EPERM)).context("adding process 7 to PROCS");
    match full_or_failed("PROCS", denied.unwrap_err()) {
        SeamError::Failed(err) => assert!(format!("{err:#}").contains("adding process 7"), "{err:#}"),
        other => panic!("not a failure: {other:?}"),
    }
    let other = anyhow::anyhow!("the map is gone");
    assert!(matches!(full_or_failed("PYTHON", other), SeamError::Failed(_)));
    assert_eq!(SeamError::Full("PYTHON").to_string(), "the kernel map PYTHON is full");
}
