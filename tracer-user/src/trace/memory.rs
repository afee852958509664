//! `--max-memory` (150 MiB unless given): the bound on the tracer's own resident memory. The
//! session looks at it at every housekeeping tick. Past the bound in all (`VmRSS`, which a
//! cgroup's limit counts too), the pages of the files mapped only to be read (the symbolizer's
//! ELF and debug files, [`page_out_ranges`]) are handed back to the kernel, at most once per
//! [`SHED_INTERVAL`]: they are read again from their files as they are touched. Past the bound
//! in its anonymous pages (`RssAnon` of `/proc/self/status`: the heap its caches live in) it
//! sheds what it can build again (the symbol
//! cache's names and what blazesym parsed to find them, named again as frames ask) and gives
//! the freed memory back to the system, says so in its log (a warning, at most once per
//! [`SHED_INTERVAL`]) and counts it (`/metrics`: `sframe_trace_memory_sheds_total`). It never
//! stops the session: what the profile itself holds, the kernel tables and the samples are not
//! dropped, so the resident size may stay above a bound set too low, and the tracer goes on.

use std::time::{Duration, Instant};

use crate::symbolize::SymbolCache;

/// Caches are shed at most this often (they are rebuilt as frames ask, which costs time: a
/// resident size that stays above the bound must not make every tick rebuild them).
pub const SHED_INTERVAL: Duration = Duration::from_secs(10);

/// The bound, and when the caches were last shed and the mapped files last handed back.
#[derive(Debug)]
pub struct MemoryBound {
    max_bytes: u64,
    last_shed: Option<Instant>,
    last_page_out: Option<Instant>,
    /// Times the caches were shed.
    pub sheds: u64,
    /// Bytes of mapped files handed back, in all.
    pub paged_out_bytes: u64,
}

impl MemoryBound {
    pub fn new(max_bytes: u64) -> MemoryBound {
        MemoryBound {
            max_bytes,
            last_shed: None,
            last_page_out: None,
            sheds: 0,
            paged_out_bytes: 0,
        }
    }

    /// The bound, in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Whether the caches are to be shed now, the resident size being `rss_bytes` at `now`:
    /// above the bound, and not shed within [`SHED_INTERVAL`]. Counts the shedding it allows.
    pub fn shed_now(&mut self, rss_bytes: u64, now: Instant) -> bool {
        if rss_bytes <= self.max_bytes || self.last_shed.is_some_and(|t| now.duration_since(t) < SHED_INTERVAL) {
            return false;
        }
        self.last_shed = Some(now);
        self.sheds += 1;
        true
    }

    /// Whether the mapped files are to be handed back now, the resident size being
    /// `rss_bytes` at `now`: above the bound, and not done within [`SHED_INTERVAL`].
    pub fn page_out_now(&mut self, rss_bytes: u64, now: Instant) -> bool {
        if rss_bytes <= self.max_bytes
            || self
                .last_page_out
                .is_some_and(|t| now.duration_since(t) < SHED_INTERVAL)
        {
            return false;
        }
        self.last_page_out = Some(now);
        true
    }

    /// Look at the resident size; past the bound in all, hand the mapped files' pages back
    /// (see [`Self::page_out_now`]); past it in anonymous memory (see [`Self::shed_now`]), empty
    /// `symbols` and say so. The session hands the freed memory back
    /// (`SymbolCache::take_dropped`).
    pub fn bound(&mut self, symbols: &mut SymbolCache) {
        if self.page_out_now(super::health::rss_bytes(), Instant::now()) {
            let bytes = page_out_mapped_files();
            self.paged_out_bytes += bytes;
            log::debug!(
                "resident memory over --max-memory: {} MiB of mapped files handed back",
                bytes >> 20
            );
        }
        let rss = anon_rss_bytes();
        if self.shed_now(rss, Instant::now()) {
            let names = symbols.cached_names();
            symbols.shed();
            log::warn!(
                "resident memory (RssAnon) {} MiB is over --max-memory {} MiB: {names} cached frame names and the \
                 symbol data parsed for them were dropped (found again as frames ask; shed {} times so far)",
                rss >> 20,
                self.max_bytes >> 20,
                self.sheds
            );
        }
    }
}

/// Hand back the pages of the files the tracer maps only to read (the symbolizer's ELF and debug
/// files, sealed copies, [`page_out_ranges`]): they count in its resident size (`VmRSS`, and a
/// cgroup's memory), the kernel reads them again if they are touched. Returns the bytes of the
/// ranges given back (0 when `/proc/self/maps` cannot be read or the kernel lacks the call).
pub fn page_out_mapped_files() -> u64 {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return 0;
    };
    let mut bytes = 0;
    for (start, end) in page_out_ranges(&maps) {
        match crate::sys::memory::page_out(start, end - start) {
            Ok(()) => bytes += end - start,
            // Too old a kernel (before 5.4): nothing to do.
            Err(err) if err.raw_os_error() == Some(22) => return bytes,
            // Unmapped since the maps were read.
            Err(_) => {}
        }
    }
    bytes
}

/// The ranges of `maps` (`/proc/self/maps`) that map a file only to read it: readable, neither
/// writable nor executable, with an inode, of a file that has no executable mapping here (the
/// program and the libraries it runs, whose read-only parts hold relocated data), and not a
/// special mapping (`[vvar]`, ...). Lines it cannot read are left out.
pub fn page_out_ranges(maps: &str) -> Vec<(u64, u64)> {
    struct Line<'a> {
        start: u64,
        end: u64,
        perms: &'a [u8],
        file: (&'a str, u64),
    }
    let lines: Vec<Line<'_>> = maps
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_ascii_whitespace();
            let (range, perms, _offset, dev, inode) = (
                fields.next()?,
                fields.next()?,
                fields.next()?,
                fields.next()?,
                fields.next()?,
            );
            let (start, end) = range.split_once('-')?;
            let start = u64::from_str_radix(start, 16).ok()?;
            let end = u64::from_str_radix(end, 16).ok().filter(|&end| end > start)?;
            let perms = perms.as_bytes();
            (perms.len() == 4).then_some(())?;
            Some(Line {
                start,
                end,
                perms,
                file: (dev, inode.parse().ok()?),
            })
        })
        .collect();
    let executable: std::collections::HashSet<(&str, u64)> =
        lines.iter().filter(|l| l.perms[2] == b'x').map(|l| l.file).collect();
    lines
        .iter()
        .filter(|l| l.file.1 != 0 && l.perms[..3] == *b"r--" && !executable.contains(&l.file))
        .map(|l| (l.start, l.end))
        .collect()
}

/// The tracer's anonymous resident memory, from `RssAnon` in `/proc/self/status` (0 when it
/// cannot be read: then nothing is shed).
pub fn anon_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    parse_rss_anon(&status)
}

/// `RssAnon:  1234 kB` in a status text, in bytes.
fn parse_rss_anon(status: &str) -> u64 {
    parse_kib(status, "RssAnon:").saturating_mul(1024)
}

/// The KiB of the line starting with `key` (`VmRSS:`, `RssAnon:`, ...) of a status text; 0
/// without it.
fn parse_kib(status: &str, key: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse::<u64>().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under the bound nothing is shed; above it the caches are shed once, then not again
    /// within the interval however long the size stays above, then again after it.
    #[test]
    fn sheds_above_the_bound_at_most_once_an_interval() {
        let mut bound = MemoryBound::new(100);
        let start = Instant::now();
        assert!(!bound.shed_now(100, start));
        assert!(bound.shed_now(101, start));
        assert!(!bound.shed_now(500, start + Duration::from_secs(1)));
        assert!(!bound.shed_now(500, start + SHED_INTERVAL - Duration::from_millis(1)));
        assert!(bound.shed_now(500, start + SHED_INTERVAL));
        assert_eq!(bound.sheds, 2);
    }

    /// The mapped files are handed back above the bound in all, then not again within the
    /// interval, then again after it.
    #[test]
    fn pages_out_above_the_bound_at_most_once_an_interval() {
        let mut bound = MemoryBound::new(100);
        let start = Instant::now();
        assert!(!bound.page_out_now(100, start));
        assert!(bound.page_out_now(101, start));
        assert!(!bound.page_out_now(500, start + SHED_INTERVAL - Duration::from_millis(1)));
        assert!(bound.page_out_now(500, start + SHED_INTERVAL));
    }

    /// Only read-only mappings of files with no executable mapping are given back: not the
    /// program's or a library's relocated read-only data, not anonymous memory, not writable
    /// or executable mappings, not special ones; unreadable lines are skipped.
    #[test]
    fn only_files_mapped_to_be_read_are_paged_out() {
        let maps = "\
55d0c0000000-55d0c0100000 r--p 00000000 fe:01 100 /usr/bin/sframe-trace
55d0c0100000-55d0c0200000 r-xp 00100000 fe:01 100 /usr/bin/sframe-trace
55d0c0200000-55d0c0210000 r--p 00200000 fe:01 100 /usr/bin/sframe-trace
7f0000000000-7f0000400000 r--p 00000000 fe:01 200 /usr/lib/debug/.build-id/ab/cdef.debug
7f0000400000-7f0000500000 r--s 00000000 00:01 300 /memfd:sframe-trace-symbols (deleted)
7f0000500000-7f0000600000 rw-p 00000000 00:00 0
7f0000600000-7f0000700000 rw-p 00000000 fe:01 400 /var/lib/data
7f0000700000-7f0000701000 r--p 00000000 00:00 0 [vvar]
7f0000800000-7f0000900000 r--p 00000000 fe:02 100 /other/fs/same/inode
garbage line
7f0000a00000-7f0000900000 r--p 00000000 fe:01 500 /backwards
";
        assert_eq!(
            page_out_ranges(maps),
            [
                (0x7f00_0000_0000, 0x7f00_0040_0000),
                (0x7f00_0040_0000, 0x7f00_0050_0000),
                (0x7f00_0080_0000, 0x7f00_0090_0000)
            ]
        );
    }

    /// A file this process maps and reads counts in its resident size; paged out, it no longer
    /// does, and its bytes read the same afterwards.
    #[test]
    fn a_mapped_file_read_is_handed_back() {
        use std::io::Write as _;
        let rss_file = || {
            let status = std::fs::read_to_string("/proc/self/status").expect("status");
            parse_kib(&status, "RssFile:")
        };
        // Beside the build, on a disk's file system (a tmpfs page has nowhere to go).
        let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
        let dir = tempfile::tempdir_in(&target)
            .or_else(|_| tempfile::tempdir())
            .expect("tempdir");
        let path = dir.path().join("data");
        let mut file = std::fs::File::create(&path).expect("create");
        let block: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
        for _ in 0..32 {
            file.write_all(&block).expect("write");
        }
        file.sync_all().expect("sync");
        let file = std::fs::File::open(&path).expect("open");
        let mapped = crate::sys::memory::Mapped::of(&file, 32 << 20).expect("mmap");
        let sum = |bytes: &[u8]| bytes.iter().step_by(4096).map(|&b| u64::from(b)).sum::<u64>();
        let before = sum(mapped.bytes());
        let touched = rss_file();
        assert!(page_out_mapped_files() >= 32 << 20, "the file's mapping was given back");
        let after = rss_file();
        assert!(
            after + (24 << 10) <= touched,
            "RssFile {touched} KiB with the file read, {after} KiB after"
        );
        assert_eq!(sum(mapped.bytes()), before, "the same bytes, read again");
    }

    /// `RssAnon` is read in bytes; a status without it, or a malformed one, gives 0 (nothing
    /// shed), and this process has some.
    #[test]
    fn rss_anon_is_read_from_the_status() {
        assert_eq!(parse_rss_anon("VmRSS:\t 9000 kB\nRssAnon:\t    2048 kB\n"), 2 << 20);
        assert_eq!(parse_rss_anon("VmRSS:\t 9000 kB\n"), 0);
        assert_eq!(parse_rss_anon("RssAnon: lots kB\n"), 0);
        assert!(anon_rss_bytes() > 0);
    }
}
