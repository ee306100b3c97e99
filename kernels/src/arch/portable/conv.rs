//! 2-D convolution ([`conv2d`]) over NCHW data with zero padding, stride, dilation and groups.
//!
//! Algorithm sketch. Three strategies, chosen by exactly the conditions of
//! [`Conv2d::scratch_len`] (in the same order), so the scratch the planner reserved always
//! suffices:
//!
//! 1. **Pointwise** (1x1, stride 1, no padding): the input planes of a group already form the
//!    `[c_in/g, h*w]` right-hand matrix, so each (image, group) is one
//!    `gemm(c_out/g, h*w, c_in/g)` with no copy at all.
//! 2. **Depthwise** (one input and one output channel per group): a GEMM would have `k = kh*kw`
//!    and one row, so direct loops are better. For every kernel tap `(ky, kx)` we compute once
//!    the range of output rows/columns whose input position falls inside the image, then add
//!    `w[ky, kx] * input` over that range with no per-element bounds test.
//! 3. **General**: im2col one (image, group) into the scratch as a
//!    `[c_in/g * kh * kw, out_h * out_w]` matrix (row `(ci, ky, kx)`, column `(oy, ox)`; padding
//!    becomes explicit zeros), then `gemm(c_out/g, out_h*out_w, c_in/g*kh*kw)` with the group's
//!    weights, which are already `[c_out/g, c_in/g*kh*kw]` row-major. The scratch is reused for
//!    every group and image.
//!
//! In every case each output channel plane then goes through the shared epilogue with its bias,
//! the residual operand if there is one ([`conv2d_res`]) and the activation.

use super::epilogue::{epilogue, epilogue_res};
use super::gemm::gemm;
use super::matmul::GemmFn;
use crate::{Activation, Conv2d};
use core::ops::Range;

/// Output positions `o` in `0..out_len` for which the input coordinate
/// `o * stride + offset - pad` lies in `0..in_len` (`offset` is the tap's dilated offset).
/// Because the coordinate grows with `o`, the valid positions form one range. Shared with the
/// 3-D convolution and pooling (`conv_nd`).
pub(super) fn valid_range(
    out_len: usize,
    in_len: usize,
    pad: usize,
    offset: usize,
    stride: usize,
) -> Range<usize> {
    // Need o * stride + offset >= pad, i.e. o >= ceil((pad - offset) / stride).
    let lo = if offset >= pad {
        0
    } else {
        (pad - offset).div_ceil(stride)
    };
    // Need o * stride + offset < in_len + pad, i.e. o < ceil((in_len + pad - offset) / stride).
    let hi = if offset >= in_len + pad {
        0
    } else {
        (in_len + pad - offset).div_ceil(stride)
    };
    let hi = hi.min(out_len);
    lo.min(hi)..hi
}

/// `dst[i] = src[start + i * stride]` for every `i` in `dst`.
fn gather(dst: &mut [f32], src: &[f32], start: usize, stride: usize) {
    if stride == 1 {
        dst.copy_from_slice(&src[start..start + dst.len()]);
    } else {
        for (d, &s) in dst.iter_mut().zip(src[start..].iter().step_by(stride)) {
            *d = s;
        }
    }
}

/// `dst[i] += weight * src[start + i * stride]` for every `i` in `dst`.
fn axpy_strided(dst: &mut [f32], weight: f32, src: &[f32], start: usize, stride: usize) {
    if stride == 1 {
        let len = dst.len();
        for (d, &s) in dst.iter_mut().zip(&src[start..start + len]) {
            *d += weight * s;
        }
    } else {
        for (d, &s) in dst.iter_mut().zip(src[start..].iter().step_by(stride)) {
            *d += weight * s;
        }
    }
}

/// Convolution. `weight` is `[c_out, c_in/groups, kh, kw]`, `bias` is `[c_out]`, `input` is
/// `[batch, c_in, h, w]`, `out` is `[batch, c_out, out_h, out_w]`; padding reads zeros and the
/// activation is applied after the bias. `scratch` needs [`Conv2d::scratch_len`] elements; its
/// contents on entry do not matter.
pub fn conv2d(
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    scratch: &mut [f32],
    out: &mut [f32],
) {
    conv2d_with(gemm, p, input, weight, bias, None, act, scratch, out);
}

/// [`conv2d`] with a residual operand: `out = act(conv(input) + bias + residual)`, where
/// `residual` is laid out as `out` (`[batch, c_out, out_h, out_w]`) and is added after the bias
/// and before the activation, plane by plane while the plane is in cache (the compiler's
/// fusion of `relu(add(conv(x), r))`).
#[allow(clippy::too_many_arguments)] // conv2d's contract plus the residual.
pub fn conv2d_res(
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    residual: &[f32],
    act: Activation,
    scratch: &mut [f32],
    out: &mut [f32],
) {
    p.check_residual(residual);
    conv2d_with(
        gemm,
        p,
        input,
        weight,
        bias,
        Some(residual),
        act,
        scratch,
        out,
    );
}

/// [`conv2d`] (or, with `residual`, [`conv2d_res`]) with the pointwise and im2col products
/// done by `gemm` (same contract as the portable [`gemm`]: `C = A B`, overwriting `C`). An ISA
/// whose only fast kernel is its GEMM (32-bit arm's NEON `asm!` tile) gets the whole
/// convolution from it this way.
#[allow(clippy::too_many_arguments)] // conv2d's contract plus the GEMM and the residual.
pub(crate) fn conv2d_with(
    gemm: GemmFn,
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    act: Activation,
    scratch: &mut [f32],
    out: &mut [f32],
) {
    p.debug_check();
    let cig = p.c_in / p.groups;
    let cog = p.c_out / p.groups;
    let in_plane = p.h * p.w;
    let out_plane = p.out_h * p.out_w;
    let k = cig * p.kh * p.kw;
    debug_assert!(
        input.len() >= p.batch * p.c_in * in_plane,
        "conv2d: input too short"
    );
    debug_assert!(weight.len() >= p.c_out * k, "conv2d: weight too short");
    debug_assert!(
        bias.is_none_or(|b| b.len() >= p.c_out),
        "conv2d: bias too short"
    );
    debug_assert!(
        scratch.len() >= p.scratch_len(),
        "conv2d: scratch too short"
    );
    debug_assert!(
        out.len() >= p.batch * p.c_out * out_plane,
        "conv2d: out too short"
    );

    if out_plane == 0 {
        return;
    }
    // Bias, residual and activation for the channels `first..` of image `n`, run right after
    // they are computed, while they are still in cache.
    let finish = |dst: &mut [f32], n: usize, first: usize| {
        for (c, plane) in (first..).zip(dst.chunks_exact_mut(out_plane)) {
            let shift = bias.map_or(0.0, |b| b[c]);
            match residual {
                None => epilogue(plane, 1.0, shift, act),
                Some(r) => {
                    let r = &r[(n * p.c_out + c) * out_plane..][..out_plane];
                    epilogue_res(plane, shift, r, act);
                }
            }
        }
    };

    if p.is_pointwise() {
        debug_assert!(p.out_h == p.h && p.out_w == p.w, "conv2d: 1x1 output size");
        for n in 0..p.batch {
            for g in 0..p.groups {
                let src = &input[(n * p.c_in + g * cig) * in_plane..][..cig * in_plane];
                let w = &weight[g * cog * k..][..cog * k];
                let dst = &mut out[(n * p.c_out + g * cog) * out_plane..][..cog * out_plane];
                gemm(cog, out_plane, cig, w, src, dst);
                finish(dst, n, g * cog);
            }
        }
    } else if p.is_depthwise() {
        for n in 0..p.batch {
            for c in 0..p.c_out {
                let src = &input[(n * p.c_in + c) * in_plane..][..in_plane];
                let w = &weight[c * k..][..k];
                let dst = &mut out[(n * p.c_out + c) * out_plane..][..out_plane];
                depthwise_plane(p, src, w, dst);
                finish(dst, n, c);
            }
        }
    } else {
        let cols = &mut scratch[..k * out_plane];
        for n in 0..p.batch {
            for g in 0..p.groups {
                let src = &input[(n * p.c_in + g * cig) * in_plane..][..cig * in_plane];
                im2col(p, cig, src, cols);
                let w = &weight[g * cog * k..][..cog * k];
                let dst = &mut out[(n * p.c_out + g * cog) * out_plane..][..cog * out_plane];
                gemm(cog, out_plane, k, w, cols, dst);
                finish(dst, n, g * cog);
            }
        }
    }
}

/// One depthwise output plane (no bias yet): `dst = sum over taps of w[tap] * shifted(src)`.
fn depthwise_plane(p: &Conv2d, src: &[f32], w: &[f32], dst: &mut [f32]) {
    let [sh, sw] = p.stride;
    let [dh, dw] = p.dilation;
    let [pt, pl, _, _] = p.pad;
    dst.fill(0.0);
    for ky in 0..p.kh {
        let rows = valid_range(p.out_h, p.h, pt, ky * dh, sh);
        for kx in 0..p.kw {
            let cols = valid_range(p.out_w, p.w, pl, kx * dw, sw);
            if cols.is_empty() {
                continue;
            }
            let wv = w[ky * p.kw + kx];
            for oy in rows.clone() {
                let iy = oy * sh + ky * dh - pt;
                let ix0 = cols.start * sw + kx * dw - pl;
                let d = &mut dst[oy * p.out_w + cols.start..oy * p.out_w + cols.end];
                axpy_strided(d, wv, &src[iy * p.w..(iy + 1) * p.w], ix0, sw);
            }
        }
    }
}

/// Writes the im2col matrix of one (image, group): `cols[(ci, ky, kx), (oy, ox)]` is the input
/// element under tap `(ky, kx)` of output `(oy, ox)` in channel `ci`, or 0 in the padding.
fn im2col(p: &Conv2d, cig: usize, src: &[f32], cols: &mut [f32]) {
    let [sh, sw] = p.stride;
    let [dh, dw] = p.dilation;
    let [pt, pl, _, _] = p.pad;
    let in_plane = p.h * p.w;
    let out_plane = p.out_h * p.out_w;
    if out_plane == 0 {
        return;
    }
    let mut rows = cols.chunks_exact_mut(out_plane);
    for ci in 0..cig {
        let plane = &src[ci * in_plane..(ci + 1) * in_plane];
        for ky in 0..p.kh {
            let ys = valid_range(p.out_h, p.h, pt, ky * dh, sh);
            for kx in 0..p.kw {
                let xs = valid_range(p.out_w, p.w, pl, kx * dw, sw);
                // Exactly cig * kh * kw rows were sliced for us.
                let Some(row) = rows.next() else { return };
                for (oy, line) in row.chunks_exact_mut(p.out_w).enumerate() {
                    if !ys.contains(&oy) || xs.is_empty() {
                        line.fill(0.0);
                        continue;
                    }
                    let iy = oy * sh + ky * dh - pt;
                    line[..xs.start].fill(0.0);
                    line[xs.end..].fill(0.0);
                    let ix0 = xs.start * sw + kx * dw - pl;
                    gather(
                        &mut line[xs.clone()],
                        &plane[iy * p.w..(iy + 1) * p.w],
                        ix0,
                        sw,
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use crate::testutil::{assert_close, XorShift};
    use std::vec;
    use std::vec::Vec;

    /// The definition, as directly as possible: for every output element, sum over the input
    /// channels of its group and every kernel tap, skipping taps that land in the padding.
    /// Signed arithmetic for the input coordinates, f64 accumulation.
    fn naive_conv(
        p: &Conv2d,
        input: &[f32],
        weight: &[f32],
        bias: Option<&[f32]>,
        act: Activation,
    ) -> Vec<f64> {
        let cig = p.c_in / p.groups;
        let cog = p.c_out / p.groups;
        let mut out = vec![0.0f64; p.batch * p.c_out * p.out_h * p.out_w];
        for n in 0..p.batch {
            for co in 0..p.c_out {
                let g = co / cog;
                for oy in 0..p.out_h {
                    for ox in 0..p.out_w {
                        let mut s = bias.map_or(0.0, |b| f64::from(b[co]));
                        for ci in 0..cig {
                            for ky in 0..p.kh {
                                for kx in 0..p.kw {
                                    let iy = (oy * p.stride[0] + ky * p.dilation[0]) as isize
                                        - p.pad[0] as isize;
                                    let ix = (ox * p.stride[1] + kx * p.dilation[1]) as isize
                                        - p.pad[1] as isize;
                                    if iy < 0 || ix < 0 || iy >= p.h as isize || ix >= p.w as isize
                                    {
                                        continue;
                                    }
                                    let (iy, ix) = (iy as usize, ix as usize);
                                    let c = g * cig + ci;
                                    let x = input[((n * p.c_in + c) * p.h + iy) * p.w + ix];
                                    let wv = weight[((co * cig + ci) * p.kh + ky) * p.kw + kx];
                                    s += f64::from(x) * f64::from(wv);
                                }
                            }
                        }
                        let o = ((n * p.c_out + co) * p.out_h + oy) * p.out_w + ox;
                        out[o] = f64::from(act.apply(s as f32));
                    }
                }
            }
        }
        out
    }

    /// The standard output size, `floor((in + pads - dilation*(k-1) - 1) / stride) + 1`.
    fn out_len(input: usize, k: usize, stride: usize, dilation: usize, pads: usize) -> usize {
        (input + pads - dilation * (k - 1) - 1) / stride + 1
    }

    #[allow(clippy::too_many_arguments)]
    fn params(
        batch: usize,
        c_in: usize,
        hw: [usize; 2],
        c_out: usize,
        k: [usize; 2],
        stride: [usize; 2],
        dilation: [usize; 2],
        pad: [usize; 4],
        groups: usize,
    ) -> Conv2d {
        Conv2d {
            batch,
            c_in,
            h: hw[0],
            w: hw[1],
            c_out,
            kh: k[0],
            kw: k[1],
            stride,
            dilation,
            pad,
            groups,
            out_h: out_len(hw[0], k[0], stride[0], dilation[0], pad[0] + pad[2]),
            out_w: out_len(hw[1], k[1], stride[1], dilation[1], pad[1] + pad[3]),
        }
    }

    #[derive(PartialEq, Debug)]
    enum Branch {
        Pointwise,
        Depthwise,
        Im2col,
    }

    /// Runs `conv2d` with a scratch of exactly `scratch_len()` NaNs (so an overrun panics and
    /// stale scratch would poison the result) against the naive definition.
    fn check(p: Conv2d, branch: Branch, seed: u32) {
        let actual = if p.is_pointwise() {
            Branch::Pointwise
        } else if p.is_depthwise() {
            Branch::Depthwise
        } else {
            Branch::Im2col
        };
        assert_eq!(actual, branch, "{p:?}");
        // Pointwise needs no scratch; im2col always does (the SIMD depthwise kernels' band
        // buffer depends on the window, see `depthwise_scratch_follows_the_formula`).
        assert!(
            match branch {
                Branch::Pointwise => p.scratch_len() == 0,
                Branch::Im2col => p.scratch_len() > 0,
                Branch::Depthwise => true,
            },
            "{p:?}"
        );
        let mut rng = XorShift::new(seed);
        let input = rng.vec(p.batch * p.c_in * p.h * p.w);
        let weight = rng.vec(p.c_out * (p.c_in / p.groups) * p.kh * p.kw);
        let bias = rng.vec(p.c_out);
        let acts = [
            (None, Activation::None),
            (Some(&bias[..]), Activation::None),
            (Some(&bias[..]), Activation::LeakyRelu { alpha: 0.1 }),
        ];
        for (bias, act) in acts {
            let mut scratch = vec![f32::NAN; p.scratch_len()];
            let mut out = vec![f32::NAN; p.batch * p.c_out * p.out_h * p.out_w];
            conv2d(&p, &input, &weight, bias, act, &mut scratch, &mut out);
            let want = naive_conv(&p, &input, &weight, bias, act);
            assert_close(
                &out,
                &want,
                &std::format!("{p:?} bias {} {act:?}", bias.is_some()),
            );
        }
    }

    #[test]
    fn conv2d_hand_computed_3x3_ones_same_padding() {
        // All-ones 3x3 image and kernel, padding 1: each output counts the in-image taps.
        let p = params(1, 1, [3, 3], 1, [3, 3], [1, 1], [1, 1], [1; 4], 1);
        let mut scratch = vec![f32::NAN; p.scratch_len()];
        let mut out = [f32::NAN; 9];
        conv2d(
            &p,
            &[1.0; 9],
            &[1.0; 9],
            Some(&[0.5]),
            Activation::None,
            &mut scratch,
            &mut out,
        );
        assert_eq!(out, [4.5, 6.5, 4.5, 6.5, 9.5, 6.5, 4.5, 6.5, 4.5]);
    }

    #[test]
    fn conv2d_hand_computed_depthwise_stride2() {
        // Two channels, 1x2 kernel [1, -1], stride 2 on a 1x4 ramp per channel.
        let p = params(1, 2, [1, 4], 2, [1, 2], [1, 2], [1, 1], [0; 4], 2);
        let input = [0.0, 1.0, 3.0, 6.0, 10.0, 20.0, 30.0, 40.0];
        let weight = [1.0, -1.0, 2.0, 0.0];
        let mut out = [f32::NAN; 4];
        let mut scratch = vec![f32::NAN; p.scratch_len()];
        conv2d(
            &p,
            &input,
            &weight,
            None,
            Activation::None,
            &mut scratch,
            &mut out,
        );
        assert_eq!(out, [-1.0, -3.0, 20.0, 60.0]);
    }

    #[test]
    fn conv2d_pointwise_branch() {
        check(
            params(1, 3, [4, 5], 4, [1, 1], [1, 1], [1, 1], [0; 4], 1),
            Branch::Pointwise,
            1,
        );
        check(
            params(2, 6, [3, 7], 9, [1, 1], [1, 1], [1, 1], [0; 4], 3),
            Branch::Pointwise,
            2,
        );
        // Dilation is irrelevant to a 1x1 kernel.
        check(
            params(2, 5, [5, 3], 2, [1, 1], [1, 1], [2, 3], [0; 4], 1),
            Branch::Pointwise,
            3,
        );
        // Large enough for the GEMM's column blocking and four-row groups.
        check(
            params(1, 8, [19, 17], 10, [1, 1], [1, 1], [1, 1], [0; 4], 1),
            Branch::Pointwise,
            4,
        );
    }

    #[test]
    fn conv2d_depthwise_branch() {
        check(
            params(1, 3, [5, 5], 3, [3, 3], [1, 1], [1, 1], [1; 4], 3),
            Branch::Depthwise,
            10,
        );
        check(
            params(2, 4, [7, 6], 4, [3, 3], [2, 2], [1, 1], [1; 4], 4),
            Branch::Depthwise,
            11,
        );
        check(
            params(2, 3, [9, 8], 3, [3, 2], [2, 1], [2, 3], [2, 0, 1, 3], 3),
            Branch::Depthwise,
            12,
        );
        check(
            params(1, 2, [6, 7], 2, [5, 5], [3, 2], [1, 1], [2; 4], 2),
            Branch::Depthwise,
            13,
        );
        // A single-channel plain conv (c_in = c_out = groups = 1) is "depthwise" too.
        check(
            params(2, 1, [6, 5], 1, [3, 2], [1, 1], [1, 1], [0; 4], 1),
            Branch::Depthwise,
            14,
        );
        // Padding larger than the kernel reach: whole rows/columns of output see only zeros.
        check(
            params(1, 2, [3, 3], 2, [2, 2], [1, 1], [1, 1], [3, 2, 1, 4], 2),
            Branch::Depthwise,
            15,
        );
    }

    #[test]
    fn conv2d_im2col_branch() {
        check(
            params(1, 3, [5, 5], 4, [3, 3], [1, 1], [1, 1], [1; 4], 1),
            Branch::Im2col,
            20,
        );
        check(
            params(2, 3, [9, 7], 5, [3, 3], [2, 2], [1, 1], [1; 4], 1),
            Branch::Im2col,
            21,
        );
        check(
            params(2, 4, [8, 9], 6, [3, 2], [1, 2], [2, 2], [2, 1, 0, 3], 2),
            Branch::Im2col,
            22,
        );
        check(
            params(1, 6, [7, 7], 3, [5, 5], [1, 1], [1, 1], [2; 4], 3),
            Branch::Im2col,
            23,
        );
        // Depthwise with a channel multiplier (2 outputs per input channel).
        check(
            params(2, 3, [6, 5], 6, [3, 3], [1, 1], [1, 1], [1; 4], 3),
            Branch::Im2col,
            24,
        );
        // 1x1 kernels that are not plain GEMMs: strided, and padded.
        check(
            params(2, 4, [7, 6], 3, [1, 1], [2, 2], [1, 1], [0; 4], 1),
            Branch::Im2col,
            25,
        );
        check(
            params(1, 4, [3, 4], 5, [1, 1], [1, 1], [1, 1], [1, 0, 0, 2], 1),
            Branch::Im2col,
            26,
        );
        // A 7x7 stride-2 stem on an odd-sized image.
        check(
            params(1, 3, [23, 21], 8, [7, 7], [2, 2], [1, 1], [3; 4], 1),
            Branch::Im2col,
            27,
        );
        // Rectangular kernel, mixed strides and dilations, asymmetric padding.
        check(
            params(2, 2, [11, 5], 4, [2, 3], [3, 1], [2, 1], [0, 2, 3, 1], 2),
            Branch::Im2col,
            28,
        );
    }

    #[test]
    fn conv2d_output_larger_than_standard_reads_padding() {
        // A caller (e.g. ceil-mode shape rules) may ask for one more row/column than the
        // standard formula; the extra positions must read zeros, not out of bounds.
        let mut p = params(1, 2, [5, 5], 3, [3, 3], [2, 2], [1, 1], [0; 4], 1);
        p.out_h += 1;
        p.out_w += 1;
        check(p, Branch::Im2col, 30);
        let mut p = params(1, 2, [5, 5], 2, [3, 3], [2, 2], [1, 1], [0; 4], 2);
        p.out_h += 1;
        p.out_w += 1;
        check(p, Branch::Depthwise, 31);
    }

    #[test]
    fn valid_range_hand_cases() {
        // in 5, pad 1, stride 1, tap offset 0: output 0 reads -1 (padding), 1..=5 read 0..=4.
        assert_eq!(valid_range(7, 5, 1, 0, 1), 1..6);
        // Stride 2, offset 2, pad 1: o*2 + 1 in 0..5 -> o in 0..2.
        assert_eq!(valid_range(3, 5, 1, 2, 2), 0..2);
        // Tap entirely past the input.
        assert_eq!(valid_range(3, 2, 0, 5, 1), 0..0);
        // Tap entirely in the leading padding.
        assert_eq!(valid_range(2, 4, 6, 0, 1), 2..2);
    }
}
