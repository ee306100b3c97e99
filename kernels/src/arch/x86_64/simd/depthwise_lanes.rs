//! Depthwise convolution with the channels in the vector lanes, for the shapes where the
//! planar kernel ([`super::depthwise`]) is weakest: stride 2, and planes of at most 8 output
//! columns (see [`lanes_band`] for the exact rule; 3x3 and 5x5 windows, dilation 1).
//!
//! Algorithm sketch, per image and group of `L` channels (`L` = lanes; the last group
//! repeats its last channel in the spare lanes and does not store them):
//!
//! ```text
//! wt[tap] = the L channels' weights for `tap`              // K*K vectors, one per tap
//! for each band of output rows (as many as fit the buffer, see `lanes_band`):
//!   for each input row the band reads:
//!     load L columns of L channel rows, transpose: L pixel vectors of L channels
//!     store them into the band buffer at their padded column (padding stays zero)
//!   for each chunk of L outputs, in the band's flat order (a chunk may span rows):
//!     acc[j] = bias                                         // j = output in the chunk
//!     for each tap: acc[j] += pixel(window of j, tap) * wt[tap]
//!     act, transpose acc back to L channel vectors of L outputs, store one per channel
//! ```
//!
//! Why. With channels in the lanes the stride costs nothing: a tap of any output is one
//! aligned pixel vector of the buffer, so stride 2 needs no deinterleave, and a chunk runs
//! `K*K*L` FMAs on `L` independent accumulators with a weight vector loaded once per tap
//! (the others are memory operands). Small planes lose nothing to row ends either, since
//! chunks run through the band's outputs in order, whatever the width: a 7x7 plane is 49
//! outputs in 7 chunks of 8. Chunks inside one output row address their windows from one base
//! at constant offsets; those that span rows take each output's offset from a table built
//! once per call.
//!
//! What it costs: the layout change at both ends, one `L x L` transpose (24 shuffles for
//! AVX2) per `L x L` block of input and of output. With stride 2 the input is four times the
//! output, and the input transposes are about half of the time: measured on Zen 3, the
//! stride-2 MobileNet-v2 layers run at 0.42-0.50 of peak without them and at 0.18-0.24 with
//! them, still ahead of the planar kernel (0.13-0.19). Between layers in a blocked
//! layout (`NCHW8c`) neither transpose would be needed.
//!
//! Tried on Zen 4 for the stride-1 planes of at most 8 columns (the 7x7 MobileNet-v2 layer,
//! 0.22 of peak here; 2026-11-24, branch `small`, `KILN_BENCH_CLOCK=thread cargo bench -p
//! kiln-kernels --features std --bench kernels -- mobilenet`, load 4-6) and not kept: a
//! *flat* planar kernel for outputs as wide as their input, which treats a plane as one
//! vector of `oh * w` outputs (tap `(ky, kx)` of output `i` is input
//! `i + (ky - pad_top) * w + kx - pad_left`, so 49 outputs fill 4 chunks of 16 lanes with no
//! transpose). With the taps read in place through masked loads (the masks depend on the
//! chunk and tap, not the plane: computed once per call), 4 chunks and 2 planes per step, it
//! ran at 0.20-0.22, no better; with `K` zero-masked copies of each plane and plain loads
//! instead, 0.14-0.15 (the taps read the copies right after the stores, at unaligned
//! offsets: no store forwarding). The profile of the masked variant shows no hot spot
//! (weights as memory operands, a mask load per tap), so neither the transposes nor the
//! lanes wasted on 7-wide rows are what limits these layers.
//!
//! Differences from the portable kernel, as for the planar kernel: the sum starts from the
//! bias and is accumulated with FMAs, and a padded tap adds `w * 0.0`.

use super::eltwise;
use super::math::{specialise_cheap, Act};
use super::vector::{array, Job, LanesJob, Simd};
use crate::params::{lanes_band, LanesBand, DEPTHWISE_MAX_LANES};
use crate::{Activation, Conv2d};

/// The largest window side.
const MAX_K: usize = 5;
/// Outputs per band whose window offsets are tabulated once per call (for chunks that span
/// output rows); larger bands compute them with a division.
const TABLE: usize = 1024;

/// The shape, validated so that no index below overflows.
#[derive(Clone, Copy)]
struct Geom {
    k: usize,
    stride: usize,
    batch: usize,
    c: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    pad_top: usize,
    pad_left: usize,
    /// Image columns copied into a buffer row (those some tap reads).
    copy_w: usize,
    band: LanesBand,
}

/// Runs a depthwise conv2d (the portable kernel's signature and semantics, see
/// [`crate::arch::portable::conv2d`]) if [`lanes_band`] assigns its shape to this kernel and
/// returns `true`; returns `false`, having written nothing, otherwise. `scratch` holds the
/// band buffer ([`Conv2d::scratch_len`] elements).
#[allow(clippy::too_many_arguments)]
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
    let Some(band) = lanes_band(p) else {
        return false;
    };
    // 2^40 per dimension is far beyond any real tensor and keeps every offset computed below
    // inside `isize`.
    const LIMIT: usize = 1 << 40;
    if [p.h, p.w, p.out_h, p.out_w, p.batch, p.c_out]
        .iter()
        .any(|&d| d >= LIMIT || d == 0)
    {
        return false;
    }
    let Some(planes) = p.batch.checked_mul(p.c_out) else {
        return false;
    };
    let (Some(in_len), Some(out_len)) = (
        p.h.checked_mul(p.w).and_then(|x| x.checked_mul(planes)),
        p.out_h
            .checked_mul(p.out_w)
            .and_then(|x| x.checked_mul(planes)),
    ) else {
        return false;
    };
    let g = Geom {
        k: p.kh,
        stride: p.stride[0],
        batch: p.batch,
        c: p.c_out,
        h: p.h,
        w: p.w,
        oh: p.out_h,
        ow: p.out_w,
        pad_top: p.pad[0],
        pad_left: p.pad[1],
        copy_w: p.w.min(band.width - p.pad[1]),
        band,
    };
    let k = p.kh;
    let data = Data {
        g,
        input: &input[..in_len],
        weight: &weight[..p.c_out * k * k],
        bias: bias.map(|b| &b[..p.c_out]),
    };
    let scratch = &mut scratch[..band.len];
    let out = &mut out[..out_len];
    // The cheap activations are fused into the store (one instantiation each); sigmoid and
    // tanh run as a second pass.
    specialise_cheap!(s, act, a => by_shape(s, a, &data, scratch, out),
        then eltwise::unary_inplace(s, act, out));
    true
}

/// The operands, sliced to the lengths the shape needs (so a short slice panics before
/// any raw access).
struct Data<'a> {
    g: Geom,
    input: &'a [f32],
    weight: &'a [f32],
    bias: Option<&'a [f32]>,
}

/// Picks the window and stride.
#[inline(always)]
fn by_shape<S: Simd, A: Act<S>>(s: S, act: A, d: &Data<'_>, buf: &mut [f32], out: &mut [f32]) {
    macro_rules! go {
        ($k:literal, $st:literal) => {
            s.vectorize(Conv::<'_, '_, A, $k, $st> { d, act, buf, out })
        };
    }
    match (d.g.k, d.g.stride) {
        (3, 1) => go!(3, 1),
        (3, _) => go!(3, 2),
        (5, 1) => go!(5, 1),
        _ => go!(5, 2),
    }
}

/// The whole convolution for window `K` and stride `ST`; [`Job::run`] picks up the lane
/// count through [`Simd::with_lanes`].
struct Conv<'a, 'b, A, const K: usize, const ST: usize> {
    d: &'a Data<'b>,
    act: A,
    buf: &'a mut [f32],
    out: &'a mut [f32],
}

impl<S: Simd, A: Act<S>, const K: usize, const ST: usize> Job<S> for Conv<'_, '_, A, K, ST> {
    type Output = ();

    #[inline(always)]
    fn run(self, s: S) {
        s.with_lanes(self)
    }
}

impl<S: Simd, A: Act<S>, const K: usize, const ST: usize> LanesJob<S> for Conv<'_, '_, A, K, ST> {
    type Output = ();

    /// Bounds, argued once for the raw accesses below and in the helpers:
    ///
    /// * buffer: `band.rows * width * L` floats from the aligned start (the band has
    ///   `DEPTHWISE_MAX_LANES >= L` floats of slack for the alignment); pixel `(t, col)` is
    ///   `L` floats at `(t * width + col) * L`. A band uses rows `t < rows <= band.rows`.
    /// * copies: image row `y < h`, columns `x < copy_w <= w` of plane `(n, ch)`, `ch < c`;
    ///   they land in columns `pad_left + x < pad_left + copy_w <= width`.
    /// * windows: output `(oy, ox)` of a band (`oy - oy0 < out_rows`, `ox < ow`) reads rows
    ///   `(oy - oy0) * ST + ky < rows` and columns `ox * ST + kx <= (ow - 1) * ST + K - 1 <
    ///   width`.
    /// * output: plane `(n, cg + l)` for `l < valid_ch` (so `cg + l < c`), elements
    ///   `i..i + valid` of the band's outputs, all `< oh * ow`.
    #[inline(always)]
    fn run<const L: usize>(self, s: S) {
        const { assert!(L == S::LANES && K <= MAX_K && (ST == 1 || ST == 2)) };
        let Data {
            g,
            input,
            weight,
            bias,
        } = *self.d;
        let Geom {
            batch,
            c,
            h,
            w,
            oh,
            ow,
            pad_top,
            pad_left,
            copy_w,
            band,
            ..
        } = g;
        let width = band.width;
        let row_len = width * L;
        let skip = self.buf.as_ptr().align_offset(64).min(L);
        let buf = &mut self.buf[skip..][..band.rows * row_len];
        // The padding is zeros from here on: copies write only image columns, and rows
        // outside the image are zeroed when a band needs them.
        buf.fill(0.0);
        let (in_plane, out_plane) = (h * w, oh * ow);
        let bands = oh.div_ceil(band.out_rows);
        let (buf0, out0) = (buf.as_mut_ptr(), self.out.as_mut_ptr());

        // Where each output of a full band starts its window, for chunks that span rows.
        // Entries past the band repeat its last output, so a partial chunk reads `L` entries
        // and its extra lanes compute that output again (they are not stored). In the last,
        // shorter band, entries past its outputs name rows below it, still inside the
        // buffer (it has `band.rows` rows); their lanes are not stored either.
        let band_px = band.out_rows * ow;
        let mut table = [0u32; TABLE + DEPTHWISE_MAX_LANES];
        let tabulated = band_px <= TABLE && band.len <= u32::MAX as usize;
        if tabulated {
            let (mut x, mut o) = (0, 0);
            for t in &mut table[..band_px] {
                *t = o as u32;
                x += 1;
                o += ST * L;
                if x == ow {
                    x = 0;
                    o += (ST * width - ow * ST) * L;
                }
            }
            let last = table[band_px - 1];
            table[band_px..band_px + L].fill(last);
        }
        let offsets = |q: usize, valid: usize| -> [usize; L] {
            if tabulated {
                let t = &table[q..q + L];
                array(|j| t[j] as usize)
            } else {
                array(|j| {
                    let q = q + j.min(valid - 1);
                    ((q / ow) * ST * width + (q % ow) * ST) * L
                })
            }
        };

        let mut wt = [0.0f32; MAX_K * MAX_K * DEPTHWISE_MAX_LANES];
        let mut bv = [0.0f32; DEPTHWISE_MAX_LANES];
        let mut src = [input.as_ptr(); L];
        for n in 0..batch {
            for cg in (0..c).step_by(L) {
                let valid_ch = L.min(c - cg);
                // Lane `l` is channel `cg + l`; lanes past the last channel repeat it (their
                // results are not stored).
                for l in 0..L {
                    let ch = (cg + l).min(c - 1);
                    let taps = &weight[ch * K * K..][..K * K];
                    for (tap, &x) in taps.iter().enumerate() {
                        wt[tap * L + l] = x;
                    }
                    bv[l] = bias.map_or(0.0, |b| b[ch]);
                    src[l] = input[(n * c + ch) * in_plane..][..in_plane].as_ptr();
                }
                let b = s.load(&bv[..L]);
                let dst = out0.wrapping_add((n * c + cg) * out_plane);
                for bi in 0..bands {
                    let oy0 = bi * band.out_rows;
                    let oy1 = (oy0 + band.out_rows).min(oh);
                    // Padded rows `oy0 * ST..` go to buffer rows `0..rows`; of those, the
                    // image rows to buffer rows `top..bottom`.
                    let y0 = oy0 * ST;
                    let rows = (oy1 - oy0 - 1) * ST + K;
                    let top = pad_top.saturating_sub(y0).min(rows);
                    let bottom = (pad_top + h).saturating_sub(y0).clamp(top, rows);
                    if bands > 1 {
                        buf[..top * row_len].fill(0.0);
                        buf[bottom * row_len..rows * row_len].fill(0.0);
                    }
                    for t in top..bottom {
                        let y = y0 + t - pad_top;
                        // SAFETY: see the bounds above.
                        unsafe {
                            copy_row::<S, L>(
                                s,
                                &src,
                                y * w,
                                copy_w,
                                buf0.wrapping_add(t * row_len + pad_left * L),
                            )
                        };
                    }
                    let first = oy0 * ow;
                    let count = (oy1 - oy0) * ow;
                    let buf_r = buf0.cast_const();
                    // Chunk `q..q + L` starts at output column `x` of the row whose windows
                    // start at `row_base`.
                    let (mut q, mut x, mut row_base) = (0, 0, 0);
                    while q < count {
                        let valid = L.min(count - q);
                        let mut acc = [b; L];
                        if x + L <= ow {
                            // One output row: one base, constant offsets.
                            let base = buf_r.wrapping_add(row_base + x * ST * L);
                            // SAFETY: see the bounds above (outputs `q..q + L` of one row).
                            unsafe { row_windows::<S, K, ST, L>(s, &wt, base, width, &mut acc) };
                        } else {
                            // Spans rows, or is the band's last, partial chunk.
                            let offs = offsets(q, valid);
                            let ptrs: [*const f32; L] = array(|j| buf_r.wrapping_add(offs[j]));
                            // SAFETY: see the bounds above, and the table's comment for the
                            // lanes past the band's outputs.
                            unsafe { windows::<S, K, L>(s, &wt, &ptrs, width, &mut acc) };
                        }
                        x += L;
                        while x >= ow {
                            x -= ow;
                            row_base += ST * width * L;
                        }
                        for a in &mut acc {
                            *a = self.act.apply(s, *a);
                        }
                        s.transpose(&mut acc);
                        let at = dst.wrapping_add(first + q);
                        for (l, &v) in acc.iter().enumerate().take(valid_ch) {
                            let at = at.wrapping_add(l * out_plane);
                            // SAFETY: see the bounds above.
                            unsafe {
                                if valid == L {
                                    s.store_ptr(at, v);
                                } else {
                                    s.store_first_ptr(at, valid, v);
                                }
                            }
                        }
                        q += valid;
                    }
                }
            }
        }
    }
}

/// `acc[j] += ` the window of output `j` of a chunk inside one output row, whose first
/// window starts at `base` (the next ones `ST` pixels apart).
///
/// # Safety
///
/// The `K` buffer rows from `base` (`width * L` floats apart) are readable for
/// `((L - 1) * ST + K) * L` floats.
#[inline(always)]
unsafe fn row_windows<S: Simd, const K: usize, const ST: usize, const L: usize>(
    s: S,
    wt: &[f32; MAX_K * MAX_K * DEPTHWISE_MAX_LANES],
    base: *const f32,
    width: usize,
    acc: &mut [S::V; L],
) {
    for ky in 0..K {
        let row = base.wrapping_add(ky * width * L);
        for kx in 0..K {
            let wv = s.load(&wt[(ky * K + kx) * L..][..L]);
            for (j, a) in acc.iter_mut().enumerate() {
                // SAFETY: the caller's contract.
                let v = unsafe { s.load_ptr(row.add((j * ST + kx) * L)) };
                *a = s.fmadd(v, wv, *a);
            }
        }
    }
}

/// `acc[j] += ` the window starting at `ptrs[j]`.
///
/// # Safety
///
/// The `K` buffer rows from each `ptrs[j]` (`width * L` floats apart) are readable for
/// `K * L` floats.
#[inline(always)]
unsafe fn windows<S: Simd, const K: usize, const L: usize>(
    s: S,
    wt: &[f32; MAX_K * MAX_K * DEPTHWISE_MAX_LANES],
    ptrs: &[*const f32; L],
    width: usize,
    acc: &mut [S::V; L],
) {
    for ky in 0..K {
        let off = ky * width * L;
        for kx in 0..K {
            let wv = s.load(&wt[(ky * K + kx) * L..][..L]);
            for (a, p) in acc.iter_mut().zip(ptrs) {
                // SAFETY: the caller's contract.
                let v = unsafe { s.load_ptr(p.add(off + kx * L)) };
                *a = s.fmadd(v, wv, *a);
            }
        }
    }
}

/// Copies `n` columns of one image row (from element `at` of each of the `L` planes at
/// `src`) into a buffer row as pixel vectors, one transpose per `L` columns.
///
/// # Safety
///
/// `src[l] + at` is readable for `n` floats; `dst` is writable for `n * L` floats.
#[inline(always)]
unsafe fn copy_row<S: Simd, const L: usize>(
    s: S,
    src: &[*const f32; L],
    at: usize,
    n: usize,
    dst: *mut f32,
) {
    let mut x = 0;
    while x + L <= n {
        // SAFETY: `x + L <= n` columns of each plane's row.
        let mut v: [S::V; L] = array(|l| unsafe { s.load_ptr(src[l].add(at + x)) });
        s.transpose(&mut v);
        for (j, &p) in v.iter().enumerate() {
            // SAFETY: pixel `x + j < n` of the buffer row.
            unsafe { s.store_ptr(dst.add((x + j) * L), p) };
        }
        x += L;
    }
    if x < n {
        let m = s.mask_range(0, n - x);
        // SAFETY: the mask selects the columns below `n`.
        let mut v: [S::V; L] = array(|l| unsafe { s.load_masked_ptr(src[l].add(at + x), m) });
        s.transpose(&mut v);
        for (j, &p) in v.iter().enumerate().take(n - x) {
            // SAFETY: pixel `x + j < n` of the buffer row.
            unsafe { s.store_ptr(dst.add((x + j) * L), p) };
        }
    }
}
