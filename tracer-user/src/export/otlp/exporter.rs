//! The export task and its handle. [`Exporter::submit`] puts a snapshot into a bounded queue
//! without ever waiting (a full queue drops the snapshot and counts it); a tokio task of its
//! own takes snapshots off the queue one at a time, encodes them and sends them, retrying what
//! may succeed later with exponential backoff. [`Exporter::shutdown`] stops the backoff (what
//! is left gets one last attempt each), lets the task drain while the collector keeps taking
//! exports (each within a bounded time) and reports what was sent and what was lost.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    fmt,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering::Relaxed},
    },
    time::Duration,
};

use tokio::{
    sync::{mpsc, watch},
    task::JoinHandle,
    time::MissedTickBehavior,
};

use super::{
    Destination, OtlpConfig,
    encode::encode,
    resource::{ResourceInfo, Runtime},
    transport::{Collector, CollectorError, Transport},
};
use crate::export::model::Resolved;

/// Snapshots waiting for the collector; more are dropped.
pub const QUEUE_CAPACITY: usize = 4;

/// How a failed export is retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// Attempts in all, the first included.
    pub attempts: u32,
    /// The wait before the first retry; it doubles up to `max_delay`.
    pub first_delay: Duration,
    pub max_delay: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            attempts: 5,
            first_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
        }
    }
}

/// One queued snapshot with the resource facts of its processes.
struct Batch {
    profile: Resolved,
    resource: ResourceInfo,
    samples: u64,
}

/// Counters shared by the handle and the task.
#[derive(Debug, Default)]
struct Stats {
    submitted: AtomicU64,
    submitted_samples: AtomicU64,
    sent: AtomicU64,
    sent_samples: AtomicU64,
    queue_full: AtomicU64,
    failed: AtomicU64,
    retries: AtomicU64,
    rejected_profiles: AtomicU64,
    /// Failed snapshots by the reason of their last attempt.
    failed_by_reason: Mutex<BTreeMap<&'static str, u64>>,
}

/// The handle the session holds.
pub struct Exporter {
    queue: mpsc::Sender<Batch>,
    /// Set at shutdown: no more waiting between attempts.
    closing: watch::Sender<bool>,
    task: JoinHandle<()>,
    stats: Arc<Stats>,
    resource: ResourceInfo,
    destination: Destination,
    interval: Duration,
}

impl Exporter {
    /// Start exporting to the configured collector; `pids` are the processes traced so far
    /// (their executables are read now, while they run). Needs a tokio runtime.
    pub fn start(config: &OtlpConfig, pids: &[u32]) -> Result<Exporter, CollectorError> {
        let collector = Collector::new(config)?;
        Ok(Exporter::with_transport(collector, config, pids, Retry::default()))
    }

    /// [`Exporter::start`] over any transport, with a given retry policy.
    pub(super) fn with_transport(
        transport: impl Transport,
        config: &OtlpConfig,
        pids: &[u32],
        retry: Retry,
    ) -> Exporter {
        let mut resource = ResourceInfo::for_host(config.service_name.clone(), config.resource_attributes.clone());
        resource.refresh(&pids.iter().copied().collect(), &HashMap::new());
        let (queue, receiver) = mpsc::channel(QUEUE_CAPACITY);
        let (closing, closed) = watch::channel(false);
        let stats = Arc::new(Stats::default());
        let task = tokio::spawn(drain(transport, receiver, closed, Arc::clone(&stats), retry));
        Exporter {
            queue,
            closing,
            task,
            stats,
            resource,
            destination: config.destination.clone(),
            interval: config.interval,
        }
    }

    /// Snapshots sent, failed and still queued or in flight, so far.
    pub fn progress(&self) -> (u64, u64, u64) {
        let get = |counter: &AtomicU64| counter.load(Relaxed);
        let (sent, failed) = (get(&self.stats.sent), get(&self.stats.failed));
        let queued = get(&self.stats.submitted).saturating_sub(sent + failed + get(&self.stats.queue_full));
        (sent, failed, queued)
    }

    /// The export interval, for a [`Ticker`].
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Queue a snapshot for export; never waits. An empty snapshot is not sent; one that does
    /// not fit in the queue is dropped and counted. `runtimes` are the language runtimes the
    /// session detected in its processes (see [`ResourceInfo::refresh`]).
    pub fn submit(&mut self, profile: Resolved, runtimes: &HashMap<u32, Runtime>) {
        if profile.stacks.is_empty() {
            return;
        }
        let samples: u64 = profile.stacks.iter().map(|s| s.count).sum();
        let pids: BTreeSet<u32> = profile.stacks.iter().map(|s| s.pid).collect();
        self.resource.refresh(&pids, runtimes);
        let resource = ResourceInfo {
            host_name: self.resource.host_name.clone(),
            host_id: self.resource.host_id.clone(),
            service_name: self.resource.service_name.clone(),
            attributes: self.resource.attributes.clone(),
            processes: pids
                .iter()
                .filter_map(|pid| Some((*pid, self.resource.processes.get(pid)?.clone())))
                .collect(),
        };
        self.stats.submitted.fetch_add(1, Relaxed);
        self.stats.submitted_samples.fetch_add(samples, Relaxed);
        let batch = Batch {
            profile,
            resource,
            samples,
        };
        if self.queue.try_send(batch).is_err() {
            self.stats.queue_full.fetch_add(1, Relaxed);
        }
    }

    /// Let the task send what is queued, without backoff (one more attempt each), then stop it
    /// and report. It gets `flush` for the next export to reach the collector, and `flush`
    /// again after each one that does: a slow collector that keeps taking exports gets them all
    /// (at most the queue's capacity and the one in flight), a stalled or failing one is given
    /// up after one `flush` without an export sent.
    pub async fn shutdown(self, flush: Duration) -> ExportReport {
        let Exporter {
            queue,
            closing,
            mut task,
            stats,
            destination,
            ..
        } = self;
        drop(queue);
        // Ignored when the task is gone already.
        let _ = closing.send(true);
        let get = |counter: &AtomicU64| counter.load(Relaxed);
        let mut sent_before = get(&stats.sent);
        while tokio::time::timeout(flush, &mut task).await.is_err() {
            let sent_now = get(&stats.sent);
            if sent_now == sent_before {
                task.abort();
                break;
            }
            sent_before = sent_now;
        }
        let sent = get(&stats.sent);
        let failed = get(&stats.failed);
        let queue_full = get(&stats.queue_full);
        let sent_samples = get(&stats.sent_samples);
        let lost_samples = get(&stats.submitted_samples).saturating_sub(sent_samples);
        ExportReport {
            destination,
            sent,
            sent_samples,
            queue_full,
            failed,
            unsent: get(&stats.submitted).saturating_sub(sent + failed + queue_full),
            lost_samples,
            retries: get(&stats.retries),
            rejected_profiles: get(&stats.rejected_profiles),
            failed_by_reason: stats.failed_by_reason.lock().map(|m| m.clone()).unwrap_or_default(),
        }
    }
}

/// The task: send each queued snapshot in turn, with retries, until the queue closes.
async fn drain(
    mut transport: impl Transport,
    mut queue: mpsc::Receiver<Batch>,
    mut closing: watch::Receiver<bool>,
    stats: Arc<Stats>,
    retry: Retry,
) {
    let mut warned = false;
    while let Some(batch) = queue.recv().await {
        let request = encode(&batch.profile, &batch.resource);
        let mut delay = retry.first_delay;
        let mut attempt = 1;
        loop {
            match transport.send(&request).await {
                Ok(accepted) => {
                    stats.sent.fetch_add(1, Relaxed);
                    stats.sent_samples.fetch_add(batch.samples, Relaxed);
                    if accepted.rejected_profiles > 0 {
                        stats
                            .rejected_profiles
                            .fetch_add(accepted.rejected_profiles.unsigned_abs(), Relaxed);
                        log::warn!(
                            "the collector rejected {} profiles: {}",
                            accepted.rejected_profiles,
                            accepted.message
                        );
                    }
                    break;
                }
                Err(err) if err.retryable && attempt < retry.attempts && !*closing.borrow() => {
                    if warned {
                        log::debug!("OTLP export attempt {attempt} failed, retrying in {delay:?}: {err}");
                    } else {
                        log::warn!("OTLP export failed, retrying with backoff: {err}");
                        warned = true;
                    }
                    stats.retries.fetch_add(1, Relaxed);
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        // Shutting down: one last attempt now.
                        _ = closing.wait_for(|closing| *closing) => {}
                    }
                    delay = (delay * 2).min(retry.max_delay);
                    attempt += 1;
                }
                Err(err) => {
                    // Once is enough on stderr; the summary counts every failure.
                    if warned {
                        log::debug!("OTLP export failed after {attempt} attempts: {err}");
                    } else {
                        log::warn!("OTLP export failed after {attempt} attempts: {err}");
                        warned = true;
                    }
                    stats.failed.fetch_add(1, Relaxed);
                    if let Ok(mut reasons) = stats.failed_by_reason.lock() {
                        *reasons.entry(err.reason).or_default() += 1;
                    }
                    break;
                }
            }
        }
    }
}

/// What became of the exports, for the summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportReport {
    pub destination: Destination,
    /// Snapshots the collector accepted, and their samples.
    pub sent: u64,
    pub sent_samples: u64,
    /// Snapshots dropped because the queue was full.
    pub queue_full: u64,
    /// Snapshots given up on after their retries (or refused for good).
    pub failed: u64,
    /// Snapshots still queued or in flight when the flush time ran out.
    pub unsent: u64,
    /// The samples of every snapshot not sent.
    pub lost_samples: u64,
    pub retries: u64,
    /// Profiles the collector took but reported as rejected (partial success).
    pub rejected_profiles: u64,
    /// The failed snapshots by why their last attempt failed (`tls-unknown-issuer`,
    /// `unauthenticated`, `unreachable`, ...; only reasons seen).
    pub failed_by_reason: BTreeMap<&'static str, u64>,
}

impl ExportReport {
    /// Snapshots that never reached the collector.
    pub fn dropped(&self) -> u64 {
        self.queue_full + self.failed + self.unsent
    }
}

impl fmt::Display for ExportReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "  otlp: {} exports sent to {}, {} samples; {} dropped",
            self.sent,
            self.destination,
            self.sent_samples,
            self.dropped()
        )?;
        if self.dropped() > 0 {
            write!(
                f,
                ", {} samples ({} queue full, {} failed{}, {} unsent at exit)",
                self.lost_samples,
                self.queue_full,
                self.failed,
                if self.failed_by_reason.is_empty() {
                    String::new()
                } else {
                    let reasons: Vec<String> = self.failed_by_reason.iter().map(|(r, n)| format!("{n} {r}")).collect();
                    format!(": {}", reasons.join(", "))
                },
                self.unsent
            )?;
        }
        if self.retries > 0 {
            write!(f, "; {} retries", self.retries)?;
        }
        if self.rejected_profiles > 0 {
            write!(f, "; {} profiles rejected by the collector", self.rejected_profiles)?;
        }
        writeln!(f)
    }
}

/// The export clock: ticks every interval, the first time one interval from now; a late tick
/// delays the next ones rather than bunching them.
pub struct Ticker(tokio::time::Interval);

impl Ticker {
    pub fn new(period: Duration) -> Ticker {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Ticker(ticks)
    }

    pub async fn tick(&mut self) {
        self.0.tick().await;
    }
}
