//! Pooling: [`max_pool2d`], [`avg_pool2d`] (horizontal stride 1 or 2; other strides use the
//! portable kernel) and [`global_avg_pool`].
//!
//! Algorithm sketch. For every output row, the window's input rows are clipped to the image
//! once. The output columns whose whole window (as the vector loads read it) lies inside the
//! row are computed a vector at a time: for each window row and each window column, one
//! vector of inputs (stride 1: an unaligned load; stride 2: the even or odd half of two
//! deinterleaved loads, see [`Simd::deinterleave`]) is folded into the accumulator. The last
//! vector of that range is shifted left to end at its last column instead of leaving a scalar
//! remainder. The few columns that touch the left/right padding go through scalar code that
//! is the portable kernel's definition. Rows too narrow for that (fewer output columns than a
//! vector plus the window, as on the 14x14 and 7x7 maps of Inception's pooling branches, where
//! every column went through the scalar code), and rows of at most two vectors with any
//! border column (Inception's padded 3x3 pools on 28x28), are copied into buffers holding the
//! padded rows, with the fold's neutral value in the padding, and every column is
//! vectorised ([`narrow`]).
//!
//! Every lane folds its window in the portable kernel's order (rows, then columns), so the
//! results are bit-identical to it: average pooling adds from `0.0` in the same order and
//! divides by the same count (the window clipped to the image, or to the padded image with
//! `count_include_pad`; uniform across a row's vectorised columns, which are never in the
//! padding), and max pooling keeps the same element among equals. Max pooling propagates NaN
//! like the reference: `x > m ? x : m` ignores a NaN, so the NaN lanes are tracked in a mask
//! and written as NaN at the end.
//!
//! Global average pooling sums each plane with four vector accumulators (reassociated, so it
//! agrees with the portable kernel to rounding, not bit for bit).
//!
//! Tried on Zen 4 and not kept (2026-11-24, branch `small`; thread CPU time of 200 calls,
//! best of 7, three alternating runs of two builds at load 6-8, on SqueezeNet's max pools
//! 96x109x109, 256x54x54 and 512x27x27 and Inception-v2's padded 3x3 average pools
//! 256x28x28 and 576x14x14, about 170-340 us each): folding each input row across the window
//! once per plane into a ring of row buffers and then folding the rows' results (max pooling
//! only, where that stays bit-identical; a 3x3 stride-2 window shares a row with the next),
//! one NaN comparison per pair of window columns (`vcmpunordps` of two vectors) instead of
//! one per column, and copying each input row once per plane in [`narrow`] instead of once
//! per window that reads it: none moved a shape by more than the run-to-run spread (5-10 %),
//! and the narrow ring buffer made the 27x27 max pool about 10 % slower. The perf profile of
//! SqueezeNet kept its 5 % in max pooling through all three; 4.5 MB of input per call for the
//! first pool suggests memory traffic rather than instructions.

use core::ops::Range;

use super::vector::Simd;
use crate::arch::portable;
use crate::Pool2d;

/// How one kind of pooling folds a window, vector-wise and scalar-wise.
trait Reduce<S: Simd>: Copy {
    type Acc: Copy;
    /// The value that leaves a fold unchanged: what the narrow-row path puts in the padding.
    const NEUTRAL: f32;
    fn init(self, s: S) -> Self::Acc;
    fn step(self, s: S, acc: Self::Acc, x: S::V) -> Self::Acc;
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
    #[inline(always)]
    fn init(self, s: S) -> S::V {
        s.zero()
    }
    #[inline(always)]
    fn step(self, s: S, acc: S::V, x: S::V) -> S::V {
        s.add(acc, x)
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
    if !pool(s, Max, p, input, out) {
        portable::max_pool2d(p, input, out);
    }
}

/// Average pooling (see [`portable::avg_pool2d`] for the divisor).
#[inline(always)]
pub(crate) fn avg_pool2d<S: Simd>(s: S, p: &Pool2d, input: &[f32], out: &mut [f32]) {
    let avg = Avg {
        include_pad: p.count_include_pad,
    };
    if !pool(s, avg, p, input, out) {
        portable::avg_pool2d(p, input, out);
    }
}

/// The window of output `o` clipped to the input, as input coordinates, and its length clipped
/// to the padded input (the portable kernel's definition).
#[inline(always)]
fn window(
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
    let (w, kw, ow) = (p.w, p.kw, p.out_w);
    let l = S::LANES;
    // Input columns one vector of outputs reads, from its first window's first column.
    let reads = reads(kw, sw, l);
    // Vector chunks start in `first..=last`: no left padding, no read past the row, no
    // output past the row.
    let first = pl.div_ceil(sw);
    let last = if w + pl >= reads && ow >= l {
        Some(((w + pl - reads) / sw).min(ow - l))
    } else {
        None
    };
    let (vec_lo, vec_hi) = match last {
        Some(last) if last >= first => (first, last + l),
        _ => (0, 0),
    };
    let input = &input[..planes * in_plane];
    let out = &mut out[..planes * out_plane];
    // More than a couple of columns left to the scalar code (rows narrower than a vector and
    // its window: 14x14 and 7x7 maps with AVX-512), or any on a row of at most two vectors
    // (28x28 with a padded 3x3 window: the two border columns cost more than a vector each,
    // copying the three rows less): pad the rows instead.
    let scalar = ow - (vec_hi - vec_lo);
    if (scalar > 2 || (scalar > 0 && ow <= 2 * l)) && narrow(s, r, p, input, out) {
        return true;
    }
    for (i, dst) in out.chunks_exact_mut(out_plane).enumerate() {
        let src = &input[i * in_plane..][..in_plane];
        for (oy, line) in dst.chunks_exact_mut(ow).enumerate() {
            let (rows, ph) = window(oy, sh, p.kh, pt, p.h, pb);
            let scalar_cols = (0..vec_lo.min(ow)).chain(vec_hi.max(vec_lo)..ow);
            for ox in scalar_cols {
                let (cols, pw) = window(ox, sw, kw, pl, w, pr);
                line[ox] = r.scalar(src, w, rows.clone(), cols, ph * pw);
            }
            let mut ox0 = vec_lo;
            while ox0 < vec_hi {
                // The last vector ends exactly at `vec_hi`, overlapping the previous one.
                let start = ox0.min(vec_hi - l);
                let x0 = start * sw - pl;
                let mut acc = r.init(s);
                for iy in rows.clone() {
                    acc = fold_row(s, r, acc, &src[iy * w..][..w], x0, kw, sw);
                }
                let v = r.finish(s, acc, rows.len(), ph, kw);
                let v = if sw == 2 { s.unpermute(v) } else { v };
                s.store(&mut line[start..], v);
                ox0 += l;
            }
        }
    }
    true
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
/// odd half of two deinterleaved loads, in [`Simd::deinterleave`]'s lane order). `row` holds
/// at least [`reads`] columns from `x0`.
#[inline(always)]
fn fold_row<S: Simd, R: Reduce<S>>(
    s: S,
    r: R,
    mut acc: R::Acc,
    row: &[f32],
    x0: usize,
    kw: usize,
    sw: usize,
) -> R::Acc {
    if sw == 1 {
        for kx in 0..kw {
            acc = r.step(s, acc, s.load(&row[x0 + kx..]));
        }
    } else {
        let l = S::LANES;
        for pair in 0..kw.div_ceil(2) {
            let at = x0 + 2 * pair;
            // The last float of an odd window's last pair is in the odd half, which it does not
            // use: it may lie past the row (a masked load then reads one float less).
            let second = if at + 2 * l <= row.len() {
                s.load(&row[at + l..])
            } else {
                s.load_partial(&row[at + l..])
            };
            let (even, odd) = s.deinterleave(s.load(&row[at..]), second);
            acc = r.step(s, acc, even);
            if 2 * pair + 1 < kw {
                acc = r.step(s, acc, odd);
            }
        }
    }
    acc
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
    let [sh, sw] = p.stride;
    let [pt, pl, pb, pr] = p.pad;
    let (w, kw, ow) = (p.w, p.kw, p.out_w);
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
        for (oy, line) in dst.chunks_exact_mut(ow).enumerate() {
            let (rows, ph) = window(oy, sh, p.kh, pt, p.h, pb);
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
                    acc = fold_row(s, r, acc, buf, x0, kw, sw);
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
