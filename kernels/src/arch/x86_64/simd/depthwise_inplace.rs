//! The planar depthwise kernel's variant that reads its taps in place, for stride-1 planes of
//! at most [`MAX_OW`] output columns with 16 lanes (AVX-512): [`super::depthwise`] offers each
//! convolution here first (after the channels-in-lanes kernel) and runs its band-buffer kernel
//! on what this one declines. Blocks, chunks, the accumulation order and the stores are those
//! of the band-buffer kernel (see its module doc); only where the taps come from differs.
//!
//! Algorithm sketch, per channel plane:
//!
//! ```text
//! for each group of C chunks of L output columns (the last group overlaps):
//!   mask[c][kx] = the lanes of chunk c whose tap kx reads an image column
//!   for each block of R output rows (the plane's last block overlaps the previous one):
//!     row[t] = input row oy + t - pad_top, or a row of zeros outside the image
//!     acc[0..R][0..C] = splat(bias)
//!     for each of the R + K - 1 input rows t the block reads:       // fully unrolled
//!       for kx, c: tap = load(row[t] + ox[c] + kx - pad_left)  // masked in edge chunks
//!         for each output row r that row t feeds: acc[r][c] += tap * w[t - r][kx]
//!     store act(acc[r][c])
//! ```
//!
//! **Reading in place.** The taps are unaligned loads straight from the input plane: a chunk
//! whose every tap lies inside the image uses plain loads, a chunk at the left or right edge
//! masked loads that zero the lanes in the padding (masked-off lanes are never read, so they
//! may point before or after the plane). Rows above and below the image read a row of zeros,
//! the first elements of the scratch (whose size stays the band buffer's, so the scratch
//! contract does not depend on the variant). The band-buffer kernel instead copies every input
//! row into a zero-padded buffer: a load and a store per input element, and taps that read
//! the freshly stored rows at odd offsets wait for the stores to retire (no store
//! forwarding). On narrow planes, where each row is one or two chunks and every chunk is at
//! an edge, that copy is a large share of the work; on wide ones the masks of the edge chunks
//! and the in-place reads lose instead.
//!
//! **The rule** ([`MAX_OW`], AVX-512 only), measured on AMD EPYC Zen 4 (2026-11-24,
//! `KILN_BENCH_CLOCK=thread cargo bench -p kiln-kernels --features std --bench kernels --
//! mobilenet`, both variants in alternating runs, of peak): 14 columns 0.26-0.28 (band) ->
//! 0.36 (here) on both 14x14 MobileNet-v2 layers, 28 columns 0.28 -> 0.30-0.31, 56 columns
//! 0.34-0.38 -> 0.32-0.33, 112 columns 0.33 -> 0.27. With AVX2 the masked loads (a
//! `vmaskmovps` per edge tap) are slow and in place lost on most shapes, so 8 lanes always take
//! the band buffer.

use super::depthwise::{planar_shape, store_block, Data};
use super::eltwise;
use super::math::{specialise_cheap, Act};
use super::vector::{array, Job, Simd};
use crate::{Activation, Conv2d};

/// The widest output plane (columns) read in place; see the module doc for the measurements.
pub(crate) const MAX_OW: usize = 28;
/// The most output rows per block.
const ROWS: usize = 4;
/// The largest window side with a specialised kernel.
const MAX_K: usize = 5;
/// The most input rows a block reads: `ROWS - 1 + MAX_K`.
const MAX_IN_ROWS: usize = ROWS - 1 + MAX_K;

/// Runs the depthwise conv2d (the portable kernel's signature and semantics, see
/// [`crate::arch::portable::conv2d`]) and returns `true` if its shape is one this variant
/// takes (16 lanes, stride 1, at most [`MAX_OW`] output columns, a window the planar kernels
/// specialise); returns `false`, having written nothing, otherwise. `scratch` needs
/// [`Conv2d::scratch_len`] elements; its first ones become the row of zeros.
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
    if S::LANES != 16 || p.out_w > MAX_OW {
        return false;
    }
    let Some(g) = Geom::new::<S>(p) else {
        return false;
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
    let zeros = &mut scratch[..g.zeros];
    zeros.fill(0.0);
    // The cheap activations are fused into the store (one instantiation each); sigmoid and
    // tanh run as a second pass.
    specialise_cheap!(s, act, a => by_shape(s, a, &conv, zeros, out),
        then eltwise::unary_inplace(s, act, out));
    true
}

/// Picks the block shape, then the window. Planes wider than a vector take two chunks side
/// by side in 3 rows (six accumulators: enough independent FMA chains to cover the FMA
/// latency); narrower ones one chunk in 4 rows; planes under 4 rows, 1 row.
#[inline(always)]
fn by_shape<S: Simd, A: Act<S>>(
    s: S,
    act: A,
    conv: &Data<'_, Geom>,
    zeros: &[f32],
    out: &mut [f32],
) {
    macro_rules! go {
        ($k:literal) => {{
            macro_rules! job {
                ($r:literal, $c:literal) => {
                    s.vectorize(Planes::<'_, '_, A, $k, $r, $c> {
                        conv,
                        act,
                        zeros,
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
    match conv.g.k {
        3 => go!(3),
        _ => go!(5),
    }
}

/// The shape of one plane's convolution, validated so that the index arithmetic below cannot
/// overflow.
struct Geom {
    k: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    pad_top: usize,
    pad_left: usize,
    /// Image columns a tap can read (at most `w`); the masks keep the loads below it.
    read_w: usize,
    /// Length of the row of zeros: `max(ow, L) + K - 1` columns a tap can read.
    zeros: usize,
}

impl Geom {
    /// `None` if the band-buffer kernel should run instead: not a depthwise convolution the
    /// planar kernels specialise (see [`planar_shape`]), an empty tensor (nothing to
    /// vectorise), or sizes so large that the index arithmetic could overflow.
    fn new<S: Simd>(p: &Conv2d) -> Option<Geom> {
        // The scratch (`depthwise_band`'s buffer) is at least one phase row of
        // `max(ow, 16) + k + 16` floats, which holds the row of zeros.
        let band = planar_shape(p)?;
        let k = p.kh;
        // Padded columns a tap reads: up to `max(ow, L) - 1 + k - 1` (the chunks cover
        // `max(ow, L)` columns), so image columns below `max(ow, L) + k - 1 - pad_left`.
        let cols_read = p.out_w.max(S::LANES) + k - 1;
        let read_w = p.w.min(cols_read.saturating_sub(p.pad[1]));
        debug_assert!(S::LANES <= crate::params::DEPTHWISE_MAX_LANES);
        debug_assert!(cols_read <= band.phase_len && band.rows >= 1);
        Some(Geom {
            k,
            h: p.h,
            w: p.w,
            oh: p.out_h,
            ow: p.out_w,
            pad_top: p.pad[0],
            pad_left: p.pad[1],
            read_w,
            zeros: cols_read,
        })
    }
}

/// The whole convolution for window `K` and blocks of `R` output rows by `C` chunks.
struct Planes<'a, 'b, A, const K: usize, const R: usize, const C: usize> {
    conv: &'a Data<'b, Geom>,
    act: A,
    zeros: &'a [f32],
    out: &'a mut [f32],
}

impl<S: Simd, A: Act<S>, const K: usize, const R: usize, const C: usize> Job<S>
    for Planes<'_, '_, A, K, R, C>
{
    type Output = ();

    /// Bounds, argued once for the raw accesses below and in [`block`]:
    ///
    /// * input: plane `p` is `input[p * h * w..][..h * w]`; row `y < h` of it is read at
    ///   columns `ox + j + kx - pad_left` for lanes `j < L`, only where that is in
    ///   `0..read_w` (`read_w <= w`): the masked groups' masks select exactly those lanes,
    ///   and an unmasked group has all of them there.
    /// * zeros: `zeros` floats; a row outside the image is `zeros + pad_left`, so its column
    ///   `x` is element `x + pad_left`. Unmasked loads read elements
    ///   `ox + kx .. ox + kx + L <= max(ow, L) + K - 1 = zeros`; masked ones a subset of
    ///   `pad_left .. pad_left + read_w <= zeros`.
    /// * output: plane `p` is `out[p * oh * ow..][..oh * ow]`; a block stores `L` lanes at
    ///   `(oy + r) * ow + ox` when that ends inside `out`, which it does except for a plane
    ///   narrower than a vector, and `ow` lanes otherwise.
    #[inline(always)]
    fn run(self, s: S) {
        const { assert!(K <= MAX_K && K % 2 == 1 && R <= ROWS && C <= 2) };
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
            read_w,
            ..
        } = *g;
        debug_assert!(self.zeros.len() == ow.max(lanes) + K - 1);
        // Blocks: `R` output rows from row `oy0(i)`; the last one ends at the last row.
        let blocks = oh.div_ceil(R);
        let oy0 = |i: usize| (i * R).min(oh - R);
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
        debug_assert!(input.len() == planes * in_plane);
        let (src0, dst0) = (input.as_ptr(), out.as_mut_ptr());
        let zero_row = self.zeros.as_ptr().wrapping_add(pad_left);
        let out_end = dst0.wrapping_add(out.len());
        // By value, so that the loops keep them in registers.
        let at = Strides { ow, pad_left };
        for p in 0..planes {
            let ch = p % c;
            let mut wv = [s.zero(); MAX_K * MAX_K];
            for (v, &x) in wv.iter_mut().zip(&weight[ch * K * K..][..K * K]) {
                *v = s.splat(x);
            }
            let b = s.splat(bias.map_or(0.0, |b| b[ch]));
            let src = src0.wrapping_add(p * in_plane);
            let dst = dst0.wrapping_add(p * out_plane);
            for j in 0..groups {
                let ox = ox(j);
                // Tap `kx` of lane `l` of chunk `c` reads image column
                // `ox[c] + l + kx - pad_left`, which must be in `0..read_w`.
                let masks: [[S::M; K]; C] = array(|c| {
                    array(|kx| {
                        let lo = pad_left.saturating_sub(ox[c] + kx).min(lanes);
                        let hi = (read_w + pad_left).saturating_sub(ox[c] + kx).min(lanes);
                        s.mask_range(lo, hi.max(lo))
                    })
                });
                // Bit `c`: chunk `c` has a tap outside the image, so it loads through masks
                // (a masked load costs more than a plain one, with AVX2 much more).
                let edge = ox.iter().enumerate().fold(0u8, |e, (c, &x)| {
                    let inside = x >= pad_left && x + lanes + K - 1 <= read_w + pad_left;
                    e | (u8::from(!inside) << c)
                });
                for i in 0..blocks {
                    let oy = oy0(i);
                    let rows: [*const f32; MAX_IN_ROWS] = array(|t| {
                        let y = (oy + t).wrapping_sub(pad_top);
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
                                    $($e => block::<S, A, K, R, C, $e>(
                                        s, &wv, b, self.act, &rows, &masks, at, ox, to, out_end,
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

/// The strides a block needs, passed by value.
#[derive(Clone, Copy)]
struct Strides {
    ow: usize,
    pad_left: usize,
}

/// `R` output rows by `C` vectors of columns, from the input rows `rows[0..R + K - 1]`,
/// stored at `out + r * ow + ox[c]`. Chunk `c` loads its taps through `masks` if bit `c` of
/// `EDGE` is set (a chunk at the plane's edge), else with plain loads.
///
/// Register budget (AVX2, 3x3): `R * C` accumulators (6 or 4), nine weights and the tap in
/// use. Each accumulator is a chain of `K * K` dependent FMAs; with six of them in flight,
/// and the next block's starting while this one ends, the FMA latency is covered.
///
/// # Safety
///
/// For every row `t`, chunk `c` and tap `kx`, `rows[t] + ox[c] + kx - pad_left` must be
/// readable for `L` elements (unmasked) or for the lanes of `masks[c][kx]` (masked); and
/// `out + r * ow + ox[c]` writable for `L` lanes where that ends at or before `out_end`,
/// else for `min(ow, L)` lanes.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn block<
    S: Simd,
    A: Act<S>,
    const K: usize,
    const R: usize,
    const C: usize,
    const EDGE: u8,
>(
    s: S,
    wv: &[S::V; MAX_K * MAX_K],
    bias: S::V,
    act: A,
    rows: &[*const f32; MAX_IN_ROWS],
    masks: &[[S::M; K]; C],
    at: Strides,
    ox: [usize; C],
    out: *mut f32,
    out_end: *mut f32,
) {
    let mut acc = [[bias; C]; R];
    // Fully unrolled over the input rows, so that every `ky` below is a constant and the
    // accumulators stay in registers.
    macro_rules! input_rows {
        ($($t:literal)*) => {$(
            if $t < R - 1 + K {
                // SAFETY: one of the block's rows; the caller's contract.
                unsafe {
                    input_row::<S, K, R, C, $t, EDGE>(
                        s, wv, rows[$t], masks, at.pad_left, ox, &mut acc,
                    )
                };
            }
        )*};
    }
    input_rows!(0 1 2 3 4 5 6 7);
    // SAFETY: the caller's contract.
    unsafe { store_block(s, act, &acc, ox, at.ow, out, out_end) };
}

/// Adds input row `T` of a block (`row`) into the accumulators of the output rows it feeds.
///
/// # Safety
///
/// `row + ox[c] + kx - pad_left` must be readable for `L` elements (or the lanes of
/// `masks[c][kx]` if bit `c` of `EDGE` is set) for every tap `kx` and chunk `c`.
#[inline(always)]
unsafe fn input_row<
    S: Simd,
    const K: usize,
    const R: usize,
    const C: usize,
    const T: usize,
    const EDGE: u8,
>(
    s: S,
    wv: &[S::V; MAX_K * MAX_K],
    row: *const f32,
    masks: &[[S::M; K]; C],
    pad_left: usize,
    ox: [usize; C],
    acc: &mut [[S::V; C]; R],
) {
    // Tap by tap, each used at once by every output row it feeds, so that one tap register
    // is live at a time.
    for kx in 0..K {
        for (c, &ox) in ox.iter().enumerate() {
            let p = row.wrapping_add(ox + kx).wrapping_sub(pad_left);
            // SAFETY: the caller's contract.
            let tap = unsafe {
                if EDGE >> c & 1 != 0 {
                    s.load_masked_ptr(p, masks[c][kx])
                } else {
                    s.load_ptr(p)
                }
            };
            for (r, a) in acc.iter_mut().enumerate() {
                if T >= r && T - r < K {
                    a[c] = s.fmadd(tap, wv[(T - r) * K + kx], a[c]);
                }
            }
        }
    }
}
