//! 3-D convolution ([`conv3d`]) and pooling ([`max_pool3d`], [`avg_pool3d`]) over NCDHW
//! data. (1-D ones the compiler maps onto the 2-D kernels with a height of 1.)
//!
//! Algorithm sketch for the convolution, the 2-D one's general path one dimension up:
//!
//! * **Pointwise** (1x1x1, stride 1, unpadded): each (image, group) is one
//!   `gemm(c_out/g, d*h*w, c_in/g)` straight on the input planes, no scratch.
//! * **Otherwise** im2col one (image, group) into the scratch as a
//!   `[c_in/g * kd*kh*kw, od*oh*ow]` matrix (row `(ci, kz, ky, kx)`, column `(oz, oy, ox)`,
//!   padding as explicit zeros; for each tap the valid output range of every axis is computed
//!   once, so the copy loops have no per-element bounds test), then
//!   `gemm(c_out/g, od*oh*ow, c_in/g*kd*kh*kw)` with the group's weights, which already are that
//!   matrix's row-major left operand. The scratch is reused for every group and image.
//!
//! Both go through the GEMM the caller passes (the `Kernels` table's), then every output
//! channel volume through the shared epilogue (bias + activation).
//!
//! Pooling clips each output's window to the input once per axis (the valid taps form one
//! range, since the tap coordinate grows with the tap index), so the triple loop over the
//! window has no bounds test. Max never reads padding (an all-padding window gives `-inf`);
//! average divides by the real taps, or with `count_include_pad` by the taps inside the padded
//! input (ONNX Runtime's rule; taps past the end padding, which ceil-mode outputs reach, are
//! never counted).

use core::ops::Range;

use super::conv::valid_range;
use super::epilogue::epilogue;
use super::matmul::GemmFn;
use crate::{Activation, Conv3d, Pool3d};

/// 3-D convolution: `x` is `[batch, c_in, d, h, w]`, `weight` `[c_out, c_in/groups, kd, kh,
/// kw]`, `bias` `[c_out]`, `y` `[batch, c_out, od, oh, ow]`; padding reads zeros and `act`
/// follows the bias. `scratch` needs [`Conv3d::scratch_len`] elements (contents irrelevant);
/// `gemm` is `Kernels::gemm` (see [`GemmFn`](crate::GemmFn)).
#[allow(clippy::too_many_arguments)] // The signature is the contract generated code calls.
pub fn conv3d(
    p: &Conv3d,
    x: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    scratch: &mut [f32],
    y: &mut [f32],
    gemm: GemmFn,
) {
    debug_assert!(p.groups > 0, "conv3d: groups is 0");
    debug_assert!(
        p.c_in.is_multiple_of(p.groups) && p.c_out.is_multiple_of(p.groups),
        "conv3d: bad groups"
    );
    debug_assert!(
        p.stride.iter().chain(&p.dilation).all(|&s| s > 0),
        "conv3d: zero stride or dilation"
    );
    let cig = p.c_in / p.groups;
    let cog = p.c_out / p.groups;
    let in_vol = p.d * p.h * p.w;
    let out_vol = p.out[0] * p.out[1] * p.out[2];
    let k = cig * p.k[0] * p.k[1] * p.k[2];
    debug_assert!(x.len() >= p.batch * p.c_in * in_vol, "conv3d: x too short");
    debug_assert!(weight.len() >= p.c_out * k, "conv3d: weight too short");
    debug_assert!(
        bias.is_none_or(|b| b.len() >= p.c_out),
        "conv3d: bias too short"
    );
    debug_assert!(
        scratch.len() >= p.scratch_len(),
        "conv3d: scratch too short"
    );
    debug_assert!(
        y.len() >= p.batch * p.c_out * out_vol,
        "conv3d: y too short"
    );
    if out_vol == 0 {
        return;
    }
    let finish = |dst: &mut [f32], first: usize| {
        for (c, vol) in (first..).zip(dst.chunks_exact_mut(out_vol)) {
            epilogue(vol, 1.0, bias.map_or(0.0, |b| b[c]), act);
        }
    };
    let pointwise = p.is_pointwise();
    if pointwise {
        debug_assert!(p.out == [p.d, p.h, p.w], "conv3d: 1x1x1 output size");
    }
    for n in 0..p.batch {
        for g in 0..p.groups {
            let src = &x[(n * p.c_in + g * cig) * in_vol..][..cig * in_vol];
            let w = &weight[g * cog * k..][..cog * k];
            let dst = &mut y[(n * p.c_out + g * cog) * out_vol..][..cog * out_vol];
            if pointwise {
                gemm(cog, out_vol, cig, w, src, dst);
            } else {
                let cols = &mut scratch[..k * out_vol];
                im2col3d(p, cig, src, cols);
                gemm(cog, out_vol, k, w, cols, dst);
            }
            finish(dst, g * cog);
        }
    }
}

/// The im2col matrix of one (image, group): `cols[(ci, kz, ky, kx), (oz, oy, ox)]` is the input
/// under that tap of that output, or 0 in the padding.
fn im2col3d(p: &Conv3d, cig: usize, src: &[f32], cols: &mut [f32]) {
    let [od, oh, ow] = p.out;
    let [sd, sh, sw] = p.stride;
    let [dd, dh, dw] = p.dilation;
    let [pd, ph, pw, _, _, _] = p.pad;
    let in_vol = p.d * p.h * p.w;
    let out_vol = od * oh * ow;
    let mut rows = cols.chunks_exact_mut(out_vol);
    for ci in 0..cig {
        let vol = &src[ci * in_vol..(ci + 1) * in_vol];
        for kz in 0..p.k[0] {
            let zs = valid_range(od, p.d, pd, kz * dd, sd);
            for ky in 0..p.k[1] {
                let ys = valid_range(oh, p.h, ph, ky * dh, sh);
                for kx in 0..p.k[2] {
                    let xs = valid_range(ow, p.w, pw, kx * dw, sw);
                    // Exactly cig * kd * kh * kw rows were sliced for us.
                    let Some(row) = rows.next() else { return };
                    for (oz, plane) in row.chunks_exact_mut(oh * ow).enumerate() {
                        if !zs.contains(&oz) || ys.is_empty() || xs.is_empty() {
                            plane.fill(0.0);
                            continue;
                        }
                        let iz = oz * sd + kz * dd - pd;
                        for (oy, line) in plane.chunks_exact_mut(ow).enumerate() {
                            if !ys.contains(&oy) {
                                line.fill(0.0);
                                continue;
                            }
                            let iy = oy * sh + ky * dh - ph;
                            line[..xs.start].fill(0.0);
                            line[xs.end..].fill(0.0);
                            let ix0 = xs.start * sw + kx * dw - pw;
                            let in_row = &vol[(iz * p.h + iy) * p.w..][..p.w];
                            let seg = &mut line[xs.clone()];
                            if sw == 1 {
                                seg.copy_from_slice(&in_row[ix0..ix0 + seg.len()]);
                            } else {
                                for (d, &v) in seg.iter_mut().zip(in_row[ix0..].iter().step_by(sw))
                                {
                                    *d = v;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The taps of output `o` along one axis: the range of tap indices on real input, the input
/// coordinate of its first tap, and the number of taps inside the padded input.
#[derive(Clone, Debug)]
struct Taps {
    taps: Range<usize>,
    first: usize,
    padded: usize,
}

fn taps(
    o: usize,
    stride: usize,
    k: usize,
    dil: usize,
    before: usize,
    n: usize,
    after: usize,
) -> Taps {
    let start = o * stride;
    // Tap t is at padded coordinate start + t * dil; it is real when in before..before + n.
    let lo = if start >= before {
        0
    } else {
        (before - start).div_ceil(dil)
    };
    let hi = if start >= before + n {
        0
    } else {
        (before + n - start).div_ceil(dil)
    };
    let padded_end = before + n + after;
    let padded = if start >= padded_end {
        0
    } else {
        (padded_end - start).div_ceil(dil)
    };
    let hi = hi.min(k);
    let lo = lo.min(hi);
    Taps {
        taps: lo..hi,
        first: (start + lo * dil).saturating_sub(before),
        padded: padded.min(k),
    }
}

/// Applies `reduce(volume, [z, y, x] taps, padded_count)` at every output of every channel.
fn pool3d_with(
    p: &Pool3d,
    x: &[f32],
    y: &mut [f32],
    reduce: impl Fn(&[f32], [&Taps; 3], usize) -> f32,
) {
    debug_assert!(
        p.stride.iter().chain(&p.dilation).all(|&s| s > 0),
        "pool3d: zero stride or dilation"
    );
    let in_vol = p.d * p.h * p.w;
    let [od, oh, ow] = p.out;
    let out_vol = od * oh * ow;
    let planes = p.batch * p.channels;
    debug_assert!(x.len() >= planes * in_vol, "pool3d: x too short");
    debug_assert!(y.len() >= planes * out_vol, "pool3d: y too short");
    if out_vol == 0 {
        return;
    }
    let axis = |a: usize, o: usize, n: usize| {
        taps(
            o,
            p.stride[a],
            p.k[a],
            p.dilation[a],
            p.pad[a],
            n,
            p.pad[a + 3],
        )
    };
    for (i, dst) in y[..planes * out_vol].chunks_exact_mut(out_vol).enumerate() {
        let vol = &x[i * in_vol..(i + 1) * in_vol];
        let mut out = dst.iter_mut();
        for oz in 0..od {
            let tz = axis(0, oz, p.d);
            for oy in 0..oh {
                let ty = axis(1, oy, p.h);
                for ox in 0..ow {
                    let tx = axis(2, ox, p.w);
                    let count = tz.padded * ty.padded * tx.padded;
                    if let Some(d) = out.next() {
                        *d = reduce(vol, [&tz, &ty, &tx], count);
                    }
                }
            }
        }
    }
}

/// Calls `f(value)` for every real input element under the window `t` of `vol`.
#[inline(always)]
fn for_window(p: &Pool3d, vol: &[f32], t: [&Taps; 3], mut f: impl FnMut(f32)) {
    let [dz, dy, dx] = p.dilation;
    for jz in 0..t[0].taps.len() {
        let iz = t[0].first + jz * dz;
        for jy in 0..t[1].taps.len() {
            let iy = t[1].first + jy * dy;
            let row = &vol[(iz * p.h + iy) * p.w..][..p.w];
            for jx in 0..t[2].taps.len() {
                f(row[t[2].first + jx * dx]);
            }
        }
    }
}

/// ONNX `MaxPool` on NCDHW data (with dilation); padding never wins, NaN propagates.
pub fn max_pool3d(p: &Pool3d, x: &[f32], y: &mut [f32]) {
    pool3d_with(p, x, y, |vol, t, _| {
        let mut m = f32::NEG_INFINITY;
        for_window(p, vol, t, |v| {
            if v > m || v.is_nan() {
                m = v;
            }
        });
        m
    });
}

/// ONNX `AveragePool` on NCDHW data (with dilation); see [`Pool3d::count_include_pad`] for
/// the divisor. An empty window gives 0.
pub fn avg_pool3d(p: &Pool3d, x: &[f32], y: &mut [f32]) {
    pool3d_with(p, x, y, |vol, t, padded| {
        let real = t[0].taps.len() * t[1].taps.len() * t[2].taps.len();
        let count = if p.count_include_pad { padded } else { real };
        if count == 0 {
            return 0.0;
        }
        let mut s = 0.0f32;
        for_window(p, vol, t, |v| s += v);
        s / count as f32
    });
}
