//! Per-channel affine ([`scale_shift`], [`scale_shift_inplace`]: inference batch norm) and
//! [`softmax`] over the middle axis of `[outer, len, inner]`.
//!
//! Algorithm sketch.
//!
//! * Scale/shift maps each channel plane with `act(x * scale[c] + shift[c])` through the
//!   element-wise map helpers. It multiplies and adds separately, like the portable kernel,
//!   rather than fusing: the op is memory-bound, and the results stay bit-identical for every
//!   activation but sigmoid and tanh.
//! * Softmax with `inner == 1` (the usual case: the last axis): each row is contiguous and
//!   vectorised along `len` in three passes — maximum, `e = exp(x - max)` stored and summed,
//!   division by the sum. The row's ragged end is handled with masked loads and stores; in the
//!   sum, the masked-off lanes are zeroed (they would otherwise contribute `exp(0 - max)`).
//! * Softmax with `inner > 1`: the `inner` softmaxes of an outer block are interleaved, so the
//!   lanes run across `inner` and the three passes walk down `len`, keeping each lane's running
//!   maximum and sum in registers. Four vectors of columns per pass while at least that many
//!   remain, then one vector at a time, the last masked. When `inner` is smaller than a vector
//!   this is one masked vector per row: fewer busy lanes, but still far cheaper than the
//!   scalar `f64` exponential of the reference.
//!
//! The maxima use `x > m ? x : m` like the portable kernel, so a NaN is never the maximum; it
//! still makes its whole softmax NaN through the exponential and the sum, as there.

use super::eltwise::{map, map_inplace};
use super::math::{exp, specialise, Act};
use super::vector::Simd;
use crate::Activation;

/// `act(x * scale + shift)` as one map.
#[derive(Clone, Copy)]
struct Affine<V, A> {
    scale: V,
    shift: V,
    act: A,
}

impl<S: Simd, A: Act<S>> Act<S> for Affine<S::V, A> {
    #[inline(always)]
    fn apply(self, s: S, v: S::V) -> S::V {
        self.act.apply(s, s.add(s.mul(v, self.scale), self.shift))
    }
}

/// `out[n, c, s] = act(input[n, c, s] * scale[c] + shift[c])`.
#[allow(clippy::too_many_arguments)] // The signature is the table's contract.
#[inline(always)]
pub(crate) fn scale_shift<S: Simd>(
    s: S,
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
    if spatial == 0 {
        return;
    }
    let (scale, shift) = (&scale[..channels], &shift[..channels]);
    let planes = out[..total]
        .chunks_exact_mut(spatial)
        .zip(input[..total].chunks_exact(spatial));
    specialise!(s, act, a => {
        for (i, (dst, src)) in planes.enumerate() {
            let c = i % channels;
            let f = Affine { scale: s.splat(scale[c]), shift: s.splat(shift[c]), act: a };
            map(s, f, src, dst);
        }
    });
}

/// In-place [`scale_shift`].
#[allow(clippy::too_many_arguments)] // The signature is the table's contract.
#[inline(always)]
pub(crate) fn scale_shift_inplace<S: Simd>(
    s: S,
    batch: usize,
    channels: usize,
    spatial: usize,
    data: &mut [f32],
    scale: &[f32],
    shift: &[f32],
    act: Activation,
) {
    let total = batch * channels * spatial;
    if spatial == 0 {
        return;
    }
    let (scale, shift) = (&scale[..channels], &shift[..channels]);
    specialise!(s, act, a => {
        for (i, plane) in data[..total].chunks_exact_mut(spatial).enumerate() {
            let c = i % channels;
            // Like the portable kernel's epilogue: the identity leaves the plane untouched
            // (so a -0.0 stays -0.0).
            if scale[c] == 1.0 && shift[c] == 0.0 && act == Activation::None {
                continue;
            }
            let f = Affine { scale: s.splat(scale[c]), shift: s.splat(shift[c]), act: a };
            map_inplace(s, f, plane);
        }
    });
}

/// Softmax over the middle axis of an `[outer, len, inner]` view.
#[inline(always)]
pub(crate) fn softmax<S: Simd>(
    s: S,
    outer: usize,
    len: usize,
    inner: usize,
    input: &[f32],
    out: &mut [f32],
) {
    let block = len * inner;
    if block == 0 {
        return;
    }
    let blocks = out[..outer * block]
        .chunks_exact_mut(block)
        .zip(input[..outer * block].chunks_exact(block));
    for (dst, src) in blocks {
        // Copying first and working in place costs one pass over data that is in cache
        // anyway, and keeps one implementation.
        dst.copy_from_slice(src);
        softmax_block(s, dst, len, inner);
    }
}

/// In-place [`softmax`].
#[inline(always)]
pub(crate) fn softmax_inplace<S: Simd>(
    s: S,
    outer: usize,
    len: usize,
    inner: usize,
    data: &mut [f32],
) {
    let block = len * inner;
    if block == 0 {
        return;
    }
    for dst in data[..outer * block].chunks_exact_mut(block) {
        softmax_block(s, dst, len, inner);
    }
}

#[inline(always)]
fn softmax_block<S: Simd>(s: S, block: &mut [f32], len: usize, inner: usize) {
    if inner == 1 {
        softmax_row(s, block);
        return;
    }
    let l = S::LANES;
    let mut c0 = 0;
    while c0 + 4 * l <= inner {
        columns::<S, 4>(s, block, len, inner, c0, S::LANES);
        c0 += 4 * l;
    }
    while c0 < inner {
        columns::<S, 1>(s, block, len, inner, c0, (inner - c0).min(l));
        c0 += l;
    }
}

/// Softmax of one contiguous row, in place.
#[inline(always)]
fn softmax_row<S: Simd>(s: S, row: &mut [f32]) {
    let l = S::LANES;
    let n = row.len();
    let full = n - n % l;
    let tail = s.mask_range(0, n - full);
    let neg_inf = s.splat(f32::NEG_INFINITY);

    let mut m = [neg_inf; 4];
    let mut chunks = row[..full].chunks_exact(4 * l);
    for c in &mut chunks {
        for (j, mj) in m.iter_mut().enumerate() {
            *mj = s.max(s.load(&c[j * l..]), *mj);
        }
    }
    for c in chunks.remainder().chunks_exact(l) {
        m[0] = s.max(s.load(c), m[0]);
    }
    if full < n {
        // Masked-off lanes must not win: fill them with -inf.
        let x = s.select(tail, s.load_partial(&row[full..]), neg_inf);
        m[1] = s.max(x, m[1]);
    }
    let max = s.reduce_max(s.max(s.max(m[0], m[1]), s.max(m[2], m[3])));
    let mv = s.splat(max);

    let mut sum = [s.zero(); 4];
    let mut chunks = row[..full].chunks_exact_mut(4 * l);
    for c in &mut chunks {
        for (j, sj) in sum.iter_mut().enumerate() {
            let e = exp(s, s.sub(s.load(&c[j * l..]), mv));
            s.store(&mut c[j * l..], e);
            *sj = s.add(*sj, e);
        }
    }
    for c in chunks.into_remainder().chunks_exact_mut(l) {
        let e = exp(s, s.sub(s.load(c), mv));
        s.store(c, e);
        sum[0] = s.add(sum[0], e);
    }
    if full < n {
        let e = exp(s, s.sub(s.load_partial(&row[full..]), mv));
        s.store_partial(&mut row[full..], e);
        sum[1] = s.add(sum[1], s.select(tail, e, s.zero()));
    }
    let total = s.reduce_add(s.add(s.add(sum[0], sum[1]), s.add(sum[2], sum[3])));
    let tv = s.splat(total);

    for c in row[..full].chunks_exact_mut(l) {
        let v = s.div(s.load(c), tv);
        s.store(c, v);
    }
    if full < n {
        let v = s.div(s.load_partial(&row[full..]), tv);
        s.store_partial(&mut row[full..], v);
    }
}

/// Softmax of the `NV` vectors of columns starting at `c0` of a `[len, inner]` block, in
/// place; with `NV == 1` the vector may be partial (`width < LANES` columns).
#[inline(always)]
fn columns<S: Simd, const NV: usize>(
    s: S,
    block: &mut [f32],
    len: usize,
    inner: usize,
    c0: usize,
    width: usize,
) {
    let l = S::LANES;
    let row_at = |r: usize| r * inner + c0;
    let mut m = [s.splat(f32::NEG_INFINITY); NV];
    for r in 0..len {
        for (j, mj) in m.iter_mut().enumerate() {
            // Masked-off lanes see 0.0; they are never stored, so their maximum is moot.
            *mj = s.max(load(s, block, row_at(r) + j * l, width), *mj);
        }
    }
    let mut sum = [s.zero(); NV];
    for r in 0..len {
        for (j, (mj, sj)) in m.iter().zip(sum.iter_mut()).enumerate() {
            let at = row_at(r) + j * l;
            let e = exp(s, s.sub(load(s, block, at, width), *mj));
            store(s, block, at, width, e);
            *sj = s.add(*sj, e);
        }
    }
    for r in 0..len {
        for (j, sj) in sum.iter().enumerate() {
            let at = row_at(r) + j * l;
            let v = s.div(load(s, block, at, width), *sj);
            store(s, block, at, width, v);
        }
    }
}

/// Loads `width` lanes from `block[at..]` (a full vector when `width == LANES`), zeros in
/// the others.
#[inline(always)]
fn load<S: Simd>(s: S, block: &[f32], at: usize, width: usize) -> S::V {
    if width < S::LANES {
        s.load_partial(&block[at..at + width])
    } else {
        s.load(&block[at..])
    }
}

/// Stores `width` lanes of `v` at `block[at..]` (a full vector when `width == LANES`).
#[inline(always)]
fn store<S: Simd>(s: S, block: &mut [f32], at: usize, width: usize, v: S::V) {
    if width < S::LANES {
        s.store_partial(&mut block[at..at + width], v);
    } else {
        s.store(&mut block[at..], v);
    }
}
