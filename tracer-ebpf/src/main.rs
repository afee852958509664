//! The in-kernel half of sframe-trace: a perf_event program attached to cpu-clock on every CPU.
//!
//! For now it filters samples to the traced process and counts them by outcome; the SFrame
//! stack walker grows here. It must stay verifier-friendly: constant loop bounds, no unbounded
//! recursion, every memory access checked.
#![no_std]
#![cfg_attr(not(test), no_main)]

use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid,
    macros::{map, perf_event},
    maps::PerCpuArray,
    programs::PerfEventContext,
};
use aya_log_ebpf::error;
use tracer_common::Counter;

/// The process to sample (see `tracer_common::GLOBAL_TARGET_TGID`), 0 = all. Set before load.
#[unsafe(no_mangle)]
static TARGET_TGID: u32 = 0;

/// Outcome counters (see `tracer_common::MAP_COUNTERS`).
#[map]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(Counter::COUNT, 0);

fn bump(ctx: &PerfEventContext, counter: Counter) {
    match COUNTERS.get_ptr_mut(counter as u32) {
        // SAFETY: the pointer comes from the map lookup and is valid for this CPU's slot while
        // the program runs; per-CPU storage means no concurrent writer.
        Some(slot) => unsafe { *slot += 1 },
        // Only possible if the map was created smaller than Counter::COUNT.
        None => error!(ctx, "counter {} out of range", counter as u32),
    }
}

#[perf_event]
pub fn on_sample(ctx: PerfEventContext) -> u32 {
    // SAFETY: a read of a read-only global that userspace fixes before load.
    let target = unsafe { core::ptr::read_volatile(&TARGET_TGID) };
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if target != 0 && tgid != target {
        bump(&ctx, Counter::NotTraced);
        return 0;
    }
    bump(&ctx, Counter::Sampled);
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
