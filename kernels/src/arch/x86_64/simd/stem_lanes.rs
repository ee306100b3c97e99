//! The stem with the output channels along the lanes: the path [`super::stem`] takes for a 7x7
//! stride-2 stem whose output channels are a multiple of 64 (ResNet's, DenseNet-121's and
//! Inception-v2's 3 -> 64 on 224x224), and on AMD's full-width AVX-512 cores (Zen 5) of 32
//! (SqueezeNet 1.0's 3 -> 96 too); on AMD's cores in tiles of 32 channels by 8 pixels
//! ([`Shape`]).
//!
//! Algorithm sketch (NCHW, one image; `L = 16` lanes; a tile is `R` output pixels of one row by
//! `V` vectors of output channels, weights in blocks of `16 V` channels):
//!
//! ```text
//! wt[block][t][c] = the weights, tap-major (t = (ci, ky, kx)) per block, once per call
//! for each output row oy, each segment of at most SEG output columns:
//!   prow[ci, ky][j] = input(ci, 2 oy + ky - pad_top, 2 seg0 + j - pad_left), 0 outside
//!   for each block of 16 V output channels, each group of 16 output columns (the last overlaps):
//!     for each run of R of the group's columns:
//!       acc[r][v] = bias[co0 + 16 v ..]
//!       for t = (ci, ky, kx):
//!         w[v] = load wt[block][t][16 v ..]                   // V loads
//!         for r: x = broadcast prow[ci, ky][2 r + kx]         // R loads
//!                acc[r][v] += x * w[v]                        // R x V FMAs
//!       stage[r][16 v ..] = acc[r][v]                         // pixel-major
//!     each 16 x 16 block of stage: transposed in registers, activation, stored to out[co][oy][..]
//! ```
//!
//! **Why.** [`super::stem`]'s first kernel keeps output columns along the lanes: it makes each
//! stride-2 tap with a permute and broadcasts every weight for every FMA, so a 7x7 window's
//! 112 FMAs per input row and chunk come with 112 broadcast loads and 7 permutes. A core with
//! two 512-bit FMA ports (Intel) does those FMAs in 56 cycles, but at two loads per cycle the
//! loads take as long, and the permutes share the port of the second FMA unit: the kernel ran
//! at 0.43 (ResNet-50's stem) and 0.59 (SqueezeNet's) of the FMA peak on an Intel Xeon, below
//! the `gemm` crate on the same product. Here a tap costs `R + V` loads for `R x V` FMAs (8
//! for 16 with `R = V = 4`), no permute: the image's stride-2 columns are just the
//! broadcasts' addresses, two floats apart. The price is the transpose of the finished tiles
//! (64 shuffles per 256 outputs, against `16 * 9` to `16 * 49` FMAs per output vector) and
//! the copy of the input rows into zero-padded rows (the window's edges need no masks).
//!
//! **The tile and the rule.** 64 channels by 4 pixels ([`Shape::Wide`]; AMD's is
//! [`Shape::Tall`]): 16 accumulators, four weight vectors
//! and a broadcast, 8 loads per 16 FMAs. For each block of channels the output columns go in
//! groups of 16, each group's tiles then its 16 x 16 transposes, so that the stores spread over
//! the computation (a transpose of the whole segment at its end stalled on a full store buffer:
//! 55 % of the kernel's samples sat after its stores). Measured on an Intel Xeon (AVX-512, two
//! FMA ports), each layer timed inside the network (`--features profile`, the two kernels'
//! servers in turns, median of the per-round ratios): ResNet-50's stem 0.88 and DenseNet-121's
//! 0.90 of the first kernel's time (kernel bench: 0.75-0.81 of the FMA peak against 0.43-0.75).
//! Not taken: SqueezeNet 1.0's 3 -> 96 (tiles of 48 channels by 8 pixels spilled accumulators
//! and ran 1.18x the first kernel's time, 32 by 8 1.2-1.8x; why is not understood), and the
//! 3x3 stems (MobileNet-v2's 3 -> 32 at 0.9 of the first kernel's speed: with 27 taps the
//! transposes weigh five times as much as with 147).
//!
//! **The stores.** Each group's `16 V` output rows of 16 floats are prefetched into L1 while
//! its tiles run (a share of them before each tile), so that the transposes' stores hit.
//! Without it, ResNet-50's stem took 2.1-2.5 ms per run inside the network against 1.2-1.4 ms
//! for the same call into a separate buffer (Intel Xeon family 6 model 167, `profile` build);
//! moving the output by multiples of 64 bytes, or the stack (ASLR, from process to process),
//! moved it between the two. The likely cause (the VM has no hardware counters to confirm
//! it): a 112x112 output plane is 50176 bytes, 1024 more than a multiple of 4 KiB, so a
//! group's 64 stores fall on only four offsets modulo 4 KiB; missing L1, they stay in the
//! store buffer through the next tiles, whose loads from the stack buffers (`wt`, `prow`,
//! `stage`) then 4K-alias them at some relative positions of the two. With the prefetches
//! the stem takes 1.30-1.50 ms wherever they lie, and ResNet-50 0.977x the time
//! (docs/performance.md, "The stem's stores").
//!
//! The sum for an output starts from the bias and adds the taps' products in the order (ci,
//! ky, kx), padded taps included (they add `w * 0.0`), whatever the tile or the thread split:
//! the bits do not depend on the thread count.

use super::math::Act;
use super::stem::{Data, Geom, MAX_C_IN_7, MAX_C_OUT, TAPS_7};
use super::vector::{array, Job, Simd};
use crate::arch::x86_64::avx2::blis::prefetch;
use crate::par::SharedMut;
use core::ops::Range;

/// The most output columns a segment has: its padded input rows ([`ROW`] floats each) and its
/// staged outputs stay on the stack.
const SEG: usize = 128;
/// Floats per padded input row: the columns `2 * (SEG - 1) + 7` a 7x7 window reads, rounded up.
const ROW: usize = 2 * SEG + 8;
/// The most padded input rows an output row reads: `c_in * 7`.
const MAX_ROWS: usize = MAX_C_IN_7 * 7;

/// The tile shapes this path runs (`V` vectors of output channels by `R` output pixels; `R`
/// divides 16, the columns of a group).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shape {
    /// 64 channels by 4 pixels: 8 loads per 16 FMAs.
    Wide,
    /// 32 channels by 8 pixels: 10 loads per 16 FMAs, but each weight vector serves 8 FMAs
    /// instead of 4, and a block's tap-major weights (147 taps of 32 channels, 18.8 KB) take
    /// half the L1d room a 64-channel block's (37.6 KB) do beside the padded input rows (21 of
    /// them, 22 KB); the latter streamed from L2 for every tile. Measured in the kernel bench,
    /// the two builds in turns (docs/performance.md, "Zen 5 again" and "Zen 4 once more"):
    ///
    /// * AMD EPYC Zen 5 (AVX-512 at full width, 48 KiB L1d): ResNet-50's stem from 0.77 to
    ///   0.83 of the FMA peak, SqueezeNet 1.0's 3 -> 96 (until then on [`super::stem`]) from
    ///   0.76 to 0.82-0.83;
    /// * AMD EPYC Zen 4 (zmm FMAs in two halves, 32 KiB L1d): ResNet-50's stem from 0.76-0.80
    ///   to 0.83, but SqueezeNet 1.0's from 0.82-0.88 on [`super::stem`] to 0.80-0.84, so
    ///   only stems of whole 64-channel blocks take it there;
    /// * Intel Xeon: SqueezeNet's stem at 1.2-1.8x the time of [`super::stem`] (see the module
    ///   docs), so Intel keeps [`Shape::Wide`].
    Tall,
}

/// The cores [`takes`] tells apart: the tile that won differs between them for reasons their
/// features do not tell (see [`Shape::Tall`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Core {
    /// AMD's cores with full-width zmm FMAs (Zen 5).
    AmdFullWidth,
    /// AMD's cores that split zmm FMAs in two (Zen 4).
    AmdHalfWidth,
    /// Intel's, and any other vendor's (unmeasured; Intel's rule).
    Other,
}

/// The tile this path runs a stem with a `k`x`k` window and `c_out` output channels with,
/// `lanes`-wide vectors, or `None` if it declines it (see the module docs and [`Shape`] for
/// the measurements behind the rule).
pub(super) fn takes(lanes: usize, k: usize, c_out: usize) -> Option<Shape> {
    use crate::arch::x86_64::cache;
    let core = match (cache::amd(), cache::full_width_512()) {
        (true, true) => Core::AmdFullWidth,
        (true, false) => Core::AmdHalfWidth,
        (false, _) => Core::Other,
    };
    shape(lanes, k, c_out, core)
}

/// [`takes`] on a `core`.
fn shape(lanes: usize, k: usize, c_out: usize, core: Core) -> Option<Shape> {
    let tall = match core {
        Core::AmdFullWidth => c_out.is_multiple_of(32),
        Core::AmdHalfWidth => c_out.is_multiple_of(64),
        Core::Other => false,
    };
    if lanes != 16 || k != 7 {
        None
    } else if tall {
        Some(Shape::Tall)
    } else if c_out.is_multiple_of(64) {
        Some(Shape::Wide)
    } else {
        None
    }
}

/// Buffers aligned to a cache line, so that every staged vector is one aligned line.
#[repr(C, align(64))]
struct Aligned<const N: usize>([f32; N]);

/// The whole convolution for output rows `rows` of every image, with tiles of `R` pixels by
/// `V` vectors of channels and a `K`x`K` window.
pub(super) struct StemLanes<'a, 'b, A, const V: usize, const R: usize, const K: usize> {
    pub(super) conv: &'a Data<'b>,
    pub(super) act: A,
    /// The whole output, of which this job writes output rows `rows` of every plane.
    pub(super) out: &'a SharedMut<'b>,
    pub(super) rows: Range<usize>,
}

impl<S: Simd, A: Act<S>, const V: usize, const R: usize, const K: usize> Job<S>
    for StemLanes<'_, '_, A, V, R, K>
{
    type Output = ();

    /// Bounds, argued once for the raw accesses below and in [`tile`]:
    ///
    /// * input: read with slice indexing only (into `prow`).
    /// * `prow`: row `ci * K + ky < MAX_ROWS` (`c_in * K <= MAX_ROWS`, `Geom::new`), columns
    ///   `2 r + kx` for pixels `r < segn <= SEG` of the segment and `kx < K <= 7`: below
    ///   `2 SEG + 6 <= ROW`.
    /// * `wt`: block `co0 / 16 V`, tap `t < c_in * K * K`, lane `< 16 V`: below
    ///   `c_out * c_in * K * K <= MAX_C_OUT * TAPS_7` (`c_out` is a multiple of `16 V`).
    /// * `stage`: 16 pixels of `16 V` floats, `16 * 16 V <= 16 * MAX_C_OUT`.
    /// * output: `out + ((n * c_out + co) * oh + oy) * ow + seg0 + px` for 16 lanes, with
    ///   `px <= segn - 16` and `seg0 + segn <= ow`: inside output plane `co` of image `n`, in
    ///   row `oy` of this job's `rows`, which no other job of the same call writes (the tasks'
    ///   ranges are disjoint).
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
        assert!(S::LANES == 16 && g.k == K && c_in * K <= MAX_ROWS && c_out <= MAX_C_OUT);
        assert!(c_in * K * K <= TAPS_7 && 2 * SEG + K - 1 <= ROW);
        assert!(c_out.is_multiple_of(16 * V) && 16 % R == 0 && ow >= 16);
        assert!(self.out.len() >= batch * c_out * oh * ow && self.rows.end <= oh);
        let taps = c_in * K * K;
        let in_plane = h * w;
        // The weights by blocks of `16 V` channels, tap-major in each: `wt[co / 16 V][t][co %
        // 16 V]`, so that a tile reads one contiguous run at constant offsets.
        let mut wt = Aligned([0.0f32; TAPS_7 * MAX_C_OUT]);
        for co in 0..c_out {
            for t in 0..taps {
                wt.0[((co / (16 * V)) * taps + t) * 16 * V + co % (16 * V)] = weight[co * taps + t];
            }
        }
        let mut b = Aligned([0.0f32; MAX_C_OUT]);
        if let Some(bias) = bias {
            b.0[..c_out].copy_from_slice(bias);
        }
        let mut prow = Aligned([0.0f32; MAX_ROWS * ROW]);
        let mut stage = Aligned([0.0f32; 16 * MAX_C_OUT]);
        // Segments of equal length: each at least 16 columns (`ow >= 16`, and a segment of a
        // plane wider than `SEG` has more than `SEG / 2`).
        let segs = ow.div_ceil(SEG);
        let dst0 = self.out.as_ptr();
        for n in 0..batch {
            let image = &input[n * c_in * in_plane..][..c_in * in_plane];
            for oy in self.rows.clone() {
                for seg in 0..segs {
                    let seg0 = seg * ow / segs;
                    let segn = (seg + 1) * ow / segs - seg0;
                    // The padded input rows: columns `2 * seg0 - pad_left + j` of the image,
                    // those in `inside` copied whole, the others zero.
                    let width = 2 * (segn - 1) + K;
                    let first = (2 * seg0) as isize - pad_left as isize;
                    let inside = (-first).clamp(0, width as isize) as usize
                        ..(w as isize - first).clamp(0, width as isize) as usize;
                    let inside = inside.start..inside.end.max(inside.start);
                    for ci in 0..c_in {
                        for ky in 0..K {
                            let to = &mut prow.0[(ci * K + ky) * ROW..][..width];
                            let y = (2 * oy + ky).wrapping_sub(pad_top);
                            if y >= h {
                                to.fill(0.0);
                                continue;
                            }
                            let from = &image[ci * in_plane + y * w..][..w];
                            to[..inside.start].fill(0.0);
                            if !inside.is_empty() {
                                let col = (first + inside.start as isize) as usize;
                                to[inside.clone()].copy_from_slice(&from[col..][..inside.len()]);
                            }
                            to[inside.end..].fill(0.0);
                        }
                    }
                    // For each block of channels, groups of 16 output columns (the last one
                    // overlaps the previous): the group's tiles, then its outputs transposed
                    // and stored. The block's weights stay in L1 over the whole segment, and the
                    // stores spread over the computation instead of filling the store buffer
                    // in one burst.
                    for co0 in (0..c_out).step_by(16 * V) {
                        for px in (0..segn).step_by(16) {
                            let px = px.min(segn - 16);
                            let to =
                                dst0.wrapping_add(((n * c_out + co0) * oh + oy) * ow + seg0 + px);
                            // The group's 16 V output rows of 16 floats (two lines each if
                            // they straddle one), prefetched a share per tile (see the module
                            // docs, "The stores").
                            let straddle = !to.addr().is_multiple_of(64);
                            for r0 in (0..16).step_by(R) {
                                for c in r0 * V..(r0 + R) * V {
                                    let row = to.wrapping_add(c * oh * ow);
                                    prefetch(row);
                                    if straddle {
                                        prefetch(row.wrapping_add(15));
                                    }
                                }
                                // SAFETY: see the bounds above.
                                unsafe {
                                    tile::<S, V, R, K>(
                                        s,
                                        c_in,
                                        prow.0.as_ptr().add(2 * (px + r0)),
                                        wt.0.as_ptr().add(co0 * taps),
                                        b.0.as_ptr().add(co0),
                                        stage.0.as_mut_ptr().add(r0 * 16 * V),
                                    )
                                };
                            }
                            // The staged `[r][co0 + c]` to `out[co0 + c][oy][seg0 + px + r]`.
                            for c in (0..16 * V).step_by(16) {
                                let mut v: [S::V; 16] = array(|r| {
                                    // SAFETY: see the bounds above.
                                    unsafe { s.load_ptr(stage.0.as_ptr().add(r * 16 * V + c)) }
                                });
                                s.transpose(&mut v);
                                for (j, &v) in v.iter().enumerate() {
                                    let v = self.act.apply(s, v);
                                    // SAFETY: see the bounds above.
                                    unsafe { s.store_ptr(to.wrapping_add((c + j) * oh * ow), v) };
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// One tile: `R` output pixels (their padded input row `2 r` floats from `prow` for row
/// `ci * K + ky`, rows [`ROW`] apart) by `V` vectors of output channels (weights `wt + t * 16 V`
/// for tap `t`, bias `bias`), stored pixel-major at `stage + r * 16 V + 16 v`.
///
/// # Safety
///
/// `prow` readable for row `c_in * K - 1` column `2 (R - 1) + K - 1`; `wt` for `c_in * K * K`
/// taps of `16 V` floats; `bias` for `16 V`; `stage`
/// writable for `R * 16 V` floats.
#[inline(always)]
unsafe fn tile<S: Simd, const V: usize, const R: usize, const K: usize>(
    s: S,
    c_in: usize,
    prow: *const f32,
    wt: *const f32,
    bias: *const f32,
    stage: *mut f32,
) {
    let l = S::LANES;
    // SAFETY: bias holds `16 V` floats (the caller's contract).
    let mut acc: [[S::V; V]; R] = array(|_| array(|v| unsafe { s.load_ptr(bias.add(l * v)) }));
    for row in 0..c_in * K {
        let x0 = prow.wrapping_add(row * ROW);
        let w0 = wt.wrapping_add(row * K * V * l);
        for kx in 0..K {
            // SAFETY: tap `row * K + kx < c_in * K * K` of `wt` (the caller's contract).
            let wv: [S::V; V] = array(|v| unsafe { s.load_ptr(w0.add((kx * V + v) * l)) });
            let xk = opaque(x0.wrapping_add(kx));
            for (r, acc) in acc.iter_mut().enumerate() {
                // SAFETY: row `row < c_in * K`, column `2 r + kx <= 2 (R - 1) + K - 1` of
                // `prow` (the caller's contract).
                let x = s.splat(unsafe { *xk.add(2 * r) });
                for (a, &w) in acc.iter_mut().zip(&wv) {
                    *a = s.fmadd(x, w, *a);
                }
            }
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        for (v, &a) in acc.iter().enumerate() {
            // SAFETY: `(r * V + v) * 16 < R * 16 V` floats of `stage` (the caller's contract).
            unsafe { s.store_ptr(stage.add((r * V + v) * l), a) };
        }
    }
}

/// `p`, as a value the optimiser cannot see through.
///
/// **Why.** The broadcasts of one window row overlap: pixel `r`'s tap `kx` reads the column
/// pixel `r - 1`'s tap `kx + 2` read, so with the taps unrolled LLVM loaded each column once
/// and kept its broadcast vector live across taps, which ran out of registers: a third of the
/// tile's loads became spills and reloads of those vectors (SqueezeNet 1.0's stem, AMD EPYC
/// Zen 5). A broadcast from memory costs one load, like the reload it replaced, and no store.
#[inline(always)]
fn opaque(p: *const f32) -> *const f32 {
    let mut addr = p.addr();
    // SAFETY: an empty template: no instruction, no memory access, `addr` unchanged.
    unsafe {
        core::arch::asm!("/* {0} */", inout(reg) addr, options(pure, nomem, nostack, preserves_flags))
    };
    p.with_addr(addr)
}

#[cfg(test)]
mod tests {
    use super::{shape, Core, Shape};

    #[test]
    fn amd_takes_32_channel_tiles_where_measured_and_others_64() {
        // ResNet-50's and SqueezeNet 1.0's stems on Zen 5; on Zen 4 ResNet-50's only;
        // SqueezeNet's stays on `stem` elsewhere.
        assert_eq!(shape(16, 7, 64, Core::AmdFullWidth), Some(Shape::Tall));
        assert_eq!(shape(16, 7, 96, Core::AmdFullWidth), Some(Shape::Tall));
        assert_eq!(shape(16, 7, 64, Core::AmdHalfWidth), Some(Shape::Tall));
        assert_eq!(shape(16, 7, 96, Core::AmdHalfWidth), None);
        assert_eq!(shape(16, 7, 64, Core::Other), Some(Shape::Wide));
        assert_eq!(shape(16, 7, 96, Core::Other), None);
        assert_eq!(shape(16, 7, 48, Core::AmdFullWidth), None);
        // 3x3 windows and AVX2 never.
        assert_eq!(shape(16, 3, 64, Core::AmdFullWidth), None);
        assert_eq!(shape(8, 7, 64, Core::Other), None);
    }
}
