//! Pooling: [`max_pool2d`], [`avg_pool2d`] (horizontal stride 1 or 2; other strides use the
//! portable kernel) and [`global_avg_pool`].
//!
//! Algorithm sketch. Four paths, chosen per call by shape:
//!
//! - **Small planes** ([`super::pool_small`]): rows at most two vectors wide (Inception-v2's
//!   28x28, 14x14 and 7x7 maps, SqueezeNet's 27x27, DenseNet-121's 14x14), every window tap
//!   one two-source permute of the whole row; with AVX2 only for strided windows.
//! - **Rows of vectors** ([`pool_planes`]): the output columns whose whole window (as the
//!   vector loads read it) lies inside the row are computed a vector at a time: for each window
//!   row and each window column, one vector of inputs (stride 1: an unaligned load; stride 2:
//!   the even or odd half of two deinterleaved loads, see [`Simd::deinterleave`]) is folded
//!   into the accumulator. The last vector of that range is shifted left to end at its last
//!   column instead of leaving a scalar remainder; the few columns that touch the left/right
//!   padding go through scalar code that is the portable kernel's definition. The vectors go in
//!   groups of up to four down the whole plane ([`Columns::run`]): a window row is checked and
//!   sliced once per group, the group's folds are independent chains, the window sizes of the
//!   networks' pools are constants (so the window loops unroll), and a max pool over rows
//!   without NaN folds each input row once, the next window that shares it (3x3 stride 2: one
//!   row, stride 1: two) reusing its maxima.
//! - **Flat planes** ([`flat`]): stride 1 with an output the input's size, on planes of at most
//!   1024 floats (Inception's padded 3x3 pools on 28x28, 14x14 and 7x7): the plane is one run of
//!   vectors, each window tap one unaligned load from a padded copy of the plane, the lanes whose
//!   tap falls off the row taking the fold's neutral value.
//! - **Padded rows** ([`narrow`]): other rows too narrow for the first path (fewer output
//!   columns than a vector plus the window, or any border column on a row of at most two
//!   vectors) are copied into buffers holding the padded rows, with the fold's neutral value in
//!   the padding, and every column is vectorised. A 16-lane kernel whose rows would take this
//!   path but whose 8-lane twin would not (SqueezeNet's 54 -> 27 and 27 -> 13 max pools,
//!   Inception-v2's 56 -> 28) runs with 8 lanes ([`prefers_8_lanes`]).
//!
//! Every lane folds its window in the portable kernel's order (rows, then columns), so the
//! results are bit-identical to it: average pooling adds from `0.0` in the same order and
//! divides by the same count (the window clipped to the image, or to the padded image with
//! `count_include_pad`; uniform across a row's vectorised columns, which are never in the
//! padding), and max pooling keeps the same element among equals. Max pooling propagates NaN
//! like the reference: `x > m ? x : m` ignores a NaN, so the NaN lanes are tracked in a mask
//! and written as NaN at the end; windows over rows known to hold no NaN ([`NanRows`]) skip
//! that tracking.
//!
//! Global average pooling sums each plane with four vector accumulators (reassociated, so it
//! agrees with the portable kernel to rounding, not bit for bit).
//!
//! Measured on Zen 4 (2026-11-24, branch `pool`; ns per output, `kernels/benches` family
//! `pool/`): SqueezeNet's 96x109x109 max pool 1.2-1.4 -> 0.7, Inception-v2's 3x3 average pools
//! on 28x28 / 14x14 / 7x7 1.1 / 1.6 / 3.1 -> 0.65 / 0.57 / 0.85 with AVX-512. What made the
//! difference was the overhead around the folds (a window-column loop and a bounds check per
//! load, a per-element NaN test moved through general registers, accumulators copied through
//! the stack, a whole-plane NaN scan ahead of the folds that missed L1), not memory traffic:
//! the same per-output times held for planes that fit the L2. An earlier attempt (branch
//! `small`) at folding rows once per plane through a ring of row buffers, over the generic
//! loops, moved nothing.

use core::ops::Range;

use super::vector::{Avx2Fma, Job, Simd};
use crate::arch::portable;
use crate::Pool2d;

/// How one kind of pooling folds a window, vector-wise and scalar-wise.
pub(super) trait Reduce<S: Simd>: Copy {
    type Acc: Copy;
    /// The value that leaves a fold unchanged: what the narrow-row path puts in the padding.
    const NEUTRAL: f32;
    /// Whether [`step`](Self::step) looks for NaNs, which [`step_clean`](Self::step_clean)
    /// may skip for inputs known to hold none (see [`NanRows`]).
    const NAN_AWARE: bool;
    fn init(self, s: S) -> Self::Acc;
    fn step(self, s: S, acc: Self::Acc, x: S::V) -> Self::Acc;
    /// [`step`](Self::step) for an `x` with no NaN lane.
    fn step_clean(self, s: S, acc: Self::Acc, x: S::V) -> Self::Acc;
    /// Whether this is max pooling, whose window over rows without NaN can be folded row by
    /// row (see [`Columns::run`]) and the result turned back into an accumulator by
    /// [`max_acc`](Self::max_acc).
    const SEPARABLE: bool;
    /// The accumulator of a NaN-free window whose maxima are `m` (only used if
    /// [`SEPARABLE`](Self::SEPARABLE)).
    fn max_acc(self, s: S, m: S::V) -> Self::Acc;
    /// The result for a window of `rows` clipped rows (`padded_rows` within the padded
    /// input) and `kw` in-image columns.
    fn finish(self, s: S, acc: Self::Acc, rows: usize, padded_rows: usize, kw: usize) -> S::V;
    /// [`finish`](Self::finish) with a divisor per lane (`counts`, exact small integers; a
    /// lane with 0 gives 0), for the narrow-row path, whose lanes include border columns.
    fn finish_counts(self, s: S, acc: Self::Acc, counts: S::V) -> S::V;
    /// The divisor's factor from a window's rows (`rows` clipped to the image, `padded` to
    /// the padded image) or from its columns; the divisor is their product.
    fn count_factor(self, clipped: usize, padded: usize) -> usize;
    /// The portable kernel's definition for one output (used at the borders).
    fn scalar(
        self,
        src: &[f32],
        w: usize,
        rows: Range<usize>,
        cols: Range<usize>,
        padded: usize,
    ) -> f32;
}

#[derive(Clone, Copy)]
struct Max;

impl<S: Simd> Reduce<S> for Max {
    type Acc = (S::V, S::M);
    const NEUTRAL: f32 = f32::NEG_INFINITY;
    const NAN_AWARE: bool = true;
    #[inline(always)]
    fn init(self, s: S) -> Self::Acc {
        let m = s.splat(f32::NEG_INFINITY);
        (m, s.is_nan(m))
    }
    #[inline(always)]
    fn step(self, s: S, (m, nan): Self::Acc, x: S::V) -> Self::Acc {
        (s.max(x, m), s.mask_or(nan, s.is_nan(x)))
    }
    #[inline(always)]
    fn step_clean(self, s: S, (m, nan): Self::Acc, x: S::V) -> Self::Acc {
        // `maxps(x, m)` is `x > m ? x : m`, the portable kernel's step for a non-NaN `x`.
        (s.max(x, m), nan)
    }
    const SEPARABLE: bool = true;
    #[inline(always)]
    fn max_acc(self, s: S, m: S::V) -> Self::Acc {
        (m, <Self as Reduce<S>>::init(self, s).1)
    }
    #[inline(always)]
    fn finish(self, s: S, (m, nan): Self::Acc, _: usize, _: usize, _: usize) -> S::V {
        s.select(nan, s.splat(f32::NAN), m)
    }
    #[inline(always)]
    fn finish_counts(self, s: S, acc: Self::Acc, _: S::V) -> S::V {
        <Self as Reduce<S>>::finish(self, s, acc, 0, 0, 0)
    }
    #[inline(always)]
    fn count_factor(self, _: usize, _: usize) -> usize {
        1
    }
    #[inline(always)]
    fn scalar(
        self,
        src: &[f32],
        w: usize,
        rows: Range<usize>,
        cols: Range<usize>,
        _: usize,
    ) -> f32 {
        let mut m = f32::NEG_INFINITY;
        for iy in rows {
            for &x in &src[iy * w + cols.start..iy * w + cols.end] {
                if x > m || x.is_nan() {
                    m = x;
                }
            }
        }
        m
    }
}

#[derive(Clone, Copy)]
struct Avg {
    include_pad: bool,
}

impl<S: Simd> Reduce<S> for Avg {
    type Acc = S::V;
    const NEUTRAL: f32 = 0.0;
    const NAN_AWARE: bool = false;
    #[inline(always)]
    fn init(self, s: S) -> S::V {
        s.zero()
    }
    #[inline(always)]
    fn step(self, s: S, acc: S::V, x: S::V) -> S::V {
        s.add(acc, x)
    }
    #[inline(always)]
    fn step_clean(self, s: S, acc: S::V, x: S::V) -> S::V {
        s.add(acc, x)
    }
    // A sum of row sums associates differently from the portable kernel's running sum.
    const SEPARABLE: bool = false;
    #[inline(always)]
    fn max_acc(self, _: S, m: S::V) -> S::V {
        m
    }
    #[inline(always)]
    fn finish(self, s: S, acc: S::V, rows: usize, padded_rows: usize, kw: usize) -> S::V {
        let count = if self.include_pad { padded_rows } else { rows } * kw;
        if count == 0 {
            s.zero()
        } else {
            s.div(acc, s.splat(count as f32))
        }
    }
    #[inline(always)]
    fn finish_counts(self, s: S, acc: S::V, counts: S::V) -> S::V {
        let zero = s.zero();
        s.select(s.gt(counts, zero), s.div(acc, counts), zero)
    }
    #[inline(always)]
    fn count_factor(self, clipped: usize, padded: usize) -> usize {
        if self.include_pad {
            padded
        } else {
            clipped
        }
    }
    #[inline(always)]
    fn scalar(
        self,
        src: &[f32],
        w: usize,
        rows: Range<usize>,
        cols: Range<usize>,
        padded: usize,
    ) -> f32 {
        let count = if self.include_pad {
            padded
        } else {
            rows.len() * cols.len()
        };
        if count == 0 {
            return 0.0;
        }
        let mut sum = 0.0f32;
        for iy in rows {
            for &x in &src[iy * w + cols.start..iy * w + cols.end] {
                sum += x;
            }
        }
        sum / count as f32
    }
}

/// Max pooling; padding never wins and NaN propagates (see [`portable::max_pool2d`]).
#[inline(always)]
pub(crate) fn max_pool2d<S: Simd>(s: S, p: &Pool2d, input: &[f32], out: &mut [f32]) {
    if !super::pool_small::takes::<S>(p) && super::pool_3x3s2::max_pool2d(s, p, input, out) {
        return;
    }
    if !pool_lanes(s, Max, p, input, out) {
        portable::max_pool2d(p, input, out);
    }
}

/// Average pooling (see [`portable::avg_pool2d`] for the divisor).
#[inline(always)]
pub(crate) fn avg_pool2d<S: Simd>(s: S, p: &Pool2d, input: &[f32], out: &mut [f32]) {
    let avg = Avg {
        include_pad: p.count_include_pad,
    };
    if !pool_lanes(s, avg, p, input, out) {
        portable::avg_pool2d(p, input, out);
    }
}

/// [`pool`] with `s`, or with 8 lanes where that is faster ([`prefers_8_lanes`]), in a
/// function of its own compiled for AVX2 (inlined into the AVX-512 entry, the 8-lane code ran
/// a quarter slower than the same code in the AVX2 table's).
#[inline(always)]
fn pool_lanes<S: Simd, R>(s: S, r: R, p: &Pool2d, input: &[f32], out: &mut [f32]) -> bool
where
    R: Reduce<S> + Reduce<Avx2Fma>,
{
    if prefers_8_lanes::<S>(p) && !super::pool_small::takes::<S>(p) {
        s.avx2().vectorize(PoolJob { r, p, input, out })
    } else {
        pool(s, r, p, input, out)
    }
}

/// [`pool`] as a [`Job`].
struct PoolJob<'a, R> {
    r: R,
    p: &'a Pool2d,
    input: &'a [f32],
    out: &'a mut [f32],
}

impl<S: Simd, R: Reduce<S>> Job<S> for PoolJob<'_, R> {
    type Output = bool;
    #[inline(always)]
    fn run(self, s: S) -> bool {
        pool(s, self.r, self.p, self.input, self.out)
    }
}

/// The window of output `o` clipped to the input, as input coordinates, and its length clipped
/// to the padded input (the portable kernel's definition).
#[inline(always)]
pub(super) fn window(
    o: usize,
    stride: usize,
    k: usize,
    pad_before: usize,
    in_len: usize,
    pad_after: usize,
) -> (Range<usize>, usize) {
    let start = o * stride;
    let end = start + k;
    let padded_end = end.min(pad_before + in_len + pad_after);
    let padded_len = padded_end.saturating_sub(start);
    let lo = start.max(pad_before).min(pad_before + in_len) - pad_before;
    let hi = end.min(pad_before + in_len).max(pad_before) - pad_before;
    (lo..hi.max(lo), padded_len)
}

/// Runs the pooling, or returns `false` (having written nothing) for shapes it does not
/// handle: a horizontal stride other than 1 or 2, an empty window, or sizes whose arithmetic
/// could overflow.
#[inline(always)]
fn pool<S: Simd, R: Reduce<S>>(s: S, r: R, p: &Pool2d, input: &[f32], out: &mut [f32]) -> bool {
    let [sh, sw] = p.stride;
    let [pt, pl, pb, pr] = p.pad;
    const LIMIT: usize = 1 << 40;
    let dims = [p.h, p.w, p.kh, p.kw, sh, p.out_h, p.out_w, pt, pl, pb, pr];
    if !(sw == 1 || sw == 2)
        || sh == 0
        || p.kh == 0
        || p.kw == 0
        || dims.iter().any(|&d| d >= LIMIT)
    {
        return false;
    }
    let planes = p.batch.checked_mul(p.channels);
    let Some((in_plane, out_plane, planes)) = planes.and_then(|n| {
        let i = p.h.checked_mul(p.w)?;
        let o = p.out_h.checked_mul(p.out_w)?;
        n.checked_mul(i)?;
        n.checked_mul(o)?;
        Some((i, o, n))
    }) else {
        return false;
    };
    if out_plane == 0 {
        return true;
    }
    let input = &input[..planes * in_plane];
    let out = &mut out[..planes * out_plane];
    let (vec_lo, vec_hi) = vector_cols(p, S::LANES);
    if super::pool_small::pool(s, r, p, input, out)
        || flat(s, r, p, input, out)
        || (pads_rows(p, S::LANES) && narrow(s, r, p, input, out))
    {
        return true;
    }
    let (kw, cols) = (p.kw, vec_lo..vec_hi);
    // The windows of the networks' pools with constant widths and strides, so that the
    // window loops unroll (a loop over the window's columns per vector cost three times the
    // folds themselves); anything else with the sizes read at run time.
    match (kw, sw) {
        (3, 2) => pool_planes::<S, R, 3, 2>(s, r, p, cols, input, out),
        (3, 1) => pool_planes::<S, R, 3, 1>(s, r, p, cols, input, out),
        (2, 2) => pool_planes::<S, R, 2, 2>(s, r, p, cols, input, out),
        _ => pool_planes::<S, R, 0, 0>(s, r, p, cols, input, out),
    }
    true
}

/// [`pool`]'s work once its checks passed: every plane, the output columns `cols` a vector at
/// a time, the others by the scalar definition. `KW` and `SW` are the window width and the
/// horizontal stride, or 0 to read them from `p`.
#[inline(always)]
fn pool_planes<S: Simd, R: Reduce<S>, const KW: usize, const SW: usize>(
    s: S,
    r: R,
    p: &Pool2d,
    cols: Range<usize>,
    input: &[f32],
    out: &mut [f32],
) {
    let kw = if KW == 0 { p.kw } else { KW };
    let sw = if SW == 0 { p.stride[1] } else { SW };
    debug_assert!(kw == p.kw && sw == p.stride[1]);
    let [sh, _] = p.stride;
    let [pt, pl, pb, pr] = p.pad;
    let (w, ow, l) = (p.w, p.out_w, S::LANES);
    let (in_plane, out_plane) = (p.h * w, p.out_h * ow);
    let (vec_lo, vec_hi) = (cols.start, cols.end);
    for (src, dst) in input
        .chunks_exact(in_plane)
        .zip(out.chunks_exact_mut(out_plane))
    {
        let mut nan = NanRows::new(src, w, R::NAN_AWARE);
        if vec_lo > 0 || vec_hi < ow {
            for (oy, line) in dst.chunks_exact_mut(ow).enumerate() {
                let (rows, ph) = window(oy, sh, p.kh, pt, p.h, pb);
                for ox in (0..vec_lo.min(ow)).chain(vec_hi.max(vec_lo)..ow) {
                    let (cols, pw) = window(ox, sw, kw, pl, w, pr);
                    line[ox] = r.scalar(src, w, rows.clone(), cols, ph * pw);
                }
            }
        }
        // The vector columns in groups of up to four vectors, each group down the whole plane:
        // a window row is sliced and checked once per group, the folds of a group are
        // independent chains, and (max pooling) a row that the next window shares is folded
        // once. The last vector ends exactly at `vec_hi`, overlapping the previous one.
        let vectors = (vec_hi - vec_lo).div_ceil(l);
        let start = |v: usize| (vec_lo + v * l).min(vec_hi - l);
        let cols = Columns { src, p, kw, sw };
        let mut v = 0;
        while v < vectors {
            v += match vectors - v {
                1 => cols.run::<S, R, 1>(s, r, &mut nan, [start(v)], dst),
                2 | 3 => cols.run::<S, R, 2>(s, r, &mut nan, [start(v), start(v + 1)], dst),
                _ => cols.run::<S, R, 4>(
                    s,
                    r,
                    &mut nan,
                    [start(v), start(v + 1), start(v + 2), start(v + 3)],
                    dst,
                ),
            };
        }
    }
}

/// One plane's input and geometry, for [`Columns::run`].
struct Columns<'a> {
    src: &'a [f32],
    p: &'a Pool2d,
    /// `p.kw` and `p.stride[1]`, possibly as constants.
    kw: usize,
    sw: usize,
}

impl Columns<'_> {
    /// Computes the `G` vectors of outputs starting at output columns `starts` (whose windows
    /// lie inside the rows) on every output row of the plane `dst`, and returns `G`.
    ///
    /// Every lane folds its window in the portable kernel's order, rows then columns. For a
    /// separable fold (max pooling, [`Reduce::SEPARABLE`]) over rows without NaN, a row's
    /// maxima are kept, and the window of the next output row that reads the same row takes
    /// them instead of folding the row again: folding a row into `m` gives `m` unless the row
    /// holds a larger value, and then the row's first largest, which is `max(row's maximum, m)`
    /// with `maxps` (3x3 stride-2 windows share a row, stride-1 ones two).
    #[inline(always)]
    fn run<S: Simd, R: Reduce<S>, const G: usize>(
        &self,
        s: S,
        r: R,
        nan: &mut NanRows,
        starts: [usize; G],
        dst: &mut [f32],
    ) -> usize {
        let p = self.p;
        let [sh, _] = p.stride;
        let [pt, _, pb, _] = p.pad;
        // The last two rows folded alone, by parity (`usize::MAX`: none), and their maxima.
        let mut held_rows = [usize::MAX; 2];
        let mut held = [[s.zero(); G]; 2];
        for (oy, line) in dst.chunks_exact_mut(p.out_w).enumerate() {
            let (rows, ph) = window(oy, sh, p.kh, pt, p.h, pb);
            let clean = nan.clean(s, rows.clone());
            let mut acc = [r.init(s); G];
            if R::SEPARABLE && clean {
                let mut m = [s.splat(f32::NEG_INFINITY); G];
                for iy in rows.clone() {
                    let slot = iy % 2;
                    if held_rows[slot] != iy {
                        held[slot] = self.max_row::<S, G>(s, iy, starts);
                        held_rows[slot] = iy;
                    }
                    for (a, &x) in m.iter_mut().zip(&held[slot]) {
                        // `x > a ? x : a`, as each element of the row would.
                        *a = s.max(x, *a);
                    }
                }
                for (a, &m) in acc.iter_mut().zip(&m) {
                    *a = r.max_acc(s, m);
                }
            } else {
                for iy in rows.clone() {
                    acc = if clean {
                        self.row::<S, R, G, true>(s, r, acc, iy, starts)
                    } else {
                        self.row::<S, R, G, false>(s, r, acc, iy, starts)
                    };
                }
            }
            for (a, &start) in acc.iter().zip(&starts) {
                let v = r.finish(s, *a, rows.len(), ph, self.kw);
                let v = if self.sw == 2 { s.unpermute(v) } else { v };
                s.store(&mut line[start..], v);
            }
        }
        G
    }

    /// The maxima of input row `iy`, which holds no NaN, for the vectors at output columns
    /// `starts` (each lane the row's first largest element in its window).
    #[inline(always)]
    fn max_row<S: Simd, const G: usize>(&self, s: S, iy: usize, starts: [usize; G]) -> [S::V; G] {
        let folds = self.row::<S, Max, G, true>(s, Max, [Max.init(s); G], iy, starts);
        let mut m = [s.zero(); G];
        for (m, f) in m.iter_mut().zip(&folds) {
            *m = f.0;
        }
        m
    }

    /// Folds input row `iy` into the accumulators of the vectors at output columns `starts`.
    #[inline(always)]
    fn row<S: Simd, R: Reduce<S>, const G: usize, const CLEAN: bool>(
        &self,
        s: S,
        r: R,
        mut acc: [R::Acc; G],
        iy: usize,
        starts: [usize; G],
    ) -> [R::Acc; G] {
        let w = self.p.w;
        let row = &self.src[iy * w..][..w];
        let pl = self.p.pad[1];
        for (a, &start) in acc.iter_mut().zip(&starts) {
            *a = fold_row::<S, R, CLEAN>(s, r, *a, row, start * self.sw - pl, self.kw, self.sw);
        }
        acc
    }
}

/// Planes taller than this many rows are folded with the NaN checks everywhere.
const NAN_ROWS: usize = 512;

/// Which of a plane's first [`NAN_ROWS`] rows hold no NaN, for a [`Reduce::NAN_AWARE`] fold:
/// a window over such rows only takes [`Reduce::step_clean`], which for max pooling drops the
/// per-element NaN test (it cost as much as the maximum itself). Checking a row once per
/// plane costs far less than checking it in every window that reads it (a 3x3 window reads
/// each row up to three times, each element up to three times per row). Rows are checked
/// when a window first reaches them, just before they are folded, so that the fold finds them
/// in L1 (a pass over the whole plane first cost a quarter of a 109x109 max pool's time).
struct NanRows<'a> {
    plane: &'a [f32],
    w: usize,
    /// Bit `i`: row `i` holds a NaN (for `i < checked`).
    bits: [u64; NAN_ROWS / 64],
    /// Rows `..checked` are in `bits`; all of them if the fold is not NaN-aware.
    checked: usize,
}

impl<'a> NanRows<'a> {
    /// The rows of `plane` (rows of `w` floats); none are looked at (and all count as clean)
    /// unless `aware`.
    #[inline(always)]
    fn new(plane: &'a [f32], w: usize, aware: bool) -> Self {
        NanRows {
            plane,
            w,
            bits: [0; NAN_ROWS / 64],
            checked: if aware { 0 } else { usize::MAX },
        }
    }

    /// Whether every row in `rows` holds no NaN (rows from [`NAN_ROWS`] on count as holding
    /// one).
    #[inline(always)]
    fn clean<S: Simd>(&mut self, s: S, rows: Range<usize>) -> bool {
        if self.checked == usize::MAX {
            return true;
        }
        while self.checked < rows.end.min(NAN_ROWS) {
            let i = self.checked;
            if has_nan(s, &self.plane[i * self.w..][..self.w]) {
                self.bits[i / 64] |= 1 << (i % 64);
            }
            self.checked += 1;
        }
        rows.into_iter()
            .all(|i| i < NAN_ROWS && self.bits[i / 64] & (1 << (i % 64)) == 0)
    }
}

/// Whether `row` holds a NaN: whole vectors, two at a time, then one partial one (a scalar
/// loop over a 109-wide row's last 45 floats cost as much as the pooling of the row).
#[inline(always)]
fn has_nan<S: Simd>(s: S, row: &[f32]) -> bool {
    let l = S::LANES;
    let mut pairs = row.chunks_exact(2 * l);
    let mut nan = s.is_nan(s.zero());
    for c in &mut pairs {
        // Unordered: either operand is NaN.
        nan = s.mask_or(nan, s.unordered(s.load(c), s.load(&c[l..])));
    }
    let rest = pairs.remainder();
    if rest.len() > l {
        nan = s.mask_or(nan, s.unordered(s.load(rest), s.load_partial(&rest[l..])));
    } else if !rest.is_empty() {
        nan = s.mask_or(nan, s.is_nan(s.load_partial(rest)));
    }
    s.mask_any(nan)
}

/// The output columns `lo..hi` of every row that [`pool`] computes a vector of `l` at a time
/// (the rest by the scalar definition): no left padding, no read past the row, no output past
/// the row.
#[inline(always)]
fn vector_cols(p: &Pool2d, l: usize) -> (usize, usize) {
    let [_, sw] = p.stride;
    let pl = p.pad[1];
    let (w, ow) = (p.w, p.out_w);
    // Input columns one vector of outputs reads, from its first window's first column.
    let reads = reads(p.kw, sw, l);
    // Vector chunks start in `first..=last`.
    let first = pl.div_ceil(sw);
    let last = if w + pl >= reads && ow >= l {
        Some(((w + pl - reads) / sw).min(ow - l))
    } else {
        None
    };
    match last {
        Some(last) if last >= first => (first, last + l),
        _ => (0, 0),
    }
}

/// Whether [`pool`] with `l` lanes pads the rows ([`narrow`]) rather than leave columns to the
/// scalar code: more than a couple of them (rows narrower than a vector and its window: 14x14
/// and 7x7 maps with AVX-512), or any on a row of at most two vectors (28x28 with a padded 3x3
/// window: the two border columns cost more than a vector each, copying the three rows less).
#[inline(always)]
fn pads_rows(p: &Pool2d, l: usize) -> bool {
    let (lo, hi) = vector_cols(p, l);
    let scalar = p.out_w - (hi - lo);
    scalar > 2 || (scalar > 0 && p.out_w <= 2 * l)
}

/// Whether a 16-lane pooling runs faster with 8 lanes: rows that 16 lanes would pad
/// ([`pads_rows`]) but 8 lanes cover (SqueezeNet's 54 -> 27 and 27 -> 13 max pools,
/// Inception-v2's 56 -> 28: padding each output row's window rows cost more than the 16-lane
/// folds saved).
#[inline(always)]
fn prefers_8_lanes<S: Simd>(p: &Pool2d) -> bool {
    S::LANES == 16 && pads_rows(p, 16) && !pads_rows(p, 8)
}

/// Input columns [`fold_row`] reads for one vector of `l` outputs (window width `kw`, stride
/// `sw`), from its first window's first column: stride 1, `kw - 1 + l`; stride 2, two vectors
/// per pair of window columns, but one float less for an odd `kw`, whose last pair uses only
/// the even half (so a 3-wide window's last vector may end one float earlier, which keeps the
/// last column of SqueezeNet's 109-wide stride-2 pool out of the scalar code).
#[inline(always)]
fn reads(kw: usize, sw: usize, l: usize) -> usize {
    if sw == 1 {
        kw - 1 + l
    } else {
        2 * (kw.div_ceil(2) - 1) + 2 * l - kw % 2
    }
}

/// Folds one window row into `acc` for the vector of outputs whose first window starts at
/// column `x0` of `row` (stride 1: one unaligned load per window column; stride 2: the even or
/// odd half of two deinterleaved loads, in [`Simd::deinterleave`]'s lane order). `CLEAN` says
/// the row holds no NaN.
///
/// # Panics
///
/// If `row` holds fewer than [`reads`] columns from `x0`.
#[inline(always)]
fn fold_row<S: Simd, R: Reduce<S>, const CLEAN: bool>(
    s: S,
    r: R,
    mut acc: R::Acc,
    row: &[f32],
    x0: usize,
    kw: usize,
    sw: usize,
) -> R::Acc {
    // One check for the whole window row; the loads below go through raw pointers (checking
    // each slice cost more than the folds: a row of 3x3 stride-2 windows is three maxima).
    assert!(x0 <= row.len() && row.len() - x0 >= reads(kw, sw, S::LANES));
    let p = row[x0..].as_ptr();
    if sw == 1 {
        for kx in 0..kw {
            // SAFETY: `kx + LANES <= reads`, checked above.
            let x = unsafe { s.load_ptr(p.add(kx)) };
            acc = step::<S, R, CLEAN>(s, r, acc, x);
        }
    } else {
        let l = S::LANES;
        let pairs = kw.div_ceil(2);
        for pair in 0..pairs {
            let at = 2 * pair;
            // An odd window's last pair uses only the even half, whose last float is the one
            // before the second vector's last: that lane may lie past the row (`reads` ends
            // before it), and is then not loaded.
            let second = if kw % 2 == 1 && pair + 1 == pairs && x0 + at + 2 * l > row.len() {
                // SAFETY: `at + 2 LANES - 1 <= reads` (an odd window's last pair), checked
                // above; the mask leaves out the lane after.
                unsafe { s.load_masked_ptr(p.add(at + l), s.mask_range(0, l - 1)) }
            } else {
                // SAFETY: `at + 2 LANES <= reads` (an even window, or a pair before the last),
                // or `x0 + at + 2 LANES <= row.len()` (the branch above not taken).
                unsafe { s.load_ptr(p.add(at + l)) }
            };
            // SAFETY: `at + LANES <= reads`, checked above.
            let first = unsafe { s.load_ptr(p.add(at)) };
            let (even, odd) = s.deinterleave(first, second);
            acc = step::<S, R, CLEAN>(s, r, acc, even);
            if 2 * pair + 1 < kw {
                acc = step::<S, R, CLEAN>(s, r, acc, odd);
            }
        }
    }
    acc
}

/// [`Reduce::step_clean`] if `CLEAN`, else [`Reduce::step`].
#[inline(always)]
fn step<S: Simd, R: Reduce<S>, const CLEAN: bool>(s: S, r: R, acc: R::Acc, x: S::V) -> R::Acc {
    if CLEAN {
        r.step_clean(s, acc, x)
    } else {
        r.step(s, acc, x)
    }
}

/// Floats of a plane [`flat`] takes.
const FLAT_PLANE: usize = 1024;

/// Floats of padding [`flat`]'s buffer holds around the plane: `(kh - 1) * w + kw - 1` at most.
const FLAT_PAD: usize = 256;

/// Window columns [`flat`] handles.
const FLAT_KW: usize = 8;

/// Floats of [`flat`]'s buffers: a plane rounded up to whole vectors, and its padding.
const FLAT_BUF: usize = FLAT_PLANE + 16 + FLAT_PAD;

/// Pooling with stride 1 whose output has the input's size (Inception's padded 3x3 pools on
/// 28x28, 14x14 and 7x7 maps), on planes of at most [`FLAT_PLANE`] floats: output `i` of the
/// flat plane reads input `i + (ky - pt) * w + (kx - pl)` for tap `(ky, kx)`, so the whole
/// plane is one run of vectors, each tap one unaligned load from a copy of the plane padded
/// above and below with the fold's neutral value; the lanes whose tap falls off the row's
/// left or right end take the neutral value instead (a comparison of the lane's column, once
/// per vector and window column). Rows narrower than two vectors otherwise waste most of
/// their lanes (14 of 16 on a 14-wide row, 7 of 16 on a 7-wide one) and copy their window's
/// rows for every output row. Each lane folds its window in the portable order, the neutral
/// values changing nothing (see [`narrow`]); the divisor is per lane. Returns `false`, having
/// written nothing, for other shapes.
#[inline(always)]
fn flat<S: Simd, R: Reduce<S>>(s: S, r: R, p: &Pool2d, input: &[f32], out: &mut [f32]) -> bool {
    let (h, w, kh, kw) = (p.h, p.w, p.kh, p.kw);
    let [pt, pl, pb, pr] = p.pad;
    let n = h * w;
    // (Then `pt + pb == kh - 1` and `pl + pr == kw - 1`.)
    let same = p.stride == [1, 1] && p.out_h == h && p.out_w == w;
    if !same || n > FLAT_PLANE || (kh - 1) * w + kw - 1 > FLAT_PAD || kw > FLAT_KW {
        return false;
    }
    let l = S::LANES;
    let vecs = n.div_ceil(l);
    // Per output: its column, and the divisor (the portable kernel's count).
    let mut col = [0f32; FLAT_PLANE + 16];
    let mut count = [0f32; FLAT_PLANE + 16];
    for (i, (c, k)) in col.iter_mut().zip(&mut count).take(n).enumerate() {
        let (oy, ox) = (i / w, i % w);
        let (rows, ph) = window(oy, 1, kh, pt, h, pb);
        let (cols, pw) = window(ox, 1, kw, pl, w, pr);
        *c = ox as f32;
        *k = (r.count_factor(rows.len(), ph) * r.count_factor(cols.len(), pw)) as f32;
    }
    // The plane at `before`, neutral values around it (never overwritten).
    let before = pt * w + pl;
    let mut buf = [R::NEUTRAL; FLAT_BUF];
    let g = Flat {
        w,
        kh,
        kw,
        pl,
        vecs,
        col: &col,
        count: &count,
    };
    for (src, dst) in input.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        buf[before..before + n].copy_from_slice(src);
        let clean = !R::NAN_AWARE || !has_nan(s, src);
        // The 3x3 window with constant sizes, so that its loops unroll.
        match (kh, kw, clean) {
            (3, 3, true) => g.plane::<S, R, 3, 3, true>(s, r, &buf, dst),
            (3, 3, false) => g.plane::<S, R, 3, 3, false>(s, r, &buf, dst),
            (_, _, true) => g.plane::<S, R, 0, 0, true>(s, r, &buf, dst),
            (_, _, false) => g.plane::<S, R, 0, 0, false>(s, r, &buf, dst),
        }
    }
    true
}

/// The geometry [`flat`] computes once per call.
struct Flat<'a> {
    w: usize,
    kh: usize,
    kw: usize,
    pl: usize,
    /// Vectors per plane.
    vecs: usize,
    /// Per output of the flat plane, its column (`vecs` vectors' worth).
    col: &'a [f32; FLAT_PLANE + 16],
    /// Per output, the divisor.
    count: &'a [f32; FLAT_PLANE + 16],
}

impl Flat<'_> {
    /// One plane from its padded copy `buf` (see [`flat`]) into `dst`. `KH` and `KW` are the
    /// window's sizes as constants, or 0 to use `kh` and `kw`; `CLEAN` says the plane holds no
    /// NaN.
    #[inline(always)]
    fn plane<S: Simd, R: Reduce<S>, const KH: usize, const KW: usize, const CLEAN: bool>(
        &self,
        s: S,
        r: R,
        buf: &[f32; FLAT_BUF],
        dst: &mut [f32],
    ) {
        let kh = if KH == 0 { self.kh } else { KH };
        let kw = if KW == 0 { self.kw } else { KW };
        let (w, pl, l) = (self.w, self.pl, S::LANES);
        // `flat` checked `vecs * l + (kh - 1) * w + kw - 1 <= FLAT_BUF`: every tap below is
        // inside `buf`.
        assert!(self.vecs * l + (kh - 1) * w + kw - 1 <= FLAT_BUF && kw <= FLAT_KW);
        let neutral = s.splat(R::NEUTRAL);
        for v in 0..self.vecs {
            let i = v * l;
            let cols = s.load(&self.col[i..]);
            // Per window column, the lanes whose column `ox + kx - pl` is off the row.
            let mut off = [None; FLAT_KW];
            for (kx, m) in off.iter_mut().enumerate().take(kw) {
                *m = if kx < pl {
                    Some(s.lt(cols, s.splat((pl - kx) as f32)))
                } else if kx > pl {
                    // (Negative when the window reaches more than the row past it.)
                    Some(s.gt(cols, s.splat(w as f32 - 1.0 - (kx - pl) as f32)))
                } else {
                    None
                };
            }
            let mut acc = r.init(s);
            for ky in 0..kh {
                for (kx, m) in off.iter().enumerate().take(kw) {
                    // Tap `(ky, kx)` of output `i` is `buf[before + i + (ky - pt) w + kx - pl]`
                    // with `before = pt w + pl`.
                    // SAFETY: in bounds, asserted above.
                    let x = unsafe { s.load_ptr(buf.as_ptr().add(i + ky * w + kx)) };
                    let x = match *m {
                        Some(m) => s.select(m, neutral, x),
                        None => x,
                    };
                    acc = step::<S, R, CLEAN>(s, r, acc, x);
                }
            }
            let res = r.finish_counts(s, acc, s.load(&self.count[i..]));
            s.store_partial(&mut dst[i..], res);
        }
    }
}

/// Floats in each of [`narrow`]'s padded row buffers.
const NARROW_ROW: usize = 320;

/// Window rows [`narrow`] has buffers for.
const NARROW_KH: usize = 8;

/// Pooling for rows of at most a few vectors of outputs, every column vectorised: the window's
/// rows are copied into buffers holding the padded rows, the padding (and anything past it)
/// set to the fold's neutral value, so that the border columns need no scalar code. Each lane
/// still folds its window's in-image elements in the portable order; the neutral values change
/// nothing (`x + 0.0 == x` for every partial sum, which is never -0.0 since it starts at +0.0;
/// max with -inf), and the divisor is per lane. Returns `false`, having written nothing, if
/// the rows or the window do not fit the buffers.
#[inline(always)]
fn narrow<S: Simd, R: Reduce<S>>(s: S, r: R, p: &Pool2d, input: &[f32], out: &mut [f32]) -> bool {
    // Constant window widths and strides, as in `pool`.
    match (p.kw, p.stride[1]) {
        (3, 2) => narrow_rows::<S, R, 3, 2>(s, r, p, input, out),
        (3, 1) => narrow_rows::<S, R, 3, 1>(s, r, p, input, out),
        (2, 2) => narrow_rows::<S, R, 2, 2>(s, r, p, input, out),
        _ => narrow_rows::<S, R, 0, 0>(s, r, p, input, out),
    }
}

/// [`narrow`] with the window width and horizontal stride `KW` and `SW`, or 0 to read them
/// from `p`.
#[inline(always)]
fn narrow_rows<S: Simd, R: Reduce<S>, const KW: usize, const SW: usize>(
    s: S,
    r: R,
    p: &Pool2d,
    input: &[f32],
    out: &mut [f32],
) -> bool {
    let [sh, _] = p.stride;
    let [pt, pl, pb, pr] = p.pad;
    let kw = if KW == 0 { p.kw } else { KW };
    let sw = if SW == 0 { p.stride[1] } else { SW };
    let (w, ow) = (p.w, p.out_w);
    let l = S::LANES;
    let vecs = ow.div_ceil(l);
    // Buffer columns the last vector reads from its first window's start (see `pool`).
    let reads = reads(kw, sw, l);
    let need = (vecs - 1) * l * sw + reads;
    // (The divisor, a product of two small integers, is then exact in f32.)
    if need > NARROW_ROW || pl + w > NARROW_ROW || p.kh > NARROW_KH {
        return false;
    }
    let (in_plane, out_plane) = (p.h * w, p.out_h * ow);
    // Per output column `ox`, the divisor's column factor, at `ox * sw`: loaded like the
    // windows' first columns, a stride-2 row's factors come out in the same lane order as its
    // sums (see `Simd::deinterleave`).
    let mut col_factor = [0f32; NARROW_ROW];
    for ox in 0..ow {
        let (cols, pw) = window(ox, sw, kw, pl, w, pr);
        col_factor[ox * sw] = r.count_factor(cols.len(), pw) as f32;
    }
    let mut bufs = [[R::NEUTRAL; NARROW_ROW]; NARROW_KH];
    for (src, dst) in input
        .chunks_exact(in_plane)
        .zip(out.chunks_exact_mut(out_plane))
    {
        let mut nan = NanRows::new(src, w, R::NAN_AWARE);
        for (oy, line) in dst.chunks_exact_mut(ow).enumerate() {
            let (rows, ph) = window(oy, sh, p.kh, pt, p.h, pb);
            let clean = nan.clean(s, rows.clone());
            let row_factor = s.splat(r.count_factor(rows.len(), ph) as f32);
            let n_rows = rows.len();
            // Vector copies: a `memcpy` call would cost more than these few floats. Whole
            // vectors are plain moves; only the row's tail is masked (masked moves for every
            // vector took a third of SqueezeNet's 27x27 pooling).
            for (buf, iy) in bufs.iter_mut().zip(rows) {
                let row = &src[iy * w..][..w];
                let dst = &mut buf[pl..pl + w];
                let mut c = 0;
                while c + l <= w {
                    s.store(&mut dst[c..], s.load(&row[c..]));
                    c += l;
                }
                if c < w {
                    s.store_partial(&mut dst[c..], s.load_partial(&row[c..]));
                }
            }
            for (v, y) in line.chunks_mut(l).enumerate() {
                let x0 = v * l * sw;
                let mut acc = r.init(s);
                for buf in &bufs[..n_rows] {
                    // The padding holds -inf or 0, never NaN.
                    acc = if clean {
                        fold_row::<S, R, true>(s, r, acc, buf, x0, kw, sw)
                    } else {
                        fold_row::<S, R, false>(s, r, acc, buf, x0, kw, sw)
                    };
                }
                let factors = if sw == 1 {
                    s.load(&col_factor[x0..])
                } else {
                    s.deinterleave(s.load(&col_factor[x0..]), s.load(&col_factor[x0 + l..]))
                        .0
                };
                let res = r.finish_counts(s, acc, s.mul(row_factor, factors));
                let res = if sw == 2 { s.unpermute(res) } else { res };
                s.store_partial(y, res);
            }
        }
    }
    true
}

/// `out[n, c] = mean(input[n, c, :])` over `spatial` elements (0 if `spatial` is 0).
#[inline(always)]
pub(crate) fn global_avg_pool<S: Simd>(
    s: S,
    batch: usize,
    channels: usize,
    spatial: usize,
    input: &[f32],
    out: &mut [f32],
) {
    let planes = batch * channels;
    let out = &mut out[..planes];
    if spatial == 0 {
        out.fill(0.0);
        return;
    }
    let l = S::LANES;
    for (y, plane) in out
        .iter_mut()
        .zip(input[..planes * spatial].chunks_exact(spatial))
    {
        let mut acc = [s.zero(); 4];
        let mut chunks = plane.chunks_exact(4 * l);
        for c in &mut chunks {
            for (j, a) in acc.iter_mut().enumerate() {
                *a = s.add(*a, s.load(&c[j * l..]));
            }
        }
        let rest = chunks.remainder();
        let mut vecs = rest.chunks_exact(l);
        for c in &mut vecs {
            acc[0] = s.add(acc[0], s.load(c));
        }
        acc[1] = s.add(acc[1], s.load_partial(vecs.remainder()));
        let total = s.add(s.add(acc[0], acc[1]), s.add(acc[2], acc[3]));
        *y = s.reduce_add(total) / spatial as f32;
    }
}
