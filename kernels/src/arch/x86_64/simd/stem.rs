//! The direct kernel for a network's stem: a 3x3 or 7x7 stride-2 convolution of a few input
//! channels (an RGB image) into many output channels, MobileNet-v2's 3 -> 32 and ShuffleNet-v2's
//! 3 -> 24 (3x3), ResNet's 3 -> 64 and SqueezeNet 1.0's 3 -> 96 (7x7) on 224x224. The x86
//! `conv2d` entries offer every non-depthwise convolution here first and run the GEMM
//! (implicit im2col, `avx2::im2col`) on what this kernel declines.
//!
//! Algorithm sketch (NCHW, one image; `L` lanes, blocks of `CO` output channels by `C` chunks
//! of `L` output columns):
//!
//! ```text
//! wt[block][ci, ky, kx][co] = the weights, transposed once per call
//! for each output row oy:
//!   rows[ci][ky] = input row 2 oy + ky - pad_top of channel ci, or none outside the image
//!   for each block of CO output channels (the last block overlaps the previous one):
//!     for each group of C chunks of L output columns (the last group overlaps):
//!       x0[c] = 2 * ox[c] - pad_left      // first image column chunk c's taps read
//!       acc[0..CO][0..C] = splat(bias)
//!       for each ci, ky with a row inside the image:              // masked loads at the edges
//!         a, b = load(row + x0[c]), load(row + x0[c] + L)          // 2L columns
//!         tap0, tap1 = even(a ++ b), odd(a ++ b)                   // columns 2j, 2j + 1
//!         tap2 = even(load(row + x0[c] + 2) ++ load(... + 2 + L))  // columns 2j + 2
//!         (7x7: the pairs from x0[c] + 2, + 4, + 6 give taps 2 to 6)
//!         acc[co][c] += tap[kx][c] * wt[block][ci, ky, kx][co]  for every co, kx, c
//!       store act(acc[co][c]) at out[co][oy][ox[c]..]
//! ```
//!
//! A 7x7 stem whose output channels are a multiple of 64 (ResNet's, DenseNet-121's and
//! Inception-v2's), or of 32 on AMD Zen 5 (SqueezeNet 1.0's 3 -> 96 too), runs
//! [`super::stem_lanes`] instead, which keeps the output channels along the lanes; this kernel
//! takes the others (SqueezeNet 1.0's 3 -> 96 elsewhere, the 3x3 stems).
//!
//! **Why.** As a GEMM the stem is `W[c_out, 27] * im2col[27, oh*ow]`: a reduction of 27, so
//! the tiles spend much of their time loading, storing and finishing `C` rather than in FMAs,
//! and the implicit im2col packer gathers every stride-2 tap into the panel first. Here the
//! taps are split from the input rows in registers (`K` two-source permutes per input row and
//! chunk, as in [`super::depthwise_stride2`]) and each tap vector feeds `CO` FMAs, the weights
//! broadcast from memory; every output is stored once, bias and activation applied.
//!
//! **The rule**: 16 lanes (AVX-512), `groups == 1`, a 3x3 window over at most [`MAX_C_IN`]
//! input channels or a 7x7 one over at most [`MAX_C_IN_7`], stride 2 both ways, no dilation, top
//! and left padding below the window's side, at least 16 output columns, [`CO_MIN`] to
//! [`MAX_C_OUT`] output channels. On several threads the output rows are split into tasks of
//! whole rows (about four per thread), each computed as on one thread: the bits do not depend
//! on the thread count (until stop 19 this kernel ran on one thread only and the GEMM took the
//! stems on two, so a network's output changed with its thread count). A 7x7 window runs one
//! channel block at a time over a band of rows (its weights are five times a 3x3's), a 3x3 one
//! all blocks per output row. Figures in
//! docs/performance.md, "MobileNet-v2: the stem and the classifier" and "7x7 stems".
//!
//! Differences from the portable kernel: the sum starts from the bias and is accumulated with
//! FMAs in the order (ci, ky, kx), and a padded tap adds `w * 0.0` or is skipped (a row outside
//! the image).

use super::depthwise_stride2::{load_masks_n, reads_outside_k, taps_n};
use super::eltwise;
use super::math::{specialise_cheap, Act, Ident};
use super::stem_lanes::{self, Shape, StemLanes};
use super::vector::{array, Job, Simd};
use crate::arch::portable::epilogue::add_residual;
use crate::pack::depth_blocks;
use crate::par::{worth_splitting, Parallel, SharedMut};
use crate::{Activation, Conv2d};
use core::ops::Range;

/// The most input channels this kernel takes with a 3x3 window: beyond a few, the reduction
/// is long enough for the GEMM.
pub(crate) const MAX_C_IN: usize = 4;
/// The most input channels this kernel takes with a 7x7 window (an RGB image): 147 taps.
pub(crate) const MAX_C_IN_7: usize = 3;
/// The fewest output channels this kernel takes: its narrowest channel block.
pub(crate) const CO_MIN: usize = 8;
/// The most output channels this kernel takes (a stem's 16-96), so that every block's weights
/// fit one array on the stack.
pub(crate) const MAX_C_OUT: usize = 96;
/// The most channel blocks: [`MAX_C_OUT`] in blocks of [`CO_MIN`].
const MAX_BLOCKS: usize = MAX_C_OUT / CO_MIN;
/// The taps of a 3x3 window over [`MAX_C_IN`] channels.
const TAPS_3: usize = MAX_C_IN * 9;
/// The taps of a 7x7 window over [`MAX_C_IN_7`] channels.
pub(super) const TAPS_7: usize = MAX_C_IN_7 * 49;
/// The output rows a 7x7 window computes per channel block before the next block: the band's
/// input rows (`2 BAND_7 + 5` of each channel, 56 KB for an RGB 224x224 image) stay in L2.
const BAND_7: usize = 8;
/// The most input rows one output row reads: `c_in * K`, the larger of a 3x3 window's over
/// [`MAX_C_IN`] channels and a 7x7 window's over [`MAX_C_IN_7`].
const MAX_ROWS: usize = if MAX_C_IN * 3 > MAX_C_IN_7 * 7 {
    MAX_C_IN * 3
} else {
    MAX_C_IN_7 * 7
};

/// Runs the stem convolution (the portable kernel's signature and semantics, see
/// [`crate::arch::portable::conv2d`], without scratch; with `res`, laid out as `out`,
/// [`crate::conv2d_res`]'s) and returns `true` if its shape is one this
/// kernel takes (see the module docs); returns `false`, having written nothing, otherwise.
/// The weights are `[c_out, c_in, 3, 3]` row-major, which is also the GEMM's depth-blocked
/// layout for so short a reduction (one depth block).
#[allow(clippy::too_many_arguments)] // conv2d's contract plus the vector token.
#[inline(always)]
pub(crate) fn conv2d<S: Simd<V: Sync> + Sync>(
    s: S,
    par: &dyn Parallel,
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    res: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
) -> bool {
    if S::LANES != 16 {
        return false;
    }
    let Some(g) = Geom::new::<S>(p) else {
        return false;
    };
    // Slicing up front turns a short buffer into a panic here, like the portable kernel's
    // indexing; every raw access below stays inside these slices.
    let conv = Data {
        g: &g,
        input: &input[..g.batch * g.c_in * g.h * g.w],
        weight: &weight[..g.c_out * g.c_in * g.k * g.k],
        bias: bias.map(|b| &b[..g.c_out]),
    };
    let out = &mut out[..g.batch * g.c_out * g.oh * g.ow];
    if let Some(r) = res {
        // No stem has a residual operand: it is added, and the activation applied, in a second
        // pass, as for the depthwise kernels.
        by_shape(s, par, Ident, &conv, out);
        add_residual(p, out, r, act);
        return true;
    }
    // The cheap activations are fused into the store (one instantiation each); sigmoid and
    // tanh run as a second pass.
    specialise_cheap!(s, act, a => by_shape(s, par, a, &conv, out),
        then eltwise::unary_inplace(s, act, out));
    true
}

/// Runs [`stem_lanes`] if it takes the stem; else picks the block shape from the number of
/// output channels: one chunk of 16 columns by 16
/// or 12 channels, whichever divides them (16 if neither does and there are at least 16; the
/// last block overlaps the previous one), else 8.
///
/// Measured on the AMD EPYC Zen 4 (AVX-512; `KILN_BENCH_CLOCK=thread cargo bench -p
/// kiln-kernels --features std --bench kernels -- stem/`, load 3-4, GFLOP/s): 3 -> 32 on 224,
/// 16 x 1 81-87, 12 x 1 50-75 (a third block of 8 channels recomputed), 8 x 2 67-72, 8 x 3
/// 51-57, 12 x 2 30 and 24 x 1 43-45 (more accumulators than registers); 3 -> 24, 12 x 1 89, 16 x 1
/// 63-70, 8 x 2 70-76, 24 x 1 59-66. Wider blocks of channels spend fewer permutes per FMA
/// (three per input row and chunk, shared by the block's `3 CO` FMAs).
#[inline(always)]
fn by_shape<S: Simd + Sync, A: Act<S> + Sync>(
    s: S,
    par: &dyn Parallel,
    act: A,
    conv: &Data<'_>,
    out: &mut [f32],
) {
    // Tasks of whole output rows (every image, every channel block of them): each output is
    // computed as on one thread, so the bits do not depend on the number of threads.
    let g = conv.g;
    let fmas = [g.c_out, g.oh, g.ow, g.c_in, g.k * g.k]
        .iter()
        .fold(g.batch, |n, &d| n.saturating_mul(d));
    let tasks = if worth_splitting(par, fmas) {
        (4 * par.threads()).min(g.oh)
    } else {
        1
    };
    let out = SharedMut::new(out);
    let out = &out;
    macro_rules! job {
        ($co:literal, $c:literal) => {
            par.run(tasks, &|t| {
                let rows = t * g.oh / tasks..(t + 1) * g.oh / tasks;
                if g.k == 7 {
                    s.vectorize(Stem::<'_, '_, A, $co, $c, 7, 8> {
                        conv,
                        act,
                        out,
                        rows,
                    })
                } else {
                    s.vectorize(Stem::<'_, '_, A, $co, $c, 3, 4> {
                        conv,
                        act,
                        out,
                        rows,
                    })
                }
            })
        };
    }
    let c_out = g.c_out;
    macro_rules! lanes_job {
        ($v:literal, $r:literal) => {
            par.run(tasks, &|t| {
                let rows = t * g.oh / tasks..(t + 1) * g.oh / tasks;
                s.vectorize(StemLanes::<'_, '_, A, $v, $r, 7> {
                    conv,
                    act,
                    out,
                    rows,
                })
            })
        };
    }
    match stem_lanes::takes(S::LANES, g.k, c_out) {
        Some(Shape::Wide) => return lanes_job!(4, 4),
        Some(Shape::Tall) => return lanes_job!(2, 8),
        None => {}
    }
    if c_out.is_multiple_of(16) {
        job!(16, 1)
    } else if c_out.is_multiple_of(12) {
        job!(12, 1)
    } else if c_out >= 16 {
        job!(16, 1)
    } else {
        job!(8, 1)
    }
}

/// The operands of one stem convolution.
pub(super) struct Data<'a> {
    pub(super) g: &'a Geom,
    pub(super) input: &'a [f32],
    pub(super) weight: &'a [f32],
    pub(super) bias: Option<&'a [f32]>,
}

/// The shape of the convolution, validated so that the index arithmetic below cannot overflow.
pub(super) struct Geom {
    pub(super) batch: usize,
    pub(super) c_in: usize,
    pub(super) c_out: usize,
    pub(super) h: usize,
    pub(super) w: usize,
    pub(super) oh: usize,
    pub(super) ow: usize,
    /// The window side, 3 or 7.
    pub(super) k: usize,
    pub(super) pad_top: usize,
    pub(super) pad_left: usize,
}

impl Geom {
    /// `None` if the GEMM should run: not a stem this kernel takes (module docs), an empty
    /// tensor, or sizes so large that the index arithmetic could overflow.
    fn new<S: Simd>(p: &Conv2d) -> Option<Geom> {
        let max_c_in = match p.kh {
            3 => MAX_C_IN,
            7 => MAX_C_IN_7,
            _ => return None,
        };
        let k = p.kh;
        let taps = p.c_in.checked_mul(k * k)?;
        let shape = p.groups == 1
            && (1..=max_c_in).contains(&p.c_in)
            && (CO_MIN..=MAX_C_OUT).contains(&p.c_out)
            && p.kw == k
            && p.stride == [2, 2]
            && p.dilation == [1, 1]
            && p.pad[0] < k
            && p.pad[1] < k
            && p.out_w >= S::LANES
            // One depth block: the depth-blocked weights are the rows as they are.
            && depth_blocks(taps).0 == 1;
        if !shape {
            return None;
        }
        // 2^40 per dimension is far beyond any real tensor and keeps every offset computed
        // below inside `isize`.
        const LIMIT: usize = 1 << 40;
        let dims = [p.batch, p.h, p.w, p.out_h, p.out_w, p.c_out];
        if dims.iter().any(|&d| d >= LIMIT || d == 0) {
            return None;
        }
        p.batch
            .checked_mul(p.c_in)?
            .checked_mul(p.h.checked_mul(p.w)?)?;
        p.batch
            .checked_mul(p.c_out)?
            .checked_mul(p.out_h.checked_mul(p.out_w)?)?;
        Some(Geom {
            batch: p.batch,
            c_in: p.c_in,
            c_out: p.c_out,
            h: p.h,
            w: p.w,
            oh: p.out_h,
            ow: p.out_w,
            k,
            pad_top: p.pad[0],
            pad_left: p.pad[1],
        })
    }
}

/// The whole convolution for blocks of `CO` output channels by `C` chunks of columns, with a
/// `K`x`K` window (`N` loads per input row and chunk, [`taps_n`]).
struct Stem<'a, 'b, A, const CO: usize, const C: usize, const K: usize, const N: usize> {
    conv: &'a Data<'b>,
    act: A,
    /// The whole output, of which this job writes output rows `rows` of every plane.
    out: &'a SharedMut<'b>,
    rows: Range<usize>,
}

impl<S: Simd, A: Act<S>, const CO: usize, const C: usize, const K: usize, const N: usize> Job<S>
    for Stem<'_, '_, A, CO, C, K, N>
{
    type Output = ();

    /// Bounds, argued once for the raw accesses below and in [`block`]:
    ///
    /// * input: channel `ci` of image `n` is `input[(n * c_in + ci) * h * w..][..h * w]`; its
    ///   row `y` is used only when `y < h`, at columns `x0[c] + d + j` for the loads' offsets
    ///   `d` and lanes `j < L`, only where that is in `0..w`: an edge group's masks select
    ///   exactly those lanes, and an inner group has all of them there.
    /// * weights: channel block `co0..co0 + CO` (`co0 <= c_out - CO`) reads
    ///   `weight[co * taps + (ci * K + ky) * K + kx]`, `taps = c_in * K * K`, inside
    ///   `c_out * taps` (copied into the blocks' arrays with slice indexing).
    /// * output: `out + ((n * c_out + co) * oh + oy) * ow + ox[c]` for `L` lanes, with
    ///   `ox[c] <= ow - L`: inside output plane `co` of image `n`, in row `oy` of this job's
    ///   `rows`, which no other job of the same call writes (the tasks' ranges are disjoint).
    #[inline(always)]
    fn run(self, s: S) {
        let Data {
            g,
            input,
            weight,
            bias,
        } = *self.conv;
        let Geom {
            batch,
            c_in,
            c_out,
            h,
            w,
            oh,
            ow,
            k: _,
            pad_top,
            pad_left,
        } = *g;
        debug_assert!(g.k == K && ow >= S::LANES && c_out >= CO && c_in * K <= MAX_ROWS);
        debug_assert!(c_out.div_ceil(CO) <= MAX_BLOCKS);
        let taps = c_in * K * K;
        let in_plane = h * w;
        // Channel blocks: the last one ends at the last channel.
        let blocks = c_out.div_ceil(CO);
        let co0 = |i: usize| (i * CO).min(c_out - CO);
        let src0 = input.as_ptr();
        // A block's bias, and its weights tap-major, `wt[t][co]` for tap `t = (ci, ky, kx)`, so
        // that the FMAs broadcast them from one base register at constant offsets (one pointer
        // per channel's row would need more registers than there are).
        let fill = |i: usize, wt: &mut [[f32; CO]], b: &mut [f32; CO]| {
            let co0 = co0(i);
            for (co, b) in b.iter_mut().enumerate() {
                *b = bias.map_or(0.0, |b| b[co0 + co]);
            }
            for (t, taps_t) in wt.iter_mut().take(taps).enumerate() {
                for (co, x) in taps_t.iter_mut().enumerate() {
                    *x = weight[(co0 + co) * taps + t];
                }
            }
        };
        // Input row `ci * K + ky` of output row `oy`, or null outside the image.
        let rows = |n: usize, oy: usize| -> [*const f32; MAX_ROWS] {
            let src = src0.wrapping_add(n * c_in * in_plane);
            array(|t| {
                let (ci, ky) = (t / K, t % K);
                let y = (2 * oy + ky).wrapping_sub(pad_top);
                if ci < c_in && y < h {
                    src.wrapping_add(ci * in_plane + y * w)
                } else {
                    core::ptr::null()
                }
            })
        };
        let row = Row::<CO, C, K, N> {
            c_in,
            w,
            ow,
            out_plane: oh * ow,
            pad_left,
        };
        assert!(self.out.len() >= batch * c_out * oh * ow && self.rows.end <= oh);
        let dst0 = self.out.as_ptr();
        let to = |n: usize, i: usize, oy: usize| {
            dst0.wrapping_add((n * c_out + co0(i)) * oh * ow + oy * ow)
        };
        if K == 3 {
            // Output rows in order, and in each all its blocks: the input is read row after
            // row (what the hardware prefetchers follow; an image is not in cache when a network
            // starts), and each input row serves every block while it is in L1.
            let mut bias_of = [[0.0f32; CO]; MAX_BLOCKS];
            let mut wt = [[[0.0f32; CO]; TAPS_3]; MAX_BLOCKS];
            for i in 0..blocks {
                fill(i, &mut wt[i], &mut bias_of[i]);
            }
            for n in 0..batch {
                for oy in self.rows.clone() {
                    let rows = rows(n, oy);
                    for i in 0..blocks {
                        // SAFETY: see the bounds above.
                        unsafe { row.run(s, self.act, &wt[i], &bias_of[i], &rows, to(n, i, oy)) };
                    }
                }
            }
        } else {
            // A 7x7 window's weights are five times as many (9.4 KB a block of 16 channels):
            // one block's at a time, over a band of output rows, every block in turn before
            // the next band, so the image is still read once, in order, and a band's input
            // rows stay in L2 for every block.
            let mut bias_of = [0.0f32; CO];
            let mut wt = [[0.0f32; CO]; TAPS_7];
            let Range { start, end } = self.rows;
            for n in 0..batch {
                for band in (start..end).step_by(BAND_7) {
                    for i in 0..blocks {
                        fill(i, &mut wt, &mut bias_of);
                        for oy in band..(band + BAND_7).min(end) {
                            let rows = rows(n, oy);
                            // SAFETY: see the bounds above.
                            unsafe { row.run(s, self.act, &wt, &bias_of, &rows, to(n, i, oy)) };
                        }
                    }
                }
            }
        }
    }
}

/// One output row of one channel block: its column groups.
struct Row<const CO: usize, const C: usize, const K: usize, const N: usize> {
    c_in: usize,
    w: usize,
    ow: usize,
    out_plane: usize,
    pad_left: usize,
}

impl<const CO: usize, const C: usize, const K: usize, const N: usize> Row<CO, C, K, N> {
    /// Output row `to` (the block's first channel; the others `out_plane` apart) from the
    /// input rows `rows[ci * K + ky]` (null: outside the image), with a block's tap-major
    /// weights `wt` (`c_in * K * K` taps) and its bias.
    ///
    /// # Safety
    ///
    /// Every non-null row is a row of `w` readable columns, `c_in * K <= MAX_ROWS`, `wt` holds
    /// `c_in * K * K` taps, and `to + co * out_plane` is writable for `ow` columns, `co < CO`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn run<S: Simd, A: Act<S>>(
        &self,
        s: S,
        act: A,
        wt: &[[f32; CO]],
        bias: &[f32; CO],
        rows: &[*const f32; MAX_ROWS],
        to: *mut f32,
    ) {
        let lanes = S::LANES;
        let (w, ow) = (self.w, self.ow);
        // Column groups: the last one ends at the last column (or starts at 0 if the plane is
        // narrower than `C` chunks; its chunks then overlap).
        let groups = ow.div_ceil(C * lanes);
        for j in 0..groups {
            let first = (j * C * lanes).min(ow.saturating_sub(C * lanes));
            let ox: [usize; C] = array(|c| (first + c * lanes).min(ow - lanes));
            // `x0[c] = 2 * ox[c] - pad_left`, as a signed column (`pad_left < K`).
            let x0: [isize; C] = array(|c| (2 * ox[c]) as isize - self.pad_left as isize);
            // Whether a chunk reads a column outside the image, so the group loads through
            // masks.
            let edge = x0.iter().any(|&x| reads_outside_k::<S, K>(x, w));
            // SAFETY: the caller's contract; the masks select exactly the columns in `0..w`,
            // and an inner group reads only such columns.
            unsafe {
                if edge {
                    let masks: [[S::M; N]; C] = array(|c| load_masks_n(s, x0[c], w));
                    block::<S, A, CO, C, K, N, true>(
                        s,
                        act,
                        wt,
                        bias,
                        rows,
                        self.c_in,
                        &masks,
                        x0,
                        ox,
                        self.out_plane,
                        to,
                    );
                } else {
                    let none = [[s.mask_range(0, 0); N]; C];
                    block::<S, A, CO, C, K, N, false>(
                        s,
                        act,
                        wt,
                        bias,
                        rows,
                        self.c_in,
                        &none,
                        x0,
                        ox,
                        self.out_plane,
                        to,
                    );
                }
            }
        }
    }
}

/// `CO` output channels (`out_plane` apart) by `C` vectors of columns of one output row,
/// from the input rows `rows[ci * K + ky]` (null: outside the image, adds nothing), stored at
/// `out + co * out_plane + ox[c]`. Loads go through `masks` if `EDGE`.
///
/// # Safety
///
/// For every non-null row, chunk `c` and load `d`, `row + x0[c] + offset[d]` must be readable
/// for `L` elements (unmasked) or for the lanes of `masks[c][d]` (masked); `wt` must hold
/// `c_in * K * K` taps; and `out + co * out_plane + ox[c]` writable for `L` lanes.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn block<
    S: Simd,
    A: Act<S>,
    const CO: usize,
    const C: usize,
    const K: usize,
    const N: usize,
    const EDGE: bool,
>(
    s: S,
    act: A,
    wt: &[[f32; CO]],
    bias: &[f32; CO],
    rows: &[*const f32; MAX_ROWS],
    c_in: usize,
    masks: &[[S::M; N]; C],
    x0: [isize; C],
    ox: [usize; C],
    out_plane: usize,
    out: *mut f32,
) {
    debug_assert!(wt.len() >= c_in * K * K);
    let mut acc: [[S::V; C]; CO] = array(|co| [s.splat(bias[co]); C]);
    for ci in 0..c_in {
        for ky in 0..K {
            let row = rows[ci * K + ky];
            if row.is_null() {
                continue;
            }
            let mut tap = [[s.zero(); C]; K];
            for (c, &x0) in x0.iter().enumerate() {
                let masks = EDGE.then_some(&masks[c]);
                // SAFETY: the caller's contract.
                let t = unsafe { taps_n::<S, K, N>(s, row.wrapping_offset(x0), masks) };
                for (kx, t) in t.into_iter().enumerate() {
                    tap[kx][c] = t;
                }
            }
            let wr = wt
                .as_ptr()
                .cast::<f32>()
                .wrapping_add((ci * K + ky) * K * CO);
            // Taps outer, channels inner: each tap's `CO x C` FMAs are independent, and the
            // unrolled channel loop keeps the accumulators in registers. (Channels outer made
            // a chain of `K` dependent FMAs per accumulator, and with `K = 7` LLVM kept the
            // accumulators on the stack: 0.80 of peak against 0.9 for the same sums.)
            for (kx, tap) in tap.iter().enumerate() {
                for (co, a) in acc.iter_mut().enumerate() {
                    // SAFETY: weight `(co, ci, ky, kx)` of the block, tap
                    // `(ci * K + ky) * K + kx < c_in * K * K` (the caller's contract).
                    let wv = s.splat(unsafe { *wr.add(kx * CO + co) });
                    for (a, &t) in a.iter_mut().zip(tap) {
                        *a = s.fmadd(t, wv, *a);
                    }
                }
            }
        }
    }
    for (co, a) in acc.iter().enumerate() {
        for (&v, &ox) in a.iter().zip(&ox) {
            let v = act.apply(s, s.unpermute(v));
            // SAFETY: the caller's contract.
            unsafe { s.store_ptr(out.add(co * out_plane + ox), v) };
        }
    }
}
