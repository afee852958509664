//! Reading the kernel's BPF program statistics.

use super::*;

/// The two counters are read from a program fd's fdinfo.
#[test]
fn fdinfo_counters() {
    let info = "pos:\t0\nprog_type:\t7\nprog_id:\t6644\nrun_time_ns:\t21635143\nrun_cnt:\t2843\nrecursion_misses:\t0\n";
    assert_eq!(parse_fdinfo(info), (21_635_143, 2843));
    assert_eq!(parse_fdinfo("pos:\t0\n"), (0, 0));
}
