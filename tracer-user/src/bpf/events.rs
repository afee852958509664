//! [`Ring`]: records the kernel ships through a ring buffer, decoded one at a time —
//! [`Events`] (samples, `EVENTS`: variable-length `SampleRecord`s) and [`Notices`] (process
//! life-cycle notices, `NOTICES`). Registered with tokio (`AsyncFd`) so a trace loop can await
//! them. It does not interpret records (symbolizing, aggregating and process tracking are
//! elsewhere).
//!
//! The sampling programs do not wake userspace for each sample (that wakeup, on both sides,
//! cost more than the walk): only when the ring buffer is filling up. So [`Ring::next`] reads
//! whatever is waiting first, and when nothing is, waits for a wakeup or [`POLL_INTERVAL`],
//! whichever comes first: samples reach userspace at most that late.

use std::{marker::PhantomData, time::Duration};

use anyhow::Context as _;
use aya::maps::{Map, MapData, RingBuf};
use tokio::io::{Interest, unix::AsyncFd};
use tracer_common::{notice::Notice, trace::Sample};

/// How often a ring buffer is read when the kernel has not woken userspace.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// A record type of a ring buffer: how to read one from its bytes.
pub trait Record: Sized {
    /// The record of `bytes` (one ring buffer entry), or `None` if they are not one.
    fn decode(bytes: &[u8]) -> Option<Self>;
}

impl Record for Sample {
    fn decode(bytes: &[u8]) -> Option<Sample> {
        Sample::decode(bytes)
    }
}

impl Record for Notice {
    fn decode(bytes: &[u8]) -> Option<Notice> {
        if bytes.len() < size_of::<Notice>() {
            return None;
        }
        // SAFETY: the bytes hold at least `size_of::<Notice>()` bytes; `Notice` is `Pod` (every
        // bit pattern valid) and the read does not assume alignment.
        Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<Notice>()) })
    }
}

/// The records of one ring buffer, each a `T`.
pub struct Ring<T> {
    ring: AsyncFd<RingBuf<MapData>>,
    name: &'static str,
    record: PhantomData<T>,
}

/// The sample stream of a loaded [`super::Kernel`].
pub type Events = Ring<Sample>;
/// The process notices of a loaded [`super::Kernel`].
pub type Notices = Ring<Notice>;

impl<T: Record> Ring<T> {
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

    /// The next record, waiting for one (module docs); `None` only if the ring buffer cannot
    /// be polled.
    pub async fn next(&mut self) -> Option<T> {
        loop {
            if let Some(record) = read(self.ring.get_mut(), self.name) {
                return Some(record);
            }
            tokio::select! {
                ready = self.ring.readable_mut() => {
                    let mut guard = match ready {
                        Ok(guard) => guard,
                        Err(err) => {
                            log::error!("polling {}: {err}", self.name);
                            return None;
                        }
                    };
                    if let Some(record) = read(guard.get_inner_mut(), self.name) {
                        return Some(record);
                    }
                    // Readiness is only cleared if no new record was announced since the guard
                    // was taken, so a record that arrived after the read above is not missed.
                    guard.clear_ready();
                }
                () = tokio::time::sleep(POLL_INTERVAL) => {}
            }
        }
    }

    /// The next record if one is waiting, without blocking (for draining after detach).
    pub fn try_next(&mut self) -> Option<T> {
        read(self.ring.get_mut(), self.name)
    }
}

/// Decode the next record; records that do not decode (which the program never writes) are
/// skipped with a warning.
fn read<T: Record>(ring: &mut RingBuf<MapData>, name: &str) -> Option<T> {
    loop {
        let item = ring.next()?;
        match T::decode(&item) {
            Some(record) => return Some(record),
            None => log::warn!("skipping a malformed {}-byte record in {name}", item.len()),
        }
    }
}
