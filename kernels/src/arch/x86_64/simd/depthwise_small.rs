//! Depthwise convolution on planes at most two vectors wide, with a one-instruction two-source
//! permute (AVX-512): MobileNet-v2's stride-2 layers on 28x28 and 14x14 maps, its stride-1
//! layers on 28x28 maps, and stride-1 planes of at most half a vector (its 7x7 layers), two
//! output rows per vector ([`Pairs`]). Every window column of a whole output row is one
//! permute of the input row, so a stride needs no deinterleave and the padding columns no
//! masks.
//!
//! Algorithm sketch, per channel plane, in blocks of `R` output rows:
//!
//! ```text
//! idx[c][kx] = per lane ox of chunk c: input column ox * S + kx - pad_left, or lane 2L - 1
//!              (past the row, so zero) where that column is padding
//! acc[0..R][0..C] = splat(bias)
//! for each of the (R - 1) * S + K input rows t the block reads (zeros in the padding):
//!   lo ++ hi = the whole row (masked loads, zeros past its end)
//!   tap[c][kx] = permute2(idx[c][kx], lo, hi)                     // K per chunk
//!   for each output row r that row t feeds (ky = t - r * S in 0..K):
//!     acc[r][c] += tap[c][kx] * w[ky][kx]  for kx in 0..K
//! store act(acc[r][c])                    // masked to the row's `ow` columns
//! ```
//!
//! The terms are added in the other depthwise kernels' order (bias, then the window by rows and
//! columns); a padding tap adds `0 * w` where some kernels skip it, so results agree to
//! rounding, not always in the sign of a zero. The last block of a plane overlaps the previous one (its rows are recomputed the
//! same), and planes of fewer than `R` rows run blocks of one row.
//!
//! Why. The other kernels for these planes pay for the stride and for narrow rows: the
//! in-place stride-2 kernel (`depthwise_stride2`) deinterleaves two loads per pair of taps and
//! masks the edge chunks, the channels-in-lanes kernel (`depthwise_lanes`) transposes the
//! input and the output, four input elements per output with stride 2. Here an input row
//! costs two loads and `K` permutes per chunk, shared by the `ceil(K / S)` output rows it
//! feeds.
//!
//! Measured (kernel bench `-- mobilenetv2/dw`, AMD EPYC Zen 4, AVX-512, of peak, before ->
//! after, two alternations): 192 channels 28x28 stride 1 0.35 -> 0.53, stride 2 0.19-0.25 ->
//! 0.34; 576 channels 14x14 stride 2 0.14 -> 0.26-0.27 and 960 channels 7x7 stride 1 0.22 ->
//! 0.29 (both as pairs of rows; 0.18 and 0.22 one row per vector). A first version with the
//! input-row loop rolled (taps through the stack) was faster with stride 1 (0.58 on 28x28) and
//! slower with stride 2 (0.26, 0.135); neither beat the in-place kernel on 14x14 stride 1.
//! Walking blocks outer and planes inner (a block's row offsets once per group of planes) sped
//! up the pairs but slowed the 28x28 planes (0.53 -> 0.49, 0.34 -> 0.29), so only [`Pairs`]
//! does.

use super::depthwise::Data;
use super::eltwise;
use super::math::{specialise_cheap, Act};
use super::vector::{Job, Simd};
use crate::{Activation, Conv2d};

/// The largest window side (the index vectors are per window column).
const MAX_K: usize = 5;
/// Output rows per block.
const ROWS: usize = 4;
/// Input floats per group of planes that [`Pairs`] walks block by block (24 KiB, within any
/// L1): a block's input rows are worked out once for the group.
const GROUP_FLOATS: usize = 6 * 1024;
/// Pairs of output rows per block of [`Pairs`].
const PAIRS: usize = 4;
/// The most input rows a block reads: `(ROWS - 1) * 2 + MAX_K`.
const MAX_IN_ROWS: usize = 11;

/// Runs the depthwise conv2d (the portable kernel's signature and semantics, see
/// [`crate::arch::portable::conv2d`]) and returns `true` if [`Geom::new`] takes its shape;
/// returns `false`, having written nothing, otherwise. Needs no scratch.
#[allow(clippy::too_many_arguments)] // The signature is the table's contract.
#[inline(always)]
pub(crate) fn conv2d<S: Simd>(
    s: S,
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
) -> bool {
    let Some(g) = Geom::new::<S>(p) else {
        return false;
    };
    let c = p.c_out;
    // Slicing up front turns a short buffer into a panic here, like the portable kernel's
    // indexing; every raw access below stays inside these slices.
    let planes = p.batch * c;
    let out = &mut out[..planes * g.oh * g.ow];
    let data = Data {
        g: &g,
        c,
        input: &input[..planes * g.h * g.w],
        weight: &weight[..c * g.k * g.k],
        bias: bias.map(|b| &b[..c]),
    };
    // The cheap activations are fused into the store; sigmoid and tanh run as a second pass.
    specialise_cheap!(s, act, a => by_shape(s, a, &data, out),
        then eltwise::unary_inplace(s, act, out));
    true
}

/// The shape of one plane's convolution and each output lane's input column per window
/// column.
struct Geom {
    k: usize,
    stride: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    pad_top: usize,
    /// Two output rows per vector (lanes `0..ow` and `L/2..L/2 + ow`), see [`Pairs`].
    pairs: bool,
    /// `taps[c][kx][j]`: the element of `lo ++ hi` that lane `j` of chunk `c` reads for window
    /// column `kx` (with `pairs`, `lo` and `hi` are the two rows' inputs).
    taps: [[[u32; 16]; MAX_K]; 2],
}

impl Geom {
    /// The geometry if this kernel takes `p`: a one-instruction [`Simd::permute2`], a
    /// depthwise convolution (one channel per group) with a square 3x3 or 5x5 window, equal
    /// strides of 2, or of 1 on rows wider than a vector, no dilation, an input narrower than
    /// two vectors and at most two vectors of output columns, padding smaller than the window,
    /// nothing empty, and sizes whose products do not overflow. Stride-1 rows wider than half
    /// a vector but not than a vector stay with [`super::depthwise_inplace`]: on MobileNet-v2's
    /// 14x14 layers it measured 0.49 of peak, this kernel 0.46.
    fn new<S: Simd>(p: &Conv2d) -> Option<Geom> {
        let l = S::LANES;
        let k = p.kh;
        let [st, st_w] = p.stride;
        // Rows of at most half a vector, each input row within one vector.
        let pairs = 2 * p.out_w <= l && p.w < l;
        let shape = S::ONE_INSTRUCTION_PERMUTE2
            && p.groups > 0
            && p.is_depthwise()
            && p.c_in == p.c_out
            && (k == 3 || k == 5)
            && p.kw == k
            && st == st_w
            && (st == 1 || st == 2)
            && (st == 2 || p.w > l || pairs)
            && p.dilation == [1, 1]
            && p.pad.iter().all(|&x| x < k)
            && p.w < 2 * l
            && p.out_w <= 2 * l
            && p.h > 0
            && p.w > 0
            && p.out_h > 0
            && p.out_w > 0;
        if !shape {
            return None;
        }
        // 2^40 per dimension keeps every `row * stride + window` far inside `isize`.
        const LIMIT: usize = 1 << 40;
        if [p.h, p.out_h].iter().any(|&d| d >= LIMIT) {
            return None;
        }
        let planes = p.batch.checked_mul(p.c_out)?;
        planes.checked_mul(p.h.checked_mul(p.w)?)?;
        planes.checked_mul(p.out_h.checked_mul(p.out_w)?)?;
        if planes == 0 {
            return None;
        }
        let past = 2 * l as u32 - 1;
        let mut taps = [[[past; 16]; MAX_K]; 2];
        let col =
            |ox: usize, kx: usize| (ox * st + kx).checked_sub(p.pad[1]).filter(|&ix| ix < p.w);
        for ox in 0..p.out_w {
            for (kx, tap) in taps[ox / l].iter_mut().enumerate().take(k) {
                // A padding column reads lane `2L - 1`: past the row, so zero (with pairs,
                // lane `L - 1` of the second row, `w < L`).
                if pairs {
                    // The first row's input is `lo`, the second's `hi`.
                    tap[ox] = col(ox, kx).map_or(past, |ix| ix as u32);
                    tap[l / 2 + ox] = col(ox, kx).map_or(past, |ix| (l + ix) as u32);
                } else {
                    tap[ox % l] = col(ox, kx).map_or(past, |ix| ix as u32);
                }
            }
        }
        Some(Geom {
            k,
            stride: st,
            h: p.h,
            w: p.w,
            oh: p.out_h,
            ow: p.out_w,
            pad_top: p.pad[0],
            pairs,
            taps,
        })
    }
}

/// Picks the window, stride, chunks and block height as constants.
#[inline(always)]
fn by_shape<S: Simd, A: Act<S>>(s: S, act: A, data: &Data<'_, Geom>, out: &mut [f32]) {
    macro_rules! job {
        ($k:literal, $st:literal, $r:literal, $c:literal) => {
            s.vectorize(Planes::<'_, '_, A, $k, $st, $r, $c> { data, act, out })
        };
    }
    macro_rules! rows {
        ($k:literal, $st:literal, $c:literal) => {
            if data.g.oh >= ROWS {
                job!($k, $st, 4, $c)
            } else {
                job!($k, $st, 1, $c)
            }
        };
    }
    macro_rules! chunks {
        ($k:literal, $st:literal) => {
            if data.g.ow > S::LANES {
                rows!($k, $st, 2)
            } else {
                rows!($k, $st, 1)
            }
        };
    }
    macro_rules! pairs {
        ($k:literal, $st:literal) => {
            if data.g.oh.div_ceil(2) >= PAIRS {
                s.vectorize(Pairs::<'_, '_, A, $k, $st, PAIRS> { data, act, out })
            } else {
                s.vectorize(Pairs::<'_, '_, A, $k, $st, 1> { data, act, out })
            }
        };
    }
    if data.g.pairs {
        return match (data.g.k, data.g.stride) {
            (3, 1) => pairs!(3, 1),
            (3, _) => pairs!(3, 2),
            (_, 1) => pairs!(5, 1),
            _ => pairs!(5, 2),
        };
    }
    match (data.g.k, data.g.stride) {
        (3, 1) => chunks!(3, 1),
        (3, _) => chunks!(3, 2),
        (_, 1) => chunks!(5, 1),
        _ => chunks!(5, 2),
    }
}

/// The whole convolution for window `K`, stride `ST`, blocks of `R` output rows and `C`
/// chunks of output columns.
struct Planes<'a, 'b, A, const K: usize, const ST: usize, const R: usize, const C: usize> {
    data: &'a Data<'b, Geom>,
    act: A,
    out: &'a mut [f32],
}

impl<S: Simd, A: Act<S>, const K: usize, const ST: usize, const R: usize, const C: usize> Job<S>
    for Planes<'_, '_, A, K, ST, R, C>
{
    type Output = ();

    #[inline(always)]
    fn run(self, s: S) {
        let Planes { data, act, out } = self;
        let g = data.g;
        let (h, w, oh, ow, l) = (g.h, g.w, g.oh, g.ow, S::LANES);
        debug_assert!(g.k == K && g.stride == ST && C == ow.div_ceil(l) && R <= oh);
        let taps: [[S::I; K]; C] =
            core::array::from_fn(|c| core::array::from_fn(|kx| s.indices(&g.taps[c][kx])));
        let lo_mask = s.mask_range(0, w.min(l));
        let hi_mask = s.mask_range(0, w.saturating_sub(l));
        let out_mask: [S::M; C] = core::array::from_fn(|c| s.mask_range(0, (ow - c * l).min(l)));
        let zeros = [0.0f32; 32];
        debug_assert!(w < 2 * l && 2 * l <= zeros.len());
        let (in_plane, out_plane) = (h * w, oh * ow);
        for (plane, (src, dst)) in data
            .input
            .chunks_exact(in_plane)
            .zip(out.chunks_exact_mut(out_plane))
            .enumerate()
        {
            let (wv, b) = weights::<S, K>(s, data, plane);
            let mut oy = 0;
            while oy < oh {
                // The last block ends at the plane's last row, overlapping the previous one.
                let base = oy.min(oh - R);
                let mut acc = [[b; C]; R];
                // Input row `base * ST + t - pad_top` for each `t`; rows in the padding read
                // zeros.
                let rows: [*const f32; MAX_IN_ROWS] = core::array::from_fn(|t| {
                    (base * ST + t)
                        .checked_sub(g.pad_top)
                        .filter(|&iy| iy < h && t < (R - 1) * ST + K)
                        .map_or(zeros.as_ptr(), |iy| src[iy * w..][..w].as_ptr())
                });
                let ctx = Ctx {
                    taps: &taps,
                    wv: &wv,
                    rows: &rows,
                    lo_mask,
                    hi_mask,
                };
                // Every input row of the block, unrolled: the rows each one feeds and their
                // window rows are constants.
                macro_rules! steps {
                    ($($t:literal)*) => {$(
                        if $t < (R - 1) * ST + K {
                            // SAFETY: every row pointer holds `w` readable floats (the
                            // zeros hold 2 L >= w).
                            unsafe { step::<S, K, ST, R, C, $t>(s, &ctx, w, &mut acc) };
                        }
                    )*};
                }
                steps!(0 1 2 3 4 5 6 7 8 9 10);
                for (r, acc) in acc.iter().enumerate() {
                    let line = &mut dst[(base + r) * ow..][..ow];
                    for c in 0..C {
                        // SAFETY: the mask selects lanes `0..ow - c l` of the row's `ow`.
                        unsafe {
                            s.store_masked_ptr(
                                line.as_mut_ptr().add(c * l),
                                out_mask[c],
                                act.apply(s, acc[c]),
                            )
                        };
                    }
                }
                oy = base + R;
            }
        }
    }
}

/// What every input row of a block needs, from [`Planes::run`].
struct Ctx<'a, S: Simd, const K: usize, const C: usize> {
    taps: &'a [[S::I; K]; C],
    wv: &'a [[S::V; K]; K],
    rows: &'a [*const f32; MAX_IN_ROWS],
    lo_mask: S::M,
    hi_mask: S::M,
}

/// Input row `T` of a block: loaded once, its `K` taps per chunk permuted once, and folded
/// into every output row `r` it feeds (window row `T - r ST`).
///
/// # Safety
///
/// `ctx.rows[T]` points to `w` readable floats, `w < 2 L`.
#[inline(always)]
unsafe fn step<
    S: Simd,
    const K: usize,
    const ST: usize,
    const R: usize,
    const C: usize,
    const T: usize,
>(
    s: S,
    ctx: &Ctx<'_, S, K, C>,
    w: usize,
    acc: &mut [[S::V; C]; R],
) {
    let row = ctx.rows[T];
    // SAFETY: the masks select lanes `0..min(w, L)` and `L..w` of the row (the caller's
    // contract).
    let (lo, hi) = unsafe {
        let lo = s.load_masked_ptr(row, ctx.lo_mask);
        let hi = if w > S::LANES {
            s.load_masked_ptr(row.add(S::LANES), ctx.hi_mask)
        } else {
            s.zero()
        };
        (lo, hi)
    };
    for c in 0..C {
        let tap: [S::V; K] = core::array::from_fn(|kx| s.permute2(ctx.taps[c][kx], lo, hi));
        for (r, acc) in acc.iter_mut().enumerate() {
            if T >= r * ST && T - r * ST < K {
                let ky = T - r * ST;
                for (x, wt) in tap.iter().zip(&ctx.wv[ky]) {
                    acc[c] = s.fmadd(*x, *wt, acc[c]);
                }
            }
        }
    }
}

/// The whole convolution for window `K` and stride `ST` on planes whose rows take at most half
/// a vector: each vector holds two output rows, `r0` in lanes `0..ow` and `r1` in lanes
/// `L/2..L/2 + ow`, and each window row's taps for both are one permute of their two input
/// rows (`lo` the first's, `hi` the second's). Blocks of `NP` pairs, the plane's last pairs
/// overlapping the previous ones (a pair of an odd-height plane's last row repeats the row
/// before it).
struct Pairs<'a, 'b, A, const K: usize, const ST: usize, const NP: usize> {
    data: &'a Data<'b, Geom>,
    act: A,
    out: &'a mut [f32],
}

impl<S: Simd, A: Act<S>, const K: usize, const ST: usize, const NP: usize> Job<S>
    for Pairs<'_, '_, A, K, ST, NP>
{
    type Output = ();

    #[inline(always)]
    fn run(self, s: S) {
        let Pairs { data, act, out } = self;
        let g = data.g;
        let (h, w, oh, ow, l) = (g.h, g.w, g.oh, g.ow, S::LANES);
        let half = l / 2;
        let pairs = oh.div_ceil(2);
        debug_assert!(g.k == K && g.stride == ST && g.pairs && NP <= pairs && w < l);
        let taps: [S::I; K] = core::array::from_fn(|kx| s.indices(&g.taps[0][kx]));
        let in_mask = s.mask_range(0, w);
        let first_out = s.mask_range(0, ow);
        let second_out = s.mask_range(half, half + ow);
        let zeros = [0.0f32; 16];
        debug_assert!(w <= zeros.len());
        // Output rows of pair `i`: `2i` and `2i + 1`, the last one of an odd plane `oh - 1`
        // twice (a plane of one row) or `oh - 2, oh - 1`.
        let rows_of = |i: usize| {
            let r1 = (2 * i + 1).min(oh - 1);
            (r1.saturating_sub(1).min(2 * i), r1)
        };
        let (in_plane, out_plane) = (h * w, oh * ow);
        let planes = data.input.len() / in_plane;
        let group = (GROUP_FLOATS / in_plane).max(1);
        for first_plane in (0..planes).step_by(group) {
            let mut first = 0;
            while first < pairs {
                let base = first.min(pairs - NP);
                // Per pair and window row, the offsets of the two input rows.
                let offs: [[(usize, usize); K]; NP] = core::array::from_fn(|i| {
                    let (r0, r1) = rows_of(base + i);
                    core::array::from_fn(|ky| {
                        (
                            row_offset(Some(r0 * ST + ky), g),
                            row_offset(Some(r1 * ST + ky), g),
                        )
                    })
                });
                for plane in first_plane..(first_plane + group).min(planes) {
                    let src = &data.input[plane * in_plane..][..in_plane];
                    let dst = &mut out[plane * out_plane..][..out_plane];
                    let (wv, b) = weights::<S, K>(s, data, plane);
                    let mut acc = [b; NP];
                    for ky in 0..K {
                        for (acc, offs) in acc.iter_mut().zip(&offs) {
                            let (o0, o1) = offs[ky];
                            // SAFETY: both rows hold `w` readable floats (the zeros 16 >= w),
                            // and the mask selects lanes `0..w`.
                            let (lo, hi) = unsafe {
                                (
                                    s.load_masked_ptr(row_ptr(src, o0, &zeros), in_mask),
                                    s.load_masked_ptr(row_ptr(src, o1, &zeros), in_mask),
                                )
                            };
                            for (tap, wt) in taps.iter().zip(&wv[ky]) {
                                *acc = s.fmadd(s.permute2(*tap, lo, hi), *wt, *acc);
                            }
                        }
                    }
                    for (i, acc) in acc.iter().enumerate() {
                        let (r0, r1) = rows_of(base + i);
                        let v = act.apply(s, *acc);
                        let to = dst.as_mut_ptr();
                        // SAFETY: the first mask selects lanes `0..ow`, written to row `r0`'s
                        // `ow` columns; the second lanes `L/2..L/2 + ow`, written from
                        // `row r1 - L/2` on, so to row `r1`'s `ow` columns (`r0, r1 < oh`).
                        unsafe {
                            s.store_masked_ptr(to.add(r0 * ow), first_out, v);
                            s.store_masked_ptr(to.add(r1 * ow).wrapping_sub(half), second_out, v);
                        }
                    }
                }
                first = base + NP;
            }
        }
    }
}

/// Marks a row in the padding in [`row_offset`]'s result.
const PADDING: usize = usize::MAX;

/// The offset in a plane of padded row `y` (input row `y - pad_top`), or [`PADDING`] if that
/// row is outside the image (or `y` is `None`).
#[inline(always)]
fn row_offset(y: Option<usize>, g: &Geom) -> usize {
    y.and_then(|y| y.checked_sub(g.pad_top))
        .filter(|&iy| iy < g.h)
        .map_or(PADDING, |iy| iy * g.w)
}

/// The row at `offset` of the plane `src`, or `zeros` for [`PADDING`]. The offsets come from
/// [`row_offset`], so a row's `w` floats are inside `src`.
#[inline(always)]
fn row_ptr(src: &[f32], offset: usize, zeros: &[f32]) -> *const f32 {
    if offset == PADDING {
        zeros.as_ptr()
    } else {
        src.as_ptr().wrapping_add(offset)
    }
}

/// Plane `plane`'s window as `K x K` splat vectors, and its bias (zero without one).
#[inline(always)]
fn weights<S: Simd, const K: usize>(
    s: S,
    data: &Data<'_, Geom>,
    plane: usize,
) -> ([[S::V; K]; K], S::V) {
    let ch = plane % data.c;
    let wk = &data.weight[ch * K * K..][..K * K];
    let wv = core::array::from_fn(|ky| core::array::from_fn(|kx| s.splat(wk[ky * K + kx])));
    (wv, s.splat(data.bias.map_or(0.0, |b| b[ch])))
}
