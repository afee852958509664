//! [`Events`]: the samples the kernel ships through the `EVENTS` ring buffer, copied out one
//! record at a time. Registered with tokio (`AsyncFd`) so a trace loop can await them. It
//! does not interpret samples (symbolizing and aggregating are elsewhere).

use anyhow::Context as _;
use aya::maps::{Map, MapData, RingBuf};
use tokio::io::{Interest, unix::AsyncFd};
use tracer_common::trace::{MAP_EVENTS, Sample};

/// The sample stream of a loaded [`super::Kernel`].
pub struct Events {
    ring: AsyncFd<RingBuf<MapData>>,
}

impl Events {
    /// Wrap the `EVENTS` map. Needs a tokio runtime (the fd is registered with its reactor).
    pub(super) fn new(map: Map) -> anyhow::Result<Events> {
        let ring = RingBuf::try_from(map).with_context(|| format!("map {MAP_EVENTS} is not a ring buffer"))?;
        tokio::runtime::Handle::try_current().with_context(|| format!("polling {MAP_EVENTS} needs a tokio runtime"))?;
        // SAFETY: the ring buffer owns its map fd and returns that same open fd for as long as
        // it lives; the AsyncFd owns the ring buffer, so the fd outlives the registration.
        let ring = unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
            .map_err(|err| err.into_parts().1)
            .with_context(|| format!("polling {MAP_EVENTS}"))?;
        Ok(Events { ring })
    }

    /// The next sample, waiting for one; `None` only if the ring buffer cannot be polled.
    pub async fn next(&mut self) -> Option<Sample> {
        loop {
            let mut guard = match self.ring.readable_mut().await {
                Ok(guard) => guard,
                Err(err) => {
                    log::error!("polling {MAP_EVENTS}: {err}");
                    return None;
                }
            };
            if let Some(sample) = read_sample(guard.get_inner_mut()) {
                return Some(sample);
            }
            // Readiness is only cleared if no new record was announced since the guard was
            // taken, so a record that arrived after the read above is not missed.
            guard.clear_ready();
        }
    }

    /// The next sample if one is waiting, without blocking (for draining after detach).
    pub fn try_next(&mut self) -> Option<Sample> {
        read_sample(self.ring.get_mut())
    }
}

/// Copy out the next record that is a whole [`Sample`]; shorter records (which the program
/// never writes) are skipped with a warning.
fn read_sample(ring: &mut RingBuf<MapData>) -> Option<Sample> {
    loop {
        let item = ring.next()?;
        if item.len() < size_of::<Sample>() {
            log::warn!(
                "skipping a {}-byte record in {MAP_EVENTS}: too short for a sample",
                item.len()
            );
            continue;
        }
        // SAFETY: the record holds at least `size_of::<Sample>()` bytes; `Sample` is plain
        // integers (every bit pattern valid) and the read does not assume alignment.
        return Some(unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<Sample>()) });
    }
}
