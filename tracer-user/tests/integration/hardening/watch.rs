//! Watching the tracer's footprint from outside while a test drives it: its resident memory
//! (`/proc/PID/status` `VmRSS`, read in the background) and its open files (`/proc/PID/fd`).

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

pub(super) use super::footprint::open_files;
use super::{footprint, status_kib};

/// The tracer's resident memory, read every 200 ms until dropped.
pub(super) struct RssWatch {
    stop: Arc<AtomicBool>,
    readings: Arc<Mutex<Vec<(Instant, u64)>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssWatch {
    pub(super) fn start(pid: u32) -> RssWatch {
        RssWatch::of(pid, "VmRSS")
    }

    /// Read `field` of `/proc/PID/status` instead (`RssAnon`: the memory the tracer itself
    /// allocated, without the pages of the files it maps).
    pub(super) fn of(pid: u32, field: &'static str) -> RssWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let readings = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let (stop, readings) = (stop.clone(), readings.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(rss) = status_kib(pid, field) {
                        readings.lock().expect("readings").push((Instant::now(), rss));
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
        };
        RssWatch {
            stop,
            readings,
            thread: Some(thread),
        }
    }

    /// The most seen.
    pub(super) fn peak_kib(&self) -> u64 {
        self.readings
            .lock()
            .expect("readings")
            .iter()
            .map(|&(_, kib)| kib)
            .max()
            .unwrap_or(0)
    }

    /// The last reading before `at`.
    pub(super) fn at(&self, at: Instant) -> u64 {
        self.readings
            .lock()
            .expect("readings")
            .iter()
            .take_while(|&&(t, _)| t <= at)
            .last()
            .map_or(0, |&(_, kib)| kib)
    }
}

impl RssWatch {
    /// The median of the readings in `[from, to]` (0 without any): one reading can catch a
    /// table being built, a median over seconds the tracer's standing size.
    pub(super) fn median_between(&self, from: Instant, to: Instant) -> u64 {
        footprint::median_between(&self.readings.lock().expect("readings"), from, to)
    }
}

impl Drop for RssWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The tracer's resident memory once it stops growing (a system-wide tracer builds the large
/// tables of the processes running at its start in the background once it samples), within
/// 20 s.
pub(super) fn settled_rss(pid: u32) -> u64 {
    let mut last = status_kib(pid, "VmRSS").expect("the tracer's VmRSS");
    for _ in 0..20 {
        std::thread::sleep(Duration::from_secs(1));
        let now = status_kib(pid, "VmRSS").expect("the tracer's VmRSS");
        if now <= last + last / 50 {
            return now;
        }
        last = now;
    }
    last
}

/// The tracer's open file descriptors on files under `dir` (deleted ones included): what it
/// holds of a test's own files, whatever other programs on the host make it open.
pub(super) fn open_files_in(pid: u32, dir: &std::path::Path) -> u64 {
    open_files_where(pid, |target| target.starts_with(dir))
}

/// The tracer's open file descriptors on processes (`/proc/...`, pidfds): what would leak with
/// every process it met if it kept them. Other programs on the host come and go too, so only a
/// count far above the start tells.
pub(super) fn open_process_files(pid: u32) -> u64 {
    open_files_where(pid, |target| {
        target.starts_with("/proc") || target.as_os_str() == "anon_inode:[pidfd]"
    })
}

/// The tracer's open file descriptors whose target `keep` accepts.
fn open_files_where(pid: u32, keep: impl Fn(&std::path::Path) -> bool) -> u64 {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    fds.filter_map(Result::ok)
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter(|target| keep(target))
        .count() as u64
}
