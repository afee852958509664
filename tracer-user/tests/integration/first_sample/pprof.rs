//! The stacks of the tracer's pprof output as the tests judge them, and the wait for the
//! tracer to catch up before it is stopped.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use crate::oracle::Frame;
use crate::support::cpu_ticks;

/// One distinct stack of a pprof profile: its process, command name, count, user frames (innermost
/// first; a location with inlined lines is one frame, its address), the names of its kernel
/// frames, and why the tracer says its user frames end early (its `truncated` label).
pub struct Traced {
    pub pid: u32,
    pub comm: String,
    pub count: u64,
    pub frames: Vec<Frame>,
    pub kernel: Vec<String>,
    pub truncated: Option<String>,
}

/// The kernel's mapping in the tracer's profiles.
const KERNEL: &str = "[kernel.kallsyms]";

/// The stacks of a pprof file as `go tool pprof -raw` prints them: samples (`COUNT WEIGHT:
/// LOCATION...`, a `comm:[NAME]` label line and a `pid:[PID]` one), locations (`ID: 0xADDR M=MAPPING ...`, the
/// object-relative address) and mappings (`ID: 0xSTART/0xLIMIT/0xOFFSET PATH ...`). Read at
/// the end rather than streamed (`-f json`): system-wide on a busy host, every sample of every
/// process symbolized as it comes is gigabytes.
pub fn pprof_stacks(file: &Path) -> Vec<Traced> {
    let out = Command::new("go")
        .args(["tool", "pprof", "-raw"])
        .arg(file)
        .output()
        .expect("run go tool pprof");
    assert!(
        out.status.success(),
        "go tool pprof -raw: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let (mut samples, mut locations, mut mappings) = (Vec::new(), HashMap::new(), HashMap::new());
    let mut truncated: Vec<Option<String>> = Vec::new();
    let mut pids: Vec<u32> = Vec::new();
    let mut section = "";
    for line in text.lines() {
        match line.trim_end() {
            "Samples:" | "Locations" | "Mappings" => {
                section = line.trim_end();
                continue;
            }
            _ => {}
        }
        let trimmed = line.trim();
        match section {
            "Samples:" => {
                if let Some((head, ids)) = trimmed.split_once(": ")
                    && let Some(Ok(count)) = head.split_whitespace().next().map(str::parse::<u64>)
                {
                    let ids: Vec<u64> = ids.split_whitespace().filter_map(|i| i.parse().ok()).collect();
                    samples.push((String::new(), count, ids));
                    truncated.push(None);
                    pids.push(0);
                } else if let Some(comm) = trimmed.strip_prefix("comm:[")
                    && let Some(last) = samples.last_mut()
                {
                    last.0 = comm.split("] ").next().unwrap_or("").trim_end_matches(']').to_owned();
                    if let Some((_, why)) = trimmed.split_once("truncated:[")
                        && let Some(last) = truncated.last_mut()
                    {
                        *last = why.split(']').next().map(str::to_owned);
                    }
                } else if let Some(pid) = trimmed.strip_prefix("pid:[")
                    && let Some(last) = pids.last_mut()
                {
                    *last = pid.split(']').next().and_then(|p| p.parse().ok()).unwrap_or(0);
                }
            }
            "Locations" => {
                // `ID: 0xADDR M=MAPPING ...`; a frame in no known object has no `M=`.
                let mut f = trimmed.split_whitespace();
                if let (Some(id), Some(addr)) = (f.next(), f.next())
                    && let (Ok(id), Some(addr)) = (
                        id.trim_end_matches(':').parse::<u64>(),
                        addr.strip_prefix("0x").and_then(|a| u64::from_str_radix(a, 16).ok()),
                    )
                {
                    let m = f.next().and_then(|m| m.strip_prefix("M=")?.parse::<u64>().ok());
                    let function = f.next().unwrap_or("").to_owned();
                    locations.insert(id, (addr, m, function));
                }
            }
            "Mappings" => {
                let mut f = trimmed.split_whitespace();
                if let (Some(id), Some(_range), Some(path)) = (f.next(), f.next(), f.next())
                    && let Ok(id) = id.trim_end_matches(':').parse::<u64>()
                {
                    mappings.insert(id, PathBuf::from(path));
                }
            }
            _ => {}
        }
    }
    samples
        .into_iter()
        .zip(truncated)
        .zip(pids)
        .map(|(((comm, count, ids), truncated), pid)| {
            let (mut frames, mut kernel) = (Vec::new(), Vec::new());
            for id in &ids {
                let (offset, m, function) = locations.get(id).cloned().unwrap_or((0, None, String::new()));
                let object = m.and_then(|m| mappings.get(&m).cloned()).unwrap_or_default();
                if object.as_os_str() == KERNEL {
                    kernel.push(function);
                } else {
                    frames.push(Frame { object, offset });
                }
            }
            Traced {
                pid,
                comm,
                count,
                frames,
                kernel,
                truncated,
            }
        })
        .collect()
}

/// Wait until the tracer has caught up: its CPU time still for two seconds in a row (it has
/// read the samples and loaded the processes), or at most 20 s (system-wide on a busy machine
/// it never idles; at its end it walks every copy still waiting anyway).
pub fn settle(pid: u32) {
    let mut still = 0;
    let mut last = cpu_ticks(pid);
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(500));
        let now = cpu_ticks(pid);
        still = if now == last { still + 1 } else { 0 };
        last = now;
        if still >= 4 {
            return;
        }
    }
}
