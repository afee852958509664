//! `--health-listen ADDR`: a small HTTP/1.1 server for a DaemonSet's probes and Prometheus.
//! `GET /healthz` answers 200 `ok` while the session's loop has published its figures within
//! [`STALE`] (it does every housekeeping second), else 503; `GET /metrics` answers the figures
//! in the Prometheus text format: samples, lost samples, exports sent, failed and queued, the
//! resident size, the kernel tables' bytes. Anything else is 404 or 405.
//!
//! The server is a task on the session's runtime and holds no lock the session waits for: the
//! session stores the figures in atomics, the server reads them. Each request is bounded
//! ([`MAX_REQUEST`] bytes of head, [`REQUEST_TIMEOUT`] to send it, one request a connection,
//! at most [`MAX_CONNECTIONS`] at once): a client cannot hold the tracer.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed},
    },
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
};

/// `/healthz` fails when the figures are older than this.
const STALE: Duration = Duration::from_secs(10);
/// The most of a request's head read.
const MAX_REQUEST: usize = 4096;
/// How long a client may take to send its request and take the answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Connections served at once; more are closed at once.
const MAX_CONNECTIONS: usize = 16;

/// The figures the session publishes.
#[derive(Debug, Default)]
pub struct Figures {
    pub samples: AtomicU64,
    pub lost: AtomicU64,
    pub exports_sent: AtomicU64,
    pub exports_failed: AtomicU64,
    pub exports_queued: AtomicU64,
    pub rss_bytes: AtomicU64,
    pub table_bytes: AtomicU64,
    /// Times `--max-memory` made the session shed its caches, and the bound.
    pub memory_sheds: AtomicU64,
    pub max_memory_bytes: AtomicU64,
    /// Milliseconds since the server started, at the last publication.
    updated_ms: AtomicU64,
}

impl Figures {
    /// Note that the figures were published `at` (since the server started).
    pub fn published_at(&self, at: Duration) {
        // Never 0: 0 is "never published".
        self.updated_ms.store((at.as_millis() as u64).max(1), Relaxed);
    }
}

/// The session's handle; inert without `--health-listen`.
pub struct Health(Option<(Arc<Figures>, Instant)>);

impl Health {
    /// Listen on `addr` (refused at once when it cannot be bound) and serve from a task.
    pub async fn start(addr: Option<SocketAddr>) -> anyhow::Result<Health> {
        let Some(addr) = addr else {
            return Ok(Health(None));
        };
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("--health-listen {addr}: {e}"))?;
        let figures = Arc::new(Figures::default());
        let started = Instant::now();
        tokio::spawn(serve(listener, Arc::clone(&figures), started));
        Ok(Health(Some((figures, started))))
    }

    /// Publish the figures (called every housekeeping second); `update` sets them.
    pub fn publish(&self, update: impl FnOnce(&Figures)) {
        if let Some((figures, started)) = &self.0 {
            update(figures);
            figures.published_at(started.elapsed());
        }
    }

    /// Whether there is a server to publish to.
    pub fn active(&self) -> bool {
        self.0.is_some()
    }
}

async fn serve(listener: TcpListener, figures: Arc<Figures>, started: Instant) {
    let open = Arc::new(AtomicUsize::new(0));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        if open.fetch_add(1, Relaxed) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Relaxed);
            continue;
        }
        let (figures, open) = (Arc::clone(&figures), Arc::clone(&open));
        tokio::spawn(async move {
            let _ = tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, &figures, started)).await;
            open.fetch_sub(1, Relaxed);
        });
    }
}

/// Read one request's head and answer it.
async fn answer(mut stream: TcpStream, figures: &Figures, started: Instant) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buffer = [0u8; 512];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST {
        let n = stream.read(&mut buffer).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buffer[..n]);
    }
    let line = head.split(|&b| b == b'\r' || b == b'\n').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, path) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let (status, body) = respond(method, path, figures, started.elapsed());
    let content_type = if path == b"/metrics" {
        "text/plain; version=0.0.4"
    } else {
        "text/plain"
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(reply.as_bytes()).await?;
    stream.shutdown().await
}

/// The status line's code and reason, and the body, for a request at `now` (since the start).
pub fn respond(method: &[u8], path: &[u8], figures: &Figures, now: Duration) -> (&'static str, String) {
    if method != b"GET" {
        return ("405 Method Not Allowed", "GET only\n".to_owned());
    }
    match path {
        b"/healthz" => {
            let updated = figures.updated_ms.load(Relaxed);
            let age = now.saturating_sub(Duration::from_millis(updated));
            if updated > 0 && age <= STALE {
                ("200 OK", "ok\n".to_owned())
            } else {
                (
                    "503 Service Unavailable",
                    "the session has published nothing lately\n".to_owned(),
                )
            }
        }
        b"/metrics" => ("200 OK", metrics(figures)),
        _ => ("404 Not Found", "/healthz or /metrics\n".to_owned()),
    }
}

/// The Prometheus text of the figures.
pub fn metrics(figures: &Figures) -> String {
    let rows: [(&str, &str, &str, &AtomicU64); 9] = [
        (
            "sframe_trace_samples_total",
            "counter",
            "Samples taken.",
            &figures.samples,
        ),
        (
            "sframe_trace_lost_samples_total",
            "counter",
            "Samples lost (ring buffer full).",
            &figures.lost,
        ),
        (
            "sframe_trace_otlp_exports_sent_total",
            "counter",
            "OTLP exports the collector accepted.",
            &figures.exports_sent,
        ),
        (
            "sframe_trace_otlp_exports_failed_total",
            "counter",
            "OTLP exports given up on.",
            &figures.exports_failed,
        ),
        (
            "sframe_trace_otlp_exports_queued",
            "gauge",
            "OTLP exports waiting to be sent.",
            &figures.exports_queued,
        ),
        (
            "sframe_trace_resident_bytes",
            "gauge",
            "The tracer's resident size (VmRSS).",
            &figures.rss_bytes,
        ),
        (
            "sframe_trace_table_bytes",
            "gauge",
            "Kernel memory of the unwind tables.",
            &figures.table_bytes,
        ),
        (
            "sframe_trace_memory_sheds_total",
            "counter",
            "Times the resident memory (RssAnon) passed --max-memory and caches were shed.",
            &figures.memory_sheds,
        ),
        (
            "sframe_trace_max_memory_bytes",
            "gauge",
            "The --max-memory bound on the resident memory (RssAnon).",
            &figures.max_memory_bytes,
        ),
    ];
    let mut out = String::new();
    for (name, kind, help, value) in rows {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}\n",
            value.load(Relaxed)
        ));
    }
    out
}

/// The tracer's resident size, from `/proc/self/statm` (pages).
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let page = crate::sys::page_size();
    pages * page.max(0) as u64
}
