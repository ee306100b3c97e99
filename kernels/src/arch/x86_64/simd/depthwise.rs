//! Depthwise convolution (one input and one output channel per group), direct SIMD over the
//! output width, for 3x3 and 5x5 windows with stride 1 or 2, dilation 1 and top/left padding
//! smaller than the window. This is the table's entry: it first offers the convolution, with
//! 16 lanes, to [`super::depthwise_small`] (planes at most two vectors wide, every tap a
//! two-source permute: stride 2, and stride 1 on rows wider than a vector), then to
//! [`super::depthwise_stride2`] (3x3 stride 2 read in place, planes of more than
//! 8 output columns), then to [`super::depthwise_lanes`] (channels in the lanes), which takes
//! the other stride-2 convolutions and planes of at most 8 output columns, then with 16 lanes
//! to [`super::depthwise_inplace`], this kernel's
//! variant without the band buffer, which takes stride-1 planes of at most
//! [`super::depthwise_inplace::MAX_OW`] columns; this planar kernel runs the rest (stride 1,
//! wider planes, and every stride-1 plane with AVX2), and anything none specialises goes to
//! the portable kernel. The code below is still generic
//! over the stride `ST` (the stride-2 band layout is described below), but only `ST = 1` is
//! instantiated since the channels-in-lanes kernel took stride 2 over.
//!
//! Algorithm sketch, per channel plane (NCHW, so a plane is contiguous):
//!
//! ```text
//! w[ky][kx] = splat(weight)                           // K*K broadcast vectors
//! for each band of up to 16 output rows:
//!   copy the input rows the band reads into the band buffer, zero-padded on every side
//!   (stride 2: each row split into its even and odd columns, see below)
//!   for each block of R = 4 output rows (the plane's last block overlaps the previous one):
//!     for each chunk of L output columns (L = lanes; the last chunk overlaps too):
//!       acc[0..R] = splat(bias)
//!       for each of the (R-1)*S + K buffer rows the block reads:   // fully unrolled
//!         tap[kx] = one unaligned load per tap                     // K vectors
//!         for each output row r that this row feeds (ky = row - r*S in 0..K):
//!           acc[r] += tap[kx] * w[ky][kx]  for kx in 0..K
//!       store act(acc[r])
//! ```
//!
//! **The band buffer** (the convolution's scratch, [`Conv2d::scratch_len`]) is what keeps the
//! inner loop free of borders: the padding is real zeros in the buffer, so every block, at the
//! edges as much as in the middle, is the same straight-line run of loads and FMAs, with no
//! masks and no row checks, whatever the plane's size. Copying the rows costs one load and one
//! store per input element, against `K*K` FMAs per output; a band (16 output rows) stays in L1.
//! With stride 2 the copy also splits every row into its even and odd padded columns (one
//! deinterleave per input element, rather than one per tap as in a kernel that reads the
//! input in place), so that tap `kx` of output column `ox` is element `ox + kx / 2` of phase
//! `kx % 2`: consecutive outputs read consecutive elements and every tap is again one plain
//! load. In general, tap `kx` is at phase `kx % S`, index `ox + kx / S`.
//!
//! Each loaded tap vector feeds up to `min(R, K)` FMAs with stride 1 instead of one, which
//! makes the block FMA-bound rather than load-bound.
//!
//! Tried on Zen 4 (AVX-512 as two 256-bit halves; 2026-11-24, branch `dw`, commits
//! 43cd4fe..HEAD~1) and not kept, each against this kernel in alternating runs of the
//! kernel bench on a shared machine: reading the taps in place (masked loads at the plane's
//! edges, a row of zeros above and below) instead of copying rows into the band buffer won
//! on the 14x14 and 28x28 MobileNet-v2 layers with AVX-512 (0.42-0.49 of peak against
//! 0.37) but lost on the 112- and 56-wide ones (0.39 against 0.46 on 112) and with AVX2 on
//! most (its masked loads are slow); it is now the variant for narrow planes with AVX-512
//! ([`super::depthwise_inplace`], with the rule's measurements). Also: blocks of 7
//! rows, or 4 rows by 2 chunks (no faster), and stride 2 here with a `deinterleave` of two
//! in-place loads per pair of taps (0.16-0.19 of peak against the channels-in-lanes
//! kernel's 0.19-0.23 with AVX-512, half of it with AVX2). Stride 2 through this kernel with
//! the band copy splitting rows into even and odd columns (a `deinterleave` per pair of input
//! vectors; commit 7dedc10, for more than 16 output columns with AVX-512) won against the
//! channels-in-lanes kernel on the 112 -> 56 layer in alternating runs of one binary at load
//! 5-7 (0.16-0.18 -> 0.19-0.21 of peak) but lost in runs of the two builds one after the
//! other at load 3.5-4 (0.22-0.23 -> 0.20-0.21; 56 -> 28 0.21-0.22 -> 0.18-0.21), so
//! stride 2 stays with the channels-in-lanes kernel.
//!
//! **No remainders.** Blocks and chunks overlap instead of having scalar remainders: a
//! recomputed output is recomputed with the same operations in the same order, hence written
//! with the same value. A plane narrower than a vector (`ow < L`) stores whole vectors anyway:
//! the extra lanes spill into the start of the next output row, or the next plane, which is
//! written later (rows, blocks, bands and planes all go in increasing address order) and so
//! overwrites them; only a store that would pass the end of the output stores just its `ow`
//! lanes.
//!
//! Bias and the cheap activations (ReLU, clip, leaky ReLU) are applied to the accumulators
//! before the store; the kernel is instantiated once per cheap activation so that this costs
//! no branch. Sigmoid and tanh run afterwards as an in-place pass over the output, which
//! saves instantiating the unrolled body for them as well.
//!
//! The whole convolution is one [`Job`], run through [`Simd::vectorize`] in a function of its
//! own whose loops hold the weights as local values: inlined into a larger function, or read
//! through a reference after stores to the output (which LLVM cannot prove disjoint), they
//! were spilled or reloaded and the hot loop ran at about half speed.
//!
//! Differences from the portable kernel: the sum is accumulated with FMAs starting from the
//! bias instead of adding the bias last (rounding differs in the last bits), and a padded tap
//! adds `w * 0.0` where the portable kernel skips it, so only an infinite or NaN *weight* next
//! to padding gives a different result (NaN here).

use super::eltwise;
use super::math::{specialise_cheap, Act};
use super::vector::{array, Job, Simd};
use crate::arch::portable;
use crate::params::{depthwise_band, DepthwiseBand};
use crate::{Activation, Conv2d};

/// Output rows per block: four accumulators, plus nine (3x3) weight vectors and the tap
/// vectors, fill AVX2's sixteen registers.
const ROWS: usize = 4;
/// The largest window side with a specialised kernel.
const MAX_K: usize = 5;
/// The most input rows a block reads: `(ROWS - 1) * 2 + MAX_K`.
const MAX_IN_ROWS: usize = 11;

/// Depthwise conv2d with the portable kernel's signature and semantics (see
/// [`portable::conv2d`]); falls back to it for shapes this kernel does not specialise.
/// `scratch` holds the band buffer; it needs [`Conv2d::scratch_len`] elements.
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
    if super::depthwise_small::conv2d(s, p, input, weight, bias, act, out)
        || super::depthwise_stride2::conv2d(s, p, input, weight, bias, act, scratch, out)
        || super::depthwise_lanes::conv2d(s, p, input, weight, bias, act, scratch, out)
        || super::depthwise_inplace::conv2d(s, p, input, weight, bias, act, scratch, out)
    {
        return;
    }
    let Some(g) = Geom::new::<S>(p) else {
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
    let buf = &mut scratch[..g.band_rows * g.row_len];
    // The buffer's padding is zeros from here on: copies only write image columns (or zeros),
    // and rows outside the image are zeroed when a band needs them.
    buf.fill(0.0);
    // The cheap activations are fused into the store (one instantiation each); sigmoid and
    // tanh run as a second pass.
    specialise_cheap!(s, act, a => by_shape(s, a, &conv, buf, out),
        then eltwise::unary_inplace(s, act, out));
}

/// The convolution's inputs, validated to the lengths its shape needs, with the variant's
/// geometry `G`.
pub(super) struct Data<'a, G> {
    pub(super) g: &'a G,
    pub(super) c: usize,
    pub(super) input: &'a [f32],
    pub(super) weight: &'a [f32],
    pub(super) bias: Option<&'a [f32]>,
}

/// Picks the block shape, then the window and stride. Planes wider than a vector take two
/// chunks side by side in 3 rows (six accumulators: enough independent FMA chains to cover
/// the FMA latency); narrower ones one chunk in 4 rows; planes under 4 rows, 1 row.
#[inline(always)]
fn by_shape<S: Simd, A: Act<S>>(
    s: S,
    act: A,
    conv: &Data<'_, Geom>,
    buf: &mut [f32],
    out: &mut [f32],
) {
    macro_rules! go {
        ($k:literal, $st:literal) => {{
            macro_rules! job {
                ($r:literal, $c:literal) => {
                    s.vectorize(Planes::<'_, '_, A, $k, $st, $r, $c> {
                        conv,
                        act,
                        buf,
                        out,
                    })
                };
            }
            let (oh, ow) = (conv.g.oh, conv.g.ow);
            if oh >= 3 && ow > S::LANES {
                job!(3, 2)
            } else if oh >= 4 {
                job!(4, 1)
            } else {
                job!(1, 1)
            }
        }};
    }
    // Stride 1 only: `Geom::new` leaves stride 2 to the channels-in-lanes kernel.
    match conv.g.k {
        3 => go!(3, 1),
        _ => go!(5, 1),
    }
}

/// The shape of one plane's convolution and of the band buffer, validated so that the index
/// arithmetic below cannot overflow.
struct Geom {
    k: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    pad_top: usize,
    pad_left: usize,
    /// Elements per phase row of the band buffer (see [`depthwise_band`]).
    phase_len: usize,
    /// Elements per buffer row: `stride` phases.
    row_len: usize,
    /// Buffer rows.
    band_rows: usize,
    /// Image columns copied into a buffer row: those a tap can read (at most `w`).
    copy_w: usize,
}

/// The band buffer of `p` if it is a convolution for the planar kernels (this one and
/// [`super::depthwise_inplace`]): a depthwise convolution they specialise (see
/// [`depthwise_band`]), stride 1 (the channels-in-lanes kernel takes stride 2 and narrow
/// planes, see `lanes_band`, and the scratch is sized for it there), not empty (nothing to
/// vectorise), and small enough that no index arithmetic below can overflow.
pub(super) fn planar_shape(p: &Conv2d) -> Option<DepthwiseBand> {
    if p.stride[0] != 1 || crate::params::lanes_band(p).is_some() {
        return None;
    }
    let band = depthwise_band(p)?;
    // 2^40 per dimension is far beyond any real tensor and keeps every
    // `coordinate * stride + window + lanes` comfortably inside `isize`.
    const LIMIT: usize = 1 << 40;
    let dims = [p.h, p.w, p.out_h, p.out_w];
    if dims.iter().any(|&d| d >= LIMIT) {
        return None;
    }
    let planes = p.batch.checked_mul(p.c_out)?;
    planes.checked_mul(p.h.checked_mul(p.w)?)?;
    planes.checked_mul(p.out_h.checked_mul(p.out_w)?)?;
    if planes == 0 || p.h == 0 || p.w == 0 || p.out_h == 0 || p.out_w == 0 {
        return None;
    }
    Some(band)
}

impl Geom {
    /// `None` if the portable kernel should run instead: not a depthwise convolution this
    /// kernel specialises (see [`depthwise_band`]), an empty tensor (nothing to vectorise), or
    /// sizes so large that the index arithmetic could overflow.
    fn new<S: Simd>(p: &Conv2d) -> Option<Geom> {
        let band = planar_shape(p)?;
        let (k, st) = (p.kh, p.stride[0]);
        // Padded columns a tap reads: up to `(max(ow, L) - 1) * st + k - 1` (the chunks cover
        // `max(ow, L)` columns). Image columns past that are not copied.
        let cols_read = (p.out_w.max(S::LANES) - 1) * st + k;
        let copy_w = p.w.min(cols_read.saturating_sub(p.pad[1]));
        debug_assert!(S::LANES <= crate::params::DEPTHWISE_MAX_LANES);
        Some(Geom {
            k,
            h: p.h,
            w: p.w,
            oh: p.out_h,
            ow: p.out_w,
            pad_top: p.pad[0],
            pad_left: p.pad[1],
            phase_len: band.phase_len,
            row_len: band.phase_len * st,
            band_rows: band.rows,
            copy_w,
        })
    }
}

/// The whole convolution for window `K`, stride `ST`, and blocks of `R` output rows by `C`
/// chunks.
struct Planes<'a, 'b, A, const K: usize, const ST: usize, const R: usize, const C: usize> {
    conv: &'a Data<'b, Geom>,
    act: A,
    buf: &'a mut [f32],
    out: &'a mut [f32],
}

/// Output rows per band: four blocks of [`ROWS`] rows. Must match [`depthwise_band`].
const BAND_OUT_ROWS: usize = 16;

impl<S: Simd, A: Act<S>, const K: usize, const ST: usize, const R: usize, const C: usize> Job<S>
    for Planes<'_, '_, A, K, ST, R, C>
{
    type Output = ();

    /// Bounds, argued once for the raw accesses below and in [`RowCopy::row`] and [`block`]:
    ///
    /// * input: plane `p` is `input[p * h * w..][..h * w]`; a copied row `y < h` reads
    ///   `copy_w <= w` elements from `y * w`.
    /// * buffer: `band_rows * row_len` elements. A band reads `rows <= band_rows` buffer rows
    ///   (`depthwise_band`); a copied row writes inside its buffer row ([`RowCopy::row`]);
    ///   a block's loads end at most `(K - 1) / ST + L` elements after `ox <= max(ow, L) - L`
    ///   in a phase row of `phase_len >= max(ow, 16) + K + 16` elements.
    /// * output: plane `p` is `out[p * oh * ow..][..oh * ow]`; a block stores `L` lanes at
    ///   `(oy + r) * ow + ox` when that ends inside `out`, which it does except for a plane
    ///   narrower than a vector, and `ow` lanes otherwise.
    #[inline(always)]
    fn run(self, s: S) {
        // Stride 2 goes to the channels-in-lanes kernel; the row copy only writes stride 1's
        // single phase.
        const { assert!(K <= MAX_K && K % 2 == 1 && ST == 1 && R <= ROWS && C <= 2) };
        let Data {
            g,
            c,
            input,
            weight,
            bias,
        } = *self.conv;
        let (buf, out) = (self.buf, self.out);
        let lanes = S::LANES;
        let Geom {
            h,
            w,
            oh,
            ow,
            pad_top,
            row_len,
            band_rows,
            ..
        } = *g;
        // Blocks: `R` output rows from row `oy0(i)`; the last one ends at the last row.
        let blocks = oh.div_ceil(R);
        let oy0 = |i: usize| (i * R).min(oh - R);
        let blocks_per_band = BAND_OUT_ROWS / R;
        let bands = blocks.div_ceil(blocks_per_band);
        // Column groups: `C` chunks of `L` output columns; chunk `c` of group `j` starts at
        // `ox(j)[c]`. The last group ends at the last column (its chunks may overlap the
        // previous group's or each other), or starts at 0 if the plane is narrower than a
        // vector (then `C` is 1).
        debug_assert!(C == 1 || ow > lanes);
        let groups = ow.div_ceil(C * lanes);
        let ox = |j: usize| -> [usize; C] {
            let first = (j * C * lanes).min(ow.saturating_sub(C * lanes));
            array(|c| (first + c * lanes).min(ow.saturating_sub(lanes)))
        };
        let (in_plane, out_plane) = (h * w, oh * ow);
        let planes = out.len() / out_plane;
        debug_assert!(input.len() == planes * in_plane && buf.len() == band_rows * row_len);
        let copy = RowCopy::new(s, g);
        // By value, so that the loops keep them in registers: read through `g`, they were
        // reloaded after every store to the output (raw pointers may alias anything).
        let strides = Strides {
            row_len: g.row_len,
            phase_len: g.phase_len,
            ow: g.ow,
        };
        let (src0, buf0, dst0) = (input.as_ptr(), buf.as_mut_ptr(), out.as_mut_ptr());
        let out_end = dst0.wrapping_add(out.len());
        for p in 0..planes {
            let ch = p % c;
            let mut wv = [s.zero(); MAX_K * MAX_K];
            for (v, &x) in wv.iter_mut().zip(&weight[ch * K * K..][..K * K]) {
                *v = s.splat(x);
            }
            let b = s.splat(bias.map_or(0.0, |b| b[ch]));
            let src = src0.wrapping_add(p * in_plane);
            let dst = dst0.wrapping_add(p * out_plane);
            for band in 0..bands {
                let first = band * blocks_per_band;
                let last = (first + blocks_per_band).min(blocks) - 1;
                // Padded input rows `y0..y0 + rows` go to buffer rows `0..rows`; of those,
                // the image rows (padded `pad_top..pad_top + h`) to buffer rows `top..bottom`.
                let y0 = oy0(first) * ST;
                let rows = (oy0(last) + R - 1) * ST + K - y0;
                debug_assert!(rows <= band_rows);
                let top = pad_top.saturating_sub(y0).min(rows);
                let bottom = (pad_top + h).saturating_sub(y0).clamp(top, rows);
                if bands > 1 {
                    // Rows of padding: zero (this band's buffer rows held image rows before).
                    buf[..top * row_len].fill(0.0);
                    buf[bottom * row_len..rows * row_len].fill(0.0);
                }
                // Image row of buffer row `top` (if `top < bottom`).
                let y_lo = (y0 + top).saturating_sub(pad_top);
                let (y_hi, y_lo) = (y_lo + (bottom - top), y_lo);
                let mut from = src.wrapping_add(y_lo * w);
                let mut to = buf0.wrapping_add(top * row_len);
                for _ in y_lo..y_hi {
                    // SAFETY: see the bounds above.
                    unsafe { copy.row(s, from, to) };
                    from = from.wrapping_add(w);
                    to = to.wrapping_add(row_len);
                }
                for i in first..=last {
                    let oy = oy0(i);
                    let rows = buf0.wrapping_add((oy * ST - y0) * row_len);
                    let at = dst.wrapping_add(oy * ow);
                    for j in 0..groups {
                        // SAFETY: see the bounds above.
                        unsafe {
                            block::<S, A, K, ST, R, C>(
                                s,
                                &wv,
                                b,
                                self.act,
                                rows,
                                strides,
                                ox(j),
                                at,
                                out_end,
                            )
                        };
                    }
                }
            }
        }
    }
}

/// The strides a block needs, passed by value.
#[derive(Clone, Copy)]
struct Strides {
    row_len: usize,
    phase_len: usize,
    ow: usize,
}

/// Copies input rows into buffer rows at the padded column offset.
struct RowCopy<S: Simd> {
    /// The lanes of the last, partial vector of a row.
    tail: S::M,
    /// Where the tail starts.
    tail_at: usize,
    /// Columns copied.
    n: usize,
    /// Where the row's first element goes in the buffer row (`pad_left`).
    at: usize,
}

impl<S: Simd> RowCopy<S> {
    #[inline(always)]
    fn new(s: S, g: &Geom) -> Self {
        let (l, n) = (S::LANES, g.copy_w);
        // Whole vectors cover `0..tail_at`; the tail covers the rest with a masked load.
        let tail_at = n - n % l;
        Self {
            tail: s.mask_range(0, n - tail_at),
            tail_at,
            n,
            at: g.pad_left,
        }
    }

    /// Copies one input row into one buffer row at the padded column offset. Writes the
    /// image columns, and zeros at padding positions after them; nothing else.
    ///
    /// # Safety
    ///
    /// `src..src + n` must be readable and the buffer row `dst..dst + row_len` writable.
    /// (The writes stay inside it: `pad_left..pad_left + n` rounded up to whole vectors,
    /// `pad_left + n + L <= phase_len`; see `depthwise_band`.)
    #[inline(always)]
    unsafe fn row(&self, s: S, src: *const f32, dst: *mut f32) {
        let l = S::LANES;
        // Loads at `x < tail_at` read whole vectors that end at or before `tail_at <= n`; the
        // tail's mask selects only columns below `n`. Stores are inside the buffer row, as
        // argued in the doc comment.
        let dst = dst.wrapping_add(self.at);
        let mut x = 0;
        while x < self.tail_at {
            // SAFETY: a whole vector inside both rows (see above).
            unsafe { s.store_ptr(dst.add(x), s.load_ptr(src.add(x))) };
            x += l;
        }
        if x < self.n {
            // SAFETY: the masked tail (see above).
            unsafe {
                let v = s.load_masked_ptr(src.add(x), self.tail);
                s.store_ptr(dst.add(x), v);
            }
        }
    }
}

/// `R` output rows by `C` vectors of columns, from the buffer rows at `rows` (the block's
/// first input row), stored at `out + r * ow + ox[c]`.
///
/// Register budget (AVX2, 3x3): `R * C` accumulators (6 or 4), nine weights and the tap in
/// use. Each accumulator is a chain of `K * K` dependent FMAs; with six of them in flight,
/// and the next block's starting while this one ends, the FMA latency is covered.
///
/// # Safety
///
/// The `(R - 1) * ST + K` buffer rows from `rows` must be readable for `ox[c] + (K - 1) / ST
/// + L` elements in each phase, and `out + r * ow + ox[c]` writable for `L` lanes where that
/// ends at or before `out_end`, else for `min(ow, L)` lanes.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn block<
    S: Simd,
    A: Act<S>,
    const K: usize,
    const ST: usize,
    const R: usize,
    const C: usize,
>(
    s: S,
    wv: &[S::V; MAX_K * MAX_K],
    bias: S::V,
    act: A,
    rows: *const f32,
    at: Strides,
    ox: [usize; C],
    out: *mut f32,
    out_end: *mut f32,
) {
    const { assert!((R - 1) * ST + K <= MAX_IN_ROWS) };
    let mut acc = [[bias; C]; R];
    // Fully unrolled over the input rows, so that every `ky` below is a constant and the
    // accumulators stay in registers.
    macro_rules! input_rows {
        ($($t:literal)*) => {$(
            if $t < (R - 1) * ST + K {
                let row = rows.wrapping_add($t * at.row_len);
                // SAFETY: one of the block's rows; the caller's contract.
                unsafe {
                    input_row::<S, K, ST, R, C, $t>(s, wv, row, at.phase_len, ox, &mut acc)
                };
            }
        )*};
    }
    input_rows!(0 1 2 3 4 5 6 7 8 9 10);
    // SAFETY: the caller's contract.
    unsafe { store_block(s, act, &acc, ox, at.ow, out, out_end) };
}

/// Stores a block's accumulators, `act` applied, at `out + r * ow + ox[c]`: `L` lanes where
/// that ends at or before `out_end`, else `min(ow, L)` (the end of the output of a plane
/// narrower than a vector). Lanes past a row's `ow` outputs (such a plane) land on later
/// outputs, which are written after this, rows, blocks and planes going in increasing address
/// order.
///
/// # Safety
///
/// `out + r * ow + ox[c]` must be writable for `L` lanes where that ends at or before
/// `out_end`, else for `min(ow, L)` lanes.
#[inline(always)]
pub(super) unsafe fn store_block<S: Simd, A: Act<S>, const R: usize, const C: usize>(
    s: S,
    act: A,
    acc: &[[S::V; C]; R],
    ox: [usize; C],
    ow: usize,
    out: *mut f32,
    out_end: *mut f32,
) {
    let l = S::LANES;
    for (r, acc) in acc.iter().enumerate() {
        for (&v, &ox) in acc.iter().zip(&ox) {
            let v = act.apply(s, v);
            let dst = out.wrapping_add(r * ow + ox);
            if (out_end as usize).wrapping_sub(dst as usize) >= l * size_of::<f32>() {
                // SAFETY: `L` lanes that end inside the output (the caller's contract).
                unsafe { s.store_ptr(dst, v) };
            } else {
                // SAFETY: the end of the output, where `ow < L` (a whole chunk of a wider
                // plane ends inside its row): `min(ow, L)` lanes are writable.
                unsafe { s.store_first_ptr(dst, ow.min(l), v) };
            }
        }
    }
}

/// Adds buffer row `T` of a block (`row`) into the accumulators of the output rows it feeds.
///
/// # Safety
///
/// `row + phase * phase_len + ox[c] + kx / ST` must be readable for `L` elements for every
/// tap `kx` and chunk `c`.
#[inline(always)]
unsafe fn input_row<
    S: Simd,
    const K: usize,
    const ST: usize,
    const R: usize,
    const C: usize,
    const T: usize,
>(
    s: S,
    wv: &[S::V; MAX_K * MAX_K],
    row: *const f32,
    phase_len: usize,
    ox: [usize; C],
    acc: &mut [[S::V; C]; R],
) {
    // Tap by tap, each used at once by every output row it feeds, so that one tap register
    // is live at a time.
    for kx in 0..K {
        for (c, &ox) in ox.iter().enumerate() {
            let at = (kx % ST) * phase_len + kx / ST + ox;
            // SAFETY: the caller's contract.
            let tap = unsafe { s.load_ptr(row.wrapping_add(at)) };
            for (r, a) in acc.iter_mut().enumerate() {
                if T >= r * ST && T - r * ST < K {
                    a[c] = s.fmadd(tap, wv[(T - r * ST) * K + kx], a[c]);
                }
            }
        }
    }
}
