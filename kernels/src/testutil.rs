//! Helpers shared by the unit tests: a tiny deterministic PRNG and a tolerance check.
//!
//! A hand-written xorshift keeps the crate free of dev-dependencies; the tests only need
//! reproducible, roughly uniform data, not statistical quality.

extern crate std;

use std::vec::Vec;

/// Marsaglia's xorshift32. Deterministic for a given seed so failures reproduce.
pub(crate) struct XorShift(u32);

impl XorShift {
    pub(crate) fn new(seed: u32) -> Self {
        // The all-zero state is a fixed point of xorshift, so never start there.
        XorShift(seed.wrapping_mul(0x9e37_79b9) | 1)
    }

    pub(crate) fn next_u32(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        x
    }

    /// Uniform in `[0, n)` (slightly biased, which does not matter here).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.next_u32() as usize % n
    }

    /// Uniform in `[lo, hi)`.
    pub(crate) fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        // 24 random bits give every representable step of a unit interval's f32 mantissa.
        let u = (self.next_u32() >> 8) as f32 / (1u32 << 24) as f32;
        lo + (hi - lo) * u
    }

    /// `len` values uniform in `[-1, 1)`.
    pub(crate) fn vec(&mut self, len: usize) -> Vec<f32> {
        (0..len).map(|_| self.uniform(-1.0, 1.0)).collect()
    }
}

/// Asserts `got` matches the reference `want` to 1e-5 relative, measured against
/// `max(|want|, 1)` so that values near zero (results of cancellation) are judged on the scale
/// of the data rather than on their own tiny magnitude.
#[track_caller]
pub(crate) fn assert_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if w.is_infinite() {
            assert_eq!(f64::from(g), w, "{what}: element {i}");
            continue;
        }
        let tol = 1e-5 * w.abs().max(1.0);
        assert!(
            (f64::from(g) - w).abs() <= tol,
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}
