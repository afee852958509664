//! Descriptors registered with tokio's reactor, for the types whose descriptor is known to
//! stay the same open fd for as long as they live.

use tokio::io::{
    Interest,
    unix::{AsyncFd, AsyncFdRegisterError},
};

/// A type that owns one open descriptor and returns that same fd from `as_raw_fd` for as long
/// as it lives (the contract `AsyncFd::register_with_interest` asks for).
pub trait StableFd: std::os::fd::AsRawFd + sealed::Sealed {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for std::os::fd::OwnedFd {}
    impl Sealed for aya::maps::RingBuf<aya::maps::MapData> {}
    impl<T> Sealed for aya_log::EbpfLogger<T> {}
}

impl StableFd for std::os::fd::OwnedFd {}
// The ring buffer owns its map fd.
impl StableFd for aya::maps::RingBuf<aya::maps::MapData> {}
// The logger owns its ring-buffer fd.
impl<T> StableFd for aya_log::EbpfLogger<T> {}

/// `inner` polled for readability on the current tokio runtime.
pub fn readable<T: StableFd>(inner: T) -> Result<AsyncFd<T>, AsyncFdRegisterError<T>> {
    // SAFETY: `StableFd` types own their fd and return it unchanged while they live; the
    // AsyncFd owns `inner`, so the fd outlives the registration.
    unsafe { AsyncFd::register_with_interest(inner, Interest::READABLE) }
}

/// Read a `T` from the start of `bytes` (unaligned); `None` when they are too few.
pub fn read_pod<T: aya::Pod>(bytes: &[u8]) -> Option<T> {
    if bytes.len() < size_of::<T>() {
        return None;
    }
    // SAFETY: the bytes hold at least `size_of::<T>()` bytes; `T` is `Pod` (every bit pattern
    // valid) and the read does not assume alignment.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}
