//! Normalisation: folded batch norm ([`scale_shift`], [`fold_batch_norm`],
//! [`batch_norm_scale_shift`]), [`softmax`] and [`log_softmax`].
//!
//! Algorithm sketch.
//!
//! * Batch norm in inference is the per-channel affine `x * s + (beta - mean * s)` with
//!   `s = gamma / sqrt(var + eps)`. The compiler either folds it into the preceding conv/dense
//!   (scale that layer's weight rows and bias once, at load time) or, when there is no such
//!   layer, runs [`scale_shift`], which is the shared epilogue applied per channel plane.
//! * Softmax over the middle axis of an `[outer, len, inner]` view, numerically stable:
//!   subtract the maximum, exponentiate, divide by the sum. With `inner == 1` each softmax is a
//!   contiguous row. Otherwise the `inner` softmaxes of an outer block are interleaved, and
//!   they are processed `TILE` columns at a time with the running maxima and sums in stack
//!   arrays, so every pass reads whole contiguous row segments instead of striding by `inner`.
//!   The out-of-place version copies each outer block into `out` and works there, while it is
//!   still in cache.
//! * Log-softmax is `x - max - ln(sum(exp(x - max)))` with the same layout and tiling; the
//!   exponentials are only summed (not stored), so it is two reading passes and one writing
//!   pass, and the result never takes the logarithm of a rounded-to-zero probability.

use super::epilogue::{epilogue, epilogue_from};
use crate::math::{expf, logf, sqrtf};
use crate::Activation;

/// `out[n, c, s] = act(input[n, c, s] * scale[c] + shift[c])`.
#[allow(clippy::too_many_arguments)] // The signature is the contract generated code calls.
pub fn scale_shift(
    batch: usize,
    channels: usize,
    spatial: usize,
    input: &[f32],
    scale: &[f32],
    shift: &[f32],
    act: Activation,
    out: &mut [f32],
) {
    let total = batch * channels * spatial;
    debug_assert!(input.len() >= total, "scale_shift: input too short");
    debug_assert!(out.len() >= total, "scale_shift: out too short");
    debug_assert!(
        scale.len() >= channels && shift.len() >= channels,
        "scale_shift: params"
    );
    if spatial == 0 {
        return;
    }
    let planes = out[..total]
        .chunks_exact_mut(spatial)
        .zip(input[..total].chunks_exact(spatial));
    for (i, (dst, src)) in planes.enumerate() {
        let c = i % channels;
        epilogue_from(src, dst, scale[c], shift[c], act);
    }
}

/// In-place [`scale_shift`].
pub fn scale_shift_inplace(
    batch: usize,
    channels: usize,
    spatial: usize,
    data: &mut [f32],
    scale: &[f32],
    shift: &[f32],
    act: Activation,
) {
    let total = batch * channels * spatial;
    debug_assert!(data.len() >= total, "scale_shift_inplace: data too short");
    debug_assert!(
        scale.len() >= channels && shift.len() >= channels,
        "scale_shift_inplace"
    );
    if spatial == 0 {
        return;
    }
    for (i, plane) in data[..total].chunks_exact_mut(spatial).enumerate() {
        let c = i % channels;
        epilogue(plane, scale[c], shift[c], act);
    }
}

/// `gamma / sqrt(var + eps)`, the multiplier batch norm applies to channel values.
#[inline]
fn bn_scale(gamma: f32, var: f32, eps: f32) -> f32 {
    gamma / sqrtf(var + eps)
}

/// Folds batch-norm statistics into the preceding conv/dense layer, in place.
///
/// With `s[o] = gamma[o] / sqrt(var[o] + eps)`: each of the `bias.len()` output channels owns
/// `weight.len() / bias.len()` consecutive weights, which are multiplied by `s[o]`, and
/// `bias[o] = (bias[o] - mean[o]) * s[o] + beta[o]`. (A layer without bias passes zeros.)
pub fn fold_batch_norm(
    weight: &mut [f32],
    bias: &mut [f32],
    gamma: &[f32],
    beta: &[f32],
    mean: &[f32],
    var: &[f32],
    eps: f32,
) {
    let channels = bias.len();
    debug_assert!(
        gamma.len() >= channels
            && beta.len() >= channels
            && mean.len() >= channels
            && var.len() >= channels,
        "fold_batch_norm: statistics too short"
    );
    if channels == 0 {
        return;
    }
    debug_assert!(
        weight.len().is_multiple_of(channels),
        "fold_batch_norm: weight length not a multiple of the channel count"
    );
    let per = weight.len() / channels;
    for o in 0..channels {
        let s = bn_scale(gamma[o], var[o], eps);
        for x in &mut weight[o * per..(o + 1) * per] {
            *x *= s;
        }
        bias[o] = (bias[o] - mean[o]) * s + beta[o];
    }
}

/// `scale = gamma / sqrt(var + eps)`, `shift = beta - mean * scale`, per channel
/// (`gamma.len()` channels).
pub fn batch_norm_scale_shift(
    gamma: &[f32],
    beta: &[f32],
    mean: &[f32],
    var: &[f32],
    eps: f32,
    scale: &mut [f32],
    shift: &mut [f32],
) {
    let channels = gamma.len();
    debug_assert!(
        beta.len() >= channels && mean.len() >= channels && var.len() >= channels,
        "batch_norm_scale_shift: statistics too short"
    );
    debug_assert!(
        scale.len() >= channels && shift.len() >= channels,
        "batch_norm_scale_shift: outputs too short"
    );
    for c in 0..channels {
        let s = bn_scale(gamma[c], var[c], eps);
        scale[c] = s;
        shift[c] = beta[c] - mean[c] * s;
    }
}

/// Columns per tile for `inner > 1` (two stack arrays of this many `f32`).
const TILE: usize = 64;

/// Softmax of one contiguous row, in place.
fn softmax_row(row: &mut [f32]) {
    let max = row
        .iter()
        .fold(f32::NEG_INFINITY, |m, &x| if x > m { x } else { m });
    let mut sum = 0.0f32;
    for x in row.iter_mut() {
        *x = expf(*x - max);
        sum += *x;
    }
    for x in row.iter_mut() {
        *x /= sum;
    }
}

/// Softmax over the rows of one `[len, inner]` block, per column, in place.
fn softmax_block(block: &mut [f32], len: usize, inner: usize) {
    let mut t0 = 0;
    while t0 < inner {
        let t1 = (t0 + TILE).min(inner);
        let width = t1 - t0;
        let mut max = [f32::NEG_INFINITY; TILE];
        let mut sum = [0.0f32; TILE];
        let (max, sum) = (&mut max[..width], &mut sum[..width]);
        for l in 0..len {
            for (m, &x) in max.iter_mut().zip(&block[l * inner + t0..l * inner + t1]) {
                if x > *m {
                    *m = x;
                }
            }
        }
        for l in 0..len {
            let seg = &mut block[l * inner + t0..l * inner + t1];
            for ((x, &m), s) in seg.iter_mut().zip(max.iter()).zip(sum.iter_mut()) {
                *x = expf(*x - m);
                *s += *x;
            }
        }
        for l in 0..len {
            let seg = &mut block[l * inner + t0..l * inner + t1];
            for (x, &s) in seg.iter_mut().zip(sum.iter()) {
                *x /= s;
            }
        }
        t0 = t1;
    }
}

/// Dispatches one outer block to the contiguous or the tiled version.
fn softmax_outer_block(block: &mut [f32], len: usize, inner: usize) {
    if inner == 1 {
        softmax_row(block);
    } else {
        softmax_block(block, len, inner);
    }
}

/// Runs `f` on each `[len, inner]` block of an `[outer, len, inner]` view of `out`, after
/// copying the block from `input` (while it is in cache) when there is one: the driver of
/// softmax and log-softmax, in and out of place.
fn per_block(
    outer: usize,
    len: usize,
    inner: usize,
    input: Option<&[f32]>,
    out: &mut [f32],
    f: fn(&mut [f32], usize, usize),
) {
    let block = len * inner;
    debug_assert!(out.len() >= outer * block, "softmax: out too short");
    debug_assert!(
        input.is_none_or(|x| x.len() >= outer * block),
        "softmax: input too short"
    );
    if block == 0 {
        return;
    }
    for (b, dst) in out[..outer * block].chunks_exact_mut(block).enumerate() {
        if let Some(x) = input {
            dst.copy_from_slice(&x[b * block..(b + 1) * block]);
        }
        f(dst, len, inner);
    }
}

/// Softmax over the middle axis of an `[outer, len, inner]` view.
pub fn softmax(outer: usize, len: usize, inner: usize, input: &[f32], out: &mut [f32]) {
    per_block(outer, len, inner, Some(input), out, softmax_outer_block);
}

/// In-place [`softmax`].
pub fn softmax_inplace(outer: usize, len: usize, inner: usize, data: &mut [f32]) {
    per_block(outer, len, inner, None, data, softmax_outer_block);
}

/// Log-softmax of one contiguous row, in place.
fn log_softmax_row(row: &mut [f32]) {
    let max = row
        .iter()
        .fold(f32::NEG_INFINITY, |m, &x| if x > m { x } else { m });
    let sum: f32 = row.iter().map(|&x| expf(x - max)).sum();
    let ls = logf(sum);
    for x in row.iter_mut() {
        *x = (*x - max) - ls;
    }
}

/// Log-softmax over the rows of one `[len, inner]` block, per column, in place.
fn log_softmax_block(block: &mut [f32], len: usize, inner: usize) {
    let mut t0 = 0;
    while t0 < inner {
        let t1 = (t0 + TILE).min(inner);
        let width = t1 - t0;
        let mut max = [f32::NEG_INFINITY; TILE];
        let mut sum = [0.0f32; TILE];
        let (max, sum) = (&mut max[..width], &mut sum[..width]);
        for l in 0..len {
            for (m, &x) in max.iter_mut().zip(&block[l * inner + t0..l * inner + t1]) {
                if x > *m {
                    *m = x;
                }
            }
        }
        for l in 0..len {
            let seg = &block[l * inner + t0..l * inner + t1];
            for ((&x, &m), s) in seg.iter().zip(max.iter()).zip(sum.iter_mut()) {
                *s += expf(x - m);
            }
        }
        // From here `sum` holds ln(sum), the amount to subtract after the max.
        for s in sum.iter_mut() {
            *s = logf(*s);
        }
        for l in 0..len {
            let seg = &mut block[l * inner + t0..l * inner + t1];
            for ((x, &m), &ls) in seg.iter_mut().zip(max.iter()).zip(sum.iter()) {
                *x = (*x - m) - ls;
            }
        }
        t0 = t1;
    }
}

/// Dispatches one outer block to the contiguous or the tiled version.
fn log_softmax_outer_block(block: &mut [f32], len: usize, inner: usize) {
    if inner == 1 {
        log_softmax_row(block);
    } else {
        log_softmax_block(block, len, inner);
    }
}

/// ONNX `LogSoftmax` over the middle axis of an `[outer, len, inner]` view:
/// `x - max - ln(sum(exp(x - max)))`, computed without overflow for any logits.
pub fn log_softmax(outer: usize, len: usize, inner: usize, input: &[f32], out: &mut [f32]) {
    per_block(outer, len, inner, Some(input), out, log_softmax_outer_block);
}

/// In-place [`log_softmax`].
pub fn log_softmax_inplace(outer: usize, len: usize, inner: usize, data: &mut [f32]) {
    per_block(outer, len, inner, None, data, log_softmax_outer_block);
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use crate::testutil::{assert_close, XorShift};
    use std::format;
    use std::vec;
    use std::vec::Vec;

    #[test]
    fn softmax_hand_computed() {
        // [0, ln 2] -> e^0 : e^(ln 2) = 1 : 2.
        let mut out = [f32::NAN; 2];
        softmax(1, 2, 1, &[0.0, 2f32.ln()], &mut out);
        assert!((out[0] - 1.0 / 3.0).abs() < 1e-7 && (out[1] - 2.0 / 3.0).abs() < 1e-7);
        // Huge logits must not overflow (e^1000 would): only the differences matter. 1000.5
        // and 1000 are exact in f32, so the answer is [1, e^0.5] / (1 + e^0.5).
        let mut data = [1000.0, 1000.5, -1e30];
        softmax_inplace(1, 3, 1, &mut data);
        let e = 0.5f64.exp();
        assert_close(
            &data,
            &[1.0 / (1.0 + e), e / (1.0 + e), 0.0],
            "large logits",
        );
        assert_eq!(data[2], 0.0);
        // Over the middle axis of [1, 2, 2]: columns are independent.
        let mut out = [f32::NAN; 4];
        softmax(1, 2, 2, &[0.0, 5.0, 2f32.ln(), 5.0], &mut out);
        let want = [1.0 / 3.0, 0.5, 2.0 / 3.0, 0.5];
        for (g, w) in out.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{out:?}");
        }
    }

    /// exp(x_l) / sum_l exp(x_l) in f64, without the max trick (inputs are small), indexing
    /// the [outer, len, inner] view directly.
    fn naive_softmax(outer: usize, len: usize, inner: usize, x: &[f32]) -> Vec<f64> {
        let mut out = vec![0.0f64; x.len()];
        for o in 0..outer {
            for i in 0..inner {
                let at = |l: usize| (o * len + l) * inner + i;
                let total: f64 = (0..len).map(|l| f64::from(x[at(l)]).exp()).sum();
                for l in 0..len {
                    out[at(l)] = f64::from(x[at(l)]).exp() / total;
                }
            }
        }
        out
    }

    #[test]
    fn softmax_matches_naive() {
        let mut rng = XorShift::new(41);
        let shapes = [
            (1, 1, 1),
            (1, 10, 1),
            (3, 7, 1),
            (2, 5, 3),
            (2, 4, TILE + 5),
            (1, 3, 2 * TILE),
            (3, 1, 4),
        ];
        for (outer, len, inner) in shapes {
            let x: Vec<f32> = (0..outer * len * inner)
                .map(|_| rng.uniform(-5.0, 5.0))
                .collect();
            let want = naive_softmax(outer, len, inner, &x);
            let what = format!("softmax [{outer}, {len}, {inner}]");
            let mut out = vec![f32::NAN; x.len()];
            softmax(outer, len, inner, &x, &mut out);
            assert_close(&out, &want, &what);
            let mut data = x.clone();
            softmax_inplace(outer, len, inner, &mut data);
            assert_close(&data, &want, &format!("{what} in place"));
        }
    }

    #[test]
    fn scale_shift_matches_naive() {
        let mut rng = XorShift::new(43);
        let (batch, channels, spatial) = (2, 3, 11);
        let x = rng.vec(batch * channels * spatial);
        let scale = rng.vec(channels);
        let shift = rng.vec(channels);
        let mut want = Vec::new();
        for n in 0..batch {
            for c in 0..channels {
                for s in 0..spatial {
                    let v = f64::from(x[(n * channels + c) * spatial + s]) * f64::from(scale[c])
                        + f64::from(shift[c]);
                    want.push(v.max(0.0));
                }
            }
        }
        let mut out = vec![f32::NAN; x.len()];
        scale_shift(
            batch,
            channels,
            spatial,
            &x,
            &scale,
            &shift,
            Activation::Relu,
            &mut out,
        );
        assert_close(&out, &want, "scale_shift");
        let mut data = x.clone();
        scale_shift_inplace(
            batch,
            channels,
            spatial,
            &mut data,
            &scale,
            &shift,
            Activation::Relu,
        );
        assert_close(&data, &want, "scale_shift_inplace");
    }

    /// Batch-norm statistics with a positive variance.
    fn stats(rng: &mut XorShift, c: usize) -> [Vec<f32>; 4] {
        let gamma = rng.vec(c);
        let beta = rng.vec(c);
        let mean = rng.vec(c);
        let var = (0..c).map(|_| rng.uniform(0.1, 2.0)).collect();
        [gamma, beta, mean, var]
    }

    #[test]
    fn batch_norm_scale_shift_hand_computed_and_random() {
        // gamma 2, var 3, eps 1 -> scale 2 / sqrt(4) = 1; shift = beta - mean = 5 - 2 = 3.
        let (mut scale, mut shift) = ([0.0f32; 1], [0.0f32; 1]);
        batch_norm_scale_shift(&[2.0], &[5.0], &[2.0], &[3.0], 1.0, &mut scale, &mut shift);
        assert_eq!((scale, shift), ([1.0], [3.0]));

        let mut rng = XorShift::new(47);
        let [gamma, beta, mean, var] = stats(&mut rng, 9);
        let eps = 1e-5f32;
        let mut scale = vec![f32::NAN; 9];
        let mut shift = vec![f32::NAN; 9];
        batch_norm_scale_shift(&gamma, &beta, &mean, &var, eps, &mut scale, &mut shift);
        // Applying scale/shift must equal the textbook (x - mean) / sqrt(var + eps) * g + b.
        let x = rng.vec(9);
        for c in 0..9 {
            let got = x[c] * scale[c] + shift[c];
            let want = (f64::from(x[c]) - f64::from(mean[c]))
                / (f64::from(var[c]) + f64::from(eps)).sqrt()
                * f64::from(gamma[c])
                + f64::from(beta[c]);
            assert_close(&[got], &[want], "batch norm as scale/shift");
        }
    }

    #[test]
    fn fold_batch_norm_equals_batch_norm_after_the_layer() {
        // A dense layer: out = W x + b, then batch norm. Folding must give the same outputs.
        let mut rng = XorShift::new(53);
        let (n_in, n_out) = (6, 4);
        let w = rng.vec(n_out * n_in);
        let b = rng.vec(n_out);
        let [gamma, beta, mean, var] = stats(&mut rng, n_out);
        let eps = 1e-3f32;
        let x = rng.vec(n_in);
        let mut want = Vec::new();
        for o in 0..n_out {
            let mut y = f64::from(b[o]);
            for i in 0..n_in {
                y += f64::from(w[o * n_in + i]) * f64::from(x[i]);
            }
            let bn = (y - f64::from(mean[o])) / (f64::from(var[o]) + f64::from(eps)).sqrt()
                * f64::from(gamma[o])
                + f64::from(beta[o]);
            want.push(bn);
        }
        let (mut fw, mut fb) = (w.clone(), b.clone());
        fold_batch_norm(&mut fw, &mut fb, &gamma, &beta, &mean, &var, eps);
        let mut got = Vec::new();
        for o in 0..n_out {
            let mut y = fb[o];
            for i in 0..n_in {
                y += fw[o * n_in + i] * x[i];
            }
            got.push(y);
        }
        assert_close(&got, &want, "folded dense");
        // Hand case: gamma 3, var 3, eps 1 -> s = 1.5; weights [2, 4] -> [3, 6];
        // bias (1 - 0.5) * 1.5 + 0.25 = 1.
        let (mut w, mut b) = ([2.0f32, 4.0], [1.0f32]);
        fold_batch_norm(&mut w, &mut b, &[3.0], &[0.25], &[0.5], &[3.0], 1.0);
        assert_eq!((w, b), ([3.0, 6.0], [1.0]));
    }
}
