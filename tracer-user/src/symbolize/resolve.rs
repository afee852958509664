//! A profile's stacks symbolized into what the exporters write ([`Resolved`]): the frames
//! through the session's [`SymbolCache`], only the objects the stacks use, and when and how the
//! samples were taken.

use std::{
    collections::HashMap,
    time::{Duration, SystemTime},
};

use tracer_common::walk::StopReason;

use super::SymbolCache;
use crate::{
    export::model::{Resolved, ResolvedStack},
    profile::{Stack, Stacks},
    registry::Catalog,
};

/// When and how the samples of a profile were taken.
#[derive(Clone, Copy, Debug)]
pub struct Collection {
    pub start: SystemTime,
    pub duration: Duration,
    /// The cpu-clock sampling period in nanoseconds.
    pub period_ns: u64,
}

/// `stacks` symbolized: what every exporter writes. Frames named before are taken from the
/// cache, so calling this periodically only symbolizes what is new. The result lists only the
/// objects its stacks use.
pub fn resolve(stacks: &Stacks, catalog: &Catalog, cache: &mut SymbolCache, collection: &Collection) -> Resolved {
    cache.prepare(stacks.keys().flat_map(Stack::frames), catalog);
    let mut objects = Vec::new();
    let mut local: HashMap<usize, usize> = HashMap::new();
    let mut stacks: Vec<ResolvedStack> = stacks
        .iter()
        .map(|(stack, tally)| {
            let mut frames = cache.prepared_frames(stack, catalog);
            for frame in &mut frames {
                frame.object = frame.object.map(|slot| {
                    *local.entry(slot).or_insert_with(|| {
                        objects.push(cache.objects[slot].clone());
                        objects.len() - 1
                    })
                });
            }
            ResolvedStack {
                pid: stack.pid,
                tid: stack.tid,
                comm: stack.comm.clone(),
                event: stack.event.to_string(),
                frames,
                count: tally.count,
                weight_ns: tally.weight_ns,
                truncated: stack.truncated.map(StopReason::name),
                cpu: stack.cpu,
            }
        })
        .collect();
    stacks.sort_by(|a, b| (a.pid, a.tid, b.count, a.cpu).cmp(&(b.pid, b.tid, a.count, b.cpu)));
    Resolved {
        objects,
        stacks,
        start_unix_ns: unix_ns(collection.start),
        duration_ns: u64::try_from(collection.duration.as_nanos()).unwrap_or(u64::MAX),
        period_ns: collection.period_ns,
    }
}

/// Nanoseconds since the Unix epoch (0 before it).
pub fn unix_ns(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
