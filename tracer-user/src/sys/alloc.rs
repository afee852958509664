//! The system allocator with a count of each call: [`Counted`] forwards every call unchanged
//! and tells its [`Counter`] the bytes that came and went (`crate::heap` keeps the counts).

use std::{
    alloc::{GlobalAlloc, Layout},
    marker::PhantomData,
};

#[cfg(target_env = "musl")]
use mimalloc::MiMalloc as Inner;
/// The allocator underneath: glibc's where the tracer links glibc (tuned by `session`), and
/// mimalloc in the static (musl) build, whose own allocator made table builds and naming a
/// third to a half slower (`cargo xtask bench --phase static`).
#[cfg(not(target_env = "musl"))]
use std::alloc::System as Inner;

/// What is told of each allocation. Neither function may allocate.
pub trait Counter {
    /// `bytes` more are held by the calling thread.
    fn grew(bytes: usize);
    /// `bytes` fewer are held by the calling thread.
    fn shrank(bytes: usize);
}

/// The system allocator, each call counted by `C`.
pub struct Counted<C>(PhantomData<C>);

impl<C> Counted<C> {
    /// The allocator (for a `#[global_allocator]` static, where `Default` cannot be called).
    pub const fn new() -> Self {
        Counted(PhantomData)
    }
}

impl<C> Default for Counted<C> {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: every call is forwarded to the system allocator unchanged; counting allocates
// nothing (the `Counter` contract).
unsafe impl<C: Counter> GlobalAlloc for Counted<C> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { Inner.alloc(layout) };
        if !ptr.is_null() {
            C::grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { Inner.alloc_zeroed(layout) };
        if !ptr.is_null() {
            C::grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { Inner.dealloc(ptr, layout) };
        C::shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let new = unsafe { Inner.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            C::shrank(layout.size());
            C::grew(new_size);
        }
        new
    }
}
