//! [`Ring`]: records the kernel ships through a ring buffer, decoded one at a time into a slot
//! the ring keeps (a sample is 5.6 KiB: decoded in place, not built and moved per record) —
//! [`Events`] (samples, `EVENTS`: variable-length `SampleRecord`s) and [`Notices`] (process
//! life-cycle notices, `NOTICES`). Registered with tokio (`AsyncFd`) so a trace loop can await
//! them. It does not interpret records (symbolizing, aggregating and process tracking are
//! elsewhere).
//!
//! The sampling programs do not wake userspace for each sample (that wakeup, on both sides,
//! cost more than the walk), nor does userspace poll often (each wakeup costs it tens of
//! microseconds): the kernel wakes it when the ring buffer is filling up or its last wakeup
//! is 200 ms old (`tracer-ebpf`'s `ship`). So [`Ring::next`] reads whatever is waiting first,
//! and when nothing is, waits for a wakeup or, for the samples, [`POLL_INTERVAL`], which only
//! matters for the last samples before sampling goes quiet: samples reach userspace at most
//! 200 ms late while they flow, and at most a second late after the last one. Notices wake
//! userspace as they are sent, so their ring needs no timer.

use std::time::Duration;

use anyhow::Context as _;
use aya::maps::{Map, MapData, RingBuf};
use tokio::io::unix::AsyncFd;
use tracer_common::{notice::Notice, sample::Sample};

/// How often the sample ring buffer is read when the kernel has not woken userspace.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// A record type of a ring buffer: how to read one from its bytes.
pub trait Record: Sized {
    /// A record to decode into.
    fn empty() -> Box<Self>;
    /// Overwrite `self` with the record of `bytes` (one ring buffer entry); false if they are
    /// not one.
    fn decode_into(&mut self, bytes: &[u8]) -> bool;
    /// How long to wait for records without a wakeup from the kernel (`None`: until woken).
    const POLL: Option<Duration>;
}

impl Record for Sample {
    const POLL: Option<Duration> = Some(POLL_INTERVAL);

    fn empty() -> Box<Sample> {
        Box::new(Sample::EMPTY)
    }

    fn decode_into(&mut self, bytes: &[u8]) -> bool {
        Sample::decode_into(self, bytes)
    }
}

impl Record for Notice {
    const POLL: Option<Duration> = None;

    fn empty() -> Box<Notice> {
        Box::new(Notice {
            time_ns: 0,
            kind: 0,
            tgid: 0,
        })
    }

    fn decode_into(&mut self, bytes: &[u8]) -> bool {
        let Some(notice) = crate::sys::poll::read_pod::<Notice>(bytes) else {
            return false;
        };
        *self = notice;
        true
    }
}

/// The records of one ring buffer, each a `T`.
pub struct Ring<T> {
    ring: AsyncFd<RingBuf<MapData>>,
    name: &'static str,
    /// The record last read.
    slot: Box<T>,
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
        let ring = crate::sys::poll::readable(ring)
            .map_err(|err| err.into_parts().1)
            .with_context(|| format!("polling {name}"))?;
        Ok(Ring {
            ring,
            name,
            slot: T::empty(),
        })
    }

    /// The next record, waiting for one (module docs); `None` only if the ring buffer cannot
    /// be polled.
    pub async fn next(&mut self) -> Option<&T> {
        loop {
            if read(self.ring.get_mut(), self.name, &mut *self.slot) {
                return Some(&self.slot);
            }
            let poll = async {
                match T::POLL {
                    Some(interval) => tokio::time::sleep(interval).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                ready = self.ring.readable_mut() => {
                    let mut guard = match ready {
                        Ok(guard) => guard,
                        Err(err) => {
                            log::error!("polling {}: {err}", self.name);
                            return None;
                        }
                    };
                    if read(guard.get_inner_mut(), self.name, &mut *self.slot) {
                        return Some(&self.slot);
                    }
                    // Readiness is only cleared if no new record was announced since the guard
                    // was taken, so a record that arrived after the read above is not missed.
                    guard.clear_ready();
                }
                () = poll => {}
            }
        }
    }

    /// The next record if one is waiting, without blocking (draining a batch, or after detach).
    pub fn try_next(&mut self) -> Option<&T> {
        read(self.ring.get_mut(), self.name, &mut *self.slot).then_some(&*self.slot)
    }
}

/// Decode the next record into `slot`; false when none is waiting. Records that do not
/// decode (which the program never writes) are skipped with a warning.
fn read<T: Record>(ring: &mut RingBuf<MapData>, name: &str, slot: &mut T) -> bool {
    loop {
        let Some(item) = ring.next() else { return false };
        if slot.decode_into(&item) {
            return true;
        }
        log::warn!("skipping a malformed {}-byte record in {name}", item.len());
    }
}
