//! Depthwise convolution on planes at most two vectors wide, with a one-instruction two-source
//! permute (AVX-512): MobileNet-v2's stride-2 layers on 28x28 and 14x14 maps, its stride-1
//! layers on 28x28 maps, and stride-1 planes of at most half a vector (its 7x7 layers), two
//! output rows per vector. Two schemes, both without masks at the padding columns:
//!
//! **Taps by permute** ([`Planes`]; stride 1 on rows wider than a vector, stride 2 on outputs
//! wider than a vector). Every window column of a whole output row is one two-source permute
//! of the input row:
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
//! **Taps summed by shift** ([`Shifted`]; stride 2 on outputs at most a vector wide, stride-1
//! pairs of rows at most half a vector wide). On Zen 4 a two-source `vpermt2ps` takes an FMA's
//! slot (measured: 12 FMAs and 12 of them issue in 24 cycles, with 6 in-lane shuffles or
//! one-source `vpermps` in 12), so per input row the taps come from at most two in-lane
//! shuffles, unshifted, and the shift moves to the output:
//!
//! ```text
//! stride 2: even, odd = deinterleave(lo, hi)        // lane order P, two vshufps
//!           window column kx reads column 2 (ox + shift) + phase of the row: lane
//!           ox + shift of `even` or `odd`; group the columns by shift
//! stride 1 pairs: v = row r0 in lanes 0..L/2, row r1 in L/2..L (two masked loads, a blend);
//!           column kx reads lane ox + kx - pad_left of its half: one group per column
//! acc[r][group] += tap * w[ky][kx]                  // per input row, as above
//! out = bias + sum over groups of permute_or_zero(idx[group], acc[r][group])
//!       // back to memory order and moved by the group's shift in one vpermps, zeros
//!       // shifted in: a lane moved past its row (or half) reads padding
//! ```
//!
//! The terms are added in the other depthwise kernels' order (bias, then the window by rows
//! and columns) by the permute scheme, by shift groups in the other; a padding tap adds
//! `0 * w` where some kernels skip it, so results agree to rounding, not always in the sign
//! of a zero. The last block of a plane overlaps the previous one (its rows are recomputed
//! the same), and planes of fewer than `R` rows run blocks of one row.
//!
//! Why. The other kernels for these planes pay for the stride and for narrow rows: the
//! in-place stride-2 kernel (`depthwise_stride2`) makes three loads per input row and chunk,
//! two of them across cache lines, and masks the edge chunks; the channels-in-lanes kernel
//! (`depthwise_lanes`) transposes the input and the output, four input elements per output
//! with stride 2. Here an input row costs two loads and `K` permutes per chunk (or two
//! shuffles), shared by the `ceil(K / S)` output rows it feeds.
//!
//! Measured (kernel bench `-- mobilenetv2/dw`, AMD EPYC Zen 4, AVX-512, of peak, before ->
//! after, two alternations): permutes (2026-11-24): 192 channels 28x28 stride 1 0.35 -> 0.53,
//! stride 2 0.19-0.25 -> 0.34; 576 channels 14x14 stride 2 0.14 -> 0.26-0.27 and 960 channels
//! 7x7 stride 1 0.22 -> 0.29 (both as pairs of rows; 0.18 and 0.22 one row per vector).
//! Shifts (2026-11-25): 28x28 stride 2 0.33-0.34 -> 0.39-0.40, 14x14 stride 2 0.26-0.28 ->
//! 0.31-0.32, 7x7 stride 1 0.28-0.29 -> 0.33; blocks of 7 rows for the 28x28 stride-2 planes
//! (no overlap) measured within noise of 4. A first version with the input-row loop rolled
//! (taps through the stack) was faster with stride 1 (0.58 on 28x28) and slower with stride 2
//! (0.26, 0.135); neither beat the in-place kernel on 14x14 stride 1. Walking blocks outer and
//! planes inner (a block's row offsets once per group of planes) sped up the pairs but slowed
//! the 28x28 planes (0.53 -> 0.49, 0.34 -> 0.29), so only the pairs do.

use super::depthwise::Data;
use super::eltwise;
use super::math::{specialise_cheap, Act};
use super::vector::{array, Job, Simd};
use crate::{Activation, Conv2d};

/// The largest window side (the index vectors are per window column).
const MAX_K: usize = 5;
/// Output rows per block.
const ROWS: usize = 4;
/// Input floats per group of planes that [`Shifted`] walks block by block with pairs of rows (24 KiB, within any
/// L1): a block's input rows are worked out once for the group.
const GROUP_FLOATS: usize = 6 * 1024;
/// Pairs of output rows per block of [`Shifted`].
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
    pad_left: usize,
    /// Two output rows per vector (lanes `0..ow` and `L/2..L/2 + ow`), see [`Shifted`].
    pairs: bool,
    /// `taps[c][kx][j]`: the element of `lo ++ hi` that lane `j` of chunk `c` reads for window
    /// column `kx` ([`Planes`] only).
    taps: [[[u32; 16]; MAX_K]; 2],
}

impl Geom {
    /// The geometry if this kernel takes `p`: a one-instruction [`Simd::permute2`], a
    /// depthwise convolution (one channel per group) with a square 3x3 or 5x5 window, equal
    /// strides of 2, or of 1 on input rows wider than a vector or at most half a vector (and
    /// output rows at most half), no dilation, an input narrower than two vectors and at most
    /// two vectors of output columns, padding smaller than the window, nothing empty, and sizes
    /// whose products do not overflow. Other stride-1 rows stay with
    /// [`super::depthwise_inplace`]: on MobileNet-v2's 14x14 layers it measured 0.49 of peak,
    /// this kernel 0.46.
    fn new<S: Simd>(p: &Conv2d) -> Option<Geom> {
        let l = S::LANES;
        let k = p.kh;
        let [st, st_w] = p.stride;
        // Output rows of at most half a vector, each input row within one vector (stride 1:
        // within half a vector, see `Shifted`).
        let pairs = 2 * p.out_w <= l && if st == 1 { 2 * p.w <= l } else { p.w < l };
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
        // Only `Planes` reads the table; `Shifted` (pairs, and stride 2 on at most a vector of
        // outputs) builds its own indices.
        let shifted = pairs || (st == 2 && p.out_w <= l);
        for ox in (0..p.out_w).filter(|_| !shifted) {
            for (kx, tap) in taps[ox / l].iter_mut().enumerate().take(k) {
                // A padding column reads lane `2L - 1`: past the row, so zero.
                tap[ox % l] = col(ox, kx).map_or(past, |ix| ix as u32);
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
            pad_left: p.pad[1],
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
    // Stride 2, and stride 1 on pairs of rows that each fit half a vector, sum the taps by
    // their shift instead of permuting each tap (see [`Shifted`]); the parity of the left
    // padding fixes each window column's phase and shift with stride 2.
    macro_rules! shifted {
        ($k:literal, $st:literal, $odd:literal, false) => {
            if data.g.oh >= ROWS {
                s.vectorize(Shifted::<'_, '_, A, $k, $st, $odd, false, ROWS> { data, act, out })
            } else {
                s.vectorize(Shifted::<'_, '_, A, $k, $st, $odd, false, 1> { data, act, out })
            }
        };
        ($k:literal, $st:literal, $odd:literal, true) => {
            if data.g.oh.div_ceil(2) >= PAIRS {
                s.vectorize(Shifted::<'_, '_, A, $k, $st, $odd, true, PAIRS> { data, act, out })
            } else {
                s.vectorize(Shifted::<'_, '_, A, $k, $st, $odd, true, 1> { data, act, out })
            }
        };
    }
    if data.g.stride == 2 && data.g.ow <= S::LANES {
        return match (data.g.k, data.g.pad_left % 2 == 1, data.g.pairs) {
            (3, false, false) => shifted!(3, 2, false, false),
            (3, false, true) => shifted!(3, 2, false, true),
            (3, true, false) => shifted!(3, 2, true, false),
            (3, true, true) => shifted!(3, 2, true, true),
            (_, false, false) => shifted!(5, 2, false, false),
            (_, false, true) => shifted!(5, 2, false, true),
            (_, true, false) => shifted!(5, 2, true, false),
            (_, true, true) => shifted!(5, 2, true, true),
        };
    }
    if data.g.pairs {
        return match data.g.k {
            3 => shifted!(3, 1, false, true),
            _ => shifted!(5, 1, false, true),
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
        let taps: [[S::I; K]; C] = array(|c| array(|kx| s.indices(&g.taps[c][kx])));
        let lo_mask = s.mask_range(0, w.min(l));
        let hi_mask = s.mask_range(0, w.saturating_sub(l));
        let out_mask: [S::M; C] = array(|c| s.mask_range(0, (ow - c * l).min(l)));
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
                let rows = block_rows::<K, ST, R>(src, base, g, &zeros);
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
        let tap: [S::V; K] = array(|kx| s.permute2(ctx.taps[c][kx], lo, hi));
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

/// The whole convolution for window `K` and stride `ST` without a permute per tap (see the
/// module docs). Stride 2: each input row (or pair of rows) is split once into its even and
/// odd columns ([`Simd::deinterleave`], two in-lane shuffles, in the ISA's lane order `P`),
/// and window column `kx` of output column `ox` reads column `2 ox + kx - pad_left = 2 (ox +
/// shift) + phase`, i.e. lane `ox + shift` of the even or odd half; the columns are grouped by
/// shift (`group = (kx + ODD) / 2`, `ODD` the parity of the left padding). Stride 1 (only
/// with `PAIRS`, rows at most `L/2` wide): the pair's two rows are one vector, and column
/// `kx` is its own group, shift `kx - pad_left`. Each group is summed in an accumulator of its
/// own, unshifted; the output is the bias plus each group's accumulator put back in memory
/// order and moved by its shift (one one-source permute, zeros shifted in). With `PAIRS`, a
/// vector holds output rows `r0` (lanes `0..L/2`) and `r1` (lanes `L/2..`),
/// the shift stays within each half, and blocks are `R` pairs; else (stride 2) blocks are `R`
/// output rows sharing their input rows.
///
/// A lane shifted past its segment (the row, or the half of a pair) reads a column below 0
/// or at least `L / (1 + PAIRS) >= w` (stride 1) or `2 L / (1 + PAIRS) > w` (stride 2),
/// padding either way: zero is right.
struct Shifted<
    'a,
    'b,
    A,
    const K: usize,
    const ST: usize,
    const ODD: bool,
    const PAIRS: bool,
    const R: usize,
> {
    data: &'a Data<'b, Geom>,
    act: A,
    out: &'a mut [f32],
}

impl<
        S: Simd,
        A: Act<S>,
        const K: usize,
        const ST: usize,
        const ODD: bool,
        const PAIRS: bool,
        const R: usize,
    > Job<S> for Shifted<'_, '_, A, K, ST, ODD, PAIRS, R>
{
    type Output = ();

    #[inline(always)]
    fn run(self, s: S) {
        let Shifted { data, act, out } = self;
        let g = data.g;
        let (h, w, oh, ow, l) = (g.h, g.w, g.oh, g.ow, S::LANES);
        debug_assert!(g.k == K && g.stride == ST && g.pairs == PAIRS && (PAIRS || ST == 2));
        debug_assert!(ST == 1 || (g.pad_left % 2 == 1) == ODD);
        debug_assert!(ow <= l && w < 2 * l && (!PAIRS || (2 * ow <= l && w < l)));
        debug_assert!(ST == 2 || 2 * w <= l);
        let combine = combine_indices::<S, K, ST, ODD, PAIRS>(s, g.pad_left);
        let zeros = [0.0f32; 32];
        let (in_plane, out_plane) = (h * w, oh * ow);
        if PAIRS {
            let half = l / 2;
            let pairs = oh.div_ceil(2);
            let in_mask = s.mask_range(0, w);
            let second_in = s.mask_range(half, half + w.min(half));
            let (first_out, second_out) = (s.mask_range(0, ow), s.mask_range(half, half + ow));
            let rows_of = |i: usize| {
                let r1 = (2 * i + 1).min(oh - 1);
                (r1.saturating_sub(1).min(2 * i), r1)
            };
            let planes = data.input.len() / in_plane;
            let group = (GROUP_FLOATS / in_plane).max(1);
            for first_plane in (0..planes).step_by(group) {
                let mut first = 0;
                while first < pairs {
                    let base = first.min(pairs - R);
                    let offs: [[(usize, usize); K]; R] = array(|i| {
                        let (r0, r1) = rows_of(base + i);
                        array(|ky| {
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
                        let mut acc = [[s.zero(); MAX_K]; R];
                        for ky in 0..K {
                            for (acc, offs) in acc.iter_mut().zip(&offs) {
                                let (o0, o1) = offs[ky];
                                // SAFETY: both rows hold `w` readable floats (the zeros 32 >=
                                // w), and the mask selects lanes `0..w`.
                                let (lo, hi) = unsafe {
                                    let (r0, r1) =
                                        (row_ptr(src, o0, &zeros), row_ptr(src, o1, &zeros));
                                    if ST == 1 {
                                        // Both rows in one vector: `r1`'s from lane `L/2`
                                        // (the mask reads its lanes `0..w`).
                                        let hi =
                                            s.load_masked_ptr(r1.wrapping_sub(half), second_in);
                                        let both =
                                            s.select(second_in, hi, s.load_masked_ptr(r0, in_mask));
                                        (both, both)
                                    } else {
                                        (
                                            s.load_masked_ptr(r0, in_mask),
                                            s.load_masked_ptr(r1, in_mask),
                                        )
                                    }
                                };
                                fold_row::<S, K, ST, ODD>(s, lo, hi, &wv[ky], acc);
                            }
                        }
                        for (i, acc) in acc.iter().enumerate() {
                            let (r0, r1) = rows_of(base + i);
                            let v = act.apply(s, combined::<S, K, ST>(s, b, acc, &combine));
                            let to = dst.as_mut_ptr();
                            // SAFETY: the first mask selects lanes `0..ow`, written to row
                            // `r0`'s `ow` columns; the second lanes `L/2..L/2 + ow`, written
                            // from `row r1 - L/2` on, so to row `r1`'s `ow` columns (`r0, r1
                            // < oh`).
                            unsafe {
                                s.store_masked_ptr(to.add(r0 * ow), first_out, v);
                                s.store_masked_ptr(
                                    to.add(r1 * ow).wrapping_sub(half),
                                    second_out,
                                    v,
                                );
                            }
                        }
                    }
                    first = base + R;
                }
            }
            return;
        }
        let lo_mask = s.mask_range(0, w.min(l));
        let hi_mask = s.mask_range(0, w.saturating_sub(l));
        let out_mask = s.mask_range(0, ow);
        for (plane, (src, dst)) in data
            .input
            .chunks_exact(in_plane)
            .zip(out.chunks_exact_mut(out_plane))
            .enumerate()
        {
            let (wv, b) = weights::<S, K>(s, data, plane);
            let mut oy = 0;
            while oy < oh {
                let base = oy.min(oh - R);
                let mut acc = [[s.zero(); MAX_K]; R];
                let rows = block_rows::<K, 2, R>(src, base, g, &zeros);
                macro_rules! steps {
                    ($($t:literal)*) => {$(
                        if $t < (R - 1) * 2 + K {
                            let row = rows[$t];
                            // SAFETY: every row pointer holds `w` readable floats (the zeros
                            // hold 2 L > w); the masks select lanes `0..min(w, L)` and `L..w`.
                            let (lo, hi) = unsafe {
                                (
                                    s.load_masked_ptr(row, lo_mask),
                                    if w > l {
                                        s.load_masked_ptr(row.add(l), hi_mask)
                                    } else {
                                        s.zero()
                                    },
                                )
                            };
                            for (r, acc) in acc.iter_mut().enumerate() {
                                // Row `t` feeds output row `r` with window row `t - 2 r`.
                                if $t >= 2 * r && $t - 2 * r < K {
                                    fold_row::<S, K, ST, ODD>(s, lo, hi, &wv[$t - 2 * r], acc);
                                }
                            }
                        }
                    )*};
                }
                steps!(0 1 2 3 4 5 6 7 8 9 10);
                for (r, acc) in acc.iter().enumerate() {
                    let v = act.apply(s, combined::<S, K, ST>(s, b, acc, &combine));
                    // SAFETY: the mask selects lanes `0..ow` of the row's `ow`.
                    unsafe {
                        s.store_masked_ptr(dst[(base + r) * ow..][..ow].as_mut_ptr(), out_mask, v)
                    };
                }
                oy = base + R;
            }
        }
    }
}

/// Adds one window row (`wv`, its `K` splat weights) to the shift groups' accumulators `acc`
/// (see [`Shifted`]): with stride 1 every window column is its own group and reads `lo` (the
/// row, or the pair of rows, itself); with stride 2 the taps are the even and odd columns of
/// `lo ++ hi`. An input row feeding two output rows is deinterleaved twice here; LLVM keeps
/// one copy, the shuffles being pure.
#[inline(always)]
fn fold_row<S: Simd, const K: usize, const ST: usize, const ODD: bool>(
    s: S,
    lo: S::V,
    hi: S::V,
    wv: &[S::V; K],
    acc: &mut [S::V; MAX_K],
) {
    if ST == 1 {
        for (acc, wt) in acc.iter_mut().zip(wv) {
            *acc = s.fmadd(lo, *wt, *acc);
        }
        return;
    }
    let (even, odd) = s.deinterleave(lo, hi);
    for (kx, wt) in wv.iter().enumerate() {
        let t = kx + usize::from(ODD);
        let tap = if t % 2 == 1 { odd } else { even };
        acc[t / 2] = s.fmadd(tap, *wt, acc[t / 2]);
    }
}

/// The shift groups of window `K` at stride `ST`: one per window column with stride 1, one
/// per pair of columns with stride 2.
const fn groups(k: usize, st: usize) -> usize {
    if st == 1 {
        k
    } else {
        k.div_ceil(2)
    }
}

/// `bias + sum over groups of permute(combine[g], acc[g])`: the shift groups' accumulators
/// of one output vector in memory order, moved by their shifts, added (see [`Shifted`]).
#[inline(always)]
fn combined<S: Simd, const K: usize, const ST: usize>(
    s: S,
    bias: S::V,
    acc: &[S::V; MAX_K],
    combine: &[S::I; MAX_K],
) -> S::V {
    let mut v = bias;
    for (a, i) in acc.iter().zip(combine).take(groups(K, ST)) {
        v = s.add(v, s.permute_or_zero(*i, *a));
    }
    v
}

/// The index vectors of [`combined`]: for group `g` (shift `g - pad_left` with stride 1,
/// `g - ODD - pad_left / 2` with stride 2), lane `j` of the output (memory order; with
/// `PAIRS`, lane `ox` of half `j / (L/2)`) reads the lane of the accumulator that holds
/// memory lane `j + shift` (with stride 2 the accumulators are in `P` order), or none (index
/// `L`, zero) where `ox + shift` leaves the segment.
#[inline(always)]
fn combine_indices<S: Simd, const K: usize, const ST: usize, const ODD: bool, const PAIRS: bool>(
    s: S,
    pad_left: usize,
) -> [S::I; MAX_K] {
    let l = S::LANES;
    let mut lane_of: [u32; 16] = array(|m| m as u32);
    if ST == 2 {
        // Where `P` puts each memory lane: deinterleave the numbers 0..2L; lane `p` of the
        // evens holds `2 m` for the memory lane `m` it carries.
        let iota: [f32; 32] = array(|i| i as f32);
        let (even, _) = s.deinterleave(s.load(&iota), s.load(&iota[l..]));
        let mut lanes = [0.0f32; 16];
        s.store(&mut lanes, even);
        for (p, &m) in lanes.iter().enumerate().take(l) {
            lane_of[m as usize / 2] = p as u32;
        }
    }
    let seg = if PAIRS { l / 2 } else { l };
    array(|g| {
        let shift = if ST == 1 {
            g as isize - pad_left as isize
        } else {
            g as isize - isize::from(ODD) - (pad_left / 2) as isize
        };
        let mut idx = [l as u32; 16];
        for (j, x) in idx.iter_mut().enumerate().take(l) {
            let src = (j % seg) as isize + shift;
            if (0..seg as isize).contains(&src) {
                *x = lane_of[j - j % seg + src as usize];
            }
        }
        s.indices(&idx)
    })
}

/// The input rows a block of `R` output rows from `base` reads: row `t` is input row `base *
/// ST + t - pad_top` of the plane `src`, or `zeros` where that is padding (or `t` is past the
/// block's `(R - 1) ST + K` rows).
#[inline(always)]
fn block_rows<const K: usize, const ST: usize, const R: usize>(
    src: &[f32],
    base: usize,
    g: &Geom,
    zeros: &[f32],
) -> [*const f32; MAX_IN_ROWS] {
    debug_assert!(src.len() == g.h * g.w);
    // `iy` wraps below zero to a huge value, which the `< h` check rejects.
    let first = (base * ST).wrapping_sub(g.pad_top);
    array(|t| {
        let iy = first.wrapping_add(t);
        if iy < g.h && t < (R - 1) * ST + K {
            src.as_ptr().wrapping_add(iy * g.w)
        } else {
            zeros.as_ptr()
        }
    })
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
    let wv = array(|ky| array(|kx| s.splat(wk[ky * K + kx])));
    (wv, s.splat(data.bias.map_or(0.0, |b| b[ch])))
}
