//! `-f otlp` within the session: every export interval, the profile's window (the stacks
//! collected since the last export, kept apart from the whole session's) is taken, symbolized
//! through the session's cache (each frame is looked up once per session, whichever consumer
//! asks first) and submitted to the exporter, which sends them from its own task. At the end
//! the last window follows and, before the summary, the exporter flushes what is queued while
//! the collector takes an export at least every request timeout. Nothing here waits for the collector until then. The CPython interpreters the
//! catalog found in the window's processes go with it (`process.runtime.*`).

use std::time::{Duration, Instant, SystemTime};

use std::collections::HashMap;

use super::TraceConfig;
use crate::export::otlp::{ExportReport, Exporter, Runtime, Ticker};
use crate::python::PythonVersion;
use crate::registry::Catalog;
use crate::{
    profile::Profile,
    symbolize::{self, Collection, SymbolCache},
};

/// The OTLP export of a session; inert without `-f otlp`.
pub struct Otlp(Option<Active>);

struct Active {
    exporter: Exporter,
    /// The request timeout: at the end, how long the exporter may go without an export sent.
    flush: Duration,
    ticker: Ticker,
    period_ns: u64,
    /// When the current window began.
    window_start: SystemTime,
    window_started: Instant,
}

impl Otlp {
    /// Start the exporter when the session exports OTLP; `pids` are the processes traced from
    /// the start.
    pub fn start(config: &TraceConfig, pids: &[u32]) -> anyhow::Result<Otlp> {
        let Some(otlp) = &config.otlp else {
            return Ok(Otlp(None));
        };
        let exporter = Exporter::start(otlp, pids)?;
        Ok(Otlp(Some(Active {
            ticker: Ticker::new(exporter.interval()),
            exporter,
            flush: otlp.timeout,
            period_ns: 1_000_000_000 / config.frequency.max(1),
            window_start: SystemTime::now(),
            window_started: Instant::now(),
        })))
    }

    /// Completes when the next window is due (never without an exporter).
    pub async fn due(&mut self) {
        match &mut self.0 {
            Some(active) => active.ticker.tick().await,
            None => std::future::pending().await,
        }
    }

    /// Whether the session exports (the profile then keeps a window).
    pub fn active(&self) -> bool {
        self.0.is_some()
    }

    /// Submit the stacks collected since the last export, and start a new window.
    pub fn export(&mut self, profile: &mut Profile, catalog: &Catalog, symbols: &mut SymbolCache) {
        let Some(active) = &mut self.0 else { return };
        let window = profile.take_window();
        let now = SystemTime::now();
        let collection = Collection {
            start: active.window_start,
            duration: active.window_started.elapsed(),
            period_ns: active.period_ns,
        };
        active.window_start = now;
        active.window_started = Instant::now();
        let began = Instant::now();
        let resolved = symbolize::resolve(&window, catalog, symbols, &collection);
        log::debug!(
            "export: {} stacks resolved in {:?}, {} names cached",
            window.len(),
            began.elapsed(),
            symbols.cached_names()
        );
        let runtimes = resolved
            .stacks
            .iter()
            .filter_map(|s| Some((s.pid, python_runtime(catalog.python_version(s.pid)?))))
            .collect::<HashMap<_, _>>();
        active.exporter.submit(resolved, &runtimes);
    }

    /// Exports sent, failed and queued so far (none without an exporter).
    pub fn progress(&self) -> (u64, u64, u64) {
        self.0.as_ref().map_or((0, 0, 0), |active| active.exporter.progress())
    }

    /// Let the exporter flush (after the last [`Otlp::export`]) while the collector takes an
    /// export every request timeout at least, and report.
    pub async fn finish(self) -> Option<ExportReport> {
        let active = self.0?;
        Some(active.exporter.shutdown(active.flush).await)
    }
}

/// The `process.runtime.*` of a process running CPython `version`.
pub fn python_runtime(version: PythonVersion) -> Runtime {
    let how = match version.micro {
        Some(_) => "version read from the interpreter's Py_Version",
        None => "minor release inferred from the interpreter's exported API",
    };
    Runtime {
        name: "cpython",
        version: Some(version.to_string()),
        description: format!("CPython {version} ({how})"),
    }
}
