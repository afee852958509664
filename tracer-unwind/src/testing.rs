//! What the tests of this crate share with tracer-user's tests (unit and integration): one
//! deterministic stream of random numbers (xorshift64*, fixed seeds, no extra crate), so that a
//! failing random case comes back on every run, hostile inputs ([`hostile`]) and Go programs
//! built for the tests ([`go`]). Not part of the library's interface, and not used by the
//! tracer.

pub mod go;
pub mod hostile;

/// xorshift64*: a deterministic stream of numbers from a seed (a seed of 0 is replaced: the
/// stream would stay 0).
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(if seed == 0 { 0x9e37_79b9_7f4a_7c15 } else { seed })
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}
