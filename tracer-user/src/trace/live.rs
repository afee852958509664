//! `--live` within the session: once a second, when the view has drawn the previous snapshot,
//! the profile (the whole session's stacks) is symbolized through the session's cache (each
//! frame is looked up once per session) and handed to the view with the session's numbers; the
//! view's thread does the rest (`export::live`). The user's `q` ends the session like Ctrl-C.

use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use tokio::{
    sync::mpsc,
    time::{Interval, MissedTickBehavior},
};
use tracer_common::Counter;

use super::TraceConfig;
use crate::registry::Catalog;
use crate::{
    bpf::Kernel,
    export::live::{
        screen::Status,
        terminal::{Snapshot, Terminal},
    },
};
use crate::{
    profile::Profile,
    symbolize::{self, Collection, SymbolCache},
};

/// How often the view gets a snapshot.
const REFRESH: Duration = Duration::from_secs(1);

/// The live view of a session; inert without `--live`.
pub struct Live(Option<Active>);

/// The user's request to stop, apart from [`Live`] so that the session can wait for both.
pub struct Quit(Option<mpsc::UnboundedReceiver<()>>);

struct Active {
    terminal: Terminal,
    refresh: Interval,
    period_ns: u64,
    start: SystemTime,
    started: Instant,
    /// Samples and time at the previous snapshot, for the rate.
    last: (u64, Instant),
}

impl Live {
    /// Take over the terminal when the session is live.
    pub fn start(config: &TraceConfig) -> anyhow::Result<(Live, Quit)> {
        if !config.live {
            return Ok((Live(None), Quit(None)));
        }
        let (send, quit) = mpsc::unbounded_channel();
        let terminal = Terminal::start(move || {
            let _ = send.send(());
        })
        .context("starting the live view")?;
        let mut refresh = tokio::time::interval(REFRESH);
        refresh.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let live = Live(Some(Active {
            terminal,
            refresh,
            period_ns: 1_000_000_000 / config.frequency.max(1),
            start: SystemTime::now(),
            started: Instant::now(),
            last: (0, Instant::now()),
        }));
        Ok((live, Quit(Some(quit))))
    }

    /// Completes when the view is due a snapshot (never without `--live`).
    pub async fn due(&mut self) {
        match &mut self.0 {
            Some(active) => {
                active.refresh.tick().await;
            }
            None => std::future::pending().await,
        }
    }

    /// Symbolize the profile and hand it to the view, unless it is still busy with the last one.
    pub fn show(
        &mut self,
        profile: &Profile,
        catalog: &Catalog,
        symbols: &mut SymbolCache,
        kernel: &Kernel,
    ) -> anyhow::Result<()> {
        let Some(active) = &mut self.0 else { return Ok(()) };
        if !active.terminal.ready() {
            return Ok(());
        }
        let lost = kernel
            .counters()?
            .into_iter()
            .find(|(counter, _)| *counter == Counter::EventsLost)
            .map_or(0, |(_, n)| n);
        let now = Instant::now();
        let (last_samples, last_time) = std::mem::replace(&mut active.last, (profile.samples, now));
        let status = Status {
            elapsed: active.started.elapsed(),
            rate: profile.samples.saturating_sub(last_samples) as f64
                / now.duration_since(last_time).as_secs_f64().max(1e-3),
            lost,
            processes: catalog.processes.len(),
        };
        let collection = Collection {
            start: active.start,
            duration: active.started.elapsed(),
            period_ns: active.period_ns,
        };
        let resolved = symbolize::resolve(&profile.stacks, catalog, symbols, &collection);
        active.terminal.show(Snapshot { resolved, status });
        Ok(())
    }

    /// Whether the view is on (the profile then keeps the whole session's stacks).
    pub fn active(&self) -> bool {
        self.0.is_some()
    }

    /// Put the terminal back (before the summary is printed); a failure of the view is reported
    /// on stderr, since the session's output is still to be written.
    pub fn finish(self) {
        if let Some(active) = self.0
            && let Err(err) = active.terminal.finish()
        {
            super::say(format_args!("sframe-trace: the live view stopped: {err}\n"));
        }
    }
}

impl Quit {
    /// Completes when the user quits the view (or the view ended), with the session's reason to
    /// stop; never without `--live`.
    pub async fn wait(&mut self) -> &'static str {
        match &mut self.0 {
            Some(quit) => match quit.recv().await {
                Some(()) => "quit from the live view",
                None => "the live view ended",
            },
            None => std::future::pending().await,
        }
    }
}
