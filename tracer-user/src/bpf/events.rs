//! [`Ring`]: records the kernel ships through a ring buffer, copied out one at a time —
//! [`Events`] (samples, `EVENTS`) and [`Notices`] (process life-cycle notices, `NOTICES`).
//! Registered with tokio (`AsyncFd`) so a trace loop can await them. It does not interpret
//! records (symbolizing, aggregating and process tracking are elsewhere).

use std::marker::PhantomData;

use anyhow::Context as _;
use aya::maps::{Map, MapData, RingBuf};
use tokio::io::{Interest, unix::AsyncFd};
use tracer_common::{notice::Notice, trace::Sample};

/// The records of one ring buffer, each a whole `T`.
pub struct Ring<T> {
    ring: AsyncFd<RingBuf<MapData>>,
    name: &'static str,
    record: PhantomData<T>,
}

/// The sample stream of a loaded [`super::Kernel`].
pub type Events = Ring<Sample>;
/// The process notices of a loaded [`super::Kernel`].
pub type Notices = Ring<Notice>;

impl<T: aya::Pod> Ring<T> {
    /// Wrap the ring buffer `map` (named `name`). Needs a tokio runtime (the fd is registered
    /// with its reactor).
    pub(super) fn new(map: Map, name: &'static str) -> anyhow::Result<Ring<T>> {
        let ring = RingBuf::try_from(map).with_context(|| format!("map {name} is not a ring buffer"))?;
        tokio::runtime::Handle::try_current().with_context(|| format!("polling {name} needs a tokio runtime"))?;
        // SAFETY: the ring buffer owns its map fd and returns that same open fd for as long as
        // it lives; the AsyncFd owns the ring buffer, so the fd outlives the registration.
        let ring = unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
            .map_err(|err| err.into_parts().1)
            .with_context(|| format!("polling {name}"))?;
        Ok(Ring {
            ring,
            name,
            record: PhantomData,
        })
    }

    /// The next record, waiting for one; `None` only if the ring buffer cannot be polled.
    pub async fn next(&mut self) -> Option<T> {
        loop {
            let mut guard = match self.ring.readable_mut().await {
                Ok(guard) => guard,
                Err(err) => {
                    log::error!("polling {}: {err}", self.name);
                    return None;
                }
            };
            if let Some(record) = read(guard.get_inner_mut(), self.name) {
                return Some(record);
            }
            // Readiness is only cleared if no new record was announced since the guard was
            // taken, so a record that arrived after the read above is not missed.
            guard.clear_ready();
        }
    }

    /// The next record if one is waiting, without blocking (for draining after detach).
    pub fn try_next(&mut self) -> Option<T> {
        read(self.ring.get_mut(), self.name)
    }
}

/// Copy out the next record that is a whole `T`; shorter records (which the program never
/// writes) are skipped with a warning.
fn read<T: aya::Pod>(ring: &mut RingBuf<MapData>, name: &str) -> Option<T> {
    loop {
        let item = ring.next()?;
        if item.len() < size_of::<T>() {
            log::warn!("skipping a {}-byte record in {name}: too short", item.len());
            continue;
        }
        // SAFETY: the record holds at least `size_of::<T>()` bytes; `T` is `Pod` (every bit
        // pattern valid) and the read does not assume alignment.
        return Some(unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<T>()) });
    }
}
