//! Element-wise kernels: every ISA table this CPU has against the portable kernels, on random
//! lengths (around and between vector sizes) and random broadcasts (same shape, per-channel,
//! scalar, outer products, transposed operands), with NaN, infinities and signed zeros mixed
//! in.
//!
//! Binary arithmetic and ReLU/clip/leaky ReLU must be bit-identical to the portable kernels
//! (the same IEEE operations); sigmoid and tanh use vector approximations and must agree to
//! 1e-6 relative.
//!
//! Run with `cargo test -p kiln-kernels --features std --test eltwise -- --nocapture` to see
//! which ISAs ran and which were skipped.

mod common;

use kiln_kernels::{Activation, BinaryOp, Broadcast, PORTABLE};
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
    /// Uniform in `[-scale, scale)`, with now and then a NaN, an infinity or a signed zero.
    fn value(&mut self, scale: f32) -> f32 {
        let r = self.next();
        if r.is_multiple_of(31) {
            [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 0.0][(r >> 8) as usize % 5]
        } else {
            ((r >> 8) as f32 / (1u32 << 23) as f32 - 1.0) * scale
        }
    }
    fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.value(scale)).collect()
    }
}

fn act(i: u8) -> Activation {
    match i % 8 {
        0 => Activation::None,
        1 => Activation::Relu,
        2 => Activation::Clip { min: 0.0, max: 6.0 },
        // Degenerate bounds: the result must still follow the scalar definition.
        3 => Activation::Clip {
            min: 1.0,
            max: -1.0,
        },
        4 => Activation::LeakyRelu { alpha: 0.1 },
        5 => Activation::LeakyRelu { alpha: -2.5 },
        6 => Activation::Sigmoid,
        _ => Activation::Tanh,
    }
}

/// NaN matches NaN; otherwise bit-identical, or (`rel > 0`) within `rel` relative error.
fn agree(got: &[f32], want: &[f32], rel: f32) -> Result<(), String> {
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if rel == 0.0 || w.is_infinite() {
            g.to_bits() == w.to_bits()
        } else {
            // The floor covers results in the subnormal range.
            (g - w).abs() <= rel * w.abs() + 1e-37
        };
        if !ok {
            return Err(format!("element {i}: got {g:e}, want {w:e}"));
        }
    }
    if got.len() != want.len() {
        return Err("length".into());
    }
    Ok(())
}

fn tolerance(a: Activation) -> f32 {
    if matches!(a, Activation::Sigmoid | Activation::Tanh) {
        1e-6
    } else {
        0.0
    }
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(300) })]

    #[test]
    fn unary_matches_portable(len in 0usize..300, a in any::<u8>(), scale in 0.5f32..30.0, seed in any::<u32>()) {
        let act = act(a);
        let x = Rng(seed | 1).vec(len, scale);
        let mut want = vec![f32::NAN; len + 2];
        (PORTABLE.unary)(act, &x, &mut want);
        let mut want_inplace = x.clone();
        (PORTABLE.unary_inplace)(act, &mut want_inplace);
        for k in common::isas("eltwise") {
            let mut got = vec![f32::NAN; len + 2];
            (k.unary)(act, &x, &mut got);
            let r = agree(&got, &want, tolerance(act));
            prop_assert!(r.is_ok(), "{} unary {act:?} len {len}: {r:?}", k.isa);
            let mut inplace = x.clone();
            (k.unary_inplace)(act, &mut inplace);
            let r = agree(&inplace, &want_inplace, tolerance(act));
            prop_assert!(r.is_ok(), "{} unary_inplace {act:?} len {len}: {r:?}", k.isa);
        }
    }

    #[test]
    fn binary_matches_portable(
        out in [1usize..5, 1usize..6, 1usize..7, 1usize..40],
        kinds in (0u8..6, 0u8..6),
        picks in any::<u8>(),
        op in 0u8..4,
        seed in any::<u32>(),
    ) {
        let op = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div][op as usize];
        let a_shape = operand_shape(out, kinds.0, picks);
        let b_shape = operand_shape(out, kinds.1, picks.rotate_left(3));
        let mut rng = Rng(seed | 1);
        let a = rng.vec(a_shape.iter().product(), 2.0);
        let b = rng.vec(b_shape.iter().product(), 2.0);
        let mut bc = Broadcast {
            shape: out,
            a_strides: strides(out, a_shape),
            b_strides: strides(out, b_shape),
        };
        // Now and then `a` is read transposed in its last two dimensions (a general inner
        // stride, which the SIMD kernels hand to the portable code).
        let a_t;
        let a = if kinds.0 == 0 && picks.is_multiple_of(4) {
            let (r, c) = (out[2], out[3]);
            a_t = transpose_last_two(&a, out);
            bc.a_strides[2] = 1;
            bc.a_strides[3] = r;
            let _ = c;
            &a_t
        } else {
            &a
        };
        let total: usize = out.iter().product();
        let mut want = vec![0.0; total];
        (PORTABLE.binary)(op, &bc, a, &b, &mut want);
        for k in common::isas("eltwise") {
            let what = format!("{} {op:?} out {out:?} a {a_shape:?} b {b_shape:?} {bc:?}", k.isa);
            let mut got = vec![f32::NAN; total];
            (k.binary)(op, &bc, a, &b, &mut got);
            let r = agree(&got, &want, 0.0);
            prop_assert!(r.is_ok(), "{what}: {r:?}");
            // In place with the accumulator on either side, when it has the output's layout.
            if bc.a_strides == strides(out, out) {
                let mut acc = a.to_vec();
                (k.binary_inplace)(op, &bc, &mut acc, &b, true);
                let r = agree(&acc, &want, 0.0);
                prop_assert!(r.is_ok(), "{what} in place (lhs): {r:?}");
            }
            if bc.b_strides == strides(out, out) {
                let mut acc = b.clone();
                (k.binary_inplace)(op, &bc, &mut acc, a, false);
                let r = agree(&acc, &want, 0.0);
                prop_assert!(r.is_ok(), "{what} in place (rhs): {r:?}");
            }
        }
    }
}

/// An operand shape broadcasting to `out`: 0 the same shape, 1 a scalar, 2 per channel
/// `[1, C, 1, 1]`, 3 a row `[1, 1, 1, W]`, 4 a column `[.., H, 1]`, 5 a random subset of
/// dimensions kept.
fn operand_shape(out: [usize; 4], kind: u8, picks: u8) -> [usize; 4] {
    match kind {
        0 => out,
        1 => [1; 4],
        2 => [1, out[1], 1, 1],
        3 => [1, 1, 1, out[3]],
        4 => [out[0], out[1], out[2], 1],
        _ => core::array::from_fn(|d| if picks >> d & 1 == 1 { out[d] } else { 1 }),
    }
}

/// Row-major strides of `shape`, 0 where it has size 1 and `out` does not.
fn strides(out: [usize; 4], shape: [usize; 4]) -> [usize; 4] {
    let mut s = [0; 4];
    let mut step = 1;
    for d in (0..4).rev() {
        s[d] = if shape[d] == 1 && out[d] != 1 {
            0
        } else {
            step
        };
        step *= shape[d];
    }
    s
}

/// `x` (contiguous with shape `out`) with each `[H, W]` matrix stored transposed, so that
/// element `(.., i, j)` is at `base + j * H + i`.
fn transpose_last_two(x: &[f32], out: [usize; 4]) -> Vec<f32> {
    let (h, w) = (out[2], out[3]);
    let mut t = vec![0.0; x.len()];
    for (src, dst) in x.chunks_exact(h * w).zip(t.chunks_exact_mut(h * w)) {
        for i in 0..h {
            for j in 0..w {
                dst[j * h + i] = src[i * w + j];
            }
        }
    }
    t
}

#[test]
fn special_values_follow_the_scalar_definitions() {
    let x = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        0.0,
        1e30,
        -1e30,
        88.8,
        -104.5,
        7.0,
    ];
    for k in common::isas("eltwise") {
        for a in 0..8 {
            let act = act(a);
            let mut want = [0.0; 10];
            (PORTABLE.unary)(act, &x, &mut want);
            let mut got = [0.0; 10];
            (k.unary)(act, &x, &mut got);
            // NaN stays NaN and infinities saturate exactly; finite values as in the harness.
            agree(&got, &want, tolerance(act)).unwrap_or_else(|e| panic!("{} {act:?}: {e}", k.isa));
        }
    }
}
