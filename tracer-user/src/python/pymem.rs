//! Code objects read out of traced processes' memory, on a thread of their own, each read
//! waited for at most [`TIMEOUT`].
//!
//! The addresses come from the process (its frame chain, as the kernel walked it), so the
//! process chooses what is read. Reads go through `/proc/PID/mem`, whose page faults do not
//! wait for a `userfaultfd` handler (the kernel fails them), but a page of a file on a
//! user's FUSE mount can still be made to take forever. A read that does not answer in time
//! leaves its thread behind, blocked; that process is not read again, the next read gets a
//! new thread, and after [`MAX_STUCK_PER_USER`] such threads left by the processes of one user
//! (their owner's uid) no process of that user is read any more: one user's stuck reads cost
//! that user's processes only. After [`MAX_STUCK`] threads left in all (as many users) no
//! process is read (Python frames then stay unnamed, counted). The session's own thread never
//! waits longer than the timeout.
//!
//! A thread left behind that answers after all (its read was slow, not stuck: a host so busy
//! that the reader was not run in time) gives its process back: at the next read the process,
//! and its user, are read again, once per process (a process whose reads keep answering late
//! would cost the session the timeout at each). A read that never returns keeps them refused.

use std::{
    collections::{HashMap, HashSet},
    fs::File,
    os::unix::fs::FileExt as _,
    sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender},
    time::Duration,
};

use crate::python::{
    CodeLayout,
    code::{CodeError, CodeMeta, read_meta, read_table},
};

/// The longest a read is waited for.
pub const TIMEOUT: Duration = Duration::from_millis(250);
/// Reader threads left blocked by the processes of one user at most; then that user's
/// processes are not read.
pub const MAX_STUCK_PER_USER: usize = 2;
/// Reader threads left blocked at most (by as many users); then reading stops.
pub const MAX_STUCK: usize = 16;
/// Processes whose memory file is kept open at most (past it, all are closed).
const MAX_OPEN: usize = 512;

/// Why nothing was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// The process's memory said no, or held no code object there.
    Code(CodeError),
    /// The read did not answer in time (now, or for this process before), or reading has
    /// stopped.
    Stuck,
}

/// What is asked of the reader thread.
enum Job {
    Meta {
        pid: u32,
        layout: CodeLayout,
        code: u64,
    },
    Table {
        pid: u32,
        at: u64,
        len: u64,
    },
    /// Any other runtime's read (`MemReader::run`).
    Run {
        pid: u32,
        work: Work,
    },
    /// Close the process's memory file (it exited or exec'ed).
    Forget(u32),
}

/// A read of [`MemReader::run`], on the reader thread.
type Work = Box<dyn FnOnce(&mut dyn FnMut(u64, &mut [u8]) -> bool) -> Box<dyn std::any::Any + Send> + Send>;

enum Reply {
    Meta(Result<CodeMeta, CodeError>),
    Table(Result<Vec<u8>, CodeError>),
    Run(Box<dyn std::any::Any + Send>),
}

/// Reads a process's memory: `read(pid, addr, buf)`, false when it cannot.
pub type ReadFn = dyn FnMut(u32, u64, &mut [u8]) -> bool + Send;

/// Makes the reading function of each new thread.
type MakeRead = Box<dyn Fn() -> Box<ReadFn>>;

struct Worker {
    jobs: SyncSender<Job>,
    replies: Receiver<Reply>,
}

/// A reader thread left behind by a read of `pid` (owned by `uid`) that did not answer in time:
/// its replies are watched for the late answer (or its end) that shows it was not stuck.
struct LeftBehind {
    pid: u32,
    uid: u32,
    replies: Receiver<Reply>,
}

/// The reader thread and what it has given up on.
pub struct MemReader {
    worker: Option<Worker>,
    make_read: MakeRead,
    /// Processes a read of which timed out: never read again.
    stuck_pids: HashSet<u32>,
    /// Threads left blocked, by the uid of the process that blocked them.
    stuck_users: HashMap<u32, usize>,
    /// The threads left blocked (at most [`MAX_STUCK`]: no read is sent past it).
    left: Vec<LeftBehind>,
    /// Processes given back once after a late answer (never twice).
    given_back: HashSet<u32>,
    /// Threads left blocked.
    pub stuck: usize,
    /// Threads left behind that answered after all (their processes read again).
    pub recovered: usize,
}

impl Default for MemReader {
    fn default() -> MemReader {
        MemReader::with(Box::new(|| Box::new(proc_mem_reader())))
    }
}

impl MemReader {
    /// A reader whose threads read with what `make_read` gives (tests: a fake memory).
    pub fn with(make_read: MakeRead) -> MemReader {
        MemReader {
            worker: None,
            make_read,
            stuck_pids: HashSet::new(),
            stuck_users: HashMap::new(),
            left: Vec::new(),
            given_back: HashSet::new(),
            stuck: 0,
            recovered: 0,
        }
    }

    /// The code object at `code` in `pid` (owned by `uid`), but its line table's bytes.
    pub fn meta(&mut self, pid: u32, uid: u32, layout: CodeLayout, code: u64) -> Result<CodeMeta, ReadError> {
        match self.ask(pid, uid, Job::Meta { pid, layout, code })? {
            Reply::Meta(r) => r.map_err(ReadError::Code),
            _ => Err(ReadError::Stuck),
        }
    }

    /// The `len` bytes of a line table at `at` in `pid`.
    pub fn table(&mut self, pid: u32, uid: u32, at: u64, len: u64) -> Result<Vec<u8>, ReadError> {
        match self.ask(pid, uid, Job::Table { pid, at, len })? {
            Reply::Table(r) => r.map_err(ReadError::Code),
            _ => Err(ReadError::Stuck),
        }
    }

    /// What `work` gives from `pid`'s memory (owned by `uid`), read on the reader thread with
    /// the same time limit (the reads of another runtime than Python's).
    pub fn run<R: Send + 'static>(
        &mut self,
        pid: u32,
        uid: u32,
        work: impl FnOnce(&mut dyn FnMut(u64, &mut [u8]) -> bool) -> R + Send + 'static,
    ) -> Result<R, ReadError> {
        let work: Work = Box::new(move |read| Box::new(work(read)));
        match self.ask(pid, uid, Job::Run { pid, work })? {
            Reply::Run(answer) => answer.downcast::<R>().map(|r| *r).map_err(|_| ReadError::Stuck),
            _ => Err(ReadError::Stuck),
        }
    }

    /// `pid` exited or exec'ed: its memory file is closed (a new image or a new process with
    /// its pid is opened afresh), and a process that got its pid may be read.
    pub fn forget(&mut self, pid: u32) {
        self.stuck_pids.remove(&pid);
        self.given_back.remove(&pid);
        if let Some(worker) = &self.worker {
            // Only forgets wait in the queue (a read is answered before the next is sent); a
            // full queue drops this one, and the process reads its old file: unreadable.
            let _ = worker.jobs.try_send(Job::Forget(pid));
        }
    }

    /// The threads left behind that have answered since (or ended): their processes and users
    /// are read again.
    fn recover(&mut self) {
        let mut i = 0;
        while i < self.left.len() {
            match self.left[i].replies.try_recv() {
                Err(mpsc::TryRecvError::Empty) => i += 1,
                Ok(_) | Err(mpsc::TryRecvError::Disconnected) => {
                    let late = self.left.swap_remove(i);
                    self.stuck -= 1;
                    if let Some(n) = self.stuck_users.get_mut(&late.uid) {
                        *n -= 1;
                        if *n == 0 {
                            self.stuck_users.remove(&late.uid);
                        }
                    }
                    // Once per process: one whose reads keep answering late (a FUSE page
                    // made slow on purpose) would cost the session the timeout every time.
                    if self.given_back.insert(late.pid) {
                        self.stuck_pids.remove(&late.pid);
                    }
                    self.recovered += 1;
                    log::info!(
                        "reading the memory of process {} answered late: it is read again",
                        late.pid
                    );
                }
            }
        }
    }

    fn ask(&mut self, pid: u32, uid: u32, job: Job) -> Result<Reply, ReadError> {
        if !self.left.is_empty() {
            self.recover();
        }
        let user_stuck = self.stuck_users.get(&uid).copied().unwrap_or(0);
        if self.stuck_pids.contains(&pid) || user_stuck >= MAX_STUCK_PER_USER || self.stuck >= MAX_STUCK {
            return Err(ReadError::Stuck);
        }
        let worker = match &mut self.worker {
            Some(worker) => worker,
            None => self.worker.insert(spawn((self.make_read)()).ok_or(ReadError::Stuck)?),
        };
        if worker.jobs.send(job).is_err() {
            self.worker = None;
            return Err(ReadError::Stuck);
        }
        match worker.replies.recv_timeout(TIMEOUT) {
            Ok(reply) => Ok(reply),
            Err(RecvTimeoutError::Timeout) => {
                self.stuck += 1;
                *self.stuck_users.entry(uid).or_default() += 1;
                self.stuck_pids.insert(pid);
                // Its job queue closes with `jobs`: the thread ends once its read returns.
                if let Some(Worker { replies, .. }) = self.worker.take() {
                    self.left.push(LeftBehind { pid, uid, replies });
                }
                log::warn!(
                    "reading the memory of process {pid} took longer than {TIMEOUT:?}: its \
                     runtime's frames are not named until it answers ({} of {MAX_STUCK_PER_USER} reader threads \
                     stuck for uid {uid}, {} of {MAX_STUCK} in all)",
                    user_stuck + 1,
                    self.stuck
                );
                Err(ReadError::Stuck)
            }
            Err(RecvTimeoutError::Disconnected) => {
                self.worker = None;
                Err(ReadError::Stuck)
            }
        }
    }
}

/// A reader thread answering jobs with `read` until its job queue closes (a thread stuck in a
/// read finds it closed once the read returns, and ends).
fn spawn(mut read: Box<ReadFn>) -> Option<Worker> {
    let (jobs, job_rx) = mpsc::sync_channel::<Job>(64);
    let (reply_tx, replies) = mpsc::sync_channel::<Reply>(1);
    let spawned = std::thread::Builder::new()
        .name("sframe-trace-pymem".into())
        .spawn(move || {
            // The session waits on this thread: it runs at the session's priority.
            crate::priority::inherit_nice();
            for job in job_rx {
                let reply = match job {
                    Job::Forget(pid) => {
                        read(pid, 0, &mut []);
                        continue;
                    }
                    Job::Meta { pid, layout, code } => {
                        Reply::Meta(read_meta(&layout, code, &mut |a, b| read(pid, a, b)))
                    }
                    Job::Table { pid, at, len } => Reply::Table(read_table(at, len, &mut |a, b| read(pid, a, b))),
                    Job::Run { pid, work } => Reply::Run(work(&mut |a, b| read(pid, a, b))),
                };
                if reply_tx.send(reply).is_err() {
                    return;
                }
            }
        });
    match spawned {
        Ok(thread) => {
            crate::priority::inherit(&thread);
            Some(Worker { jobs, replies })
        }
        Err(err) => {
            log::warn!("cannot start a thread to read Python code objects: {err}");
            None
        }
    }
}

/// Reads through `/proc/PID/mem`, each process's file opened at its first read and kept; a
/// read of no bytes closes it (see [`MemReader::forget`]).
fn proc_mem_reader() -> impl FnMut(u32, u64, &mut [u8]) -> bool + Send {
    let mut files: HashMap<u32, Option<File>> = HashMap::new();
    move |pid, addr, buf| {
        if buf.is_empty() {
            files.remove(&pid);
            return true;
        }
        if files.len() >= MAX_OPEN && !files.contains_key(&pid) {
            files.clear();
        }
        let file = files
            .entry(pid)
            .or_insert_with(|| File::open(format!("/proc/{pid}/mem")).ok());
        file.as_ref().is_some_and(|f| f.read_exact_at(buf, addr).is_ok())
    }
}

#[cfg(test)]
mod tests;
