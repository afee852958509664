//! The kernel's statistics of the BPF programs a process holds (`run_time_ns` and `run_cnt` in
//! `/proc/PID/fdinfo/FD` of each program fd, counted while `kernel.bpf_stats_enabled` is 1),
//! summed over the process's programs. Read by `measure` around each run's work and by `cost`
//! for the rejecting runs.

use std::path::Path;

/// The BPF programs of one process, summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgStats {
    pub run_time_ns: u64,
    /// The entry program's runs (the largest count).
    pub run_cnt: u64,
    pub programs: usize,
}

impl ProgStats {
    /// What was added since `earlier` (of the same programs).
    pub fn since(self, earlier: ProgStats) -> ProgStats {
        ProgStats {
            run_time_ns: self.run_time_ns.saturating_sub(earlier.run_time_ns),
            run_cnt: self.run_cnt.saturating_sub(earlier.run_cnt),
            programs: self.programs,
        }
    }
}

/// The statistics of every BPF program `pid` holds an fd of.
pub fn prog_stats(pid: u32) -> anyhow::Result<ProgStats> {
    let mut stats = ProgStats::default();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        let entry = entry?;
        if std::fs::read_link(entry.path()).is_ok_and(|l| l == Path::new("anon_inode:bpf-prog")) {
            let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", entry.file_name().to_string_lossy()))?;
            let (time, runs) = parse_fdinfo(&info);
            stats.run_time_ns += time;
            stats.run_cnt = stats.run_cnt.max(runs);
            stats.programs += 1;
        }
    }
    Ok(stats)
}

/// `(run_time_ns, run_cnt)` of a program fd's fdinfo.
fn parse_fdinfo(info: &str) -> (u64, u64) {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or(0)
    };
    (field("run_time_ns:"), field("run_cnt:"))
}

#[cfg(test)]
mod tests;
