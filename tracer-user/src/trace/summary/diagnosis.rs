//! The summary's last word on a profile that came back empty or broken: one sentence per
//! cause found, each naming the cause and the next step (`diagnosis` in the JSON summary).
//! Pure: the session gathers the evidence ([`Evidence`]); this only words it.

/// What the session saw that can explain an empty or broken profile.
#[derive(Debug, Default)]
pub struct Evidence<'a> {
    /// Samples kept, and samples the kernel could not hand over.
    pub samples: u64,
    pub lost: u64,
    pub frequency: u64,
    /// Sentences already found about the targets (a thread id, a kernel thread).
    pub target_notes: &'a [String],
    /// Given pids that used no CPU time while traced.
    pub idle: &'a [u32],
    /// Sentences about runtimes without their flag (Java, Node.js).
    pub runtimes: &'a [String],
    /// Processes sampled in JIT code, and perf maps read.
    pub jit_processes: u64,
    pub perf_maps: u64,
    /// Objects without symbols that frames were left unnamed in, with their samples (most
    /// first); named when in at least 1 sample in 20.
    pub unnamed: &'a [(String, u64)],
    /// Whether debuginfod servers were configured (`DEBUGINFOD_URLS`, `--debuginfod`).
    pub debuginfod: bool,
    /// The Debian packages that own objects of [`mentioned`] (path, package), as far as the
    /// host's dpkg lists them.
    pub packages: &'a [(String, String)],
}

/// The objects without symbols the advice names ([`Evidence::unnamed`]): those in at least 1
/// sample in 20, at most [`MAX_UNNAMED`].
pub fn mentioned(unnamed: &[(String, u64)], samples: u64) -> Vec<&str> {
    unnamed
        .iter()
        .filter(|(_, n)| n * 20 >= samples)
        .take(MAX_UNNAMED)
        .map(|(path, _)| path.as_str())
        .collect()
}

/// Objects without symbols named in the advice, at most.
const MAX_UNNAMED: usize = 3;

/// The sentences, in the order a reader should act on them.
pub fn diagnose(e: &Evidence<'_>) -> Vec<String> {
    let mut out: Vec<String> = e.target_notes.to_vec();
    if e.samples == 0 {
        if !e.idle.is_empty() {
            let pids: Vec<String> = e.idle.iter().map(u32::to_string).collect();
            out.push(format!(
                "no samples: pid {} used no CPU time while traced (it slept or waited the whole time): to see \
                 where it waits, trace it with -e offcpu",
                pids.join(", ")
            ));
        } else if e.lost > 0 {
            out.push(format!(
                "no samples: all {} were lost (the ring buffer was full): raise --ring-buffer-size or lower -F",
                e.lost
            ));
        } else if e.target_notes.is_empty() {
            out.push(format!(
                "no samples: the traced processes ran less than one sampling period ({:.1} ms at -F {}) on a CPU, \
                 or ended at once: trace for longer, raise -F, or run `sframe-trace doctor` to check this host",
                1000.0 / e.frequency.max(1) as f64,
                e.frequency
            ));
        }
    }
    out.extend(e.runtimes.iter().cloned());
    if e.runtimes.is_empty() && e.jit_processes > e.perf_maps {
        out.push(format!(
            "{} processes ran JIT-compiled code without a perf map (/tmp/perf-PID.map), so those frames have no \
             names: start the runtime with its perf-map flag (Node.js --perf-basic-prof, Java \
             -XX:+DumpPerfMapAtExit, .NET DOTNET_PerfMapEnabled=1)",
            e.jit_processes - e.perf_maps
        ));
    }
    // Objects with unnamed frames in at least 1 sample in 20: those a reader meets.
    let unnamed: Vec<&(String, u64)> = e.unnamed.iter().filter(|(_, n)| n * 20 >= e.samples).collect();
    if !unnamed.is_empty() {
        let named: Vec<String> = unnamed
            .iter()
            .take(MAX_UNNAMED)
            .map(|(path, n)| format!("{} ({n} samples)", tracer_unwind::names::escaped(path)))
            .collect();
        let more = unnamed.len().saturating_sub(MAX_UNNAMED);
        let mut debug_packages: Vec<String> = Vec::new();
        for (path, _) in unnamed.iter().take(MAX_UNNAMED) {
            if let Some((_, package)) = e.packages.iter().find(|(owned, _)| owned == path) {
                let debug = format!("{}-dbgsym", tracer_unwind::names::escaped(package));
                if !debug_packages.contains(&debug) {
                    debug_packages.push(debug);
                }
            }
        }
        let install = if debug_packages.is_empty() {
            "install their debug packages (`dpkg -S PATH` or `rpm -qf PATH` names the package; its debug \
             package is PACKAGE-dbgsym or PACKAGE-debuginfo)"
                .to_owned()
        } else {
            format!(
                "install {} (from Debian's debug archive, deb.debian.org/debian-debug)",
                debug_packages.join(", ")
            )
        };
        let fix = if e.debuginfod {
            format!("{install}, or give --debug-dir")
        } else {
            format!(
                "set DEBUGINFOD_URLS (e.g. https://debuginfod.debian.net, https://debuginfod.fedoraproject.org) to \
                 fetch their symbols, or {install}"
            )
        };
        out.push(format!(
            "frames in objects without symbols are unnamed: {}{}: {fix}",
            named.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    out
}

#[cfg(test)]
mod tests;
