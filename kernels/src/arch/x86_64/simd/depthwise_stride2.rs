//! The planar depthwise kernel for 3x3 windows with stride 2 that reads its taps in place and
//! splits even and odd columns in registers, for 16 lanes (AVX-512): [`super::depthwise`]
//! offers each convolution here first and hands what this one declines to the
//! channels-in-lanes kernel ([`super::depthwise_lanes`]). Blocks, chunks, the accumulation
//! order and the stores are those of the other planar kernels (see [`super::depthwise`]).
//!
//! Algorithm sketch, per channel plane (NCHW, so a plane is contiguous):
//!
//! ```text
//! for each group of C chunks of L output columns (the last group overlaps):
//!   x0[c] = 2 * ox[c] - pad_left        // first image column chunk c's taps read
//!   masks for the four loads below, for chunks at the plane's edges
//!   for each block of R output rows (the plane's last block overlaps the previous one):
//!     acc[0..R][0..C] = splat(bias)
//!     for each of the 2R + 1 input rows t the block reads:         // fully unrolled
//!       a, b = load(row[t] + x0[c]), load(row[t] + x0[c] + L)      // 2L columns
//!       e = load 2 lanes (row[t] + x0[c] + 2L)                     // the 2 after them
//!       tap0, tap1 = even(a ++ b), odd(a ++ b)                     // columns 2j, 2j + 1
//!       tap2 = even((a ++ b ++ e)[2..2L + 2])                      // columns 2j + 2
//!       for each output row r that row t feeds (ky = t - 2r in 0..3):
//!         acc[r][c] += tap[kx] * w[ky][kx]   for kx in 0..3
//!     store act(acc[r][c])
//! ```
//!
//! **Why.** In NCHW a stride-2 tap of 16 consecutive outputs is every other column of 32
//! consecutive inputs: one in-lane shuffle (`vshufps`, in [`Simd::deinterleave`]'s lane order,
//! put back into memory order once per accumulator before the store) of two loads. Each input
//! row then costs three loads, two lane shifts (`valignd`, [`Simd::shift_in2`]) and three
//! shuffles per chunk (the even columns, the odd ones, and the even ones one column on),
//! shared by the one or two output rows it feeds, against the channels-in-lanes kernel's two
//! 16x16 transposes per 16x16 block of input and of output. The full-width loads cross a cache
//! line (the first tap's column is odd with a padding of 1), and on Zen 4 those issue at about
//! 0.6 per cycle (measured with a register-only loop), so the third tap is shifted out of the
//! first two loads and a two-lane one rather than loaded twice more: 0.262-0.266 -> 0.280-0.282
//! of peak on MobileNet-v2's 112-wide layer, 0.276-0.281 -> 0.303-0.309 on the 56-wide one
//! (AMD EPYC Zen 4, 2026-11-25, kernel bench binaries alternated three times). (With
//! two-source permutes, `vpermt2ps`, for the split, as before 2026-11-25, the four-load
//! version ran about 5% faster, 0.28-0.30; the stem kernels and [`super::depthwise_small`],
//! which share the split, gain more from the shuffles.) Rows above and below the image read a
//! row of zeros (the first elements of the scratch, which is sized for the channels-in-lanes
//! kernel and is much longer), columns outside it are zeroed by masked loads in the chunks at
//! the plane's edges.
//!
//! **The rule** (16 lanes, more than [`MIN_OW`] output columns), measured on AMD EPYC Zen 4
//! (2026-11-24, `KILN_BENCH_CLOCK=thread cargo bench -p kiln-kernels --features std --bench
//! kernels -- mobilenet`, the bench binaries of both kernels in alternating runs, three each,
//! load 3.5-4.1, of peak): 112 -> 56 columns 0.19-0.23 (channels in lanes) -> 0.28-0.29
//! (here), 56 -> 28 0.22 -> 0.30, 28 -> 14 0.19-0.20 -> 0.24-0.25. On 14 -> 7 (7 of 16 lanes
//! used) it lost, 0.14 -> 0.11. With AVX2 (8 lanes, in-lane `vshufps` deinterleave) it lost
//! on every layer it took (0.21-0.22 -> 0.13-0.17, one run; likely because sixteen registers
//! hold the nine weights and six accumulators but not the loads and taps as well), so 8 lanes
//! keep the channels-in-lanes kernel.
//!
//! Differences from the portable kernel, as for the other planar kernels: the sum starts from
//! the bias and is accumulated with FMAs, and a padded tap adds `w * 0.0`.

use super::depthwise::{store_block, Data};
use super::eltwise;
use super::math::{specialise_cheap, Act};
use super::vector::{array, Job, Simd};
use crate::params::lanes_band;
use crate::{Activation, Conv2d};

/// The window side.
const K: usize = 3;
/// The most output rows per block.
const ROWS: usize = 4;
/// The most input rows a block reads: `2 * (ROWS - 1) + K`.
const MAX_IN_ROWS: usize = 2 * (ROWS - 1) + K;
/// The narrowest output plane (columns, exclusive) this kernel takes; narrower planes waste
/// most lanes of a chunk and run faster with the channels in the lanes.
const MIN_OW: usize = 8;
/// Loads per input row and chunk: the `2L` columns from the first tap's, and the two after
/// them.
const LOADS: usize = 3;

/// Runs the depthwise conv2d (the portable kernel's signature and semantics, see
/// [`crate::arch::portable::conv2d`]) and returns `true` if its shape is one this kernel
/// takes (16 lanes, a 3x3 window, stride 2, and a shape the channels-in-lanes kernel would
/// otherwise take, which sizes the scratch); returns `false`, having written nothing,
/// otherwise. `scratch` needs [`Conv2d::scratch_len`] elements; its first ones become the row
/// of zeros.
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
) -> bool {
    if S::LANES != 16 || p.out_w <= MIN_OW {
        return false;
    }
    let Some(g) = Geom::new::<S>(p) else {
        return false;
    };
    let c = p.c_out;
    // Slicing up front turns a short buffer into a panic here, like the portable kernel's
    // indexing; every raw access below stays inside these slices.
    let out = &mut out[..p.batch * c * g.oh * g.ow];
    let conv = Data {
        g: &g,
        c,
        input: &input[..p.batch * c * g.h * g.w],
        weight: &weight[..c * K * K],
        bias: bias.map(|b| &b[..c]),
    };
    let zeros = &mut scratch[..g.zeros];
    zeros.fill(0.0);
    // The cheap activations are fused into the store (one instantiation each); sigmoid and
    // tanh run as a second pass.
    specialise_cheap!(s, act, a => by_shape(s, a, &conv, zeros, out),
        then eltwise::unary_inplace(s, act, out));
    true
}

/// Picks the block shape: planes wider than a vector take two chunks side by side in 4 rows
/// (eight accumulators; 3 rows measured 0.27-0.28 of peak against 0.28-0.30 on the 112- and
/// 56-wide MobileNet-v2 layers), narrower ones one chunk in 4 rows; planes with fewer rows
/// than that, 1 row.
#[inline(always)]
fn by_shape<S: Simd, A: Act<S>>(
    s: S,
    act: A,
    conv: &Data<'_, Geom>,
    zeros: &[f32],
    out: &mut [f32],
) {
    macro_rules! job {
        ($r:literal, $c:literal) => {
            s.vectorize(Planes::<'_, '_, A, $r, $c> {
                conv,
                act,
                zeros,
                out,
            })
        };
    }
    let (oh, ow) = (conv.g.oh, conv.g.ow);
    match (ow > S::LANES, oh) {
        (true, 4..) => job!(4, 2),
        (true, _) => job!(1, 2),
        (false, 4..) => job!(4, 1),
        (false, _) => job!(1, 1),
    }
}

/// The shape of one plane's convolution, validated so that the index arithmetic below cannot
/// overflow.
struct Geom {
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    pad_top: usize,
    pad_left: usize,
    /// Length of the row of zeros: `2 * max(ow, L) + K`, past the last column a tap can read.
    zeros: usize,
}

impl Geom {
    /// `None` if another kernel should run: not a 3x3 stride-2 depthwise convolution the
    /// channels-in-lanes kernel would take (whose band buffer is the scratch; see
    /// [`lanes_band`]), an empty tensor, or sizes so large that the index arithmetic could
    /// overflow.
    fn new<S: Simd>(p: &Conv2d) -> Option<Geom> {
        // `lanes_band` implies a depthwise convolution with a square window, the same stride
        // both ways, no dilation and top/left padding below the window.
        let band = lanes_band(p)?;
        if p.kh != K || p.stride[0] != 2 {
            return None;
        }
        // 2^40 per dimension is far beyond any real tensor and keeps every offset computed
        // below inside `isize`.
        const LIMIT: usize = 1 << 40;
        let dims = [p.h, p.w, p.out_h, p.out_w];
        if dims.iter().any(|&d| d >= LIMIT || d == 0) {
            return None;
        }
        let planes = p.batch.checked_mul(p.c_out)?;
        planes.checked_mul(p.h.checked_mul(p.w)?)?;
        planes.checked_mul(p.out_h.checked_mul(p.out_w)?)?;
        if planes == 0 {
            return None;
        }
        let zeros = 2 * p.out_w.max(S::LANES) + K;
        // The band buffer holds at least `K` rows of `((ow - 1) * 2 + K) * 16` floats, far
        // more than the row of zeros.
        debug_assert!(zeros <= band.len);
        Some(Geom {
            h: p.h,
            w: p.w,
            oh: p.out_h,
            ow: p.out_w,
            pad_top: p.pad[0],
            pad_left: p.pad[1],
            zeros,
        })
    }
}

/// The whole convolution for blocks of `R` output rows by `C` chunks.
struct Planes<'a, 'b, A, const R: usize, const C: usize> {
    conv: &'a Data<'b, Geom>,
    act: A,
    zeros: &'a [f32],
    out: &'a mut [f32],
}

impl<S: Simd, A: Act<S>, const R: usize, const C: usize> Job<S> for Planes<'_, '_, A, R, C> {
    type Output = ();

    /// Bounds, argued once for the raw accesses below and in [`block`]:
    ///
    /// * input: plane `p` is `input[p * h * w..][..h * w]`; row `y < h` of it is read at
    ///   columns `x0[c] + d + j` for the loads' offsets `d` and lanes `j < L`, only where that
    ///   is in `0..w`: the masked chunks' masks select exactly those lanes, and an unmasked
    ///   chunk has all of them there.
    /// * zeros: `zeros = 2 * max(ow, L) + K` floats; a row outside the image is `zeros`
    ///   itself, so its column `x` is element `x`. Every column a chunk reads is below
    ///   `x0[c] + 2 + 2L <= 2 * (max(ow, L) - L) + 2 + 2L < zeros` (as `ox[c] <=
    ///   max(ow, L) - L`), and a masked load reads only columns `>= 0`.
    /// * output: as in [`super::depthwise_inplace`]: a block stores `L` lanes at
    ///   `(oy + r) * ow + ox[c]` when that ends inside `out`, else `min(ow, L)` lanes.
    #[inline(always)]
    fn run(self, s: S) {
        const { assert!(R <= ROWS && C <= 2) };
        let Data {
            g,
            c,
            input,
            weight,
            bias,
        } = *self.conv;
        let out = self.out;
        let lanes = S::LANES;
        let Geom {
            h,
            w,
            oh,
            ow,
            pad_top,
            pad_left,
            ..
        } = *g;
        debug_assert!(self.zeros.len() == g.zeros);
        // Blocks: `R` output rows from row `oy0(i)`; the last one ends at the last row.
        let blocks = oh.div_ceil(R);
        let oy0 = |i: usize| (i * R).min(oh - R);
        // Column groups as in `depthwise_inplace`: the last group ends at the last column, or
        // starts at 0 if the plane is narrower than a vector (then `C` is 1).
        debug_assert!(C == 1 || ow > lanes);
        let groups = ow.div_ceil(C * lanes);
        let ox = |j: usize| -> [usize; C] {
            let first = (j * C * lanes).min(ow.saturating_sub(C * lanes));
            array(|c| (first + c * lanes).min(ow.saturating_sub(lanes)))
        };
        let (in_plane, out_plane) = (h * w, oh * ow);
        let planes = out.len() / out_plane;
        debug_assert!(input.len() == planes * in_plane);
        let (src0, dst0) = (input.as_ptr(), out.as_mut_ptr());
        let zero_row = self.zeros.as_ptr();
        let out_end = dst0.wrapping_add(out.len());
        for p in 0..planes {
            let ch = p % c;
            let mut wv = [s.zero(); K * K];
            for (v, &x) in wv.iter_mut().zip(&weight[ch * K * K..][..K * K]) {
                *v = s.splat(x);
            }
            let b = s.splat(bias.map_or(0.0, |b| b[ch]));
            let src = src0.wrapping_add(p * in_plane);
            let dst = dst0.wrapping_add(p * out_plane);
            for j in 0..groups {
                let ox = ox(j);
                // `x0[c] = 2 * ox[c] - pad_left`, as a signed column (`pad_left < K`).
                let x0: [isize; C] = array(|c| (2 * ox[c]) as isize - pad_left as isize);
                let masks: [[S::M; LOADS]; C] = array(|c| load_masks(s, x0[c], w));
                // Bit `c`: chunk `c` reads a column outside the image, so it loads through
                // masks.
                let edge = x0.iter().enumerate().fold(0u8, |e, (c, &x)| {
                    e | (u8::from(reads_outside::<S>(x, w)) << c)
                });
                for i in 0..blocks {
                    let oy = oy0(i);
                    let rows: [*const f32; MAX_IN_ROWS] = array(|t| {
                        let y = (2 * oy + t).wrapping_sub(pad_top);
                        if y < h {
                            src.wrapping_add(y * w)
                        } else {
                            zero_row
                        }
                    });
                    let to = dst.wrapping_add(oy * ow);
                    // SAFETY: see the bounds above.
                    unsafe {
                        macro_rules! edges {
                            ($($e:literal)*) => {
                                match edge {
                                    $($e => block::<S, A, R, C, $e>(
                                        s, &wv, b, self.act, &rows, &masks, x0, ox, ow, to,
                                        out_end,
                                    ),)*
                                    _ => unreachable!("{C} chunks"),
                                }
                            };
                        }
                        if C == 1 {
                            edges!(0 1)
                        } else {
                            edges!(0 1 2 3)
                        }
                    };
                }
            }
        }
    }
}

/// `R` output rows by `C` vectors of columns, from the input rows `rows[0..2R + 1]`, stored at
/// `out + r * ow + ox[c]`. Chunk `c` loads its taps through `masks` if bit `c` of `EDGE` is
/// set (a chunk at the plane's edge), else with plain loads.
///
/// # Safety
///
/// For every row `t`, chunk `c` and load `d`, `rows[t] + x0[c] + offset[d]` must be readable
/// for `L` elements (unmasked) or for the lanes of `masks[c][d]` (masked); and
/// `out + r * ow + ox[c]` writable for `L` lanes where that ends at or before `out_end`,
/// else for `min(ow, L)` lanes.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn block<S: Simd, A: Act<S>, const R: usize, const C: usize, const EDGE: u8>(
    s: S,
    wv: &[S::V; K * K],
    bias: S::V,
    act: A,
    rows: &[*const f32; MAX_IN_ROWS],
    masks: &[[S::M; LOADS]; C],
    x0: [isize; C],
    ox: [usize; C],
    ow: usize,
    out: *mut f32,
    out_end: *mut f32,
) {
    let mut acc = [[bias; C]; R];
    // Fully unrolled over the input rows, so that every `ky` below is a constant and the
    // accumulators stay in registers.
    macro_rules! input_rows {
        ($($t:literal)*) => {$(
            if $t < 2 * R + 1 {
                // SAFETY: one of the block's rows; the caller's contract.
                unsafe {
                    input_row::<S, R, C, $t, EDGE>(s, wv, rows[$t], masks, x0, &mut acc)
                };
            }
        )*};
    }
    input_rows!(0 1 2 3 4 5 6 7 8);
    for v in acc.iter_mut().flatten() {
        *v = s.unpermute(*v);
    }
    // SAFETY: the caller's contract.
    unsafe { store_block(s, act, &acc, ox, ow, out, out_end) };
}

/// Adds input row `T` of a block (`row`) into the accumulators of the output rows it feeds.
///
/// # Safety
///
/// `row + x0[c] + offset[d]` must be readable for `L` elements (or the lanes of
/// `masks[c][d]` if bit `c` of `EDGE` is set) for every load `d` and chunk `c`.
#[inline(always)]
unsafe fn input_row<S: Simd, const R: usize, const C: usize, const T: usize, const EDGE: u8>(
    s: S,
    wv: &[S::V; K * K],
    row: *const f32,
    masks: &[[S::M; LOADS]; C],
    x0: [isize; C],
    acc: &mut [[S::V; C]; R],
) {
    for (c, &x0) in x0.iter().enumerate() {
        // SAFETY: the caller's contract.
        let taps = unsafe { taps(s, row.wrapping_offset(x0), &masks[c], EDGE >> c & 1 != 0) };
        for (r, a) in acc.iter_mut().enumerate() {
            if T >= 2 * r && T - 2 * r < K {
                let ky = T - 2 * r;
                for (kx, &tap) in taps.iter().enumerate() {
                    a[c] = s.fmadd(tap, wv[ky * K + kx], a[c]);
                }
            }
        }
    }
}

/// The masks of a chunk's three loads ([`taps`]) whose first column is `x0` in an image row
/// of `w` columns: lane `l` of load `d` reads column `x0 + d L + l`, which must be in `0..w`
/// and, for the third load, `l < K - 1`.
#[inline(always)]
fn load_masks<S: Simd>(s: S, x0: isize, w: usize) -> [S::M; LOADS] {
    let lanes = S::LANES;
    array(|d| {
        let n = if d + 1 == LOADS { K - 1 } else { lanes };
        inside_mask(s, x0 + (d * lanes) as isize, n, w)
    })
}

/// The lanes `l < n` of a load from column `at` whose column `at + l` is inside a row of `w`.
#[inline(always)]
fn inside_mask<S: Simd>(s: S, at: isize, n: usize, w: usize) -> S::M {
    let lo = (-at).clamp(0, n as isize) as usize;
    let hi = (w as isize - at).clamp(0, n as isize) as usize;
    s.mask_range(lo, hi.max(lo))
}

/// The masks of a chunk's `N` loads ([`taps_n`]) whose first column is `x0` in an image row of
/// `w` columns: lane `l` of load `d` reads column `x0 + 2 (d / 2) + (d % 2) L + l`, which must
/// be in `0..w`. Shared with the stem kernel ([`super::stem`]).
#[inline(always)]
pub(super) fn load_masks_n<S: Simd, const N: usize>(s: S, x0: isize, w: usize) -> [S::M; N] {
    let lanes = S::LANES;
    array(|d| inside_mask(s, x0 + (2 * (d / 2) + (d % 2) * lanes) as isize, lanes, w))
}

/// Whether a chunk's loads ([`taps`]) from column `x0` read a column outside `0..w`, so the
/// chunk must load through [`load_masks`].
#[inline(always)]
pub(super) fn reads_outside<S: Simd>(x0: isize, w: usize) -> bool {
    reads_outside_k::<S, K>(x0, w)
}

/// Whether the loads of [`taps_n`] for a `K`-column window from column `x0` read a column
/// outside `0..w`.
#[inline(always)]
pub(super) fn reads_outside_k<S: Simd, const K: usize>(x0: isize, w: usize) -> bool {
    x0 < 0 || x0 as usize + (K - 1) + 2 * S::LANES > w
}

/// The three stride-2 taps of a chunk of `L` outputs whose first tap reads `at` (column `x0`
/// of an input row): tap `kx` holds columns `x0 + 2j + kx` for lane `j`, in the lane order of
/// [`Simd::deinterleave`]. Three loads: `a`, `b`, the `2L` columns from `x0` (through
/// `masks[0..2]` if `edge`), and `e`, the two columns after them (always through `masks[2]`,
/// which selects at most those two); taps 0 and 1 are the even and odd columns of `a ++ b`,
/// tap 2 the even columns of the same `2L + 2` columns two on (`Simd::shift_in2`, one
/// in-register shift each instead of two more loads, which would cross a cache line).
///
/// # Safety
///
/// `at + d L` must be readable for `L` elements, or for the lanes of `masks[d]`, for loads
/// `d` 0 and 1 (masked if `edge`), and for the lanes of `masks[2]` at `at + 2L`.
#[inline(always)]
unsafe fn taps<S: Simd>(s: S, at: *const f32, masks: &[S::M; LOADS], edge: bool) -> [S::V; K] {
    let lanes = S::LANES;
    // SAFETY: the caller's contract.
    let (a, b, e) = unsafe {
        let e = s.load_masked_ptr(at.wrapping_add(2 * lanes), masks[2]);
        if edge {
            (
                s.load_masked_ptr(at, masks[0]),
                s.load_masked_ptr(at.wrapping_add(lanes), masks[1]),
                e,
            )
        } else {
            (s.load_ptr(at), s.load_ptr(at.wrapping_add(lanes)), e)
        }
    };
    let (even, odd) = s.deinterleave(a, b);
    let (even2, _) = s.deinterleave(s.shift_in2(a, b), s.shift_in2(b, e));
    [even, odd, even2]
}

/// The `K` stride-2 taps of a chunk of `L` outputs whose first tap reads `at` (column `x0` of
/// an input row): tap `kx` holds columns `x0 + 2j + kx` for lane `j`, in the lane order of
/// [`Simd::deinterleave`]. `N = 2 ceil(K / 2)` loads, in pairs: pair `p` loads the `2L`
/// columns from `x0 + 2p`, and one two-source permute each splits its even columns (tap `2p`)
/// and its odd ones (tap `2p + 1`, a dead permute past the window). Loads through `masks`
/// ([`load_masks_n`]) if given.
///
/// # Safety
///
/// `at + 2 (d / 2) + (d % 2) L` must be readable for `L` elements, or for the lanes of
/// `masks[d]`, for each load `d < N`.
#[inline(always)]
pub(super) unsafe fn taps_n<S: Simd, const K: usize, const N: usize>(
    s: S,
    at: *const f32,
    masks: Option<&[S::M; N]>,
) -> [S::V; K] {
    const { assert!(N == 2 * K.div_ceil(2)) };
    let lanes = S::LANES;
    // A macro, not a closure: a closure would not inherit the caller's target features.
    macro_rules! load {
        ($d:expr, $off:expr) => {{
            let p = at.wrapping_add($off);
            // SAFETY: the caller's contract.
            unsafe {
                match masks {
                    Some(m) => s.load_masked_ptr(p, m[$d]),
                    None => s.load_ptr(p),
                }
            }
        }};
    }
    let mut taps = [s.zero(); K];
    for pair in 0..N / 2 {
        let (even, odd) = s.deinterleave(
            load!(2 * pair, 2 * pair),
            load!(2 * pair + 1, 2 * pair + lanes),
        );
        taps[2 * pair] = even;
        if 2 * pair + 1 < K {
            taps[2 * pair + 1] = odd;
        }
    }
    taps
}
