//! Pooling on planes at most two vectors wide (Inception-v2's 28x28, 14x14 and 7x7 maps,
//! SqueezeNet's 27x27 and 13x13, DenseNet-121's 14x14 transition), any window up to 8 columns
//! wide and any strides: every tap is a permute.
//!
//! Algorithm sketch. For each output row, each input row of its window (clipped to the
//! image) is loaded whole into two vectors `lo ++ hi` (masked; the lanes past the row hold the
//! fold's neutral value, `-inf` or `0.0`). For each window column `kx` and each output chunk
//! of `LANES` columns, one two-source permute ([`Simd::permute2`]) gathers the tap of every
//! output column at once: lane `ox` takes element `ox * sw + kx - pl` of the row, or the last
//! lane (`2 * LANES - 1`, always neutral since `w < 2 * LANES`) where that column is padding.
//! The fold then runs over the window in the portable kernel's order (rows, then columns, from
//! `-inf` or `0.0`), so the result is bit-identical to it: folding a neutral lane changes nothing
//! (`max(-inf, m)` keeps `m`; a sum from `+0.0` is never `-0.0`, so adding `+0.0` is exact),
//! and an average divides by the same count (a row factor times a column factor,
//! [`Reduce::count_factor`]). A plane with a NaN is recomputed by the scalar definition, as
//! in the other paths. Planes go in groups that fit in L1, output row by output row across
//! the group, so a row's window is worked out once per group and the folds in flight are
//! independent.
//!
//! Why. The row-vector paths of [`super::pool`] vectorise along a row, and on a 14-wide row of
//! 7 outputs that is one partly used vector per window row and column plus the scalar border
//! columns; the padded-row path copies every row first. Here an output row costs `kh` loads
//! and `kh * kw` permutes and folds per chunk whatever the padding, strides and row width.
//!
//! Measured (kernel bench `-- pool/`, AMD EPYC Zen 4, G window elements/s, AVX-512, before ->
//! after): Inception-v2's 3x3 stride-2 max pools on 28x28 and 14x14 7.1 -> 20, 3.0 -> 12,
//! its 3x3 average pools on 28x28 / 14x14 / 7x7 16 / 18 / 11.8 -> 27 / 23 / 12.6;
//! SqueezeNet's 27x27 max pool 7.0 -> 16.8; DenseNet-121's 2x2 average pools on 28x28 and
//! 14x14 6.3 -> 11.2, 1.5 -> 6.8. AVX2 (strided windows only): the 14x14 max pool 3.8 -> 6.3,
//! the 2x2 average pool 1.5 -> 3.8.

use super::pool::{window, Reduce};
use super::vector::{array, Simd};
use crate::arch::x86_64::avx2::blis::prefetch_run;
use crate::Pool2d;

/// The widest window handled (the index vectors are per window column).
const KW_MAX: usize = 8;

/// Input floats per group of planes walked row by row together (24 KiB, within any L1).
const GROUP_FLOATS: usize = 6 * 1024;

/// Whether this path takes a pooling with `S`: planes that fit (`w < 2 LANES`, `out_w <=
/// 2 LANES`, a window at most [`KW_MAX`] wide), and with AVX2, whose two-source permute is
/// four instructions, only strided windows: its flat stride-1 planes ran 1.4-2x faster on
/// Inception-v2's 14x14 and 7x7 pools (and with AVX-512 on Zen 4, 0.7-0.9x as fast as this
/// path). On Intel, whose permutes all go to one port, the flat path also takes the stride-1
/// planes one vector wide: per layer in Inception-v2 (AVX-512, Xeon family 6 model 207, the
/// two paths in turns), its 3x3 pools on 7x7 ran in 0.66-0.72 of this path's time and on
/// 14x14 in 0.80-0.84, while on 28x28 (two vectors) this path stays 1.6-1.8x the faster.
/// Not on AMD Zen 5, whose 512-bit FMAs are as wide as Intel's but whose shuffles are not
/// confined to one port: there the flat path took 1.41x this path's time on the 3x3 max
/// pool on 7x7, 1.57x on the 3x3 average pool on 7x7 and 1.15x on 14x14 (AMD EPYC family 26
/// model 2, both in turns in one run).
#[inline(always)]
pub(super) fn takes<S: Simd>(p: &Pool2d) -> bool {
    let l = S::LANES;
    p.h > 0
        && p.w > 0
        && p.w < 2 * l
        && p.out_w <= 2 * l
        && p.kw <= KW_MAX
        && (S::ONE_INSTRUCTION_PERMUTE2 || p.stride[1] > 1)
        && !(p.stride[1] == 1 && p.w <= l && crate::arch::x86_64::cache::intel())
}

/// Runs the pooling if this path [`takes`] it, or returns `false` having written nothing.
/// `input` and `out` hold exactly the whole planes ([`super::pool`] checked their sizes).
#[inline(always)]
pub(super) fn pool<S: Simd, R: Reduce<S>>(
    s: S,
    r: R,
    p: &Pool2d,
    input: &[f32],
    out: &mut [f32],
) -> bool {
    let l = S::LANES;
    let (w, ow, kw) = (p.w, p.out_w, p.kw);
    if !takes::<S>(p) {
        return false;
    }
    let sw = p.stride[1];
    let [_, pl, _, pr] = p.pad;
    let chunks = ow.div_ceil(l);
    let neutral = 2 * l as u32 - 1;

    // Per chunk and window column, the row element each output lane reads; per chunk, the
    // column factor of each lane's divisor.
    let mut taps = [[[neutral; 16]; KW_MAX]; 2];
    let mut col_factor = [[0.0f32; 16]; 2];
    for ox in 0..ow {
        let (c, lane) = (ox / l, ox % l);
        for (kx, tap) in taps[c].iter_mut().enumerate().take(kw) {
            // In the padded row, column `ox * sw + kx`; in the image if not in the padding.
            let ix = (ox * sw + kx).checked_sub(pl).filter(|&ix| ix < w);
            tap[lane] = ix.map_or(neutral, |ix| ix as u32);
        }
        let (cols, padded) = window(ox, sw, kw, pl, w, pr);
        col_factor[c][lane] = r.count_factor(cols.len(), padded) as f32;
    }
    let taps: [[S::I; KW_MAX]; 2] = array(|c| array(|kx| s.indices(&taps[c][kx])));
    let col_factor: [S::V; 2] = array(|c| s.load(&col_factor[c]));

    let g = Geometry {
        p,
        taps,
        col_factor,
    };
    // The networks' window widths as constants and the chunk count as a constant, so that
    // the window loops unroll and the accumulators stay in registers.
    match (chunks, kw) {
        (1, 2) => planes::<S, R, 1, 2>(s, r, &g, input, out),
        (1, 3) => planes::<S, R, 1, 3>(s, r, &g, input, out),
        (2, 2) => planes::<S, R, 2, 2>(s, r, &g, input, out),
        (2, 3) => planes::<S, R, 2, 3>(s, r, &g, input, out),
        (1, _) => planes::<S, R, 1, 0>(s, r, &g, input, out),
        _ => planes::<S, R, 2, 0>(s, r, &g, input, out),
    }
    true
}

/// A plane's permute indices and divisor factors, from [`pool`].
struct Geometry<'a, S: Simd> {
    p: &'a Pool2d,
    taps: [[S::I; KW_MAX]; 2],
    col_factor: [S::V; 2],
}

/// Every plane, with `C` output chunks and a window `KW` wide (0: `p.kw`).
#[allow(clippy::needless_range_loop)] // `c` indexes the chunk's taps, accumulator and mask
#[inline(always)]
fn planes<S: Simd, R: Reduce<S>, const C: usize, const KW: usize>(
    s: S,
    r: R,
    g: &Geometry<'_, S>,
    input: &[f32],
    out: &mut [f32],
) {
    let p = g.p;
    let l = S::LANES;
    let (w, ow) = (p.w, p.out_w);
    let kw = if KW == 0 { p.kw } else { KW };
    debug_assert!(kw == p.kw && C == ow.div_ceil(l));
    let [sh, sw] = p.stride;
    let [pt, pl, pb, pr] = p.pad;
    let (in_plane, out_plane) = (p.h * w, p.out_h * ow);
    let fill = s.splat(R::NEUTRAL);
    let lo_mask = s.mask_range(0, w.min(l));
    let hi_mask = s.mask_range(0, w.saturating_sub(l));
    let no_nan = s.is_nan(fill);
    let out_mask: [S::M; C] = array(|c| s.mask_range(0, (ow - c * l).min(l)));
    // Groups of planes that fit in L1 together; in a group, output rows outer and planes
    // inner: a row's window is worked out once for the group, and consecutive folds are
    // independent chains.
    let planes = input.len() / in_plane;
    let group = (GROUP_FLOATS / in_plane).max(1);
    let mut nan = no_nan;
    for first in (0..planes).step_by(group) {
        let group = first..(first + group).min(planes);
        // The next group's input, a share per output row: in a network the planes arrive
        // from L2 or L3 (the layer before wrote them), and a group is a few dozen short
        // planes, too short for the hardware's streams to get going. Kernel bench with the
        // input in memory (`KILN_BENCH_COLD=1`, AMD EPYC Zen 5, AVX-512): SqueezeNet's 3x3
        // max pool on 27x27 3.4-3.9 -> 9.8-13.5 G window elements/s, Inception-v2's 3x3
        // average pools on 28x28 and 14x14 8-15 -> 20-26 and 6-11 -> 14-21; warm unchanged.
        let next = &input[group.end * in_plane..(group.end + group.len()).min(planes) * in_plane];
        let share = next.len().div_ceil(p.out_h.max(1)).next_multiple_of(16);
        for oy in 0..p.out_h {
            let from = (oy * share).min(next.len());
            prefetch_run(next[from..].as_ptr(), share.min(next.len() - from));
            let (rows, padded_rows) = window(oy, sh, p.kh, pt, p.h, pb);
            let row_factor = s.splat(r.count_factor(rows.len(), padded_rows) as f32);
            let counts: [S::V; C] = array(|c| s.mul(g.col_factor[c], row_factor));
            for plane in group.clone() {
                let src = &input[plane * in_plane..][..in_plane];
                let mut acc = [r.init(s); C];
                for iy in rows.clone() {
                    let row = &src[iy * w..][..w];
                    // SAFETY: the masks select lanes `0..min(w, l)` and `l..w` of the row.
                    let (lo, hi) = unsafe {
                        let lo = s.load_masked_ptr(row.as_ptr(), lo_mask);
                        let hi = if w > l {
                            s.load_masked_ptr(row.as_ptr().add(l), hi_mask)
                        } else {
                            fill
                        };
                        (lo, hi)
                    };
                    // Masked loads zero the other lanes; a max pool needs -inf there.
                    let (lo, hi) = if R::NEUTRAL == 0.0 {
                        (lo, hi)
                    } else {
                        (s.select(lo_mask, lo, fill), s.select(hi_mask, hi, fill))
                    };
                    if R::NAN_AWARE {
                        nan = s.mask_or(nan, s.unordered(lo, hi));
                    }
                    for c in 0..C {
                        for tap in &g.taps[c][..kw] {
                            acc[c] = r.step_clean(s, acc[c], s.permute2(*tap, lo, hi));
                        }
                    }
                }
                let line = &mut out[plane * out_plane + oy * ow..][..ow];
                for c in 0..C {
                    let v = r.finish_counts(s, acc[c], counts[c]);
                    // SAFETY: the mask selects lanes `0..ow - c l` of the row's `ow` outputs.
                    unsafe { s.store_masked_ptr(line.as_mut_ptr().add(c * l), out_mask[c], v) };
                }
            }
        }
    }
    if s.mask_any(nan) {
        // The planes with a NaN again, by the scalar definition, which propagates it as the
        // portable kernel does.
        for (src, dst) in input
            .chunks_exact(in_plane)
            .zip(out.chunks_exact_mut(out_plane))
        {
            if !src.iter().any(|x| x.is_nan()) {
                continue;
            }
            for (oy, line) in dst.chunks_exact_mut(ow).enumerate() {
                let (rows, ph) = window(oy, sh, p.kh, pt, p.h, pb);
                for (ox, y) in line.iter_mut().enumerate() {
                    let (cols, pw) = window(ox, sw, kw, pl, w, pr);
                    *y = r.scalar(src, w, rows.clone(), cols, ph * pw);
                }
            }
        }
    }
}
