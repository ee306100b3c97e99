//! Scale/shift and softmax: every ISA table this CPU has against the portable kernels, on
//! random shapes (planes shorter than, around and longer than a vector; softmax over the last
//! axis, over a middle axis narrower than a vector, and over wide interleaved blocks), with
//! NaN and infinities mixed in.
//!
//! Scale/shift with ReLU/clip/leaky ReLU must be bit-identical (the same multiply and add);
//! with sigmoid/tanh, and softmax (vector exponential, another summation order), within
//! 1e-6 and 1e-5 relative.
//!
//! Run with `cargo test -p kiln-kernels --features std --test norm -- --nocapture` to see which
//! ISAs ran and which were skipped.

mod common;

use kiln_kernels::{Activation, PORTABLE};
use proptest::prelude::*;

/// xorshift32: reproducible data from a proptest-chosen seed.
struct Rng(u32);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0
    }
    fn uniform(&mut self, scale: f32) -> f32 {
        ((self.next() >> 8) as f32 / (1u32 << 23) as f32 - 1.0) * scale
    }
    /// Uniform values, with (`specials`) now and then a NaN, an infinity or a signed zero.
    fn vec(&mut self, n: usize, scale: f32, specials: bool) -> Vec<f32> {
        (0..n)
            .map(|_| {
                let r = self.next();
                if specials && r.is_multiple_of(37) {
                    [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0][(r >> 8) as usize % 4]
                } else {
                    self.uniform(scale)
                }
            })
            .collect()
    }
}

fn act(i: u8) -> Activation {
    match i % 7 {
        0 => Activation::None,
        1 => Activation::Relu,
        2 => Activation::Clip { min: 0.0, max: 6.0 },
        3 => Activation::Clip {
            min: 0.5,
            max: -0.5,
        },
        4 => Activation::LeakyRelu { alpha: 0.2 },
        5 => Activation::Sigmoid,
        _ => Activation::Tanh,
    }
}

/// NaN matches NaN, infinities match exactly; otherwise bit-identical (`rel == 0`) or within
/// `rel` relative error (with a floor for subnormal results).
fn agree(got: &[f32], want: &[f32], rel: f32) -> Result<(), String> {
    if got.len() != want.len() {
        return Err("length".into());
    }
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if rel == 0.0 || w.is_infinite() {
            g.to_bits() == w.to_bits()
        } else {
            (g - w).abs() <= rel * w.abs() + 1e-37
        };
        if !ok {
            return Err(format!("element {i}: got {g:e}, want {w:e}"));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(300) })]

    #[test]
    fn scale_shift_matches_portable(
        dims in (1usize..3, 1usize..6, 0usize..80),
        a in any::<u8>(),
        identity in prop::bool::weighted(0.1),
        seed in any::<u32>(),
    ) {
        let (batch, channels, spatial) = dims;
        let act = act(a);
        let mut rng = Rng(seed | 1);
        let n = batch * channels * spatial;
        let x = rng.vec(n, 4.0, true);
        // Sometimes the identity affine, which the in-place kernels may skip entirely.
        let (scale, shift) = if identity {
            (vec![1.0; channels], vec![0.0; channels])
        } else {
            (rng.vec(channels, 2.0, false), rng.vec(channels, 1.0, false))
        };
        let rel = if matches!(act, Activation::Sigmoid | Activation::Tanh) { 1e-6 } else { 0.0 };
        let mut want = vec![0.0; n];
        (PORTABLE.scale_shift)(batch, channels, spatial, &x, &scale, &shift, act, &mut want);
        let mut want_inplace = x.clone();
        (PORTABLE.scale_shift_inplace)(batch, channels, spatial, &mut want_inplace, &scale, &shift, act);
        for k in common::isas("norm") {
            let what = format!("{} [{batch}, {channels}, {spatial}] {act:?}", k.isa);
            let mut got = vec![f32::NAN; n];
            (k.scale_shift)(batch, channels, spatial, &x, &scale, &shift, act, &mut got);
            let r = agree(&got, &want, rel);
            prop_assert!(r.is_ok(), "{what}: {r:?}");
            let mut inplace = x.clone();
            (k.scale_shift_inplace)(batch, channels, spatial, &mut inplace, &scale, &shift, act);
            let r = agree(&inplace, &want_inplace, rel);
            prop_assert!(r.is_ok(), "{what} in place: {r:?}");
        }
    }

    #[test]
    fn softmax_matches_portable(
        outer in 1usize..4,
        len in prop_oneof![1usize..6, 1usize..120],
        inner in prop_oneof![Just(1usize), 2usize..8, 8usize..40, 60usize..140],
        scale in 0.1f32..20.0,
        specials in prop::bool::weighted(0.15),
        seed in any::<u32>(),
    ) {
        let n = outer * len * inner;
        let x = Rng(seed | 1).vec(n, scale, specials);
        let mut want = vec![0.0; n];
        (PORTABLE.softmax)(outer, len, inner, &x, &mut want);
        for k in common::isas("norm") {
            let what = format!("{} softmax [{outer}, {len}, {inner}]", k.isa);
            let mut got = vec![f32::NAN; n];
            (k.softmax)(outer, len, inner, &x, &mut got);
            let r = agree(&got, &want, 1e-5);
            prop_assert!(r.is_ok(), "{what}: {r:?}");
            let mut inplace = x.clone();
            (k.softmax_inplace)(outer, len, inner, &mut inplace);
            let r = agree(&inplace, &want, 1e-5);
            prop_assert!(r.is_ok(), "{what} in place: {r:?}");
        }
    }
}

#[test]
fn softmax_large_logits_and_all_equal_rows() {
    // Huge logits must not overflow, an all -inf row is NaN like the reference, and a row of
    // equal values is uniform.
    let rows: [&[f32]; 3] = [
        &[
            1000.0, 1000.5, -1e30, 999.0, 1000.25, 3.0, -2.0, 1000.0, 0.0, 1.0,
        ],
        &[f32::NEG_INFINITY; 9],
        &[2.5; 17],
    ];
    for k in common::isas("norm") {
        for row in rows {
            let mut want = vec![0.0; row.len()];
            (PORTABLE.softmax)(1, row.len(), 1, row, &mut want);
            let mut got = vec![0.0; row.len()];
            (k.softmax)(1, row.len(), 1, row, &mut got);
            agree(&got, &want, 1e-5).unwrap_or_else(|e| panic!("{} {row:?}: {e}", k.isa));
        }
    }
}
