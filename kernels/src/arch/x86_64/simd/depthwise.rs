//! Depthwise convolution (one input and one output channel per group), direct SIMD over the
//! output width, for 3x3 and 5x5 windows with stride 1 or 2, dilation 1 and any padding.
//! Anything else goes to the portable kernel.
//!
//! Algorithm sketch, per channel plane (NCHW, so a plane is contiguous):
//!
//! ```text
//! w[ky][kx] = splat(weight)                        // K*K broadcast vectors
//! for each block of R = 4 output rows (the last block overlaps the previous one):
//!   for each chunk of L output columns (L = lanes; the last chunk overlaps too):
//!     acc[0..R] = splat(bias)
//!     for each of the (R-1)*S + K input rows the block reads:   // fully unrolled
//!       skip it if it lies in the top/bottom padding
//!       tap[kx] = the L inputs under tap kx of the chunk        // K vectors, see below
//!       for each output row r that this input row feeds (ky = row - r*S in 0..K):
//!         acc[r] += tap[kx] * w[ky][kx]  for kx in 0..K
//!     store act(acc[r])
//! ```
//!
//! Each loaded tap vector feeds up to `min(R, K)` FMAs (stride 1) instead of one, which is
//! what takes the kernel from load-bound to FMA-bound. With stride 1, `tap[kx]` is one
//! unaligned load at column `ox*1 + kx - pad`. With stride 2 the inputs of consecutive
//! outputs are two apart, so two consecutive vectors are split into even and odd elements
//! ([`Simd::deinterleave`]): the evens are tap `kx`, the odds tap `kx + 1`, and a second pair
//! two columns later gives `kx + 2`. AVX2's in-lane shuffle leaves the lanes in a permuted
//! order; every tap of a chunk has the same order, so the accumulators are simply put back
//! in order once before the store.
//!
//! Borders: a chunk whose loads all fall inside the row runs with plain loads. Chunks that
//! touch the left or right padding (and every chunk of a narrow plane) use masked loads that
//! read only the in-image columns and see zeros elsewhere — the same sum as skipping the
//! padded taps. Input rows in the top/bottom padding are skipped. Blocks and chunks overlap
//! instead of having scalar remainders: a recomputed output is recomputed with the same
//! operations in the same order, so it is written with the same value. A plane narrower than
//! one vector stores only its `ow` lanes ([`Simd::store_first_ptr`]).
//!
//! Bias and the cheap activations (ReLU, clip, leaky ReLU) are applied to the accumulators
//! before the store; the kernel is instantiated once per cheap activation so that this costs
//! no branch. Sigmoid and tanh run afterwards as an in-place pass over the output, which
//! saves instantiating the unrolled body for them as well.
//!
//! Code layout: the blocks of a plane fall into four classes by two flags, whether the loads
//! need masks (left/right padding) and whether input rows need checking (top/bottom padding).
//! The class with neither is the plane's interior rectangle, nearly all of the work on a
//! large plane: straight-line loads and FMAs with no branch. Each class is a separate
//! function ([`Region`], via [`Simd::vectorize`]) holding the weights as local values; see
//! there for why that matters (about 2x).
//!//! Differences from the portable kernel: the sum is accumulated with FMAs starting from the
//! bias instead of adding the bias last (rounding differs in the last bits), and a padded tap
//! adds `w * 0.0` where the portable kernel skips it, so only an infinite or NaN *weight* next
//! to padding gives a different result (NaN here).

use super::eltwise;
use super::math::{Act, Clip, ClipOrdered, Ident, Leaky, Relu};
use super::vector::{Job, Simd};
use crate::arch::portable;
use crate::{Activation, Conv2d};

/// Output rows per block: four accumulators, plus nine (3x3) weight vectors and the tap
/// vectors, fill AVX2's sixteen registers.
const ROWS: usize = 4;
/// The largest window side with a specialised kernel.
const MAX_K: usize = 5;
/// The most input rows a block reads: `(ROWS - 1) * 2 + MAX_K`.
const MAX_IN_ROWS: usize = 11;
/// Planes with at most this many outputs are small: each class of blocks then runs over all
/// planes in one call (see [`regions`]), since a whole small layer stays in cache between the
/// passes and a call per plane would cost more than the plane's arithmetic.
const SMALL_PLANE: usize = 32 * 32;

/// Depthwise conv2d with the portable kernel's signature and semantics (see
/// [`portable::conv2d`]); falls back to it for shapes this kernel does not specialise.
#[allow(clippy::too_many_arguments)] // The signature is the table's contract.
#[inline(always)]
pub(crate) fn conv2d<S: Simd>(
    s: S,
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    scratch: &mut [f32],
    out: &mut [f32],
) {
    let Some(g) = Geom::new(p) else {
        portable::conv2d(p, input, weight, bias, act, scratch, out);
        return;
    };
    let c = p.c_out;
    let kk = g.k * g.k;
    // Slicing up front turns a short buffer into a panic here, like the portable kernel's
    // indexing; every raw access below stays inside these slices.
    let out = &mut out[..p.batch * c * g.oh * g.ow];
    let conv = Data {
        g: &g,
        c,
        input: &input[..p.batch * c * g.h * g.w],
        weight: &weight[..c * kk],
        bias: bias.map(|b| &b[..c]),
    };
    // The cheap activations are fused into the store (one instantiation each); sigmoid and
    // tanh run as a second pass.
    match act {
        Activation::None | Activation::Sigmoid | Activation::Tanh => {
            by_shape(s, Ident, &conv, out);
            if act != Activation::None {
                eltwise::unary_inplace(s, act, out);
            }
        }
        Activation::Relu => by_shape(s, Relu, &conv, out),
        Activation::Clip { min, max } if min <= max => {
            let a = ClipOrdered {
                min: s.splat(min),
                max: s.splat(max),
            };
            by_shape(s, a, &conv, out);
        }
        Activation::Clip { min, max } => {
            let a = Clip {
                min: s.splat(min),
                max: s.splat(max),
            };
            by_shape(s, a, &conv, out);
        }
        Activation::LeakyRelu { alpha } => {
            let a = Leaky {
                alpha: s.splat(alpha),
            };
            by_shape(s, a, &conv, out);
        }
    }
}

/// The convolution's inputs, validated to the lengths its shape needs.
struct Data<'a> {
    g: &'a Geom,
    c: usize,
    input: &'a [f32],
    weight: &'a [f32],
    bias: Option<&'a [f32]>,
}

#[inline(always)]
fn by_shape<S: Simd, A: Act<S>>(s: S, act: A, conv: &Data<'_>, out: &mut [f32]) {
    match (conv.g.k, conv.g.stride) {
        (3, 1) => regions::<S, A, 3, 1>(s, act, conv, out),
        (3, _) => regions::<S, A, 3, 2>(s, act, conv, out),
        (5, 1) => regions::<S, A, 5, 1>(s, act, conv, out),
        _ => regions::<S, A, 5, 2>(s, act, conv, out),
    }
}

/// The shape of one plane's convolution, validated so that the index arithmetic below cannot
/// overflow.
struct Geom {
    k: usize,
    stride: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    pad_top: isize,
    pad_left: isize,
}

impl Geom {
    /// `None` if the portable kernel should run instead: not a plain depthwise convolution,
    /// a window/stride/dilation without a specialised kernel, an empty tensor (nothing to
    /// vectorise), or sizes so large that the index arithmetic could overflow.
    fn new(p: &Conv2d) -> Option<Geom> {
        let k = p.kh;
        let supported = p.groups == p.c_in
            && p.c_in == p.c_out
            && p.kh == p.kw
            && (k == 3 || k == 5)
            && p.stride[0] == p.stride[1]
            && (p.stride[0] == 1 || p.stride[0] == 2)
            && p.dilation == [1, 1];
        if !supported {
            return None;
        }
        // 2^40 per dimension is far beyond any real tensor and keeps every
        // `coordinate * stride + window + lanes` comfortably inside `isize`.
        const LIMIT: usize = 1 << 40;
        let dims = [p.h, p.w, p.out_h, p.out_w, p.pad[0], p.pad[1]];
        if dims.iter().any(|&d| d >= LIMIT) {
            return None;
        }
        let planes = p.batch.checked_mul(p.c_out)?;
        planes.checked_mul(p.h.checked_mul(p.w)?)?;
        planes.checked_mul(p.out_h.checked_mul(p.out_w)?)?;
        p.c_out.checked_mul(k * k)?;
        if planes == 0 || p.h == 0 || p.w == 0 || p.out_h == 0 || p.out_w == 0 {
            return None;
        }
        Some(Geom {
            k,
            stride: p.stride[0],
            h: p.h,
            w: p.w,
            oh: p.out_h,
            ow: p.out_w,
            pad_top: p.pad[0] as isize,
            pad_left: p.pad[1] as isize,
        })
    }
}

/// What every block of one plane shares.
#[derive(Clone, Copy)]
struct Plane<'a, S: Simd, A> {
    s: S,
    act: A,
    src: &'a [f32],
    h: usize,
    w: usize,
    ow: usize,
    /// Outputs per row a chunk stores: `LANES`, or fewer for a plane narrower than a vector.
    width: usize,
    wv: [S::V; MAX_K * MAX_K],
    bias: S::V,
}

/// The blocks of one plane: `R` output rows by one vector of columns each. Block rows and
/// chunks are numbered; the last of each is shifted back to end at the plane's edge, so that
/// there is no scalar remainder (a recomputed output gets the same operations in the same
/// order, hence the same value).
struct Tiling {
    rows_per_block: usize,
    blocks: usize,
    chunks: usize,
    oh: usize,
    ow: usize,
    width: usize,
    lanes: usize,
}

impl Tiling {
    /// First output row of block `i`.
    fn oy0(&self, i: usize) -> usize {
        (i * self.rows_per_block).min(self.oh - self.rows_per_block)
    }
    /// First output column of chunk `j`.
    fn ox0(&self, j: usize) -> usize {
        (j * self.lanes).min(self.ow - self.width)
    }
}

/// The run `a..b` of `0..n` on which `inside` holds, given that it holds on one run (or
/// nowhere, giving an empty run).
fn run_of(n: usize, inside: impl Fn(usize) -> bool) -> (usize, usize) {
    let mut a = 0;
    while a < n && !inside(a) {
        a += 1;
    }
    let mut b = a;
    while b < n && inside(b) {
        b += 1;
    }
    (a, b)
}

/// Every plane, block class by block class.
///
/// The blocks whose loads need neither masks nor row checks form a rectangle of every plane
/// (row blocks `ri0..ri1` by chunks `cj0..cj1`), since `y0` and `x0` grow with the block and
/// chunk number; the frame around it needs masks (left/right columns), row checks (top/bottom
/// rows) or both. Each class runs as a [`Region`] job. Large planes go plane by plane, all
/// classes of one plane while its data is in cache; small planes go class by class over all
/// planes (see [`SMALL_PLANE`]).
#[inline(always)]
fn regions<S: Simd, A: Act<S>, const K: usize, const ST: usize>(
    s: S,
    act: A,
    conv: &Data<'_>,
    out: &mut [f32],
) {
    let g = conv.g;
    let lanes = S::LANES;
    let rows_per_block = if g.oh >= ROWS { ROWS } else { 1 };
    let t = Tiling {
        rows_per_block,
        blocks: g.oh.div_ceil(rows_per_block),
        chunks: g.ow.div_ceil(lanes).max(1),
        oh: g.oh,
        ow: g.ow,
        width: g.ow.min(lanes),
        lanes,
    };
    let y0 = |i: usize| (t.oy0(i) * ST) as isize - g.pad_top;
    let x0 = |j: usize| (t.ox0(j) * ST) as isize - g.pad_left;
    // Input rows a block reads, and input columns a chunk reads (K taps, each a vector of
    // outputs ST apart; with ST = 2 the odd half of the last pair is read but unused).
    let rows_read = (rows_per_block - 1) * ST + K;
    let span = (K - 1 + ST * lanes) as isize;
    let (ri0, ri1) = if rows_per_block == ROWS {
        run_of(t.blocks, |i| {
            y0(i) >= 0 && y0(i) as usize + rows_read <= g.h
        })
    } else {
        (0, 0)
    };
    let (cj0, cj1) = run_of(t.chunks, |j| x0(j) >= 0 && x0(j) + span <= g.w as isize);
    let all_rows = [(0, t.blocks), (0, 0)];
    let border_rows = [(0, ri0), (ri1, t.blocks)];
    let inner_rows = [(ri0, ri1), (0, 0)];
    let edge_cols = [(0, cj0), (cj1, t.chunks)];
    let inner_cols = [(cj0, cj1), (0, 0)];
    let n_planes = out.len() / (g.oh * g.ow);
    let mut run = |planes: (usize, usize)| {
        macro_rules! region {
            ($r:expr, $edge:literal, $check:literal, $rows:expr, $cols:expr) => {{
                let (rows, cols) = ($rows, $cols);
                let any = |v: &[(usize, usize); 2]| v.iter().any(|&(a, b)| a < b);
                if any(&rows) && any(&cols) {
                    s.vectorize(Region::<'_, '_, A, K, ST, { $r }, $edge, $check> {
                        conv,
                        act,
                        tiling: &t,
                        planes,
                        rows,
                        cols,
                        out: &mut *out,
                    });
                }
            }};
        }
        if rows_per_block == ROWS {
            region!(ROWS, false, false, inner_rows, inner_cols);
            region!(ROWS, true, false, inner_rows, edge_cols);
            region!(ROWS, false, true, border_rows, inner_cols);
            region!(ROWS, true, true, border_rows, edge_cols);
        } else {
            region!(1, false, true, all_rows, inner_cols);
            region!(1, true, true, all_rows, edge_cols);
        }
    };
    if g.oh * g.ow <= SMALL_PLANE {
        run((0, n_planes));
    } else {
        for i in 0..n_planes {
            run((i, i + 1));
        }
    }
}

/// One class of blocks (see [`regions`]) of the planes `planes`: row blocks in `rows` by
/// chunks in `cols` (each up to two ranges), all with the same `EDGE` (masked loads) and
/// `CHECK` (row checks).
///
/// Each class is a function of its own (a [`Job`]) whose loops see the plane's weights and
/// constants as local values. Inlined into one loop with the other classes, the weights were
/// spilled under the register pressure of the masked variants, or read through a reference
/// after stores to the output, which LLVM cannot prove disjoint; either way the hot loop ran
/// at about half the speed of a hand-written one.
struct Region<
    'a,
    'b,
    A,
    const K: usize,
    const ST: usize,
    const R: usize,
    const EDGE: bool,
    const CHECK: bool,
> {
    conv: &'a Data<'b>,
    act: A,
    tiling: &'a Tiling,
    planes: (usize, usize),
    rows: [(usize, usize); 2],
    cols: [(usize, usize); 2],
    out: &'a mut [f32],
}

impl<
        S: Simd,
        A: Act<S>,
        const K: usize,
        const ST: usize,
        const R: usize,
        const EDGE: bool,
        const CHECK: bool,
    > Job<S> for Region<'_, '_, A, K, ST, R, EDGE, CHECK>
{
    type Output = ();

    #[inline(always)]
    fn run(self, s: S) {
        let Data {
            g,
            c,
            input,
            weight,
            bias,
        } = *self.conv;
        let t = self.tiling;
        let (in_plane, out_plane) = (g.h * g.w, g.oh * g.ow);
        for p in self.planes.0..self.planes.1 {
            let ch = p % c;
            let mut wv = [s.zero(); MAX_K * MAX_K];
            for (v, &x) in wv.iter_mut().zip(&weight[ch * K * K..][..K * K]) {
                *v = s.splat(x);
            }
            let pl = Plane {
                s,
                act: self.act,
                src: &input[p * in_plane..][..in_plane],
                h: g.h,
                w: g.w,
                ow: g.ow,
                width: t.width,
                wv,
                bias: s.splat(bias.map_or(0.0, |b| b[ch])),
            };
            let dst = &mut self.out[p * out_plane..][..out_plane];
            for &(r0, r1) in &self.rows {
                for i in r0..r1 {
                    let oy0 = t.oy0(i);
                    let y0 = (oy0 * ST) as isize - g.pad_top;
                    for &(c0, c1) in &self.cols {
                        for j in c0..c1 {
                            let ox0 = t.ox0(j);
                            let x0 = (ox0 * ST) as isize - g.pad_left;
                            let out = &mut dst[oy0 * t.ow + ox0..];
                            block::<S, A, K, ST, R, EDGE, CHECK>(&pl, y0, x0, out);
                        }
                    }
                }
            }
        }
    }
}

/// `R` output rows by one vector of columns, stored at `out[r * ow..]`. With `EDGE`, loads are
/// masked to the image's columns; with `CHECK`, input rows outside the image are skipped.
///
/// Register budget (AVX2, 3x3): `R = 4` accumulators, nine weights, the activation's
/// constants and the tap being used fill the sixteen registers. Each accumulator is a chain of
/// `K * K` dependent FMAs, but consecutive blocks are independent and the out-of-order core
/// overlaps them (a hand-written version of this loop measures about 0.8 of the FMA peak).
#[inline(always)]
fn block<
    S: Simd,
    A: Act<S>,
    const K: usize,
    const ST: usize,
    const R: usize,
    const EDGE: bool,
    const CHECK: bool,
>(
    pl: &Plane<'_, S, A>,
    y0: isize,
    x0: isize,
    out: &mut [f32],
) {
    const {
        assert!((R - 1) * ST + K <= MAX_IN_ROWS && K <= MAX_K && K % 2 == 1 && (ST == 1 || ST == 2))
    };
    let s = pl.s;
    // The masks of the (up to six) loads per input row, the same for every row.
    let mut masks = [s.mask_range(0, 0); MAX_K + 1];
    if EDGE {
        for (j, m) in masks.iter_mut().enumerate().take(loads_per_row(K, ST)) {
            let first = x0 + load_offset::<S>(j, ST) as isize;
            let lanes = S::LANES as isize;
            let lo = (-first).clamp(0, lanes);
            let hi = (pl.w as isize - first).clamp(lo, lanes);
            *m = s.mask_range(lo as usize, hi as usize);
        }
    }
    let mut acc = [pl.bias; R];
    // Fully unrolled over the input rows, so every `ky` below is a constant and the
    // accumulators stay in registers.
    macro_rules! input_rows {
        ($($t:literal)*) => {$(
            if $t < (R - 1) * ST + K {
                input_row::<S, A, K, ST, R, EDGE, CHECK, $t>(pl, y0, x0, &masks, &mut acc);
            }
        )*};
    }
    input_rows!(0 1 2 3 4 5 6 7 8 9 10);
    // One bounds check for all R rows rather than one per store.
    let out = &mut out[..(R - 1) * pl.ow + pl.width];
    for (r, &v) in acc.iter().enumerate() {
        let v = if ST == 2 { s.unpermute(v) } else { v };
        let v = pl.act.apply(s, v);
        let at = out[r * pl.ow..].as_mut_ptr();
        if pl.width == S::LANES {
            // SAFETY: `out` holds `(R - 1) * ow + width` elements, so row `r < R` has
            // `width` of them from `r * ow`.
            unsafe { s.store_ptr(at, v) };
        } else {
            // SAFETY: as above.
            unsafe { s.store_first_ptr(at, pl.width, v) };
        }
    }
}

/// Vector loads per input row: one per tap with stride 1; pairs covering the taps two by two
/// with stride 2.
const fn loads_per_row(k: usize, st: usize) -> usize {
    if st == 1 {
        k
    } else {
        k + 1
    }
}

/// Column offset of load `j` of a row, relative to the chunk's first input column.
#[inline(always)]
fn load_offset<S: Simd>(j: usize, st: usize) -> usize {
    if st == 1 {
        j
    } else {
        // Pair j / 2 starts at tap 2 * (j / 2); its second vector is LANES further.
        2 * (j / 2) + (j % 2) * S::LANES
    }
}

/// Adds input row `T` of the block into the accumulators of the output rows it feeds.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn input_row<
    S: Simd,
    A,
    const K: usize,
    const ST: usize,
    const R: usize,
    const EDGE: bool,
    const CHECK: bool,
    const T: usize,
>(
    pl: &Plane<'_, S, A>,
    y0: isize,
    x0: isize,
    masks: &[S::M; MAX_K + 1],
    acc: &mut [S::V; R],
) {
    let s = pl.s;
    let iy = y0 + T as isize;
    if CHECK && (iy < 0 || iy >= pl.h as isize) {
        return; // top or bottom padding: these taps add zeros
    }
    // In bounds: `iy` is in `0..h`, checked above or (without CHECK) by the caller for the
    // whole block; `wrapping_add` just avoids asserting it a second time.
    let row = pl.src.as_ptr().wrapping_add(iy as usize * pl.w);
    let mut taps = [s.zero(); K];
    if ST == 1 {
        for (kx, t) in taps.iter_mut().enumerate() {
            *t = load::<S, EDGE>(s, row, pl.w, x0 + kx as isize, masks[kx]);
        }
    } else {
        for pair in 0..K.div_ceil(2) {
            let first = x0 + 2 * pair as isize;
            let (even, odd) = s.deinterleave(
                load::<S, EDGE>(s, row, pl.w, first, masks[2 * pair]),
                load::<S, EDGE>(s, row, pl.w, first + S::LANES as isize, masks[2 * pair + 1]),
            );
            taps[2 * pair] = even;
            if 2 * pair + 1 < K {
                taps[2 * pair + 1] = odd;
            }
        }
    }
    for (r, a) in acc.iter_mut().enumerate() {
        if T >= r * ST && T - r * ST < K {
            let ky = T - r * ST;
            for (kx, &t) in taps.iter().enumerate() {
                *a = s.fmadd(t, pl.wv[ky * K + kx], *a);
            }
        }
    }
}

/// `LANES` inputs from `row[first..]` of a row of `w` elements that is inside the plane.
#[inline(always)]
fn load<S: Simd, const EDGE: bool>(
    s: S,
    row: *const f32,
    w: usize,
    first: isize,
    mask: S::M,
) -> S::V {
    debug_assert!(EDGE || (first >= 0 && first as usize + S::LANES <= w));
    let p = row.wrapping_offset(first);
    if EDGE {
        // SAFETY: `row` starts a row of `w` elements inside the plane (see `input_row`), and
        // `mask` selects exactly the lanes whose column `first + lane` lies in `0..w` (see
        // `block`); the other lanes are not read.
        unsafe { s.load_masked_ptr(p, mask) }
    } else {
        // SAFETY: `row` starts a row of `w` elements inside the plane. The non-EDGE variant
        // runs only if `0 <= x0` and `x0 + K - 1 + ST * LANES <= w` (see `row_block`), and
        // every load reads `first..first + LANES` with `first - x0 <= K - 1 + (ST - 1) *
        // LANES` (see `load_offset`), so the whole vector is inside the row.
        unsafe { s.load_ptr(p) }
    }
}
